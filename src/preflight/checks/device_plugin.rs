//! device-plugin-scope: the device plugin family's DaemonSets run on the hybrid GPU nodes, and not on cloud GPU nodes
//! that bring their own NVIDIA stack.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PodSpec};
use kube::ResourceExt;

use super::support::{Findings, names, node_gpus};
use crate::cluster::karpenter::{HYBRID_LABEL, NODEPOOL_LABEL, NodeClassReference};
use crate::cluster::scheduling::{NodeShape, daemonset_may_run_on};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{NodeClassLookup, PoolLookup, Snapshot};
use crate::preflight::targets::PreflightTargets;

const PIN_FIX: &str = "pin it to the hybrid nodes: nodeSelector {eks.amazonaws.com/compute-type: hybrid} (with the \
GPU Operator, check every operand DaemonSet and NFD: `kubectl get daemonset -A -o yaml`)";

/// What a cloud GPU node brings of the NVIDIA stack.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stack {
    /// Its own device plugin (EKS Auto Mode, Bottlerocket NVIDIA AMIs): a hybrid one there registers GPUs twice.
    Own(String),
    /// Drivers without a device plugin (EKS-optimized AL2023 NVIDIA AMI): it needs one installed for it.
    Without(String),
    /// Not known; treated as bringing its own, as the seed recommends scoping the hybrid plugin to hybrid nodes.
    Unknown(String),
}

impl Stack {
    fn reason(&self) -> &str {
        match self {
            Stack::Own(r) | Stack::Without(r) | Stack::Unknown(r) => r,
        }
    }
}

/// The nodes the fallback NodePool would create, and what they bring of the NVIDIA stack.
struct Fallback<'a> {
    shape: &'a NodeShape,
    stack: Stack,
}

fn fallback_stack(reference: Option<&NodeClassReference>, class: &NodeClassLookup) -> Stack {
    let Some(r) = reference else {
        return Stack::Unknown("the NodePool names no NodeClass".into());
    };
    if r.group == "eks.amazonaws.com" {
        return Stack::Own("EKS Auto Mode manages the NVIDIA device plugin on its GPU nodes".into());
    }
    if r.kind == "EC2NodeClass"
        && let NodeClassLookup::Found(object) = class
    {
        let spec = &object["spec"];
        let mut families: Vec<String> = spec["amiSelectorTerms"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["alias"].as_str())
            .map(|a| a.split('@').next().unwrap_or_default().to_lowercase())
            .collect();
        families.extend(spec["amiFamily"].as_str().map(str::to_lowercase));
        if families.iter().any(|f| f.starts_with("bottlerocket")) {
            return Stack::Own(format!(
                "EC2NodeClass {} runs Bottlerocket, whose NVIDIA variants include the device plugin",
                r.name
            ));
        }
        if families.iter().any(|f| f.starts_with("al2")) {
            return Stack::Without(format!(
                "EC2NodeClass {} runs the EKS-optimized Amazon Linux NVIDIA AMI: drivers, no device plugin",
                r.name
            ));
        }
        return Stack::Unknown(format!("EC2NodeClass {} selects an AMI hybrid-drill cannot classify", r.name));
    }
    Stack::Unknown(format!("{} {}: what its nodes bring is not known, assumed their own stack", r.kind, r.name))
}

fn node_stack(node: &Node, pool_name: &str, fallback: Option<&Fallback>) -> Stack {
    let label = |k: &str| node.labels().get(k).cloned().unwrap_or_default();
    let os = node.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| i.os_image.clone()).unwrap_or_default();
    if label(HYBRID_LABEL) == "auto" {
        return Stack::Own("an EKS Auto Mode node".into());
    }
    if os.contains("Bottlerocket") {
        return Stack::Own(format!("runs {os}"));
    }
    if label(NODEPOOL_LABEL) == pool_name
        && let Some(f) = fallback
    {
        return f.stack.clone();
    }
    if os.contains("Amazon Linux") {
        return Stack::Without(format!("runs {os}"));
    }
    Stack::Unknown(format!(
        "what it runs ({}) is not known, assumed its own stack",
        if os.is_empty() { "no OS image" } else { &os }
    ))
}

/// Names, images or app labels of the DaemonSets the seed means: the device plugin and GPU Operator operands.
const FAMILY: &[(&str, &str)] = &[
    ("nvidia-device-plugin", "NVIDIA device plugin"),
    ("nvidia/k8s-device-plugin", "NVIDIA device plugin"),
    ("gpu-feature-discovery", "GPU Feature Discovery"),
    ("dcgm-exporter", "DCGM exporter"),
    ("container-toolkit", "NVIDIA container toolkit"),
    ("node-feature-discovery", "Node Feature Discovery"),
    ("nfd-worker", "Node Feature Discovery"),
    ("nvidia-driver", "NVIDIA driver"),
    ("mig-manager", "NVIDIA MIG manager"),
];

/// Which member of the device plugin family a DaemonSet is, if any.
pub(super) fn family_member(ds: &DaemonSet) -> Option<&'static str> {
    let mut words = vec![ds.name_any()];
    for key in ["app.kubernetes.io/name", "app", "app.kubernetes.io/component"] {
        words.extend(ds.labels().get(key).cloned());
    }
    let spec = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    for c in spec.iter().flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten())) {
        words.extend(c.image.clone());
    }
    let words: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    FAMILY.iter().find(|(needle, _)| words.iter().any(|w| w.contains(needle))).map(|(_, what)| *what)
}

pub(super) fn device_plugin_scope(
    s: &Snapshot,
    on_prem: &[&Node],
    fallback: Option<&NodeShape>,
    targets: &PreflightTargets,
    out: &mut Findings,
) {
    let id = CheckId::DevicePluginScope;
    let reference = match &s.pool {
        PoolLookup::Found(pool) => pool.node_class_ref(),
        _ => None,
    };
    let fallback = fallback.map(|shape| Fallback { shape, stack: fallback_stack(reference, &s.node_class) });
    let fallback = fallback.as_ref();
    let hybrid: Vec<NodeShape> = on_prem.iter().map(|n| NodeShape::from_node(n)).collect();
    // Cloud GPU nodes: GPU nodes that are neither targeted nor hybrid, and the nodes the fallback would create.
    let mut cloud: Vec<(NodeShape, Stack)> = s
        .nodes
        .iter()
        .filter(|n| !s.on_prem.contains(&n.name_any()))
        .filter(|n| n.labels().get(HYBRID_LABEL).map(String::as_str) != Some("hybrid"))
        .filter(|n| node_gpus(n) > 0 || n.labels().get(NODEPOOL_LABEL) == Some(&targets.node_pool))
        .map(|n| (NodeShape::from_node(n), node_stack(n, &targets.node_pool, fallback)))
        .collect();
    if let Some(f) = fallback {
        cloud.push((f.shape.clone(), f.stack.clone()));
    }
    let members: Vec<(&DaemonSet, &str, &PodSpec)> = s
        .daemonsets
        .iter()
        .filter_map(|ds| {
            let what = family_member(ds)?;
            Some((ds, what, ds.spec.as_ref()?.template.spec.as_ref()?))
        })
        .collect();
    if members.is_empty() {
        out.fix(
            id,
            Status::Warn,
            "DaemonSets (all namespaces)",
            "no DaemonSet of the NVIDIA device plugin or GPU Operator found: hybrid GPU nodes advertise nvidia.com/gpu \
             only through a device plugin",
            "install the NVIDIA device plugin pinned to hybrid nodes: nodeSelector {eks.amazonaws.com/compute-type: \
             hybrid}, tolerating nvidia.com/gpu:NoSchedule",
        );
    }
    for (ds, what, spec) in &members {
        judge_member(ds, what, spec, &cloud, &hybrid, out);
    }
    if let Some(f) = fallback
        && matches!(f.stack, Stack::Without(_))
        && !members.iter().any(|(_, what, spec)| *what == "NVIDIA device plugin" && daemonset_may_run_on(spec, f.shape))
    {
        out.fix(
            id,
            Status::Fail,
            format!("NodePool {}", targets.node_pool),
            format!(
                "{}, and no device plugin DaemonSet runs on its nodes: they would never advertise nvidia.com/gpu",
                f.stack.reason()
            ),
            format!(
                "install a device plugin for the fallback's nodes, e.g. with nodeSelector {{{NODEPOOL_LABEL}: {}}}",
                targets.node_pool
            ),
        );
    }
}

/// One DaemonSet of the device plugin's family: it must not double a cloud node's own stack, and should reach the
/// hybrid GPU nodes (or, failing that, serve cloud nodes that have none).
fn judge_member(
    ds: &DaemonSet,
    what: &str,
    spec: &PodSpec,
    cloud: &[(NodeShape, Stack)],
    hybrid: &[NodeShape],
    out: &mut Findings,
) {
    let id = CheckId::DevicePluginScope;
    let object = format!("DaemonSet {}/{}", ds.namespace().unwrap_or_default(), ds.name_any());
    let doubled: Vec<String> = cloud
        .iter()
        .filter(|(n, stack)| !matches!(stack, Stack::Without(_)) && daemonset_may_run_on(spec, n))
        .map(|(n, stack)| format!("{} ({})", n.name, stack.reason()))
        .collect();
    let on_hybrid: Vec<&str> =
        hybrid.iter().filter(|n| daemonset_may_run_on(spec, n)).map(|n| n.name.as_str()).collect();
    let missed: Vec<&str> = hybrid.iter().filter(|n| !daemonset_may_run_on(spec, n)).map(|n| n.name.as_str()).collect();
    let serves_bare_cloud: Vec<&str> = cloud
        .iter()
        .filter(|(n, stack)| matches!(stack, Stack::Without(_)) && daemonset_may_run_on(spec, n))
        .map(|(n, _)| n.name.as_str())
        .collect();
    if !doubled.is_empty() {
        out.fix(
            id,
            Status::Fail,
            object,
            format!(
                "this {what} also runs on cloud GPU nodes that bring their own stack: {}; GPUs get registered \
                 twice and versions collide",
                names(&doubled)
            ),
            PIN_FIX,
        );
    } else if !missed.is_empty() && (!on_hybrid.is_empty() || serves_bare_cloud.is_empty()) {
        out.fix(
            id,
            Status::Warn,
            object,
            format!("this {what} does not run on the hybrid GPU nodes {}", names(&missed)),
            "select the hybrid nodes (eks.amazonaws.com/compute-type: hybrid) and tolerate \
             nvidia.com/gpu:NoSchedule",
        );
    } else if on_hybrid.is_empty() {
        out.add(
            id,
            Status::Pass,
            object,
            format!(
                "this {what} serves cloud GPU nodes without their own device plugin: {}",
                names(&serves_bare_cloud)
            ),
        );
    } else {
        out.add(
            id,
            Status::Pass,
            object,
            format!("this {what} runs on the hybrid GPU nodes only ({})", names(&on_hybrid)),
        );
    }
}
