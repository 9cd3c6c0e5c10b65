//! What the fallback used and cost: nodes, node-hours and GPU-hours per instance type and NodePool, counted per
//! NodeClaim from its creation to its deletion; launches that failed; what still ran when the run ended.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::drill::Drill;
use crate::timeline::{ConditionStatus, Event, NodeRole, Observation};

/// What one fallback NodePool brought.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolShare {
    pub nodes: usize,
    pub node_hours: f64,
}

/// What a fallback node-hour is counted from, as report.json writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BillingBasis {
    /// From each NodeClaim's creation, when the instance is asked for, to its deletion, once the instance is
    /// terminated.
    #[serde(rename = "nodeclaim")]
    NodeClaim,
    /// From the Node object to its deletion: runs whose timeline holds no NodeClaims.
    #[serde(rename = "node")]
    Node,
}

/// GPU capacity the fallback brought, and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FallbackUsage {
    pub nodes: usize,
    pub node_hours: f64,
    pub gpu_hours: f64,
    pub max_gpus: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_limit: Option<i64>,
    /// The NodePool's limit was exceeded (Karpenter's limits are eventually consistent).
    pub overrun: bool,
    /// The drill's own ceiling (`guards.maxFallbackGpus`), and whether the fallback went above it (which aborts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub over_ceiling: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced_instance_types: Vec<String>,
    pub by_instance_type: BTreeMap<String, f64>,
    /// Per fallback NodePool (an on-demand and a Spot pool, say): its nodes and their node-hours. Empty in runs
    /// recorded before nodes carried their pool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_node_pool: BTreeMap<String, PoolShare>,
    /// How node-hours were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billed_from: Option<BillingBasis>,
    /// Fallback capacity the run ended with, still billing: its NodeClaims (or nodes), counted up to `still_running_at`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub still_running: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub still_running_at: Option<DateTime<Utc>>,
    /// NodeClaims deleted without ever launching (EC2 out of capacity, a NodeClass not ready): no instance, no cost,
    /// but their time is part of the provisioning phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_launches: Vec<FailedLaunch>,
}

/// A NodeClaim Karpenter gave up on before its instance launched, with what the cluster said about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedLaunch {
    pub nodeclaim: String,
    /// When the NodeClaim was seen gone.
    pub at: DateTime<Utc>,
    /// The last Kubernetes Event about the NodeClaim (Karpenter's `InsufficientCapacityError`, ...), or its
    /// `Launched=False` condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One fallback instance's life: from when it was asked for to when it was gone (or the run ended).
struct Billed {
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
    node: Option<String>,
    launched: bool,
    /// The last thing the cluster said about a NodeClaim: an Event's reason and message, or a condition.
    said: Option<(String, Option<String>)>,
}

/// A fallback node's instance type, GPUs and NodePool.
type Shape = (Option<String>, i64, Option<String>);

/// What the timeline says of the fallback's instances.
#[derive(Default)]
struct Fleet {
    claims: BTreeMap<String, Billed>,
    /// Nodes by name; those a NodeClaim names are dropped once the claims are known.
    nodes: BTreeMap<String, Billed>,
    shape: BTreeMap<String, Shape>,
    max_gpus: i64,
}

/// Each NodeClaim and fallback node from the fault on, with its life, its shape and what the cluster said of it.
fn fleet(obs: &[Observation], t0_seq: u64) -> Fleet {
    let after_t0 = |o: &Observation| o.seq > t0_seq || t0_seq == u64::MAX;
    // A real instance bills from launch to termination: its NodeClaim's creation to its deletion, which Karpenter
    // completes only once the instance is terminated. Nodes no NodeClaim names (older timelines) bill as Node objects.
    let mut fleet = Fleet::default();
    for o in obs {
        match &o.event {
            Event::NodeClaimCreated { nodeclaim } if after_t0(o) => {
                fleet.claims.insert(
                    nodeclaim.clone(),
                    Billed { start: o.received, end: None, node: None, launched: false, said: None },
                );
            }
            Event::NodeClaimCondition { nodeclaim, condition, status }
                if *condition == crate::cluster::karpenter::ClaimCondition::Launched =>
            {
                if let Some(c) = fleet.claims.get_mut(nodeclaim) {
                    if status.is_true() {
                        c.launched = true;
                    } else if *status == ConditionStatus::False {
                        c.said = Some((format!("{condition}=False"), None));
                    }
                }
            }
            Event::KubeEvent { object, reason, message } => {
                if let Some(c) = object.strip_prefix("NodeClaim/").and_then(|name| fleet.claims.get_mut(name)) {
                    c.said = Some((reason.clone(), Some(message.clone())));
                }
            }
            Event::NodeClaimNode { nodeclaim, node } => {
                if let Some(c) = fleet.claims.get_mut(nodeclaim) {
                    c.node = Some(node.clone());
                    c.launched = true;
                }
            }
            Event::NodeClaimDeleted { nodeclaim } => {
                if let Some(c) = fleet.claims.get_mut(nodeclaim) {
                    c.end.get_or_insert(o.received);
                }
            }
            Event::NodeAdded { node, role: NodeRole::Fallback, instance_type, gpus, node_pool } if after_t0(o) => {
                fleet.shape.insert(node.clone(), (instance_type.clone(), *gpus, node_pool.clone()));
                fleet.nodes.insert(
                    node.clone(),
                    Billed { start: o.received, end: None, node: None, launched: true, said: None },
                );
            }
            Event::NodeReady { node, role: NodeRole::Fallback, gpus, .. } => {
                if let Some(entry) = fleet.shape.get_mut(node) {
                    entry.1 = entry.1.max(*gpus);
                }
            }
            Event::NodeDeleted { node, role: NodeRole::Fallback } => {
                if let Some(n) = fleet.nodes.get_mut(node) {
                    n.end.get_or_insert(o.received);
                }
            }
            Event::FallbackGpus { gpus } => fleet.max_gpus = fleet.max_gpus.max(*gpus),
            _ => {}
        }
    }
    fleet
}

/// The NodeClaims that never launched, with what the cluster last said about them, in the order they went.
fn failed_launches(claims: &BTreeMap<String, Billed>) -> Vec<FailedLaunch> {
    let mut failed: Vec<FailedLaunch> = claims
        .iter()
        .filter(|(_, c)| !c.launched)
        .filter_map(|(name, c)| {
            let (reason, message) = c.said.clone().map_or((None, None), |(r, m)| (Some(r), m));
            Some(FailedLaunch { nodeclaim: name.clone(), at: c.end?, reason, message })
        })
        .collect();
    failed.sort_by_key(|f| f.at);
    failed
}

/// What the fallback used and cost from the fault on, judged against its NodePool's limit and the drill's ceiling.
pub(super) fn fallback_usage(drill: &Drill, obs: &[Observation], t0_seq: u64) -> FallbackUsage {
    let mut usage = FallbackUsage::default();
    let end = obs.last().map(|o| o.received);
    let Fleet { mut claims, mut nodes, shape, max_gpus } = fleet(obs, t0_seq);
    usage.max_gpus = max_gpus;
    usage.failed_launches = failed_launches(&claims);
    let claimed: Vec<String> = claims.values().filter_map(|c| c.node.clone()).collect();
    nodes.retain(|name, _| !claimed.contains(name));
    // A launched claim that names no node is an instance that never registered (it bills all the same), unless a
    // node no claim names is left too: then the link was not observed, and the node alone is counted.
    if !nodes.is_empty() {
        claims.retain(|_, c| c.node.is_some());
    }
    usage.billed_from = (!claims.is_empty())
        .then_some(BillingBasis::NodeClaim)
        .or_else(|| (!nodes.is_empty()).then_some(BillingBasis::Node));
    let mut spans: Vec<(f64, Option<String>, i64, Option<String>)> = Vec::new();
    let billed = claims.iter().filter(|(_, c)| c.launched).chain(nodes.iter());
    for (name, b) in billed {
        let Some(stop) = b.end.or(end) else { continue };
        if b.end.is_none() {
            usage.still_running.push(name.clone());
            usage.still_running_at = end;
        }
        let (instance_type, gpus, pool) = shape.get(b.node.as_deref().unwrap_or(name)).cloned().unwrap_or_default();
        spans.push(((stop - b.start).num_milliseconds().max(0) as f64 / 3_600_000.0, instance_type, gpus, pool));
    }
    let limit = obs.iter().find_map(|o| match &o.event {
        Event::Baseline { fallback_gpu_limit, .. } => *fallback_gpu_limit,
        _ => None,
    });
    apply_limit(&mut usage, limit);
    usage.ceiling = drill.spec.guards.max_fallback_gpus.map(|c| c as i64);
    usage.over_ceiling = usage.ceiling.is_some_and(|c| usage.max_gpus > c);
    count(&mut usage, &spans, drill);
    usage
}

/// Adds each billed span (hours, instance type, GPUs, NodePool) to the totals, per NodePool and instance type, and
/// prices it.
fn count(usage: &mut FallbackUsage, spans: &[(f64, Option<String>, i64, Option<String>)], drill: &Drill) {
    let mut cost = 0.0;
    for (hours, instance_type, gpus, pool) in spans {
        if let Some(pool) = pool {
            let share = usage.by_node_pool.entry(pool.clone()).or_default();
            share.nodes += 1;
            share.node_hours += hours;
        }
        usage.nodes += 1;
        usage.node_hours += hours;
        usage.gpu_hours += hours * *gpus as f64;
        let it = instance_type.clone().unwrap_or_else(|| "unknown".into());
        *usage.by_instance_type.entry(it.clone()).or_default() += hours;
        match drill.spec.pricing.get(&it) {
            Some(price) => cost += hours * price,
            None if !usage.unpriced_instance_types.contains(&it) => usage.unpriced_instance_types.push(it),
            None => {}
        }
    }
    if usage.nodes > 0 && !drill.spec.pricing.is_empty() {
        usage.estimated_cost = Some((cost * 100.0).round() / 100.0);
    }
}

/// Sets the fallback's GPU limit and flags an overrun of it.
pub fn apply_limit(usage: &mut FallbackUsage, limit: Option<i64>) {
    usage.gpu_limit = limit;
    usage.overrun = limit.is_some_and(|l| usage.max_gpus > l);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::karpenter::ClaimCondition;
    use crate::phases::analyse;
    use crate::phases::tests::{drill, timeline};
    use crate::timeline::Event as E;
    use crate::timeline::FaultKind;

    #[test]
    fn the_fallback_bills_from_each_nodeclaims_creation_to_its_deletion_and_says_what_still_runs() {
        let fb = NodeRole::Fallback;
        let launched = |claim: &str| E::NodeClaimCondition {
            nodeclaim: claim.into(),
            condition: ClaimCondition::parse("Launched").unwrap(),
            status: ConditionStatus::True,
        };
        let node = |name: &str| E::NodeAdded {
            node: name.into(),
            role: fb,
            instance_type: Some("g6.12xlarge".into()),
            gpus: 4,
            node_pool: Some("gpu-fallback".into()),
        };
        let events = vec![
            (0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain }),
            (1.0, Some(1), E::NodeClaimCreated { nodeclaim: "c1".into() }),
            (1.0, Some(1), E::NodeClaimCreated { nodeclaim: "c2".into() }),
            // Refused for capacity: no instance, nothing billed.
            (1.0, Some(1), E::NodeClaimCreated { nodeclaim: "never".into() }),
            (2.0, Some(2), launched("c1")),
            (2.0, Some(2), launched("c2")),
            (91.0, Some(91), node("f1")),
            (91.0, Some(91), node("f2")),
            (91.5, None, E::NodeClaimNode { nodeclaim: "c1".into(), node: "f1".into() }),
            (91.5, None, E::NodeClaimNode { nodeclaim: "c2".into(), node: "f2".into() }),
            (1000.0, None, E::NodeDeleted { node: "f1".into(), role: fb }),
            (1801.0, None, E::NodeClaimDeleted { nodeclaim: "c1".into() }),
            (3601.0, None, E::ReturnStarted { step: "return".into() }),
        ];
        let f = analyse(&drill(), &timeline(events)).fallback;
        assert_eq!(f.billed_from, Some(BillingBasis::NodeClaim));
        assert_eq!(f.nodes, 2);
        // c1: 1 s to 1801 s (the instance outlives its Node object); c2: 1 s to the end, still running.
        assert!((f.node_hours - (1800.0 + 3600.0) / 3600.0).abs() < 1e-9, "{}", f.node_hours);
        assert!((f.gpu_hours - 4.0 * 1.5).abs() < 1e-9, "{}", f.gpu_hours);
        assert_eq!(f.still_running, ["c2"]);
        assert_eq!(f.still_running_at.unwrap().to_rfc3339(), "2026-01-01T01:00:01+00:00");
    }

    #[test]
    fn a_nodeclaim_gone_before_launching_is_a_failed_launch_with_what_karpenter_said_and_bills_nothing() {
        let launched = |claim: &str| E::NodeClaimCondition {
            nodeclaim: claim.into(),
            condition: ClaimCondition::parse("Launched").unwrap(),
            status: ConditionStatus::True,
        };
        let events = vec![
            (0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain }),
            (1.0, Some(1), E::NodeClaimCreated { nodeclaim: "c1".into() }),
            (
                1.1,
                Some(1),
                E::KubeEvent {
                    object: "NodeClaim/c1".into(),
                    reason: "InsufficientCapacityError".into(),
                    message: "NodeClaim c1 event: insufficient capacity, ...g6.12xlarge...".into(),
                },
            ),
            (1.2, None, E::NodeClaimDeleted { nodeclaim: "c1".into() }),
            (4.0, Some(4), E::NodeClaimCreated { nodeclaim: "c2".into() }),
            (4.5, Some(4), launched("c2")),
            // Still launching when the run ends: not a failure.
            (5.0, Some(5), E::NodeClaimCreated { nodeclaim: "c3".into() }),
            (6.0, None, E::ReturnStarted { step: "return".into() }),
        ];
        let a = analyse(&drill(), &timeline(events));
        let f = &a.fallback;
        assert_eq!(f.failed_launches.len(), 1, "{:?}", f.failed_launches);
        let failed = &f.failed_launches[0];
        assert_eq!(failed.nodeclaim, "c1");
        assert_eq!(failed.reason.as_deref(), Some("InsufficientCapacityError"));
        assert!(failed.message.as_deref().unwrap().contains("g6.12xlarge"));
        assert_eq!(failed.at.to_rfc3339(), "2026-01-01T00:00:01.200+00:00");
        assert_eq!(f.nodes, 1, "only the launched claim bills");
        let line = crate::report::billing_in_words(f).join("\n");
        assert!(line.contains("launch failed: NodeClaim c1"), "{line}");
        assert!(line.contains("InsufficientCapacityError"), "{line}");
        // The first claim, failed, still opens the provisioning: its time is part of the fallback's.
        let first = a.milestones.iter().find(|m| m.label == "first NodeClaim created");
        assert_eq!(first.map(|m| m.received.to_rfc3339()).as_deref(), Some("2026-01-01T00:00:01+00:00"));
    }

    #[test]
    fn overrun_is_flagged_above_the_limit() {
        let mut usage = FallbackUsage { max_gpus: 20, ..Default::default() };
        apply_limit(&mut usage, Some(16));
        assert!(usage.overrun);
        apply_limit(&mut usage, Some(24));
        assert!(!usage.overrun);
    }
}
