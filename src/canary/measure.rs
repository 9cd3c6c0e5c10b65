//! What a canary's timeline measured, as a pure function of its observations: the NodeClaim it caused, each phase from
//! the launch to the first good answer and the reclaim, the launches Karpenter was refused, the pod's startup and the
//! node-hours it cost.

use serde::{Deserialize, Serialize};

use crate::cluster::karpenter::ClaimCondition;
use crate::phases::PodStartup;
use crate::phases::fallback_faults::{FailedLaunch, failed_launch};
use crate::timeline::{ConditionStatus, Event, Observation, StepOutcome};

/// The canary's own steps, as its timeline names them.
pub const LAUNCH: &str = "launch";
pub const ANSWER: &str = "first-answer";
pub const REMOVE: &str = "remove";

/// One phase of the canary, each bounded by two observations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanaryPhase {
    /// A drill's phase name where the canary measures the same span (`launched`, `image-pull`...), so the last
    /// drill's figure can be set against it.
    pub name: String,
    pub from: String,
    pub to: String,
    /// On the tool's clock (sub-second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// On the server's clock (whole seconds), where both ends carry one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_seconds: Option<i64>,
}

/// Everything the timeline says about one canary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub phases: Vec<CanaryPhase>,
    /// From the launch (the pod created) to the first good answer.
    pub first_answer_seconds: Option<f64>,
    pub nodeclaim: Option<String>,
    pub node: Option<String>,
    pub instance_type: Option<String>,
    /// Karpenter's launches refused for want of capacity, as a drill reads them.
    pub failed_launches: Vec<FailedLaunch>,
    pub startup: Option<PodStartup>,
    /// The NodeClaim from its creation to its deletion (or the end of the timeline).
    pub node_hours: f64,
}

/// The moments the phases are cut at, each the first observation of its kind after the launch.
struct Moments<'a> {
    obs: &'a [Observation],
    launch: u64,
}

impl<'a> Moments<'a> {
    fn first(&self, f: impl Fn(&Event) -> bool) -> Option<&'a Observation> {
        self.obs.iter().find(|o| o.seq >= self.launch && f(&o.event))
    }

    fn step(&self, step: &str, started: bool) -> Option<&'a Observation> {
        self.first(|e| match e {
            Event::StepStarted { step: s, .. } => started && s == step,
            Event::StepFinished { step: s, outcome, .. } => !started && s == step && *outcome == StepOutcome::Passed,
            _ => false,
        })
    }

    fn claim_reached(&self, claim: &str, condition: ClaimCondition) -> Option<&'a Observation> {
        self.first(|e| {
            matches!(e, Event::NodeClaimCondition { nodeclaim, condition: c, status: ConditionStatus::True }
                if nodeclaim == claim && *c == condition)
        })
    }
}

fn phase(name: &str, from: (&str, Option<&Observation>), to: (&str, Option<&Observation>)) -> CanaryPhase {
    let (a, b) = (from.1, to.1);
    CanaryPhase {
        name: name.into(),
        from: from.0.into(),
        to: to.0.into(),
        seconds: a.zip(b).map(|(a, b)| (b.t_ms.saturating_sub(a.t_ms)) as f64 / 1000.0),
        server_seconds: a
            .and_then(|a| a.server_time)
            .zip(b.and_then(|b| b.server_time))
            .map(|(a, b)| (b - a).num_seconds().max(0)),
    }
}

/// The canary's measurements from its timeline; `pod` is the canary pod's name.
pub fn measure(obs: &[Observation], pod: &str) -> Measured {
    let launch = obs.iter().find(|o| matches!(&o.event, Event::StepStarted { step, .. } if step == LAUNCH));
    let m = Moments { obs, launch: launch.map_or(0, |o| o.seq) };
    let created = m.first(|e| matches!(e, Event::NodeClaimCreated { .. }));
    let claim = created.and_then(|o| match &o.event {
        Event::NodeClaimCreated { nodeclaim } => Some(nodeclaim.clone()),
        _ => None,
    });
    let c = claim.as_deref().unwrap_or_default();
    let node =
        m.first(|e| matches!(e, Event::NodeClaimNode { nodeclaim, .. } if nodeclaim == c)).and_then(|o| {
            match &o.event {
                Event::NodeClaimNode { node, .. } => Some(node.clone()),
                _ => None,
            }
        });
    let n = node.as_deref().unwrap_or_default();
    let launched = m.claim_reached(c, ClaimCondition::Launched);
    let registered = m.claim_reached(c, ClaimCondition::Registered);
    let initialized = m.claim_reached(c, ClaimCondition::Initialized);
    let gpus = m.first(
        |e| matches!(e, Event::NodeReady { node, status: ConditionStatus::True, gpus, .. } if node == n && *gpus > 0),
    );
    let scheduled = m.first(|e| matches!(e, Event::PodScheduled { pod: p, .. } if p == pod));
    let ready = m.first(|e| matches!(e, Event::PodReady { pod: p, .. } if p == pod));
    let kubelet = |reason: &str| {
        let object = format!("Pod/{pod}");
        let mut said = obs.iter().filter(
            move |o| matches!(&o.event, Event::KubeEvent { object: ob, reason: r, .. } if *ob == object && r == reason),
        );
        (said.next(), said.next_back())
    };
    // The first `Pulling`, the last `Pulled` (an init container's image, then the server's).
    let pulling = kubelet("Pulling").0;
    let pulled = match kubelet("Pulled") {
        (first, None) => first,
        (_, last) => last,
    };
    let answer = m.step(ANSWER, false);
    let remove = m.step(REMOVE, true);
    let gone = m.first(|e| matches!(e, Event::NodeClaimDeleted { nodeclaim } if nodeclaim == c));
    let usable = match (gpus, initialized) {
        (Some(g), Some(i)) => Some(if g.seq > i.seq { g } else { i }),
        _ => None,
    };
    let phases = vec![
        phase("provisioning", ("NodeClaim created", created), ("Initialized", initialized)),
        phase("launched", ("NodeClaim created", created), ("Launched", launched)),
        phase("registered", ("Launched", launched), ("Registered", registered)),
        phase("initialized", ("Registered", registered), ("Initialized", initialized)),
        phase("gpu-allocatable", ("NodeClaim created", created), ("node Ready with GPUs allocatable", gpus)),
        phase("scheduling", ("node usable", usable), ("pod bound", scheduled)),
        phase("image-pull", ("Pulling", pulling), ("Pulled", pulled)),
        phase("load", ("Pulled", pulled), ("pod Ready", ready)),
        phase("startup", ("pod bound", scheduled), ("pod Ready", ready)),
        phase("first-answer", ("pod created", launch), ("first good answer", answer)),
        phase("reclaim", ("canary removed", remove), ("NodeClaim gone", gone)),
    ];
    let first_answer_seconds = phases.iter().find(|p| p.name == "first-answer").and_then(|p| p.seconds);
    let instance_type = obs.iter().find_map(|o| match &o.event {
        Event::NodeAdded { node: added, instance_type, .. } if added == n => instance_type.clone(),
        _ => None,
    });
    let failed_launches = obs.iter().filter(|o| o.seq >= m.launch).filter_map(failed_launch).collect();
    let startup = crate::phases::per_pod(obs, m.launch, u64::MAX).pods.into_iter().find(|p| p.pod == pod);
    let end = gone.or(obs.last());
    let node_hours =
        created.zip(end).map(|(a, b)| (b.t_ms.saturating_sub(a.t_ms)) as f64 / 3_600_000.0).unwrap_or_default();
    Measured {
        phases,
        first_answer_seconds,
        nodeclaim: claim,
        node,
        instance_type,
        failed_launches,
        startup,
        node_hours,
    }
}

/// Why no node came, in Karpenter's words: each refused launch with the pools EC2 refused, else nothing.
pub fn launch_refusal(measured: &Measured) -> Option<String> {
    let first = measured.failed_launches.first()?;
    let mut pools: Vec<String> = measured.failed_launches.iter().flat_map(|f| f.pools.clone()).collect();
    pools.sort();
    pools.dedup();
    let n = measured.failed_launches.len();
    Some(format!(
        "{n} launch{} refused ({}){}",
        if n == 1 { "" } else { "es" },
        first.reason,
        if pools.is_empty() { String::new() } else { format!(": no capacity for {}", pools.join(", ")) }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::NodeRole;

    /// One observation a second, on both clocks.
    fn timeline(events: Vec<Event>) -> Vec<Observation> {
        let base = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap();
        let timed = events.into_iter().enumerate().map(|(i, e)| (i as f64, Some(i as i64), e)).collect();
        crate::timeline::observations_from(base, timed)
    }

    fn claim(condition: ClaimCondition) -> Event {
        Event::NodeClaimCondition { nodeclaim: "gpu-fallback-a".into(), condition, status: ConditionStatus::True }
    }

    #[test]
    fn every_phase_of_a_passing_canary_is_cut_from_its_timeline() {
        let pod = "canary-x";
        let obs = timeline(vec![
            Event::NodeClaimCreated { nodeclaim: "before".into() },
            Event::StepStarted { step: LAUNCH.into(), action: "create".into() },
            Event::NodeClaimCreated { nodeclaim: "gpu-fallback-a".into() },
            claim(ClaimCondition::Launched),
            Event::NodeClaimNode { nodeclaim: "gpu-fallback-a".into(), node: "n1".into() },
            Event::NodeAdded {
                node: "n1".into(),
                role: NodeRole::Fallback,
                instance_type: Some("g6.12xlarge".into()),
                gpus: 4,
                node_pool: None,
            },
            claim(ClaimCondition::Registered),
            Event::NodeReady { node: "n1".into(), role: NodeRole::Fallback, status: ConditionStatus::True, gpus: 4 },
            claim(ClaimCondition::Initialized),
            Event::PodScheduled { pod: pod.into(), node: "n1".into(), role: NodeRole::Fallback },
            Event::PodReady { pod: pod.into(), node: "n1".into(), role: NodeRole::Fallback, containers: vec![] },
            Event::StepFinished { step: ANSWER.into(), outcome: StepOutcome::Passed, message: String::new() },
            Event::StepStarted { step: REMOVE.into(), action: "delete".into() },
            Event::NodeClaimDeleted { nodeclaim: "gpu-fallback-a".into() },
        ]);
        let m = measure(&obs, pod);
        assert_eq!(m.nodeclaim.as_deref(), Some("gpu-fallback-a"), "the claim created after the launch");
        assert_eq!(m.node.as_deref(), Some("n1"));
        assert_eq!(m.instance_type.as_deref(), Some("g6.12xlarge"));
        for name in ["provisioning", "launched", "registered", "initialized", "gpu-allocatable", "scheduling"] {
            let p = m.phases.iter().find(|p| p.name == name).unwrap();
            assert!(p.seconds.is_some(), "{name}: {p:?}");
        }
        let pull = m.phases.iter().find(|p| p.name == "image-pull").unwrap();
        assert_eq!(pull.seconds, None, "no Pulling event: not measured, never guessed");
        assert!(m.first_answer_seconds.unwrap() > 0.0);
        assert!(m.phases.iter().find(|p| p.name == "reclaim").unwrap().seconds.is_some());
        assert!(m.node_hours > 0.0);
    }

    #[test]
    fn refused_launches_are_named_with_their_pools() {
        let message = "creating instance, insufficient capacity, with fleet error(s), InsufficientInstanceCapacity: \
                       We currently do not have sufficient g6.12xlarge capacity in the Availability Zone you requested (us-east-1a).";
        let obs = timeline(vec![
            Event::StepStarted { step: LAUNCH.into(), action: "create".into() },
            Event::KubeEvent {
                object: "NodeClaim/gpu-fallback-b".into(),
                reason: "InsufficientCapacityError".into(),
                message: message.into(),
            },
        ]);
        let m = measure(&obs, "canary-x");
        let cause = launch_refusal(&m).unwrap();
        assert!(cause.contains("1 launch refused (InsufficientCapacityError)"), "{cause}");
        assert!(cause.contains("g6.12xlarge (us-east-1a)"), "{cause}");
        assert!(m.phases.iter().all(|p| p.seconds.is_none()), "{:?}", m.phases);
    }
}
