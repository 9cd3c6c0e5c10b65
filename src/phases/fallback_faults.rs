//! What the fallback did when the drill failed it too: launches refused for want of capacity and how long Karpenter
//! took to move on, a fallback node lost and the second recovery, and a partial on-prem loss, measured from the
//! timeline alone (report/fallback_faults.rs words them).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::cluster::karpenter::ClaimCondition;
use crate::domain::RestoreTarget;
use crate::timeline::{ConditionStatus, Event, NodeRole, Observation};

/// The fallback's own failures the drill caused, and what they cost; every part absent when the drill caused none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FallbackFaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_node: Option<SecondRecovery>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialLoss>,
}

impl FallbackFaults {
    pub fn is_empty(&self) -> bool {
        self.capacity.is_none() && self.lost_node.is_none() && self.partial.is_none()
    }
}

/// A capacity fault: the types taken away, each launch refused, each launch that went elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityOutcome {
    pub instance_types: Vec<String>,
    /// When the types were taken away, seconds since the drill started.
    pub removed_at_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_back_at_seconds: Option<f64>,
    pub failed_launches: Vec<FailedLaunch>,
    /// The fallback's NodeClaims launched while the types were out.
    pub launches: Vec<Launch>,
    /// From the first launch attempt while the types were out to the first launch on a type that had capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto_seconds: Option<f64>,
    /// The RTO less the time the refused launches cost (first refusal to the first launch elsewhere): an estimate;
    /// `hybrid-drill history` sets it against the plain drill's measured RTO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto_without_seconds: Option<f64>,
    /// Why nothing could be launched, when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

/// One launch refused: Karpenter's InsufficientCapacityError event on a NodeClaim, with each pool EC2 refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedLaunch {
    pub t_seconds: f64,
    pub at: chrono::DateTime<chrono::Utc>,
    pub nodeclaim: String,
    pub reason: String,
    /// `type (zone)` for each pool the message names; empty when it names none (every type already known out).
    pub pools: Vec<String>,
    pub message: String,
}

/// One fallback NodeClaim launched while the types were out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub nodeclaim: String,
    pub created_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
}

/// One fallback node lost while the workload ran there, and how the service came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecondRecovery {
    pub nodeclaim: String,
    pub node: String,
    pub pods: usize,
    pub lost_at_seconds: f64,
    /// The first restoredWhen loss after it, if the service dropped below its criterion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_lost_seconds: Option<f64>,
    /// The NodeClaim whose node took the lost node's workload pods (the first of their replacements scheduled), or
    /// that node's name when no NodeClaim of it was seen; any pool, the drill's or another (a Spot pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_node_pool: Option<String>,
    /// Whether the replacement's NodeClaim was created after the loss (else capacity already there took the pods).
    #[serde(default)]
    pub replacement_new: bool,
    /// Since the loss: the first replacement pod bound to its node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_scheduled_seconds: Option<f64>,
    /// Each since the loss (negative: the replacement's NodeClaim was already on its way when the node was lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_created_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_launched_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_ready_seconds: Option<f64>,
    /// The loss to the service restored again: the second recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_seconds: Option<f64>,
}

/// A drain of part of the on-prem nodes, and who filled the gap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialLoss {
    pub nodes: Vec<String>,
    pub of: usize,
    /// The nodes went NotReady (a node failure), where the node lifecycle controller's zone rule applies.
    #[serde(default)]
    pub lost: bool,
    /// Fallback NodeClaims created after the fault: zero when the remaining on-prem nodes took the workload.
    pub fallback_nodeclaims: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto_seconds: Option<f64>,
}

fn secs(o: &Observation) -> f64 {
    o.t_ms as f64 / 1000.0
}

/// The fallback faults of a run, from its timeline and its RTO.
pub fn fallback_faults(observations: &[Observation], rto_seconds: Option<f64>) -> FallbackFaults {
    FallbackFaults {
        capacity: capacity(observations, rto_seconds),
        lost_node: lost_node(observations),
        partial: partial(observations, rto_seconds),
    }
}

static POOL: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"sufficient (\S+) capacity in the Availability Zone you requested \(([^)]+)\)")
        .expect("a valid pattern")
});

/// `type (zone)` for each pool an EC2 insufficient-capacity message names.
fn pools(message: &str) -> Vec<String> {
    POOL.captures_iter(message).map(|c| format!("{} ({})", &c[1], &c[2])).collect()
}

pub fn failed_launch(o: &Observation) -> Option<FailedLaunch> {
    let Event::KubeEvent { object, reason, message } = &o.event else { return None };
    let nodeclaim = object.strip_prefix("NodeClaim/")?;
    (reason.contains("InsufficientCapacity") || message.contains("InsufficientInstanceCapacity")).then(|| {
        FailedLaunch {
            t_seconds: secs(o),
            at: o.server_time.unwrap_or(o.received),
            nodeclaim: nodeclaim.into(),
            reason: reason.clone(),
            pools: pools(message),
            message: message.clone(),
        }
    })
}

/// The fallback's NodeClaims created from `from` on, with their launch and the type their node got.
fn launches(observations: &[Observation], from: u64) -> Vec<Launch> {
    let mut by_claim: BTreeMap<String, Launch> = BTreeMap::new();
    let mut node_of: BTreeMap<String, String> = BTreeMap::new();
    let mut type_of: BTreeMap<String, String> = BTreeMap::new();
    for o in observations.iter().filter(|o| o.seq >= from) {
        match &o.event {
            Event::NodeClaimCreated { nodeclaim } => {
                by_claim.entry(nodeclaim.clone()).or_insert(Launch {
                    nodeclaim: nodeclaim.clone(),
                    created_seconds: secs(o),
                    launched_seconds: None,
                    instance_type: None,
                });
            }
            Event::NodeClaimCondition { nodeclaim, condition: ClaimCondition::Launched, status } => {
                if let (Some(l), ConditionStatus::True) = (by_claim.get_mut(nodeclaim), status) {
                    l.launched_seconds.get_or_insert(secs(o));
                }
            }
            Event::NodeClaimNode { nodeclaim, node } => {
                node_of.insert(nodeclaim.clone(), node.clone());
            }
            Event::NodeAdded { node, role: NodeRole::Fallback, instance_type: Some(t), .. } => {
                type_of.insert(node.clone(), t.clone());
            }
            _ => {}
        }
    }
    let mut all: Vec<Launch> = by_claim.into_values().collect();
    for l in &mut all {
        l.instance_type = node_of.get(&l.nodeclaim).and_then(|n| type_of.get(n)).cloned();
    }
    all.sort_by(|a, b| a.created_seconds.total_cmp(&b.created_seconds));
    all
}

fn capacity(observations: &[Observation], rto_seconds: Option<f64>) -> Option<CapacityOutcome> {
    let removed = observations.iter().find(|o| matches!(o.event, Event::CapacityRemoved { .. }))?;
    let Event::CapacityRemoved { instance_types, .. } = &removed.event else { return None };
    let given_back = observations.iter().find(|o| {
        o.seq > removed.seq && matches!(o.event, Event::RestoreStarted { what: RestoreTarget::Capacity, .. })
    });
    let until = given_back.map_or(u64::MAX, |o| o.seq);
    let window = || observations.iter().filter(|o| o.seq > removed.seq && o.seq < until);
    let failed_launches: Vec<FailedLaunch> = window().filter_map(failed_launch).collect();
    let launches: Vec<Launch> = launches(observations, removed.seq)
        .into_iter()
        .filter(|l| l.created_seconds <= given_back.map_or(f64::MAX, secs))
        .collect();
    let elsewhere = launches
        .iter()
        .filter(|l| l.instance_type.as_ref().is_some_and(|t| !instance_types.contains(t)))
        .filter_map(|l| l.launched_seconds)
        .min_by(f64::total_cmp);
    let first_attempt = launches
        .iter()
        .map(|l| l.created_seconds)
        .chain(failed_launches.iter().map(|f| f.t_seconds))
        .min_by(f64::total_cmp);
    let first_refusal = failed_launches.first().map(|f| f.t_seconds);
    let lost = match (first_refusal, elsewhere) {
        (Some(refused), Some(moved)) => Some((moved - refused).max(0.0)),
        (None, Some(_)) => Some(0.0),
        _ => None,
    };
    let cause = (elsewhere.is_none() && !failed_launches.is_empty()).then(|| {
        format!(
            "no fallback capacity: {} launch{} refused with InsufficientCapacityError, every allowed type out ({})",
            failed_launches.len(),
            if failed_launches.len() == 1 { "" } else { "es" },
            instance_types.join(", ")
        )
    });
    Some(CapacityOutcome {
        instance_types: instance_types.clone(),
        removed_at_seconds: secs(removed),
        given_back_at_seconds: given_back.map(secs),
        move_seconds: first_attempt.zip(elsewhere).map(|(a, m)| (m - a).max(0.0)),
        rto_without_seconds: rto_seconds.zip(lost).map(|(rto, lost)| (rto - lost).max(0.0)),
        rto_seconds,
        failed_launches,
        launches,
        cause,
    })
}

/// Where the lost node's workload went: the node the first replacement pod was bound to, and that node's NodeClaim
/// (the fallback's, or another pool's seen as collateral), with the pool and when the claim was created.
struct Replacement {
    node: String,
    scheduled: f64,
    claim: Option<(String, Option<String>, Option<f64>)>,
}

fn replacement(observations: &[Observation], lost: &Observation, lost_claim: &str) -> Option<Replacement> {
    // Up to the return: the pods its restart creates go back on-prem, and are no one's replacement.
    let ret = observations.iter().find(|o| o.seq > lost.seq && matches!(o.event, Event::ReturnStarted { .. }));
    let until = ret.map_or(u64::MAX, |o| o.seq);
    let after = || observations.iter().filter(|o| o.seq > lost.seq && o.seq < until);
    let created: Vec<&String> =
        after().filter_map(|o| if let Event::PodCreated { pod } = &o.event { Some(pod) } else { None }).collect();
    let (node, scheduled) = after().find_map(|o| match &o.event {
        Event::PodScheduled { pod, node, .. } if created.contains(&pod) => Some((node.clone(), secs(o))),
        _ => None,
    })?;
    let fallback_claim = observations.iter().find_map(|o| match &o.event {
        Event::NodeClaimNode { nodeclaim, node: n } if *n == node && nodeclaim != lost_claim => {
            let pool = observations.iter().find_map(|o| match &o.event {
                Event::NodeAdded { node: n, node_pool, .. } if *n == node => node_pool.clone(),
                _ => None,
            });
            Some((nodeclaim.clone(), pool))
        }
        _ => None,
    });
    let other_claim = || {
        observations.iter().find_map(|o| match &o.event {
            Event::CollateralNodeClaim { claim, .. } if claim.node.as_deref() == Some(node.as_str()) => {
                Some((claim.name.clone(), Some(claim.node_pool.clone())))
            }
            _ => None,
        })
    };
    let claim = fallback_claim.or_else(other_claim).map(|(name, pool)| {
        let created = observations.iter().find_map(|o| match &o.event {
            Event::NodeClaimCreated { nodeclaim } if *nodeclaim == name => Some(secs(o)),
            Event::CollateralNodeClaim { claim, milestone } if claim.name == name && milestone == "created" => {
                Some(secs(o))
            }
            _ => None,
        });
        (name, pool, created)
    });
    Some(Replacement { node, scheduled, claim })
}

fn lost_node(observations: &[Observation]) -> Option<SecondRecovery> {
    let lost = observations.iter().find(|o| matches!(o.event, Event::FallbackNodeLost { .. }))?;
    let Event::FallbackNodeLost { nodeclaim, node, pods } = &lost.event else { return None };
    let after = || observations.iter().filter(|o| o.seq > lost.seq);
    let since = |o: &Observation| secs(o) - secs(lost);
    let took = replacement(observations, lost, nodeclaim);
    let claim_name = took.as_ref().and_then(|r| r.claim.as_ref().map(|c| c.0.clone()));
    // Another pool's claim is seen through Karpenter's events on it only.
    let launched = claim_name.as_ref().and_then(|c| {
        launches(observations, 0).into_iter().find(|l| l.nodeclaim == *c).and_then(|l| l.launched_seconds).or_else(
            || {
                let object = format!("NodeClaim/{c}");
                observations.iter().find_map(|o| match &o.event {
                    Event::KubeEvent { object: ob, reason, .. } if *ob == object && reason == "Launched" => {
                        Some(secs(o))
                    }
                    _ => None,
                })
            },
        )
    });
    let ready = took.as_ref().and_then(|r| {
        observations.iter().find(
            |o| matches!(&o.event, Event::NodeReady { node, status: ConditionStatus::True, .. } if *node == r.node),
        )
    });
    let service_lost = after().find(|o| matches!(o.event, Event::ServiceLost { .. }));
    let restored = service_lost
        .and_then(|l| observations.iter().find(|o| o.seq > l.seq && matches!(o.event, Event::ServiceRestored { .. })));
    let created = took.as_ref().and_then(|r| r.claim.as_ref().and_then(|c| c.2));
    Some(SecondRecovery {
        nodeclaim: nodeclaim.clone(),
        node: node.clone(),
        pods: *pods,
        lost_at_seconds: secs(lost),
        service_lost_seconds: service_lost.map(since),
        replacement: claim_name.or_else(|| took.as_ref().map(|r| r.node.clone())),
        replacement_node_pool: took.as_ref().and_then(|r| r.claim.as_ref().and_then(|c| c.1.clone())),
        replacement_new: created.is_some_and(|c| c >= secs(lost)),
        replacement_scheduled_seconds: took.as_ref().map(|r| r.scheduled - secs(lost)),
        replacement_node: took.map(|r| r.node),
        replacement_created_seconds: created.map(|c| c - secs(lost)),
        replacement_launched_seconds: launched.map(|t| t - secs(lost)),
        replacement_ready_seconds: ready.map(since),
        recovery_seconds: restored.map(since),
    })
}

fn partial(observations: &[Observation], rto_seconds: Option<f64>) -> Option<PartialLoss> {
    let loss = observations.iter().find(|o| matches!(o.event, Event::PartialLoss { .. }))?;
    let Event::PartialLoss { nodes, of, lost } = &loss.event else { return None };
    let fallback_nodeclaims =
        observations.iter().filter(|o| o.seq > loss.seq && matches!(o.event, Event::NodeClaimCreated { .. })).count();
    Some(PartialLoss { nodes: nodes.clone(), of: *of, lost: *lost, fallback_nodeclaims, rto_seconds })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Event as E;

    fn obs(seq: u64, t: f64, event: Event) -> Observation {
        Observation { seq, t_ms: (t * 1000.0) as u64, received: chrono::DateTime::UNIX_EPOCH, server_time: None, event }
    }

    #[test]
    fn a_refused_launch_and_the_move_to_the_next_type_are_measured() {
        let ice = "creating instance, with fleet error(s), InsufficientInstanceCapacity: We currently do not have \
                   sufficient g6.12xlarge capacity in the Availability Zone you requested (us-east-1a)";
        let timeline = vec![
            obs(1, 1.0, E::CapacityRemoved { step: "c".into(), instance_types: vec!["g6.12xlarge".into()] }),
            obs(2, 2.0, E::NodeClaimCreated { nodeclaim: "a".into() }),
            obs(
                3,
                3.0,
                E::KubeEvent {
                    object: "NodeClaim/a".into(),
                    reason: "InsufficientCapacityError".into(),
                    message: ice.into(),
                },
            ),
            obs(4, 4.0, E::NodeClaimCreated { nodeclaim: "b".into() }),
            obs(
                5,
                5.5,
                E::NodeClaimCondition {
                    nodeclaim: "b".into(),
                    condition: ClaimCondition::Launched,
                    status: ConditionStatus::True,
                },
            ),
            obs(6, 5.6, E::NodeClaimNode { nodeclaim: "b".into(), node: "n".into() }),
            obs(
                7,
                5.7,
                E::NodeAdded {
                    node: "n".into(),
                    role: NodeRole::Fallback,
                    instance_type: Some("g6e.12xlarge".into()),
                    gpus: 4,
                    node_pool: None,
                },
            ),
        ];
        let c = capacity(&timeline, Some(10.0)).unwrap();
        assert_eq!(c.failed_launches[0].pools, ["g6.12xlarge (us-east-1a)"]);
        assert_eq!(c.move_seconds, Some(3.5));
        assert_eq!(c.rto_without_seconds, Some(7.5));
        assert_eq!(c.cause, None);
        // The refused claim is listed too, without a type: it never got a node.
        assert_eq!(c.launches[0].instance_type, None);
        assert_eq!(c.launches[1].instance_type.as_deref(), Some("g6e.12xlarge"));
    }

    #[test]
    fn the_replacement_is_the_claim_whose_node_took_the_pods_even_in_another_pool() {
        use crate::cluster::collateral::ClaimFacts;
        let spot = |milestone: &str, node: Option<&str>| E::CollateralNodeClaim {
            claim: ClaimFacts {
                name: "spot-1".into(),
                node_pool: "gpu-spot".into(),
                instance_type: None,
                capacity_type: None,
                zone: None,
                node: node.map(Into::into),
                created: None,
                gpus: 4,
                deleting: false,
            },
            milestone: milestone.into(),
        };
        let role = NodeRole::Other;
        let timeline = vec![
            obs(1, 9.5, spot("created", None)),
            obs(2, 10.0, E::FallbackNodeLost { nodeclaim: "fb-1".into(), node: "n1".into(), pods: 1 }),
            obs(3, 10.2, E::ServiceLost { ready_pods: 3 }),
            obs(4, 10.4, E::PodCreated { pod: "p2".into() }),
            obs(5, 10.9, E::PodScheduled { pod: "p2".into(), node: "n2".into(), role }),
            obs(6, 11.0, spot("initialized", Some("n2"))),
            obs(7, 12.0, E::ServiceRestored { ready_pods: 4, held_since_ms: None }),
        ];
        let l = lost_node(&timeline).unwrap();
        assert_eq!(l.replacement.as_deref(), Some("spot-1"));
        assert_eq!(l.replacement_node_pool.as_deref(), Some("gpu-spot"));
        assert_eq!(l.replacement_node.as_deref(), Some("n2"));
        assert!(!l.replacement_new, "created before the loss");
        assert_eq!(l.replacement_created_seconds, Some(-0.5));
        assert_eq!(l.recovery_seconds, Some(2.0));
        let line = FallbackFaults { lost_node: Some(l), ..Default::default() }.lines().join("\n");
        assert!(line.contains("NodeClaim spot-1 of NodePool gpu-spot (node n2), created before the loss"), "{line}");
        assert!(line.contains("NodeClaim created 0.5s before the loss"), "{line}");
    }

    #[test]
    fn with_every_type_out_the_cause_is_named() {
        let timeline = vec![
            obs(1, 1.0, E::CapacityRemoved { step: "c".into(), instance_types: vec!["a".into(), "b".into()] }),
            obs(
                2,
                2.0,
                E::KubeEvent {
                    object: "NodeClaim/x".into(),
                    reason: "InsufficientCapacityError".into(),
                    message: "all requested instance types were unavailable during launch".into(),
                },
            ),
        ];
        let c = capacity(&timeline, None).unwrap();
        assert!(c.cause.unwrap().contains("every allowed type out (a, b)"));
    }
}
