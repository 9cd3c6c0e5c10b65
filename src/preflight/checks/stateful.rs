//! statefulset-failover: whether a fault that loses the on-prem nodes leaves StatefulSet pods behind, which never
//! fail over by themselves.

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::support::{Findings, names};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::Snapshot;
use crate::preflight::targets::Expectations;

/// statefulset-failover: a lost node's pods are deleted by the taint eviction but stay Terminating, since no kubelet
/// confirms they stopped. A ReplicaSet replaces them at once; a StatefulSet does not, because its replacement would
/// take the same name and identity (at most one pod per ordinal), so it waits until the old pod is gone.
pub(super) fn statefulset_failover(s: &Snapshot, expect: &Expectations, out: &mut Findings) {
    let id = CheckId::StatefulsetFailover;
    let object = "StatefulSets on the on-prem nodes";
    if !expect.loses_nodes {
        return out.add(
            id,
            Status::Skip,
            object,
            "not checked: the drill loses no node (a drain evicts StatefulSet pods and their controller re-creates \
             them)",
        );
    }
    // (namespace, StatefulSet) -> `pod on node` of each of its pods on the on-prem nodes.
    let mut stateful: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for pod in &s.pods_on_prem {
        let namespace = pod.namespace().unwrap_or_default();
        if expect.protected_namespaces.contains(&namespace) {
            continue;
        }
        let Some(owner) = pod.owner_references().iter().find(|o| o.controller == Some(true)) else { continue };
        if owner.kind != "StatefulSet" {
            continue;
        }
        let node = pod.spec.as_ref().and_then(|p| p.node_name.clone()).unwrap_or_default();
        stateful.entry((namespace, owner.name.clone())).or_default().push(format!("{} on {node}", pod.name_any()));
    }
    if stateful.is_empty() {
        return out.add(id, Status::Pass, object, "no StatefulSet pod runs on the on-prem nodes");
    }
    for ((namespace, name), pods) in stateful {
        out.fix(
            id,
            Status::Warn,
            format!("StatefulSet {namespace}/{name}"),
            format!(
                "its pods ({}) will stay Terminating on the lost nodes, and the StatefulSet controller creates no \
                 replacement until each is confirmed gone (the node returns, or someone force-deletes it): it does \
                 not fail over during the drill, and the report names it as not moved",
                names(&pods)
            ),
            "expect it down for the whole fault; to fail it over, make sure the node is really down (fenced or \
             powered off) and then taint it node.kubernetes.io/out-of-service=nodeshutdown:NoExecute or force-delete \
             the pods (kubectl delete pod --force --grace-period=0): two copies of one ordinal must never run",
        );
    }
}
