//! What a GPU fault's remediation changes on a node, as the timeline records it before the fault: the GPUs
//! allocatable, whether it is schedulable, its NoSchedule/NoExecute taints. The restore is checked against it.

use serde::{Deserialize, Serialize};

use super::view::NodeState;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMarks {
    pub gpus: i64,
    pub schedulable: bool,
    /// `key:effect`, sorted.
    pub taints: Vec<String>,
}

impl NodeMarks {
    pub fn of(node: &NodeState) -> NodeMarks {
        let mut taints: Vec<String> = node
            .taints
            .iter()
            .filter(|(_, effect, _)| effect == "NoSchedule" || effect == "NoExecute")
            .map(|(k, e, _)| format!("{k}:{e}"))
            .collect();
        taints.sort();
        taints.dedup();
        NodeMarks { gpus: node.gpus, schedulable: node.schedulable, taints }
    }

    /// How `now` shows a quarantine against these marks: cordoned, or a taint added.
    pub fn quarantine(&self, now: &NodeMarks) -> Option<String> {
        if self.schedulable && !now.schedulable {
            return Some("cordoned".into());
        }
        now.taints.iter().find(|t| !self.taints.contains(t)).map(|t| format!("tainted {t}"))
    }

    /// What keeps `now` from being as these marks: GPUs missing, cordoned, or a taint added.
    pub fn differences(&self, now: &NodeMarks) -> Vec<String> {
        let mut out = Vec::new();
        if now.gpus != self.gpus {
            out.push(format!("{} of {} GPUs allocatable", now.gpus, self.gpus));
        }
        out.extend(self.quarantine(now));
        out
    }
}
