//! Which pods a drain evicts, as kubectl drain chooses them: the one selection the plan, preflight and the drain
//! step all read, so the step evicts exactly the pods the plan listed.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::ResourceExt;

use super::karpenter::GPU_RESOURCE;
use super::quantity::as_integer;

/// kubectl drain's `--force` and `--delete-emptydir-data`, off unless the drill file turns them on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainFlags {
    /// Evict pods no controller recreates: they are lost.
    pub force: bool,
    /// Evict pods with emptyDir volumes: their data is deleted.
    pub delete_empty_dir_data: bool,
}

/// kubectl drain leaves DaemonSet pods (their controller ignores cordons) and mirror pods (the kubelet owns them).
pub fn is_evictable(pod: &Pod) -> bool {
    let daemonset = pod.owner_references().iter().any(|o| o.kind == "DaemonSet" && o.controller == Some(true));
    let mirror = pod.annotations().contains_key("kubernetes.io/config.mirror");
    let finished =
        pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|p| p == "Succeeded" || p == "Failed");
    !daemonset && !mirror && !finished && pod.metadata.deletion_timestamp.is_none()
}

/// What evicting a pod costs beyond the pod's own restart, and which kubectl flag accepts that cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loss {
    /// No controller recreates it: evicted, it is gone (`force`).
    pub bare: bool,
    /// Its emptyDir volumes, whose data an eviction deletes (`deleteEmptyDirData`).
    pub empty_dirs: Vec<String>,
}

impl Loss {
    pub fn of(pod: &Pod) -> Loss {
        let empty_dirs = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter(|v| v.empty_dir.is_some())
            .map(|v| v.name.clone())
            .collect();
        Loss { bare: !pod.owner_references().iter().any(|o| o.controller == Some(true)), empty_dirs }
    }

    pub fn is_none(&self) -> bool {
        !self.bare && self.empty_dirs.is_empty()
    }

    /// The drill-file flags this loss needs and the flags given do not turn on.
    pub fn missing_flags(&self, flags: DrainFlags) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.bare && !flags.force {
            missing.push("force");
        }
        if !self.empty_dirs.is_empty() && !flags.delete_empty_dir_data {
            missing.push("deleteEmptyDirData");
        }
        missing
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.bare {
            parts.push("no controller: it will be lost".to_string());
        }
        if !self.empty_dirs.is_empty() {
            parts.push(format!("its emptyDir data ({}) will be deleted", self.empty_dirs.join(", ")));
        }
        f.write_str(&parts.join("; "))
    }
}

/// One pod a drain acts on, or leaves, on the node it runs on.
#[derive(Debug, Clone)]
pub struct DrainPod {
    pub pod: Pod,
    pub node: String,
    pub loss: Loss,
}

impl DrainPod {
    /// `namespace/name`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.pod.namespace().unwrap_or_default(), self.pod.name_any())
    }

    /// The GPUs the pod holds (requests, or limits where no request is given), as the scheduler counts them.
    pub fn gpus(&self) -> i64 {
        self.pod.spec.as_ref().map(pod_gpus).unwrap_or(0)
    }
}

/// A drain's choice for the pods of a set of nodes.
#[derive(Debug, Clone, Default)]
pub struct DrainSelection {
    /// Evicted, in node order; a pod whose loss its flags allow is here with that loss.
    pub evict: Vec<DrainPod>,
    /// Left alone because their namespace is protected.
    pub protected: Vec<DrainPod>,
    /// kubectl drain would refuse them with these flags: a bare pod without `force`, emptyDir without
    /// `deleteEmptyDirData`.
    pub refused: Vec<DrainPod>,
}

impl DrainSelection {
    /// Sorts the pods of one node into the selection.
    pub fn add_node(&mut self, node: &str, pods: Vec<Pod>, protected: &[String], flags: DrainFlags) {
        for pod in pods.into_iter().filter(is_evictable) {
            let loss = Loss::of(&pod);
            let in_protected = protected.iter().any(|ns| Some(ns.as_str()) == pod.metadata.namespace.as_deref());
            let refused = !loss.missing_flags(flags).is_empty();
            let entry = DrainPod { pod, node: node.to_string(), loss };
            match (in_protected, refused) {
                (true, _) => self.protected.push(entry),
                (false, true) => self.refused.push(entry),
                (false, false) => self.evict.push(entry),
            }
        }
    }

    /// Why kubectl drain would refuse, one clause per refused pod naming the flag that allows it; `None` if it
    /// would not.
    pub fn refusal(&self, step: &str, flags: DrainFlags) -> Option<String> {
        let clauses: Vec<String> = self
            .refused
            .iter()
            .map(|p| {
                let allow = p.loss.missing_flags(flags).iter().map(|f| format!("`{f}: true`")).collect::<Vec<_>>();
                format!("{} on {} ({}; allow with {})", p.name(), p.node, p.loss, allow.join(" and "))
            })
            .collect();
        (!clauses.is_empty()).then(|| {
            format!(
                "the drain of step `{step}` would evict pods kubectl drain refuses without a flag: {}; set the flag on \
                 the step (`drain: {{nodes: onPrem, force: true, deleteEmptyDirData: true}}`) or move the pods first",
                clauses.join("; ")
            )
        })
    }

    /// The GPUs of the evicted pods, which all need a place on the fallback.
    pub fn evicted_gpus(&self) -> i64 {
        self.evict.iter().map(DrainPod::gpus).sum()
    }
}

/// The pods a lost on-prem node displaces onto the fallback (a drain, a cut, a node failure): every pod a drain
/// would evict, whatever flags it has, but no DaemonSet pod and nothing in a protected namespace.
pub fn displaced(pods_by_node: &BTreeMap<String, Vec<Pod>>, protected: &[String]) -> Vec<DrainPod> {
    let mut selection = DrainSelection::default();
    let everything = DrainFlags { force: true, delete_empty_dir_data: true };
    for (node, pods) in pods_by_node {
        selection.add_node(node, pods.clone(), protected, everything);
    }
    selection.evict
}

/// The `nvidia.com/gpu` a pod holds: its containers' sum, or its largest init container if that is more, each
/// container's request (or limit, which the API server copies into an unset request).
pub fn pod_gpus(spec: &PodSpec) -> i64 {
    let of = |c: &k8s_openapi::api::core::v1::Container| {
        let r = c.resources.as_ref();
        let request = r.and_then(|r| r.requests.as_ref()).and_then(|q| q.get(GPU_RESOURCE));
        let limit = r.and_then(|r| r.limits.as_ref()).and_then(|q| q.get(GPU_RESOURCE));
        request.or(limit).and_then(as_integer).unwrap_or(0)
    };
    let containers: i64 = spec.containers.iter().map(of).sum();
    let init = spec.init_containers.iter().flatten().map(of).max().unwrap_or(0);
    containers.max(init)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    fn owned(name: &str, namespace: &str) -> Pod {
        pod(serde_json::json!({"metadata": {"name": name, "namespace": namespace, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "2", "controller": true}]}}))
    }

    fn names(pods: &[DrainPod]) -> Vec<String> {
        pods.iter().map(DrainPod::name).collect()
    }

    #[test]
    fn daemonset_mirror_finished_and_terminating_pods_are_left_alone() {
        let ds = pod(serde_json::json!({"metadata": {"name": "a", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "1", "controller": true}]}}));
        let mirror =
            pod(serde_json::json!({"metadata": {"name": "b", "annotations": {"kubernetes.io/config.mirror": "x"}}}));
        let failed = pod(serde_json::json!({"metadata": {"name": "c"}, "status": {"phase": "Failed"}}));
        let succeeded = pod(serde_json::json!({"metadata": {"name": "s"}, "status": {"phase": "Succeeded"}}));
        let terminating =
            pod(serde_json::json!({"metadata": {"name": "e", "deletionTimestamp": "2026-01-01T00:00:00Z"}}));
        let all = [ds, mirror, failed, succeeded, terminating];
        assert!(all.iter().all(|p| !is_evictable(p)));
        let mut selection = DrainSelection::default();
        selection.add_node("n", all.to_vec(), &[], DrainFlags::default());
        assert!(selection.evict.is_empty() && selection.protected.is_empty() && selection.refused.is_empty());
    }

    #[test]
    fn protected_namespaces_are_kept_apart_even_for_pods_a_flag_would_refuse() {
        let bare_in_kube_system = pod(serde_json::json!({"metadata": {"name": "static", "namespace": "kube-system"}}));
        let mut selection = DrainSelection::default();
        selection.add_node(
            "n1",
            vec![owned("p", "inference"), owned("coredns", "kube-system"), bare_in_kube_system],
            &["kube-system".to_string()],
            DrainFlags::default(),
        );
        assert_eq!(names(&selection.evict), ["inference/p"]);
        assert_eq!(names(&selection.protected), ["kube-system/coredns", "kube-system/static"]);
        assert!(selection.refusal("drain", DrainFlags::default()).is_none());
    }

    #[test]
    fn bare_and_empty_dir_pods_are_refused_naming_the_flag_and_evicted_with_it() {
        let bare = pod(serde_json::json!({"metadata": {"name": "bare", "namespace": "batch"}}));
        let mut scratch = owned("scratch", "batch");
        scratch.spec = Some(
            serde_json::from_value(serde_json::json!({"containers": [{"name": "c"}], "volumes": [
                {"name": "cache", "emptyDir": {}}, {"name": "config", "configMap": {"name": "x"}}]}))
            .unwrap(),
        );
        let pods = vec![bare, scratch, owned("ok", "batch")];

        let mut refused = DrainSelection::default();
        refused.add_node("n1", pods.clone(), &[], DrainFlags::default());
        assert_eq!(names(&refused.evict), ["batch/ok"]);
        assert_eq!(names(&refused.refused), ["batch/bare", "batch/scratch"]);
        let why = refused.refusal("drain", DrainFlags::default()).unwrap();
        assert!(why.contains("batch/bare on n1 (no controller: it will be lost; allow with `force: true`)"), "{why}");
        assert!(
            why.contains(
                "batch/scratch on n1 (its emptyDir data (cache) will be deleted; allow with `deleteEmptyDirData: true`)"
            ),
            "{why}"
        );

        let only_force = DrainFlags { force: true, delete_empty_dir_data: false };
        let mut half = DrainSelection::default();
        half.add_node("n1", pods.clone(), &[], only_force);
        assert_eq!(names(&half.refused), ["batch/scratch"]);

        let both = DrainFlags { force: true, delete_empty_dir_data: true };
        let mut allowed = DrainSelection::default();
        allowed.add_node("n1", pods, &[], both);
        assert!(allowed.refused.is_empty() && allowed.refusal("drain", both).is_none());
        assert_eq!(names(&allowed.evict), ["batch/bare", "batch/scratch", "batch/ok"]);
        assert!(allowed.evict[0].loss.bare && allowed.evict[1].loss.empty_dirs == ["cache"]);
        assert!(allowed.evict[2].loss.is_none());
    }

    #[test]
    fn every_displaced_gpu_pod_counts_but_daemonsets_and_protected_namespaces_do_not() {
        let gpu_pod = |name: &str, namespace: &str, gpus: &str| {
            let mut p = owned(name, namespace);
            p.spec = Some(
                serde_json::from_value(serde_json::json!({"containers": [
                    {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}))
                .unwrap(),
            );
            p
        };
        let mut plugin = gpu_pod("device-plugin", "gpu-operator", "1");
        plugin.metadata.owner_references = Some(vec![
            serde_json::from_value(serde_json::json!(
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "1", "controller": true}))
            .unwrap(),
        ]);
        let bare_gpu = {
            let mut p = gpu_pod("notebook", "research", "2");
            p.metadata.owner_references = None;
            p
        };
        let by_node = BTreeMap::from([
            ("n1".to_string(), vec![gpu_pod("llm-a", "inference", "4"), plugin, gpu_pod("dcgm", "kube-system", "1")]),
            ("n2".to_string(), vec![gpu_pod("embeddings", "batch", "1"), bare_gpu]),
        ]);
        let moved = displaced(&by_node, &["kube-system".to_string()]);
        assert_eq!(names(&moved), ["inference/llm-a", "batch/embeddings", "research/notebook"]);
        assert_eq!(moved.iter().map(DrainPod::gpus).sum::<i64>(), 7);
    }

    #[test]
    fn gpus_are_the_request_or_the_limit_and_init_containers_count_at_most_once() {
        let spec: PodSpec = serde_json::from_value(serde_json::json!({
            "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "3"}}}],
            "containers": [
                {"name": "a", "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}},
                {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {"name": "c"}]}))
        .unwrap();
        assert_eq!(pod_gpus(&spec), 3);
    }
}
