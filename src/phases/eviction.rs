//! The drain and the eviction: the on-prem nodes lost, their NoExecute taint, the pods evicted, and what the
//! workload's tolerations said the wait would be.

use super::moments::Moments;
use crate::cluster::tolerations;
use crate::timeline::{Event, NodeRole, Observation};

impl<'a> Moments<'a> {
    pub(super) fn node_lost(&self) -> Option<&'a Observation> {
        self.scan
            .first(
                self.t0_seq,
                |e| matches!(e, Event::NodeReady { role: NodeRole::OnPrem, status, .. } if !status.is_true()),
            )
            .filter(|o| o.seq < self.fault_end)
    }

    pub(super) fn lost_node_tainted(&self) -> Option<&'a Observation> {
        self.scan.first(self.t0_seq, lost_node_taint).filter(|o| o.seq < self.fault_end)
    }

    pub(super) fn first_pod_evicted(&self, before: u64) -> Option<&'a Observation> {
        self.scan
            .first(self.t0_seq, |e| matches!(e, Event::PodTerminating { role: NodeRole::OnPrem, .. }))
            .filter(|o| o.seq < before)
    }

    /// What the workload's tolerations said the wait after the lost node's taint would be.
    pub(super) fn expected_toleration(&self) -> Option<String> {
        expected_toleration(self.scan.obs, self.lost_node_tainted())
    }
}

/// The NoExecute taint the node lifecycle controller puts on an on-prem node it lost.
fn lost_node_taint(e: &Event) -> bool {
    matches!(e, Event::NodeTaint { role: NodeRole::OnPrem, key, effect, added: true, .. }
        if effect == "NoExecute" && (key == tolerations::UNREACHABLE || key == tolerations::NOT_READY))
}

/// What the workload's tolerations, read before the fault, said the wait after `taint` would be.
fn expected_toleration(obs: &[Observation], taint: Option<&Observation>) -> Option<String> {
    let key = match taint.map(|o| &o.event) {
        Some(Event::NodeTaint { key, .. }) => key.as_str(),
        _ => tolerations::UNREACHABLE,
    };
    obs.iter().find_map(|o| match &o.event {
        Event::TolerationsRead { tolerations } => tolerations
            .iter()
            .find(|t| t.taint == key)
            .map(|t| format!("expected from the pods' tolerations: {}", t.describe())),
        _ => None,
    })
}
