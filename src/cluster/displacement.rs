//! What a lost on-prem node did to each workload on it, read while the fault still holds: which controllers replaced
//! their pods elsewhere and which did not (a StatefulSet waits for its old pod to be confirmed gone, which never
//! happens while the node is unreachable).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use super::drain_selection::is_daemon_or_mirror;

/// One workload that had pods on the lost on-prem nodes, by its controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadMove {
    /// `Deployment`, `StatefulSet`, `Job`, ... (a ReplicaSet of a Deployment is named by its Deployment).
    pub kind: String,
    /// `namespace/name` of the controller.
    pub workload: String,
    /// Its pods still bound to the lost nodes, as `pod on node (state)`.
    pub left: Vec<String>,
    /// Its pods bound to other nodes and not Terminating: the replacements (and any copy that ran off-prem already).
    pub elsewhere: usize,
    /// Its pods bound to no node yet: replacements still waiting for a place.
    #[serde(default)]
    pub pending: usize,
}

impl WorkloadMove {
    /// Moved: as many pods run elsewhere as it left behind. A StatefulSet never does while the node is lost.
    pub fn moved(&self) -> bool {
        self.elsewhere >= self.left.len()
    }
}

impl fmt::Display for WorkloadMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({}; {} elsewhere", self.kind, self.workload, self.left.join(", "), self.elsewhere)?;
        if self.pending > 0 {
            write!(f, ", {} Pending", self.pending)?;
        }
        if self.kind == "Pod" {
            f.write_str(": no controller replaces it")?;
        } else if !self.moved() && self.kind == "StatefulSet" {
            // Why it did not move, which the operator would otherwise read as a slow fallback.
            f.write_str(
                ": a StatefulSet creates no replacement until the old pod is confirmed gone, by the node's return or \
                 a force delete",
            )?;
        }
        f.write_str(")")
    }
}

/// The controller a pod belongs to, as people name it: a ReplicaSet that a Deployment made is named by that
/// Deployment (its name is the Deployment's plus `-<pod-template-hash>`).
pub fn controller(pod: &Pod) -> Option<(String, String, String)> {
    let owner = pod.owner_references().iter().find(|o| o.controller == Some(true))?;
    let hash = pod.labels().get("pod-template-hash");
    let (kind, name) = match hash.and_then(|h| owner.name.strip_suffix(&format!("-{h}"))) {
        Some(deployment) if owner.kind == "ReplicaSet" => ("Deployment".to_string(), deployment.to_string()),
        _ => (owner.kind.clone(), owner.name.clone()),
    };
    Some((kind, name, owner.uid.clone()))
}

fn state(pod: &Pod) -> &'static str {
    match pod.metadata.deletion_timestamp {
        Some(_) => "Terminating",
        None => "not evicted",
    }
}

/// Each controller with pods on the lost nodes (`on_lost`, outside the protected namespaces, no DaemonSet or mirror
/// pod), with its pods found in `everywhere` (the pods of those namespaces) off the lost nodes; a bare pod as a
/// workload of its own (kind `Pod`), which nothing replaces.
pub fn moves(on_lost: &[Pod], everywhere: &[Pod], lost: &[String], protected: &[String]) -> Vec<WorkloadMove> {
    let mut by_owner: BTreeMap<String, WorkloadMove> = BTreeMap::new();
    for pod in on_lost {
        let namespace = pod.namespace().unwrap_or_default();
        if protected.contains(&namespace) || is_daemon_or_mirror(pod) {
            continue;
        }
        // A bare pod stands for itself: nothing replaces it.
        let (kind, name, uid) =
            controller(pod).unwrap_or_else(|| ("Pod".into(), pod.name_any(), pod.uid().unwrap_or_default()));
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let entry = by_owner.entry(uid).or_insert_with(|| WorkloadMove {
            kind,
            workload: format!("{namespace}/{name}"),
            left: Vec::new(),
            elsewhere: 0,
            pending: 0,
        });
        entry.left.push(format!("{} on {node} ({})", pod.name_any(), state(pod)));
    }
    for pod in everywhere.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let owner = pod.owner_references().iter().find(|o| o.controller == Some(true));
        let Some(entry) = owner.and_then(|o| by_owner.get_mut(&o.uid)) else { continue };
        match pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) {
            None => entry.pending += 1,
            Some(node) if !lost.contains(node) => entry.elsewhere += 1,
            Some(_) => {}
        }
    }
    let mut out: Vec<WorkloadMove> = by_owner.into_values().collect();
    out.sort_by(|a, b| (&a.kind, &a.workload).cmp(&(&b.kind, &b.workload)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    fn owned(name: &str, node: Option<&str>, kind: &str, owner: &str, uid: &str, terminating: bool) -> Pod {
        let mut p = pod(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {}, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": uid, "controller": true}]},
            "spec": {"containers": [{"name": "c"}]},
        }));
        if kind == "ReplicaSet" {
            p.metadata.labels.as_mut().unwrap().insert("pod-template-hash".into(), "5d9c7".into());
        }
        p.spec.as_mut().unwrap().node_name = node.map(String::from);
        if terminating {
            p.metadata.deletion_timestamp =
                Some(serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).unwrap());
        }
        p
    }

    #[test]
    fn a_deployment_replaced_elsewhere_moved_and_a_statefulset_left_terminating_did_not() {
        let lost = ["h1".to_string()];
        let on_lost = vec![
            owned("llm-a", Some("h1"), "ReplicaSet", "llm-5d9c7", "rs", true),
            owned("index-0", Some("h1"), "StatefulSet", "index", "sts", true),
            owned("job-x", Some("h1"), "Job", "nightly", "job", false),
            owned("plugin", Some("h1"), "DaemonSet", "plugin", "ds", false),
        ];
        let mut everywhere = on_lost.clone();
        everywhere.push(owned("llm-b", Some("cloud-1"), "ReplicaSet", "llm-5d9c7", "rs", false));
        everywhere.push(owned("llm-c", None, "ReplicaSet", "llm-5d9c7", "rs", false));
        everywhere.push(owned("job-y", None, "Job", "nightly", "job", false));
        let moves = moves(&on_lost, &everywhere, &lost, &[]);
        let summary: Vec<(String, bool)> = moves.iter().map(|m| (m.to_string(), m.moved())).collect();
        assert_eq!(
            summary,
            [
                ("Deployment ns/llm (llm-a on h1 (Terminating); 1 elsewhere, 1 Pending)".to_string(), true),
                ("Job ns/nightly (job-x on h1 (not evicted); 0 elsewhere, 1 Pending)".to_string(), false),
                (
                    "StatefulSet ns/index (index-0 on h1 (Terminating); 0 elsewhere: a StatefulSet creates no \
                     replacement until the old pod is confirmed gone, by the node's return or a force delete)"
                        .to_string(),
                    false
                ),
            ]
        );
    }

    #[test]
    fn a_bare_pod_does_not_move_and_protected_namespaces_are_left_out() {
        let bare = pod(serde_json::json!({"metadata": {"name": "bare", "namespace": "ns", "uid": "b"},
            "spec": {"nodeName": "h1", "containers": [{"name": "c"}]}}));
        let mut system = owned("coredns", Some("h1"), "ReplicaSet", "coredns-5d9c7", "c", true);
        system.metadata.namespace = Some("kube-system".into());
        let moves = moves(&[bare, system], &[], &["h1".into()], &["kube-system".into()]);
        let summary: Vec<String> = moves.iter().map(ToString::to_string).collect();
        assert_eq!(summary, ["Pod ns/bare (bare on h1 (not evicted); 0 elsewhere: no controller replaces it)"]);
        assert!(!moves[0].moved());
    }
}
