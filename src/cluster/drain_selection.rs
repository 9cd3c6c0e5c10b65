//! Which pods a drain evicts, as kubectl drain chooses them; read by the plan and by preflight before any step runs,
//! and by the drain step itself.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// kubectl drain leaves DaemonSet pods (their controller ignores cordons) and mirror pods (the kubelet owns them).
pub fn is_evictable(pod: &Pod) -> bool {
    let daemonset = pod.owner_references().iter().any(|o| o.kind == "DaemonSet" && o.controller == Some(true));
    let mirror = pod.annotations().contains_key("kubernetes.io/config.mirror");
    let finished =
        pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|p| p == "Succeeded" || p == "Failed");
    !daemonset && !mirror && !finished && pod.metadata.deletion_timestamp.is_none()
}

/// Splits the pods on a node into those a drain evicts and those it leaves because their namespace is protected.
pub fn select_for_drain(pods: Vec<Pod>, protected: &[String]) -> (Vec<Pod>, Vec<Pod>) {
    pods.into_iter()
        .filter(is_evictable)
        .partition(|p| !protected.iter().any(|ns| Some(ns.as_str()) == p.metadata.namespace.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn daemonset_mirror_finished_and_terminating_pods_are_left_alone() {
        let ds = pod(serde_json::json!({"metadata": {"name": "a", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "1", "controller": true}]}}));
        let mirror =
            pod(serde_json::json!({"metadata": {"name": "b", "annotations": {"kubernetes.io/config.mirror": "x"}}}));
        let failed = pod(serde_json::json!({"metadata": {"name": "c"}, "status": {"phase": "Failed"}}));
        let terminating =
            pod(serde_json::json!({"metadata": {"name": "e", "deletionTimestamp": "2026-01-01T00:00:00Z"}}));
        assert!([ds, mirror, failed, terminating].iter().all(|p| !is_evictable(p)));
    }

    #[test]
    fn protected_namespaces_are_kept_apart() {
        let app = |ns: &str| pod(serde_json::json!({"metadata": {"name": "p", "namespace": ns}}));
        let done = pod(
            serde_json::json!({"metadata": {"name": "d", "namespace": "inference"}, "status": {"phase": "Succeeded"}}),
        );
        let (evict, left) =
            select_for_drain(vec![app("inference"), app("kube-system"), done], &["kube-system".to_string()]);
        let namespaces = |pods: &[Pod]| pods.iter().map(|p| p.namespace().unwrap()).collect::<Vec<_>>();
        assert_eq!(namespaces(&evict), ["inference"]);
        assert_eq!(namespaces(&left), ["kube-system"]);
    }
}
