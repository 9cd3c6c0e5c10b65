//! gpu-taint and taint-applied-late: the hybrid GPU nodes carry the GPU taint, and carried it before anything was
//! scheduled onto them.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::support::{Findings, gpu_taints, names, pod_name, taint_text};
use crate::cluster::drain_selection::is_evictable;
use crate::cluster::scheduling::tolerates;
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::Snapshot;
use crate::preflight::targets::PreflightTargets;

const REGISTER_FIX: &str = "register the node with the taint: kubelet flag \
--register-with-taints=nvidia.com/gpu=Exists:NoSchedule in its nodeadm NodeConfig (a later `kubectl taint` leaves a \
window in which other pods land)";

pub(super) fn gpu_taint(on_prem: &[&Node], targets: &PreflightTargets, out: &mut Findings) {
    let id = CheckId::GpuTaint;
    if on_prem.is_empty() {
        out.fix(
            id,
            Status::Fail,
            format!("Nodes -l {}", targets.nodes),
            "the on-prem selector matches no node",
            format!("check it with `kubectl get nodes -l '{}'`", targets.nodes),
        );
        return;
    }
    let mut tainted = Vec::new();
    for node in on_prem {
        match gpu_taints(node).first() {
            Some(t) => tainted.push((node.name_any(), taint_text(t))),
            None => out.fix(
                id,
                Status::Fail,
                format!("Node {}", node.name_any()),
                "has no nvidia.com/gpu:NoSchedule taint: any pod can be scheduled onto this GPU server",
                REGISTER_FIX,
            ),
        }
    }
    if !tainted.is_empty() {
        let taints: BTreeSet<&str> = tainted.iter().map(|(_, t)| t.as_str()).collect();
        out.add(
            id,
            Status::Pass,
            format!("Node {}", names(tainted.iter().map(|(n, _)| n))),
            format!("tainted {}", names(taints)),
        );
    }
}

pub(super) fn taint_applied_late(on_prem: &[&Node], s: &Snapshot, out: &mut Findings) {
    let id = CheckId::TaintAppliedLate;
    let mut clean = Vec::new();
    for node in on_prem {
        let name = node.name_any();
        let taints = gpu_taints(node);
        if taints.is_empty() {
            continue;
        }
        let intruders: Vec<String> = s
            .pods_on_prem
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str()))
            .filter(|p| is_evictable(p))
            .filter(|p| {
                let tolerations = p.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
                !taints.iter().all(|t| tolerations.iter().any(|tol| tolerates(tol, t)))
            })
            .map(pod_name)
            .collect();
        if intruders.is_empty() {
            clean.push(name);
        } else {
            out.fix(
                id,
                Status::Fail,
                format!("Node {name}"),
                format!(
                    "pods that do not tolerate {} run here: {}; the taint came after they were scheduled \
                     (`kubectl taint` after the node joined), or they were bound by spec.nodeName",
                    names(taints.iter().map(taint_text)),
                    names(&intruders)
                ),
                format!("{REGISTER_FIX}; then move these pods off (delete them so they reschedule elsewhere)"),
            );
        }
    }
    if !clean.is_empty() {
        out.add(
            id,
            Status::Pass,
            format!("Node {}", names(&clean)),
            "every pod on them tolerates the GPU taint or belongs to a DaemonSet",
        );
    } else if on_prem.iter().all(|n| gpu_taints(n).is_empty()) {
        out.add(id, Status::Skip, "hybrid GPU nodes", "not checked: no GPU taint to check against (see gpu-taint)");
    }
}
