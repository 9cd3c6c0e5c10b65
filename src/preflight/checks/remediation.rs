//! gpu-remediation: for a drill with a `gpuFault`, whether a GPU remediation that can quarantine the hybrid nodes
//! runs on them. A failed GPU leaves its node Ready: without one, nothing evicts the pods and no fallback starts.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::support::Findings;
use crate::cluster::scheduling::{NodeShape, daemonset_may_run_on};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::Snapshot;
use crate::preflight::targets::Expectations;

/// Remediation DaemonSets by a word of their name, labels or images, and whether they cover hybrid nodes.
const KNOWN: &[(&str, &str, bool)] = &[
    ("nvsentinel", "NVIDIA NVSentinel", true),
    ("node-problem-detector", "node-problem-detector", true),
    // EKS node auto repair acts on managed node groups and Karpenter nodes only, whatever the agent detects.
    ("eks-node-monitoring-agent", "EKS node monitoring agent", false),
];

const FIX: &str = "install a remediation that quarantines and drains hybrid GPU nodes: NVIDIA NVSentinel, or \
node-problem-detector with a DCGM/Xid check and a drainer; EKS node auto repair does not cover hybrid nodes";

/// The known remediation a DaemonSet is, if any: its name, and whether it covers hybrid nodes.
pub(super) fn remediation(ds: &DaemonSet) -> Option<(&'static str, bool)> {
    let mut words = vec![ds.name_any()];
    words.extend(ds.labels().values().cloned());
    let spec = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    words.extend(spec.iter().flat_map(|s| s.containers.iter().filter_map(|c| c.image.clone())));
    let words: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    KNOWN
        .iter()
        .find(|(needle, _, _)| words.iter().any(|w| w.contains(needle)))
        .map(|(_, what, covers)| (*what, *covers))
}

pub(super) fn gpu_remediation(s: &Snapshot, on_prem: &[&Node], expect: &Expectations, out: &mut Findings) {
    let id = CheckId::GpuRemediation;
    let object = "GPU remediation on the hybrid nodes";
    // Said only where it matters: every other drill's preflight stays as it was.
    if !expect.gpu_fault {
        return;
    }
    let hybrid: Vec<NodeShape> = on_prem.iter().map(|n| NodeShape::from_node(n)).collect();
    let mut covering = Vec::new();
    let mut elsewhere = Vec::new();
    for ds in &s.daemonsets {
        let Some((what, covers)) = remediation(ds) else { continue };
        let Some(spec) = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref()) else { continue };
        let name = format!("{what} (DaemonSet {}/{})", ds.namespace().unwrap_or_default(), ds.name_any());
        if covers && !hybrid.is_empty() && hybrid.iter().all(|n| daemonset_may_run_on(spec, n)) {
            covering.push(name);
        } else {
            elsewhere.push(name);
        }
    }
    if !covering.is_empty() {
        return out.add(id, Status::Pass, object, format!("found: {}", covering.join(", ")));
    }
    let found = if elsewhere.is_empty() {
        String::new()
    } else {
        format!(" ({} found, not covering them)", elsewhere.join(", "))
    };
    out.fix(
        id,
        Status::Warn,
        object,
        format!(
            "no remediation covering the hybrid nodes{found}: a failed GPU leaves its node Ready, nothing quarantines \
             it, and the fallback never triggers; the drill will measure how long users are served degraded"
        ),
        FIX,
    );
}
