//! Which pods a drain evicts, as kubectl drain chooses them: the one selection the plan, preflight and the drain
//! step all read, so the step evicts exactly the pods the plan listed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::apps::v1::DaemonSet;
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

/// The DaemonSet that controls a pod, as `namespace/name`.
pub fn daemonset_of(pod: &Pod) -> Option<String> {
    let owner = pod.owner_references().iter().find(|o| o.kind == "DaemonSet" && o.controller == Some(true))?;
    Some(format!("{}/{}", pod.namespace().unwrap_or_default(), owner.name))
}

fn is_mirror(pod: &Pod) -> bool {
    pod.annotations().contains_key("kubernetes.io/config.mirror")
}

/// A pod that ran to completion (Succeeded or Failed): kubectl drain deletes it whatever its controller or volumes.
pub fn is_finished(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|p| p == "Succeeded" || p == "Failed")
}

/// Pods that belong to their node rather than to a workload: a DaemonSet's (its controller ignores cordons and puts
/// it back) and mirror pods (the kubelet owns them). Neither moves anywhere when the node is lost.
pub fn is_daemon_or_mirror(pod: &Pod) -> bool {
    daemonset_of(pod).is_some() || is_mirror(pod)
}

/// A live pod a drain moves off its node: neither a DaemonSet's nor a mirror pod, not finished, not already
/// Terminating. (A drain also deletes finished pods and waits for Terminating ones: see [`DrainSelection`].)
pub fn is_evictable(pod: &Pod) -> bool {
    !is_daemon_or_mirror(pod) && !is_finished(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// The DaemonSets named by the DaemonSet pods among `pods` that no longer exist, as `namespace/name`: kubectl drain
/// gets each one, and refuses (or, with `--force`, deletes) the pods of one that is gone.
pub async fn missing_daemonsets<'a>(
    client: &kube::Client,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> Result<BTreeSet<String>, kube::Error> {
    let named: BTreeSet<String> = pods.into_iter().filter(|p| !is_finished(p)).filter_map(daemonset_of).collect();
    let mut missing = BTreeSet::new();
    for full in named {
        let (namespace, name) = full.split_once('/').unwrap_or_default();
        let api: kube::Api<DaemonSet> = kube::Api::namespaced(client.clone(), namespace);
        if api.get_opt(name).await?.is_none() {
            missing.insert(full);
        }
    }
    Ok(missing)
}

/// What evicting a pod costs beyond the pod's own restart, and which kubectl flag accepts that cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loss {
    /// No controller recreates it: evicted, it is gone (`force`).
    pub bare: bool,
    /// Its DaemonSet (`namespace/name`) no longer exists: evicted, it is gone (`force`).
    pub orphaned_by: Option<String>,
    /// Its emptyDir volumes, whose data an eviction deletes (`deleteEmptyDirData`).
    pub empty_dirs: Vec<String>,
}

impl Loss {
    pub fn of(pod: &Pod) -> Loss {
        if is_finished(pod) {
            // It ran to completion: nothing is restarted or lost by deleting it, as kubectl drain judges.
            return Loss::default();
        }
        let empty_dirs = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter(|v| v.empty_dir.is_some())
            .map(|v| v.name.clone())
            .collect();
        let bare = !pod.owner_references().iter().any(|o| o.controller == Some(true));
        Loss { bare, orphaned_by: None, empty_dirs }
    }

    pub fn is_none(&self) -> bool {
        !self.bare && self.orphaned_by.is_none() && self.empty_dirs.is_empty()
    }

    /// The drill-file flags this loss needs and the flags given do not turn on.
    pub fn missing_flags(&self, flags: DrainFlags) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if (self.bare || self.orphaned_by.is_some()) && !flags.force {
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
        if let Some(daemonset) = &self.orphaned_by {
            parts.push(format!("its DaemonSet {daemonset} no longer exists: it will be lost"));
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

/// A drain's choice for the pods of a set of nodes, as kubectl drain makes it: live pods evicted (a bare or orphaned
/// pod only with `force`, emptyDir data only with `deleteEmptyDirData`), finished pods deleted through the same
/// eviction, Terminating pods waited for, DaemonSet pods (as with `--ignore-daemonsets`) and mirror pods left.
#[derive(Debug, Clone, Default)]
pub struct DrainSelection {
    /// DaemonSets (`namespace/name`) found missing ([`missing_daemonsets`]): their pods are orphans, which kubectl
    /// drain refuses without `--force` and deletes with it. Empty: every DaemonSet exists.
    pub missing_daemonsets: BTreeSet<String>,
    /// Evicted, in node order; a pod whose loss its flags allow is here with that loss. Finished pods too.
    pub evict: Vec<DrainPod>,
    /// Already Terminating: not evicted again, but the drain waits until they are gone, as kubectl drain does.
    pub terminating: Vec<DrainPod>,
    /// Left alone because their namespace is protected.
    pub protected: Vec<DrainPod>,
    /// kubectl drain would refuse them with these flags: a bare or orphaned pod without `force`, emptyDir without
    /// `deleteEmptyDirData`.
    pub refused: Vec<DrainPod>,
}

impl DrainSelection {
    /// A selection that knows which DaemonSets are gone.
    pub fn knowing(missing_daemonsets: BTreeSet<String>) -> DrainSelection {
        DrainSelection { missing_daemonsets, ..DrainSelection::default() }
    }

    /// Sorts the pods of one node into the selection.
    pub fn add_node(&mut self, node: &str, pods: Vec<Pod>, protected: &[String], flags: DrainFlags) {
        for pod in pods {
            let orphaned_by = daemonset_of(&pod).filter(|ds| self.missing_daemonsets.contains(ds));
            let finished = is_finished(&pod);
            // kubectl drain's filters, in its order: mirror pods are never touched; a DaemonSet's pod is left unless
            // finished or orphaned.
            if is_mirror(&pod) || (daemonset_of(&pod).is_some() && !finished && orphaned_by.is_none()) {
                continue;
            }
            let mut loss = Loss::of(&pod);
            if !finished {
                loss.orphaned_by = orphaned_by;
                loss.bare &= loss.orphaned_by.is_none();
            }
            let in_protected = protected.iter().any(|ns| Some(ns.as_str()) == pod.metadata.namespace.as_deref());
            let terminating = pod.metadata.deletion_timestamp.is_some();
            let refused = !loss.missing_flags(flags).is_empty();
            let entry = DrainPod { pod, node: node.to_string(), loss };
            match (in_protected, terminating, refused) {
                (true, _, _) => self.protected.push(entry),
                // Its deletion is under way: kubectl evicts it again and waits; only the wait changes anything.
                (false, true, _) => self.terminating.push(entry),
                (false, false, true) => self.refused.push(entry),
                (false, false, false) => self.evict.push(entry),
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

    /// The GPUs of the evicted pods, which all need a place on the fallback (a finished pod holds none).
    pub fn evicted_gpus(&self) -> i64 {
        self.evict.iter().filter(|p| !is_finished(&p.pod)).map(DrainPod::gpus).sum()
    }
}

/// The pods a lost on-prem node displaces onto the fallback (a drain, a cut, a node failure): every live pod a drain
/// would evict, whatever flags it has, but no DaemonSet pod, no finished pod and nothing in a protected namespace.
pub fn displaced(pods_by_node: &BTreeMap<String, Vec<Pod>>, protected: &[String]) -> Vec<DrainPod> {
    let mut selection = DrainSelection::default();
    let everything = DrainFlags { force: true, delete_empty_dir_data: true };
    for (node, pods) in pods_by_node {
        selection.add_node(node, pods.clone(), protected, everything);
    }
    selection.evict.retain(|p| !is_finished(&p.pod));
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

    /// A pod as the API server answers a LIST of one node's pods: phase, owner and deletion as recorded.
    fn recorded(name: &str, phase: &str, owner: Option<&str>, terminating: bool) -> Pod {
        let owners: Vec<serde_json::Value> = owner
            .map(|kind| {
                serde_json::json!({"apiVersion": "apps/v1", "kind": kind, "name": format!("{name}-owner"),
                    "uid": format!("{name}-uid"), "controller": true, "blockOwnerDeletion": true})
            })
            .into_iter()
            .collect();
        let mut p = pod(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "batch", "uid": format!("{name}-1"), "resourceVersion": "4711",
                "creationTimestamp": "2026-01-01T00:00:00Z", "ownerReferences": owners},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x"}],
                "volumes": [{"name": "scratch", "emptyDir": {}}]},
            "status": {"phase": phase, "hostIP": "10.0.1.21"}
        }));
        if terminating {
            p.metadata.deletion_timestamp =
                Some(serde_json::from_value(serde_json::json!("2026-01-01T00:05:00Z")).unwrap());
            p.metadata.deletion_grace_period_seconds = Some(30);
        }
        p
    }

    #[test]
    fn the_selection_follows_kubectl_drain_for_daemonset_mirror_finished_orphaned_and_terminating_pods() {
        let ds = recorded("agent", "Running", Some("DaemonSet"), false);
        let orphan = recorded("old-agent", "Running", Some("DaemonSet"), false);
        let mut mirror = recorded("static", "Running", None, false);
        mirror.metadata.annotations = Some([("kubernetes.io/config.mirror".to_string(), "x".to_string())].into());
        let failed_bare = recorded("burn-in", "Failed", None, false);
        let succeeded = recorded("report", "Succeeded", Some("Job"), false);
        let finished_orphan = recorded("gone-agent", "Succeeded", Some("DaemonSet"), false);
        let terminating = recorded("leaving", "Running", Some("ReplicaSet"), true);
        let terminating_bare = recorded("leaving-bare", "Running", None, true);
        let pods = vec![ds, orphan, mirror, failed_bare, succeeded, finished_orphan, terminating, terminating_bare];
        assert!(pods.iter().all(|p| !is_evictable(p)), "none of them is a live pod a drain moves");
        let missing: BTreeSet<String> = ["batch/old-agent-owner".to_string(), "batch/gone-agent-owner".into()].into();

        // Without flags: the orphan is refused (kubectl: the DaemonSet's get fails), a finished pod is deleted
        // whatever its controller or emptyDir (kubectl: "any finished pod can be removed"), Terminating pods are
        // waited for, the live DaemonSet pod (--ignore-daemonsets) and the mirror pod are left.
        let no_flags = DrainFlags::default();
        let mut selection = DrainSelection::knowing(missing.clone());
        selection.add_node("n", pods.clone(), &[], no_flags);
        assert_eq!(names(&selection.evict), ["batch/burn-in", "batch/report", "batch/gone-agent"]);
        assert!(selection.evict.iter().all(|p| p.loss.is_none()));
        assert_eq!(names(&selection.terminating), ["batch/leaving", "batch/leaving-bare"]);
        assert_eq!(names(&selection.refused), ["batch/old-agent"]);
        let why = selection.refusal("drain", no_flags).unwrap();
        assert!(
            why.contains("batch/old-agent on n (its DaemonSet batch/old-agent-owner no longer exists: it will be lost; its emptyDir data (scratch) will be deleted; allow with `force: true` and `deleteEmptyDirData: true`)"),
            "{why}"
        );

        // With --force (and the emptyDir flag) kubectl deletes the orphan too.
        let both = DrainFlags { force: true, delete_empty_dir_data: true };
        let mut forced = DrainSelection::knowing(missing);
        forced.add_node("n", pods.clone(), &[], both);
        assert_eq!(names(&forced.evict), ["batch/old-agent", "batch/burn-in", "batch/report", "batch/gone-agent"]);
        assert!(forced.refused.is_empty());

        // Without the DaemonSets' answer every DaemonSet counts as present, as before a get.
        let mut unknown = DrainSelection::default();
        unknown.add_node("n", pods.clone(), &[], no_flags);
        assert!(unknown.refused.is_empty());

        // A lost node sends none of them to the fallback.
        assert!(displaced(&BTreeMap::from([("n".to_string(), pods)]), &[]).is_empty());
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
