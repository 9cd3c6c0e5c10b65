//! The path of a failed GPU on a node that stays Ready: the GPUs reported unhealthy (allocatable dropped), the node
//! quarantined by a remediation (cordon or taint), and the time users were served by a degraded set of pods before
//! that; or, when nothing quarantined it, the finding that the fallback never triggered (report.json's `gpuFault`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::moments::Moments;
use crate::domain::PhaseId;
use crate::drill::{Action, Drill};
use crate::timeline::{Event, NodeRole, Observation};

/// What the GPU fault of a run came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuFaultOutcome {
    /// The on-prem nodes whose GPUs failed.
    pub nodes: Vec<String>,
    /// Whether a remediation quarantined a faulty node within the drill's bound: without it, nothing starts the
    /// fallback.
    pub fallback_triggered: bool,
    pub quarantine_within_seconds: f64,
    /// How the first faulty node was quarantined (`hybrid-gpu-1 cordoned`), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantined_by: Option<String>,
    /// The first workload pod not Ready on a faulty node to the quarantine (or the fault's end when none came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_seconds: Option<f64>,
    /// The faulty nodes whose workload pods stopped being Ready, and those pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded_nodes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded_pods: Vec<String>,
    /// What detected the fault first: `allocatable` (the device plugin) or `detectedBy` (the GPUs' errors in
    /// Prometheus); absent when neither was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_by: Option<String>,
    /// The largest value the `detectedBy` query answered (DCGM's Xid: 79 is a GPU fallen off the bus), and the
    /// nodes its series named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_errors: Option<GpuErrors>,
}

/// The GPUs' errors as the `detectedBy` query first answered them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuErrors {
    pub value: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Seconds from t0 to the answer.
    pub seconds: f64,
}

/// The remediations that would have quarantined the nodes, for a finding that none did.
pub const REMEDIATIONS: &str = "a remediation that covers hybrid nodes: NVIDIA NVSentinel (fault quarantine and node \
drainer), or node-problem-detector with a DCGM/Xid check and a drainer (e.g. draino, medik8s); EKS node auto repair \
and the EKS node monitoring agent cover managed node groups and Karpenter nodes, not hybrid nodes";

/// The drill's `gpuFault`, if any.
fn fault_step(drill: &Drill) -> Option<&crate::drill::GpuFaultAction> {
    drill.spec.steps.iter().find_map(|s| match &s.action {
        Action::GpuFault(g) => Some(g),
        _ => None,
    })
}

/// The objective of `quarantine` when the drill sets none: its `quarantineWithin`.
pub(super) fn implied_objective(drill: &Drill, id: PhaseId) -> Option<f64> {
    (id == PhaseId::Quarantine).then(|| fault_step(drill).map(|g| g.quarantine_within.as_secs_f64())).flatten()
}

impl<'a> Moments<'a> {
    fn faulty_nodes(&self) -> Option<(BTreeSet<&'a str>, &'a Observation)> {
        let o = self.scan.first(self.t0_seq, |e| matches!(e, Event::GpuFaulted { .. }))?;
        match &o.event {
            Event::GpuFaulted { nodes, .. } => Some((nodes.iter().map(String::as_str).collect(), o)),
            _ => None,
        }
    }

    pub(super) fn gpu_fault(&self) -> bool {
        self.t0
            .is_some_and(|o| matches!(o.event, Event::FaultInjected { kind: crate::domain::FaultKind::GpuFault, .. }))
    }

    /// The first faulty node reporting fewer GPUs allocatable while Ready: the device plugin's detection.
    pub(super) fn gpus_unhealthy(&self) -> Option<&'a Observation> {
        let (nodes, _) = self.faulty_nodes()?;
        let before = |node: &str| {
            self.scan.obs.iter().rev().filter(|o| o.seq < self.t0_seq).find_map(|o| match &o.event {
                Event::NodeReady { node: n, gpus, .. } | Event::NodeAdded { node: n, gpus, .. } if n == node => {
                    Some(*gpus)
                }
                _ => None,
            })
        };
        self.scan
            .first(self.t0_seq, |e| match e {
                Event::NodeReady { node, gpus, status, .. } if nodes.contains(node.as_str()) && status.is_true() => {
                    before(node).is_none_or(|b| *gpus < b)
                }
                _ => false,
            })
            .filter(|o| o.seq < self.fault_end)
    }

    /// The first answer of the step's `detectedBy` query with a series, before the fault ended.
    pub(super) fn gpu_errors_seen(&self) -> Option<&'a Observation> {
        self.scan.first(self.t0_seq, |e| matches!(e, Event::GpuErrorsSeen { .. })).filter(|o| o.seq < self.fault_end)
    }

    /// The GPU fault's detection: the allocatable drop or the GPUs' errors in Prometheus, whichever came first.
    pub(super) fn gpu_detected(&self) -> Option<&'a Observation> {
        [self.gpus_unhealthy(), self.gpu_errors_seen()].into_iter().flatten().min_by_key(|o| o.seq)
    }

    /// The first faulty node cordoned or given a NoSchedule/NoExecute taint after t0, before the fault ended.
    pub(super) fn node_quarantined(&self) -> Option<&'a Observation> {
        let (nodes, _) = self.faulty_nodes()?;
        self.scan
            .first(self.t0_seq, |e| match e {
                Event::NodeSchedulable { node, schedulable: false, .. } => nodes.contains(node.as_str()),
                Event::NodeTaint { node, effect, added: true, .. } => {
                    nodes.contains(node.as_str()) && (effect == "NoSchedule" || effect == "NoExecute")
                }
                _ => false,
            })
            .filter(|o| o.seq < self.fault_end)
    }

    /// The first workload pod not Ready on a faulty node after t0.
    pub(super) fn first_pod_degraded(&self) -> Option<&'a Observation> {
        let (nodes, _) = self.faulty_nodes()?;
        self.scan
            .first(self.t0_seq, |e| {
                matches!(e, Event::PodNotReady { node, role: NodeRole::OnPrem, .. } if nodes.contains(node.as_str()))
            })
            .filter(|o| o.seq < self.fault_end)
    }

    /// Where the degraded service ended: the quarantine, else the fault's end (the restore), else the return.
    pub(super) fn degraded_ended(&self) -> Option<&'a Observation> {
        self.node_quarantined().or(self.restore).or(self.ret)
    }

    /// The record of the GPU fault: none for another fault.
    pub(super) fn gpu_fault_outcome(&self) -> Option<GpuFaultOutcome> {
        let (nodes, faulted) = self.faulty_nodes()?;
        let quarantine_within_seconds = match &faulted.event {
            Event::GpuFaulted { quarantine_within_seconds, .. } => *quarantine_within_seconds,
            _ => 0.0,
        };
        let unremediated = self.scan.first(self.t0_seq, |e| matches!(e, Event::GpuFaultUnremediated { .. })).is_some();
        let quarantined = self.node_quarantined();
        let quarantined_by = quarantined.map(|o| match &o.event {
            Event::NodeSchedulable { node, .. } => format!("{node} cordoned"),
            Event::NodeTaint { node, key, effect, .. } => format!("{node} tainted {key}:{effect}"),
            _ => String::new(),
        });
        let degraded = |f: &dyn Fn(&str, &str) -> String| -> Vec<String> {
            let end = self.degraded_ended().map_or(u64::MAX, |o| o.seq);
            let set: BTreeSet<String> = self
                .scan
                .obs
                .iter()
                .filter(|o| o.seq > self.t0_seq && o.seq < end)
                .filter_map(|o| match &o.event {
                    Event::PodNotReady { pod, node, .. } if nodes.contains(node.as_str()) => Some(f(pod, node)),
                    _ => None,
                })
                .collect();
            set.into_iter().collect()
        };
        let degraded_seconds = match (self.first_pod_degraded(), self.degraded_ended()) {
            (Some(from), Some(to)) if to.t_ms >= from.t_ms => Some((to.t_ms - from.t_ms) as f64 / 1000.0),
            _ => None,
        };
        Some(GpuFaultOutcome {
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            fallback_triggered: quarantined.is_some() && !unremediated,
            quarantine_within_seconds,
            quarantined_by,
            degraded_seconds,
            degraded_nodes: degraded(&|_, node| node.to_string()),
            degraded_pods: degraded(&|pod, _| pod.to_string()),
            detected_by: self.gpu_detected().map(|o| match o.event {
                Event::GpuErrorsSeen { .. } => "detectedBy".to_string(),
                _ => "allocatable".to_string(),
            }),
            gpu_errors: self.gpu_errors_seen().and_then(|o| match &o.event {
                Event::GpuErrorsSeen { nodes, value } => Some(GpuErrors {
                    value: *value,
                    nodes: nodes.clone(),
                    seconds: self.t0.map_or(0.0, |t0| (o.t_ms - t0.t_ms) as f64 / 1000.0),
                }),
                _ => None,
            }),
        })
    }
}

/// The GPU fault's record of a run, from its observations.
pub fn outcome(observations: &[Observation]) -> Option<GpuFaultOutcome> {
    Moments::new(observations).gpu_fault_outcome()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::tests::{drill, timeline};
    use super::*;
    use crate::timeline::gpu::NodeMarks;
    use crate::timeline::{ConditionStatus, FaultKind};

    fn faulted(quarantine: bool) -> Vec<Observation> {
        let on = NodeRole::OnPrem;
        let before = BTreeMap::from([("h1".to_string(), NodeMarks { gpus: 8, schedulable: true, taints: vec![] })]);
        let mut events = vec![
            (
                0.0,
                None,
                Event::NodeAdded { node: "h1".into(), role: on, instance_type: None, gpus: 8, node_pool: None },
            ),
            (1.0, None, Event::FaultInjected { step: "g".into(), kind: FaultKind::GpuFault }),
            (
                1.5,
                None,
                Event::GpuFaulted { nodes: vec!["h1".into()], quarantine_within_seconds: 30.0, before: before.clone() },
            ),
            (2.0, None, Event::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 0 }),
            (2.5, None, Event::PodNotReady { pod: "p1".into(), node: "h1".into(), role: on }),
        ];
        if quarantine {
            events.push((9.0, None, Event::NodeSchedulable { node: "h1".into(), role: on, schedulable: false }));
        } else {
            events.push((32.0, None, Event::GpuFaultUnremediated { nodes: vec!["h1".into()], waited_seconds: 30.5 }));
            events.push((
                32.5,
                None,
                Event::RestoreStarted { step: "r".into(), what: crate::domain::RestoreTarget::GpuFault },
            ));
        }
        timeline(events)
    }

    #[test]
    fn a_quarantined_gpu_fault_is_detected_quarantined_and_degraded_until_then() {
        let obs = faulted(true);
        let a = super::super::analyse(&drill(), &obs);
        assert_eq!(a.phase(PhaseId::GpuDetection).unwrap().seconds, Some(1.0));
        assert_eq!(a.phase(PhaseId::Quarantine).unwrap().seconds, Some(8.0));
        assert_eq!(a.phase(PhaseId::Degraded).unwrap().seconds, Some(6.5));
        let o = outcome(&obs).unwrap();
        assert!(o.fallback_triggered);
        assert_eq!(o.quarantined_by.as_deref(), Some("h1 cordoned"));
        assert_eq!(o.degraded_pods, ["p1"]);
    }

    #[test]
    fn a_gpu_fault_nothing_quarantined_leaves_the_quarantine_incomplete_and_degraded_until_the_restore() {
        let obs = faulted(false);
        let a = super::super::analyse(&drill(), &obs);
        assert_eq!(a.phase(PhaseId::Quarantine).unwrap().seconds, None);
        assert_eq!(a.phase(PhaseId::Degraded).unwrap().seconds, Some(30.0));
        let o = outcome(&obs).unwrap();
        assert!(!o.fallback_triggered);
        assert_eq!((o.degraded_seconds, o.degraded_nodes.clone()), (Some(30.0), vec!["h1".to_string()]));
        assert!(outcome(&timeline(vec![])).is_none());
    }
}
