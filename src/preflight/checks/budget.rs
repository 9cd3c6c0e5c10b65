//! The drain's budgets: workload-pdb (one PodDisruptionBudget covers the workload and allows a disruption now),
//! drain-pods (kubectl drain would evict every pod on the on-prem nodes with the drill's flags), and the GPU pods a
//! lost on-prem node sends to the fallback besides the workload's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::support::{Findings, names};
use crate::cluster::drain_selection::{DrainPod, DrainSelection, displaced};
use crate::cluster::scheduling::selector_matches;
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{Snapshot, Workload};
use crate::preflight::targets::Expectations;

fn on_prem_pods_by_node(s: &Snapshot) -> BTreeMap<String, Vec<Pod>> {
    let mut by_node: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for pod in &s.pods_on_prem {
        let node = pod.spec.as_ref().and_then(|p| p.node_name.clone()).unwrap_or_default();
        by_node.entry(node).or_default().push(pod.clone());
    }
    by_node
}

/// The GPU pods other than the workload's that a drain, a cut or a node failure would send to the fallback too.
pub(super) fn other_displaced_gpu_pods(s: &Snapshot, expect: &Expectations) -> Vec<DrainPod> {
    displaced(&on_prem_pods_by_node(s), &expect.protected_namespaces)
        .into_iter()
        .filter(|p| p.gpus() > 0 && !s.workload_pod_names.contains(&p.name()))
        .collect()
}

/// drain-pods: the drain would evict every pod on the on-prem nodes with the drill's flags, as kubectl drain would.
pub(super) fn drain_pods(s: &Snapshot, expect: &Expectations, out: &mut Findings) {
    let id = CheckId::DrainPods;
    let object = "Pods on the on-prem nodes";
    if !expect.drains {
        return out.add(id, Status::Skip, object, "not checked: the drill does not drain");
    }
    let mut selection = DrainSelection::knowing(s.missing_daemonsets.clone());
    for (node, pods) in on_prem_pods_by_node(s) {
        selection.add_node(&node, pods, &expect.protected_namespaces, expect.drain_flags);
    }
    let left = selection.protected.iter().map(|p| format!("{} on {}", p.name(), p.node));
    let left = if selection.protected.is_empty() {
        String::new()
    } else {
        format!("; left alone (protected namespace): {}", names(left))
    };
    for p in &selection.refused {
        let flags = p.loss.missing_flags(expect.drain_flags);
        out.fix(
            id,
            Status::Fail,
            format!("Pod {} on {}", p.name(), p.node),
            format!("kubectl drain refuses it without `{}`: {}", flags.join("` and `"), p.loss),
            format!(
                "move it off the on-prem nodes before the drill, or set `{}` on the drain step (`{}` to preflight \
                 without a drill file)",
                flags.iter().map(|f| format!("{f}: true")).collect::<Vec<_>>().join(", "),
                flags.iter().map(|f| cli_flag(f)).collect::<Vec<_>>().join(" ")
            ),
        );
    }
    if selection.refused.is_empty() {
        out.add(id, Status::Pass, object, format!("{} pods to evict{left}", selection.evict.len()));
    }
}

/// The `preflight` flag that says what a drain step's field does.
fn cli_flag(field: &str) -> &'static str {
    match field {
        "force" => "--force",
        _ => "--delete-emptydir-data",
    }
}

pub(super) fn workload_budget(s: &Snapshot, w: &Workload, object: &str, drains: bool, out: &mut Findings) {
    let id = CheckId::WorkloadPdb;
    // A budget in the way blocks a drain; a lost node's pods are evicted by its taint, which ignores budgets.
    let (blocking, but) = if drains {
        (Status::Fail, "")
    } else {
        (Status::Warn, " (this drill does not drain: a lost node's taint evicts regardless of budgets)")
    };
    let labels = w.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
    let covering: Vec<_> = s
        .budgets
        .iter()
        .filter(|b| b.spec.as_ref().and_then(|s| s.selector.as_ref()).is_some_and(|sel| selector_matches(sel, &labels)))
        .collect();
    match covering.as_slice() {
        [] => out.fix(
            id,
            Status::Warn,
            object,
            "no PodDisruptionBudget covers it: a drain may take every replica at once",
            "add a PodDisruptionBudget with maxUnavailable sized to one on-prem node's worth of replicas",
        ),
        [b] => {
            let name = format!("PodDisruptionBudget {}/{}", b.namespace().unwrap_or_default(), b.name_any());
            let status = b.status.as_ref();
            let allowed = status.map(|s| s.disruptions_allowed).unwrap_or(0);
            if allowed > 0 {
                out.add(id, Status::Pass, name, format!("covers {object} and allows {allowed} disruptions now"));
            } else {
                out.fix(
                    id,
                    blocking,
                    name,
                    format!(
                        "allows no disruption now ({} healthy, {} required): a drain of {object} would block{but}",
                        status.map(|s| s.current_healthy).unwrap_or(0),
                        status.map(|s| s.desired_healthy).unwrap_or(0)
                    ),
                    "raise maxUnavailable (or lower minAvailable), or wait until its pods are healthy",
                );
            }
        }
        many => out.fix(
            id,
            Status::Fail,
            object,
            format!(
                "{} PodDisruptionBudgets cover it ({}): the Eviction API refuses to evict its pods",
                many.len(),
                names(many.iter().map(|b| b.name_any()))
            ),
            "keep exactly one PodDisruptionBudget per workload",
        ),
    }
}
