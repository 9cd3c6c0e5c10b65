//! How long the workload's pods tolerate the taints the node lifecycle controller puts on a node it lost
//! (`node.kubernetes.io/unreachable`, `node.kubernetes.io/not-ready`, both `NoExecute`): the wait before they are
//! evicted, which belongs in the RTO of a node failure or a link cut.

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};
use serde::{Deserialize, Serialize};

use super::scheduling::tolerates;

pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// What the workload's pods say about one NoExecute taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaintTolerance {
    pub taint: String,
    pub pods: usize,
    /// The shortest and longest wait before a pod is evicted, among the pods evicted at all (0: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<i64>,
    /// Pods that tolerate the taint forever: never evicted, so never replaced by the fallback.
    #[serde(default)]
    pub forever: usize,
}

/// The wait before the taint eviction controller evicts `pod` from a node with `taint`: `Some(0)` without a
/// matching toleration, the shortest `tolerationSeconds` among those that match, `None` when they match forever.
pub fn eviction_wait(pod: &Pod, taint: &str) -> Option<i64> {
    // The node lifecycle controller's taints have no value.
    let taint = Taint { key: taint.into(), effect: "NoExecute".into(), ..Default::default() };
    let matching: Vec<&Toleration> = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .map(|ts| ts.iter().filter(|t| tolerates(t, &taint)).collect())
        .unwrap_or_default();
    if matching.is_empty() {
        return Some(0);
    }
    // As the taint eviction controller computes it: a bounded toleration wins over an unbounded one.
    matching.iter().filter_map(|t| t.toleration_seconds).map(|s| s.max(0)).min()
}

pub fn tolerance(pods: &[Pod], taint: &str) -> TaintTolerance {
    let waits: Vec<Option<i64>> = pods.iter().map(|p| eviction_wait(p, taint)).collect();
    let bounded = waits.iter().flatten();
    TaintTolerance {
        taint: taint.into(),
        pods: pods.len(),
        min_seconds: bounded.clone().min().copied(),
        max_seconds: bounded.max().copied(),
        forever: waits.iter().filter(|w| w.is_none()).count(),
    }
}

impl TaintTolerance {
    /// `node.kubernetes.io/unreachable: evicted after 30s (4 pods)`.
    pub fn describe(&self) -> String {
        let wait = match (self.min_seconds, self.max_seconds) {
            (Some(a), Some(b)) if a == b => format!("evicted after {a}s"),
            (Some(a), Some(b)) => format!("evicted after {a}s to {b}s"),
            _ => "never evicted".into(),
        };
        let forever = match self.forever {
            0 => String::new(),
            n if n == self.pods => String::new(),
            n => format!("; {n} of them tolerate it forever and are never evicted"),
        };
        format!("{}: {wait} ({} pods{forever})", self.taint, self.pods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(tolerations: serde_json::Value) -> Pod {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [], "tolerations": tolerations}}),
        )
        .unwrap()
    }

    #[test]
    fn the_wait_is_read_from_the_matching_tolerations() {
        let defaulted = pod(serde_json::json!([
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
        ]));
        assert_eq!(eviction_wait(&defaulted, UNREACHABLE), Some(300));
        assert_eq!(eviction_wait(&defaulted, NOT_READY), Some(30));
        assert_eq!(eviction_wait(&pod(serde_json::json!([])), UNREACHABLE), Some(0));
        let forever = pod(serde_json::json!([{"operator": "Exists"}]));
        assert_eq!(eviction_wait(&forever, UNREACHABLE), None);
        let both = pod(
            serde_json::json!([{"operator": "Exists"}, {"key": UNREACHABLE, "operator": "Exists", "tolerationSeconds": 60}]),
        );
        assert_eq!(eviction_wait(&both, UNREACHABLE), Some(60));
        let t = tolerance(&[defaulted, forever], UNREACHABLE);
        assert_eq!((t.min_seconds, t.max_seconds, t.forever), (Some(300), Some(300), 1));
        assert_eq!(
            t.describe(),
            "node.kubernetes.io/unreachable: evicted after 300s (2 pods; 1 of them tolerate it forever and are never evicted)"
        );
    }
}
