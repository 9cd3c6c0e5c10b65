//! The checks: pure functions of a [`Snapshot`], one group per recommendation of the seed, each finding naming its
//! object and the fix.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, Taint, Toleration};
use kube::ResourceExt;
use serde::Deserialize;

use super::gather::{NodeClassLookup, NodeClassRef, PoolLookup, Snapshot, Workload};
use super::matching::{LabelValue, NodeShape, daemonset_may_run_on, selector_matches, tolerates};
use super::{CheckId, Expectations, Finding, Status, Targets};
use crate::cluster::karpenter::{GPU_RESOURCE, NODEPOOL_LABEL, NodePool};
use crate::cluster::quantity::as_integer;
use crate::cluster::tolerations::{NOT_READY, UNREACHABLE, eviction_wait};
use crate::steps::drain::is_evictable;

/// The label EKS puts on hybrid nodes.
pub const HYBRID_LABEL: &str = "eks.amazonaws.com/compute-type";
const CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";

const REGISTER_FIX: &str = "register the node with the taint: kubelet flag \
--register-with-taints=nvidia.com/gpu=Exists:NoSchedule in its nodeadm NodeConfig (a later `kubectl taint` leaves a \
window in which other pods land)";
const TOLERATION_FIX: &str =
    "add to the pod template: tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]";
const PIN_FIX: &str = "pin it to the hybrid nodes: nodeSelector {eks.amazonaws.com/compute-type: hybrid} (with the \
GPU Operator, check every operand DaemonSet and NFD: `kubectl get daemonset -A -o yaml`)";

/// The findings of one run, in check order.
#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn add(&mut self, check: CheckId, status: Status, object: impl Into<String>, message: impl Into<String>) {
        self.0.push(Finding { check, status, object: object.into(), message: message.into(), fix: None });
    }

    fn fix(
        &mut self,
        check: CheckId,
        status: Status,
        object: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.0.push(Finding { check, status, object: object.into(), message: message.into(), fix: Some(fix.into()) });
    }

    fn skip(&mut self, checks: &[CheckId], object: &str, why: &str) {
        for check in checks {
            self.add(*check, Status::Skip, object, format!("not checked: {why}"));
        }
    }
}

const POOL_CHECKS: &[CheckId] = &[
    CheckId::NodepoolReady,
    CheckId::NodepoolNodeclass,
    CheckId::NodepoolLimits,
    CheckId::NodepoolConsolidation,
    CheckId::NodepoolCapacityType,
    CheckId::NodepoolTaint,
    CheckId::NodepoolEmpty,
];

const WORKLOAD_CHECKS: &[CheckId] = &[
    CheckId::WorkloadGpuRequest,
    CheckId::WorkloadToleration,
    CheckId::WorkloadAffinity,
    CheckId::WorkloadPdb,
    CheckId::WorkloadFitsLimit,
    CheckId::RtoFloor,
];

/// Every check against one snapshot.
pub fn evaluate(s: &Snapshot, targets: &Targets, expect: &Expectations) -> Vec<Finding> {
    let mut out = Findings::default();
    karpenter_crds(s, &mut out);
    let on_prem: Vec<&Node> = s.nodes.iter().filter(|n| s.on_prem.contains(&n.name_any())).collect();
    gpu_taint(&on_prem, targets, &mut out);
    taint_applied_late(&on_prem, s, &mut out);
    let fallback = Fallback::of(s, &targets.node_pool);
    device_plugin_scope(s, &on_prem, fallback.as_ref(), targets, &mut out);
    node_pool(s, targets, &mut out);
    workloads(s, targets, &on_prem, fallback.as_ref(), expect, &mut out);
    out.0
}

fn names(items: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    items.into_iter().map(|s| s.as_ref().to_string()).collect::<Vec<_>>().join(", ")
}

fn taint_text(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

fn is_gpu_taint(t: &Taint) -> bool {
    t.key == GPU_RESOURCE && (t.effect == "NoSchedule" || t.effect == "NoExecute")
}

fn gpu_taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| is_gpu_taint(t))
        .cloned()
        .collect()
}

fn node_gpus(node: &Node) -> i64 {
    let status = node.status.as_ref();
    [status.and_then(|s| s.allocatable.as_ref()), status.and_then(|s| s.capacity.as_ref())]
        .into_iter()
        .flatten()
        .filter_map(|m| m.get(GPU_RESOURCE).and_then(as_integer))
        .max()
        .unwrap_or(0)
}

fn pod_name(p: &Pod) -> String {
    format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any())
}

fn karpenter_crds(s: &Snapshot, out: &mut Findings) {
    let id = CheckId::KarpenterCrds;
    let object = "API group karpenter.sh";
    if s.karpenter_versions.is_empty() {
        out.fix(
            id,
            Status::Fail,
            object,
            "Karpenter's CRDs are not installed: the API server serves no karpenter.sh group",
            "install Karpenter (1.0 or later) and its CRDs, e.g. `helm upgrade --install karpenter-crd \
             oci://public.ecr.aws/karpenter/karpenter-crd -n kube-system`; check with `kubectl api-resources \
             --api-group=karpenter.sh`",
        );
        return;
    }
    if !s.karpenter_versions.iter().any(|v| v == "v1") {
        out.fix(
            id,
            Status::Fail,
            object,
            format!(
                "karpenter.sh is served only at {}; hybrid-drill reads karpenter.sh/v1",
                names(&s.karpenter_versions)
            ),
            "upgrade Karpenter and its CRDs to v1 (Karpenter 1.0 or later; see its v1 migration guide)",
        );
        return;
    }
    let missing: Vec<&str> =
        ["nodepools", "nodeclaims"].into_iter().filter(|r| !s.karpenter_v1_resources.iter().any(|h| h == r)).collect();
    if missing.is_empty() {
        out.add(id, Status::Pass, object, "NodePool and NodeClaim are served at karpenter.sh/v1");
    } else {
        out.fix(
            id,
            Status::Fail,
            object,
            format!("karpenter.sh/v1 does not serve {}", names(&missing)),
            "re-install Karpenter's CRDs at the version of the running Karpenter",
        );
    }
}

fn gpu_taint(on_prem: &[&Node], targets: &Targets, out: &mut Findings) {
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

fn taint_applied_late(on_prem: &[&Node], s: &Snapshot, out: &mut Findings) {
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

/// What a cloud GPU node brings of the NVIDIA stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stack {
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

/// The fallback NodePool's template, as far as placement goes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolTemplate {
    #[serde(default)]
    metadata: TemplateMeta,
    #[serde(default)]
    spec: TemplateSpec,
}

#[derive(Debug, Default, Deserialize)]
struct TemplateMeta {
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TemplateSpec {
    #[serde(default)]
    node_class_ref: Option<RefJson>,
    #[serde(default)]
    requirements: Vec<Requirement>,
    #[serde(default)]
    taints: Vec<Taint>,
}

#[derive(Debug, Default, Deserialize)]
struct RefJson {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
}

#[derive(Debug, Default, Deserialize)]
struct Requirement {
    key: String,
    operator: String,
    #[serde(default)]
    values: Vec<String>,
}

fn template(pool: &NodePool) -> PoolTemplate {
    pool.spec.template.clone().and_then(|t| serde_json::from_value(t).ok()).unwrap_or_default()
}

pub fn node_class_ref(pool: &NodePool) -> Option<NodeClassRef> {
    template(pool).spec.node_class_ref.map(|r| NodeClassRef { group: r.group, kind: r.kind, name: r.name })
}

/// Labels every Karpenter node carries, whatever its requirements say.
const WELL_KNOWN_LABELS: &[&str] = &[
    "node.kubernetes.io/instance-type",
    CAPACITY_TYPE_LABEL,
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// The nodes the fallback NodePool would create, and what they bring of the NVIDIA stack.
pub struct Fallback {
    pub shape: NodeShape,
    pub stack: Stack,
}

impl Fallback {
    fn of(s: &Snapshot, pool_name: &str) -> Option<Fallback> {
        let PoolLookup::Found(pool) = &s.pool else {
            return None;
        };
        let t = template(pool);
        let mut labels: BTreeMap<String, LabelValue> = t
            .metadata
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), LabelValue::OneOf(BTreeSet::from([v.clone()]))))
            .collect();
        labels.insert(NODEPOOL_LABEL.into(), LabelValue::OneOf(BTreeSet::from([pool_name.to_string()])));
        let group = t.spec.node_class_ref.as_ref().map(|r| r.group.clone()).unwrap_or_default();
        if group == "eks.amazonaws.com" {
            labels.insert(HYBRID_LABEL.into(), LabelValue::OneOf(BTreeSet::from(["auto".to_string()])));
        }
        for r in &t.spec.requirements {
            match r.operator.as_str() {
                "In" => {
                    let values: BTreeSet<String> = r.values.iter().cloned().collect();
                    let narrowed = match labels.get(&r.key) {
                        Some(LabelValue::OneOf(have)) => have.intersection(&values).cloned().collect(),
                        _ => values,
                    };
                    labels.insert(r.key.clone(), LabelValue::OneOf(narrowed));
                }
                "Exists" => {
                    labels.entry(r.key.clone()).or_insert(LabelValue::Any);
                }
                _ => {}
            }
        }
        for key in WELL_KNOWN_LABELS {
            labels.entry(key.to_string()).or_insert(LabelValue::Any);
        }
        // NFD, GPU Feature Discovery and the GPU Operator label a GPU node after it joins; the provider adds its own.
        let mut maybe_prefixes = vec!["nvidia.com/".to_string(), "feature.node.kubernetes.io/".to_string()];
        if !group.is_empty() {
            maybe_prefixes.push(format!("{group}/"));
        }
        let shape = NodeShape {
            name: format!("new nodes of NodePool {pool_name}"),
            labels,
            taints: t.spec.taints,
            prospective: true,
            maybe_prefixes,
        };
        Some(Fallback { shape, stack: fallback_stack(t.spec.node_class_ref.as_ref(), &s.node_class) })
    }
}

fn fallback_stack(reference: Option<&RefJson>, class: &NodeClassLookup) -> Stack {
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
pub fn family_member(ds: &DaemonSet) -> Option<&'static str> {
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

fn device_plugin_scope(
    s: &Snapshot,
    on_prem: &[&Node],
    fallback: Option<&Fallback>,
    targets: &Targets,
    out: &mut Findings,
) {
    let id = CheckId::DevicePluginScope;
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
        let object = format!("DaemonSet {}/{}", ds.namespace().unwrap_or_default(), ds.name_any());
        let doubled: Vec<String> = cloud
            .iter()
            .filter(|(n, stack)| !matches!(stack, Stack::Without(_)) && daemonset_may_run_on(spec, n))
            .map(|(n, stack)| format!("{} ({})", n.name, stack.reason()))
            .collect();
        let on_hybrid: Vec<&str> =
            hybrid.iter().filter(|n| daemonset_may_run_on(spec, n)).map(|n| n.name.as_str()).collect();
        let missed: Vec<&str> =
            hybrid.iter().filter(|n| !daemonset_may_run_on(spec, n)).map(|n| n.name.as_str()).collect();
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
    if let Some(f) = fallback
        && matches!(f.stack, Stack::Without(_))
        && !members
            .iter()
            .any(|(_, what, spec)| *what == "NVIDIA device plugin" && daemonset_may_run_on(spec, &f.shape))
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

fn condition<'a>(conditions: &'a [crate::cluster::karpenter::KarpenterCondition], kind: &str) -> Option<&'a str> {
    conditions.iter().find(|c| c.type_ == kind).map(|c| c.status.as_str())
}

fn node_pool(s: &Snapshot, targets: &Targets, out: &mut Findings) {
    let object = format!("NodePool {}", targets.node_pool);
    let pool = match &s.pool {
        PoolLookup::NotServed => {
            out.skip(POOL_CHECKS, &object, "karpenter.sh/v1 NodePools are not served (see karpenter-crds)");
            return;
        }
        PoolLookup::Missing { existing } => {
            out.fix(
                CheckId::NodepoolReady,
                Status::Fail,
                &object,
                format!("not found (existing: {})", if existing.is_empty() { "none".into() } else { names(existing) }),
                "fix spec.targets.fallback.nodePool (or --node-pool); list them with `kubectl get nodepools`",
            );
            out.skip(&POOL_CHECKS[1..], &object, "the NodePool does not exist");
            return;
        }
        PoolLookup::Found(pool) => pool,
    };
    let t = template(pool);

    let conditions = pool.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    if condition(conditions, "Ready") == Some("True") {
        out.add(CheckId::NodepoolReady, Status::Pass, &object, "Ready");
    } else {
        let not_true: Vec<String> = conditions
            .iter()
            .filter(|c| c.status != "True")
            .map(|c| {
                let why = c.message.as_deref().filter(|m| !m.is_empty()).or(c.reason.as_deref()).unwrap_or_default();
                format!("{}={} {why}", c.type_, c.status).trim().to_string()
            })
            .collect();
        out.fix(
            CheckId::NodepoolReady,
            Status::Fail,
            &object,
            if not_true.is_empty() {
                "has no Ready condition yet".into()
            } else {
                format!("not Ready: {}", names(&not_true))
            },
            format!("`kubectl describe nodepool {}` and Karpenter's logs say why", targets.node_pool),
        );
    }

    let id = CheckId::NodepoolNodeclass;
    match (node_class_ref(pool), &s.node_class) {
        (None, _) => out.fix(
            id,
            Status::Fail,
            &object,
            "its template names no nodeClassRef",
            "set spec.template.spec.nodeClassRef to the NodeClass of the GPU fallback (group, kind, name)",
        ),
        (Some(r), NodeClassLookup::NotServed) => out.fix(
            id,
            Status::Fail,
            r.object(),
            format!("the API server serves no {} in group {}: the NodeClass CRD is not installed", r.kind, r.group),
            format!(
                "install your Karpenter provider's CRDs (on AWS the karpenter-crd chart brings EC2NodeClass); check with \
                 `kubectl api-resources --api-group={}`",
                r.group
            ),
        ),
        (Some(r), NodeClassLookup::Missing) => out.fix(
            id,
            Status::Fail,
            r.object(),
            format!("not found: NodePool {} cannot launch nodes", targets.node_pool),
            format!("create {} {} or point nodeClassRef at an existing one", r.kind, r.name),
        ),
        (Some(r), NodeClassLookup::Unreadable(why)) => out.fix(
            id,
            Status::Warn,
            r.object(),
            format!("cannot read it: {why}"),
            format!("grant get on {} ({}) to the identity running hybrid-drill", r.kind, r.group),
        ),
        (Some(r), NodeClassLookup::Found(o)) => {
            let ready = o["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .and_then(|c| c["status"].as_str());
            match ready {
                Some("True") | None => out.add(id, Status::Pass, r.object(), "exists and is Ready"),
                Some(other) => out.fix(
                    id,
                    Status::Fail,
                    r.object(),
                    format!("exists but Ready={other}"),
                    format!("`kubectl describe {} {}` says why", r.kind.to_lowercase(), r.name),
                ),
            }
        }
        (Some(r), NodeClassLookup::NotLooked) => out.add(id, Status::Skip, r.object(), "not checked"),
    }

    let limit = pool.spec.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE));
    match limit {
        Some(q) => out.add(
            CheckId::NodepoolLimits,
            Status::Pass,
            &object,
            format!("caps nvidia.com/gpu at {} (eventually consistent: a burst can overrun it)", q.0),
        ),
        None => out.fix(
            CheckId::NodepoolLimits,
            Status::Fail,
            &object,
            "has no nvidia.com/gpu limit: a burst of pending GPU pods can launch any number of cloud GPU nodes",
            "add spec.limits: {nvidia.com/gpu: 16} sized to the fallback's budget, with EC2 quotas and AWS Budgets \
             alerts behind it",
        ),
    }

    let disruption = pool.spec.disruption.clone().unwrap_or_default();
    let policy = disruption["consolidationPolicy"].as_str();
    let after = disruption["consolidateAfter"].as_str();
    let consolidation_fix =
        "set spec.disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5m}";
    match (policy, after) {
        (Some(p), Some("Never")) => out.fix(
            CheckId::NodepoolConsolidation,
            Status::Fail,
            &object,
            format!("{p} with consolidateAfter: Never: idle fallback GPU nodes are never reclaimed"),
            consolidation_fix,
        ),
        (Some(p), Some(a)) if humantime::parse_duration(a).is_ok_and(|d| d.is_zero()) => out.fix(
            CheckId::NodepoolConsolidation,
            Status::Warn,
            &object,
            format!("{p} with consolidateAfter {a} (Karpenter's default): a node is reclaimed the moment it empties"),
            "set consolidateAfter explicitly, e.g. 5m, so a restarting pod does not lose its node",
        ),
        (Some(p), Some(a)) => {
            out.add(CheckId::NodepoolConsolidation, Status::Pass, &object, format!("{p}, consolidateAfter {a}"))
        }
        _ => out.fix(
            CheckId::NodepoolConsolidation,
            Status::Fail,
            &object,
            "no consolidation policy and consolidateAfter: idle fallback GPU nodes may never be reclaimed",
            consolidation_fix,
        ),
    }

    let capacity = t.spec.requirements.iter().find(|r| r.key == CAPACITY_TYPE_LABEL);
    let id = CheckId::NodepoolCapacityType;
    match capacity.map(|r| (r.operator.as_str(), &r.values)) {
        None => out.fix(
            id,
            Status::Warn,
            &object,
            "does not pin karpenter.sh/capacity-type (Karpenter picks on-demand unless told otherwise)",
            "add the requirement {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
        ),
        Some(("In", values)) if values.iter().all(|v| v != "spot") => {
            out.add(id, Status::Pass, &object, format!("capacity type {}", names(values)))
        }
        Some(("NotIn", values)) if values.iter().any(|v| v == "spot") => {
            out.add(id, Status::Pass, &object, format!("capacity type not {}", names(values)))
        }
        Some((op, values)) => out.fix(
            id,
            Status::Fail,
            &object,
            format!(
                "capacity type {op} [{}] allows spot: a fallback can be reclaimed in the middle of an incident",
                names(values)
            ),
            "use on-demand for the fallback ({key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}); \
             put spot bursts in a separate NodePool",
        ),
    }

    match t.spec.taints.iter().find(|t| is_gpu_taint(t)) {
        Some(taint) => out.add(
            CheckId::NodepoolTaint,
            Status::Pass,
            &object,
            format!("its nodes are tainted {}", taint_text(taint)),
        ),
        None => out.fix(
            CheckId::NodepoolTaint,
            Status::Fail,
            &object,
            "its nodes carry no nvidia.com/gpu taint: any pod can land on a costly fallback GPU node",
            "add to spec.template.spec.taints: {key: nvidia.com/gpu, effect: NoSchedule}",
        ),
    }

    let nodes: Vec<&Node> =
        s.nodes.iter().filter(|n| n.labels().get(NODEPOOL_LABEL) == Some(&targets.node_pool)).collect();
    if s.claims.is_empty() && nodes.is_empty() {
        out.add(CheckId::NodepoolEmpty, Status::Pass, &object, "at 0 NodeClaims and 0 nodes");
    } else {
        let holders: Vec<String> = s.pods_on_fallback.iter().filter(|p| is_evictable(p)).map(pod_name).collect();
        out.fix(
            CheckId::NodepoolEmpty,
            Status::Warn,
            &object,
            format!(
                "not at 0: {} NodeClaims, nodes {}; pods holding them: {} (preferred affinity is not a guarantee)",
                s.claims.len(),
                if nodes.is_empty() { "none".into() } else { names(nodes.iter().map(|n| n.name_any())) },
                if holders.is_empty() { "none".into() } else { names(&holders) }
            ),
            "move the pods back on-prem (e.g. `kubectl rollout restart`) and let consolidation reclaim the nodes; a \
             drill started now measures from a warm fallback",
        );
    }
}

fn pod_gpus(spec: &PodSpec) -> i64 {
    let of = |c: &k8s_openapi::api::core::v1::Container| {
        let r = c.resources.as_ref();
        [r.and_then(|r| r.requests.as_ref()), r.and_then(|r| r.limits.as_ref())]
            .into_iter()
            .flatten()
            .filter_map(|m| m.get(GPU_RESOURCE).and_then(as_integer))
            .max()
            .unwrap_or(0)
    };
    let containers: i64 = spec.containers.iter().map(of).sum();
    let init = spec.init_containers.iter().flatten().map(of).max().unwrap_or(0);
    containers.max(init)
}

fn tolerations(spec: Option<&PodSpec>) -> &[Toleration] {
    spec.and_then(|s| s.tolerations.as_deref()).unwrap_or_default()
}

fn workloads(
    s: &Snapshot,
    targets: &Targets,
    on_prem: &[&Node],
    fallback: Option<&Fallback>,
    expect: &Expectations,
    out: &mut Findings,
) {
    let selection = format!("Pods -n {} -l {}", targets.namespace, targets.selector);
    if s.workloads.is_empty() {
        out.fix(
            CheckId::WorkloadFound,
            Status::Fail,
            &selection,
            "no pod matches the workload selector",
            format!("check it with `kubectl get pods -n {} -l '{}'`", targets.namespace, targets.selector),
        );
        out.skip(WORKLOAD_CHECKS, &selection, "no workload found");
        return;
    }
    out.add(
        CheckId::WorkloadFound,
        Status::Pass,
        &selection,
        format!("{} pods of {}", s.workload_pods, names(s.workloads.iter().map(Workload::object))),
    );

    // The taints the workload must tolerate: the GPU taints of the hybrid nodes and of the fallback's nodes.
    let mut must_tolerate: Vec<Taint> = on_prem.iter().flat_map(|n| gpu_taints(n)).collect();
    if let Some(f) = fallback {
        must_tolerate.extend(f.shape.taints.iter().filter(|t| is_gpu_taint(t)).cloned());
    }
    must_tolerate.sort_by_key(taint_text);
    must_tolerate.dedup_by_key(|t| taint_text(t));
    if must_tolerate.is_empty() {
        must_tolerate.push(Taint { key: GPU_RESOURCE.into(), effect: "NoSchedule".into(), ..Default::default() });
    }
    let hybrid: Vec<NodeShape> = on_prem.iter().map(|n| NodeShape::from_node(n)).collect();
    let limit = match &s.pool {
        PoolLookup::Found(pool) => pool.spec.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE)).and_then(as_integer),
        _ => None,
    };

    let mut demand = Vec::new();
    for w in &s.workloads {
        let object = w.object();
        let Some(spec) = w.template.spec.as_ref() else {
            out.skip(&WORKLOAD_CHECKS[..4], &object, "it has no pod template");
            continue;
        };
        let gpus = pod_gpus(spec);
        if gpus > 0 {
            out.add(
                CheckId::WorkloadGpuRequest,
                Status::Pass,
                &object,
                format!("each pod requests {gpus} nvidia.com/gpu"),
            );
            demand.push((w, gpus));
        } else {
            out.fix(
                CheckId::WorkloadGpuRequest,
                Status::Fail,
                &object,
                "requests no nvidia.com/gpu: Karpenter will not launch a GPU node for it",
                "request the GPUs in resources.limits: {nvidia.com/gpu: N}",
            );
        }
        workload_toleration(w, spec, &must_tolerate, &object, out);
        workload_affinity(spec, &hybrid, fallback, &object, out);
        workload_budget(s, w, &object, expect.drains, out);
    }

    let id = CheckId::WorkloadFitsLimit;
    let objects = names(demand.iter().map(|(w, _)| w.object()));
    match limit {
        _ if demand.is_empty() => {
            out.add(id, Status::Skip, &selection, "not checked: no GPU demand (see workload-gpu-request)")
        }
        None => out.add(id, Status::Skip, &objects, "not checked: the fallback has no GPU limit (see nodepool-limits)"),
        Some(limit) => {
            let total: i64 = demand.iter().map(|(w, g)| i64::from(w.replicas) * g).sum();
            let parts = names(demand.iter().map(|(w, g)| format!("{} x {g}", w.replicas)));
            if total <= limit {
                out.add(
                    id,
                    Status::Pass,
                    &objects,
                    format!("needs {total} GPUs on the fallback ({parts}), under its limit of {limit}"),
                );
            } else {
                out.fix(
                    id,
                    Status::Fail,
                    &objects,
                    format!(
                        "needs {total} GPUs on the fallback ({parts}) but NodePool {} is limited to {limit}: some pods \
                         would stay Pending",
                        targets.node_pool
                    ),
                    format!("raise the NodePool's nvidia.com/gpu limit to at least {total}, or run fewer replicas"),
                );
            }
        }
    }

    let w = &s.workloads[0];
    rto_floor(s, w, expect.rto_objective, out);
}

fn workload_toleration(w: &Workload, spec: &PodSpec, taints: &[Taint], object: &str, out: &mut Findings) {
    let id = CheckId::WorkloadToleration;
    let declared = tolerations(Some(spec));
    let missing: Vec<&Taint> = taints.iter().filter(|t| !declared.iter().any(|tol| tolerates(tol, t))).collect();
    if missing.is_empty() {
        out.add(
            id,
            Status::Pass,
            object,
            format!("its pod template tolerates {}", names(taints.iter().map(taint_text))),
        );
        return;
    }
    let admitted = w.sample_pod.as_ref().and_then(|p| p.spec.as_ref());
    let injected = w.kind != "Pod" && missing.iter().all(|t| tolerations(admitted).iter().any(|tol| tolerates(tol, t)));
    out.fix(
        id,
        Status::Fail,
        object,
        format!(
            "its pod template does not tolerate {}{}: its pods cannot land on the tainted hybrid or fallback nodes",
            names(missing.iter().map(|t| taint_text(t))),
            if injected {
                " (its running pods do, from an older revision or the ExtendedResourceToleration admission plugin, \
                 which EKS does not guarantee)"
            } else {
                ""
            }
        ),
        TOLERATION_FIX,
    );
}

fn workload_affinity(
    spec: &PodSpec,
    hybrid: &[NodeShape],
    fallback: Option<&Fallback>,
    object: &str,
    out: &mut Findings,
) {
    let id = CheckId::WorkloadAffinity;
    if hybrid.is_empty() {
        out.add(id, Status::Skip, object, "not checked: no on-prem node (see gpu-taint)");
        return;
    }
    let excluded: Vec<&str> = hybrid.iter().filter(|h| !h.may_be_selected_by(spec)).map(|h| h.name.as_str()).collect();
    if excluded.len() == hybrid.len() {
        out.fix(
            id,
            Status::Fail,
            object,
            format!("its nodeSelector or required node affinity excludes every on-prem node ({})", names(&excluded)),
            "select the hybrid nodes, e.g. a preferred affinity for eks.amazonaws.com/compute-type In [hybrid]",
        );
        return;
    }
    let preference = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.preferred_during_scheduling_ignored_during_execution.as_ref())
        .into_iter()
        .flatten()
        .filter(|p| p.weight > 0)
        .find(|p| {
            hybrid.iter().all(|h| h.may_match_term(&p.preference))
                && fallback.is_none_or(|f| !f.shape.may_match_term(&p.preference))
        });
    if fallback.is_some_and(|f| !f.shape.may_be_selected_by(spec)) {
        out.fix(
            id,
            Status::Warn,
            object,
            "requires the on-prem nodes: it can never fall back to the cloud, so a failure leaves it Pending until \
             on-prem returns",
            "if it must fall back, make the hybrid affinity preferredDuringScheduling instead of required",
        );
    } else if let Some(p) = preference {
        let terms = names(
            p.preference
                .match_expressions
                .iter()
                .flatten()
                .map(|e| format!("{} {} [{}]", e.key, e.operator, names(e.values.iter().flatten()))),
        );
        out.add(id, Status::Pass, object, format!("prefers the on-prem nodes (weight {}: {terms})", p.weight));
    } else {
        out.fix(
            id,
            Status::Fail,
            object,
            "no node affinity prefers the on-prem nodes: the scheduler may place it on cloud GPU nodes in steady \
             state, and a return does not bring it back",
            "add preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, preference: {matchExpressions: \
             [{key: eks.amazonaws.com/compute-type, operator: In, values: [hybrid]}]}}]",
        );
    }
    if !excluded.is_empty() {
        out.fix(
            id,
            Status::Warn,
            object,
            format!("its nodeSelector or required node affinity excludes the on-prem nodes {}", names(&excluded)),
            "check the on-prem selector and the workload's required affinity agree",
        );
    }
}

fn workload_budget(s: &Snapshot, w: &Workload, object: &str, drains: bool, out: &mut Findings) {
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

fn rto_floor(s: &Snapshot, w: &Workload, rto_objective: Option<Duration>, out: &mut Findings) {
    let id = CheckId::RtoFloor;
    let object = w.object();
    let template = tolerations(w.template.spec.as_ref());
    let admitted = tolerations(w.sample_pod.as_ref().and_then(|p| p.spec.as_ref()));
    // What applies is what the API server admitted; the template alone when no pod runs.
    let pod = w.sample_pod.clone().unwrap_or_else(|| Pod { spec: w.template.spec.clone(), ..Default::default() });
    // The default node-monitor-grace-period: 50s since Kubernetes 1.32, 40s before. The API does not expose it.
    let grace: i64 = if s.server_minor.is_none_or(|m| m >= 32) { 50 } else { 40 };
    let mut parts = Vec::new();
    let mut shortest: Option<i64> = None;
    for (key, what) in [(UNREACHABLE, "unreachable"), (NOT_READY, "not-ready")] {
        let declares = |ts: &[Toleration]| ts.iter().any(|t| t.key.as_deref() == Some(key));
        let source = if declares(template) {
            "set in its pod template"
        } else if declares(admitted) {
            "added by the API server's DefaultTolerationSeconds"
        } else {
            "no toleration: evicted as soon as the taint lands"
        };
        match eviction_wait(&pod, key) {
            Some(secs) => {
                parts.push(format!("{what} {secs}s ({source})"));
                shortest = Some(shortest.map_or(secs, |s| s.min(secs)));
            }
            None => {
                out.fix(
                    id,
                    Status::Warn,
                    &object,
                    format!(
                        "tolerates {key} forever ({source}): its pods never leave a failed node, so no fallback starts"
                    ),
                    format!("set tolerationSeconds on the {key} toleration, e.g. 60"),
                );
                parts.push(format!("{what} forever"));
            }
        }
    }
    let Some(wait) = shortest else {
        return;
    };
    let floor = grace + wait;
    let message = format!(
        "a node failure evicts its pods about {floor}s after the fault: node-monitor-grace-period {grace}s (the \
         default; not readable through the API) + tolerationSeconds {}; a drain evicts at once",
        names(&parts)
    );
    let fix = "to shorten it, set tolerationSeconds for node.kubernetes.io/unreachable and not-ready in the pod \
               template (at the cost of evicting on brief network blips)";
    match rto_objective {
        Some(rto) if rto.as_secs() <= floor as u64 => out.fix(
            id,
            Status::Warn,
            &object,
            format!(
                "{message}; the RTO objective of {} cannot be met by a node failure",
                humantime::format_duration(rto)
            ),
            fix,
        ),
        _ => out.fix(id, Status::Info, &object, message, fix),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use serde::de::DeserializeOwned;

    use super::*;

    fn obj<T: DeserializeOwned>(yaml: &str) -> T {
        serde_json::from_value(crate::drill::parse::parse_document(yaml).unwrap().value).unwrap()
    }

    fn targets() -> Targets {
        Targets {
            nodes: "eks.amazonaws.com/compute-type=hybrid,gpu.model=h200".into(),
            namespace: "inference".into(),
            selector: "app=llm-inference".into(),
            node_pool: "gpu-fallback".into(),
        }
    }

    fn hybrid_node(name: &str) -> Node {
        obj(&format!(
            "metadata: {{name: {name}, labels: {{eks.amazonaws.com/compute-type: hybrid, node-type: hybrid-gpu, gpu.model: h200}}}}\n\
             spec: {{taints: [{{key: nvidia.com/gpu, effect: NoSchedule}}]}}\n\
             status: {{allocatable: {{nvidia.com/gpu: '8'}}}}"
        ))
    }

    const TEMPLATE: &str = "\
metadata: {labels: {app: llm-inference}}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          preference: {matchExpressions: [{key: eks.amazonaws.com/compute-type, operator: In, values: [hybrid]}]}
  containers:
    - name: server
      resources: {limits: {nvidia.com/gpu: '4'}}
";

    fn workload_pod(name: &str, node: &str) -> Pod {
        obj(&format!(
            "metadata:
  name: {name}
  namespace: inference
  labels: {{app: llm-inference}}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: llm-inference-abc, uid: u, controller: true}}]
spec:
  nodeName: {node}
  containers: [{{name: server}}]
  tolerations:
    - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
    - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 30}}
    - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 30}}
"
        ))
    }

    fn pool() -> NodePool {
        obj("\
metadata: {name: gpu-fallback}
spec:
  template:
    metadata: {labels: {node-type: cloud-gpu-fallback}}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [g6.12xlarge, g6e.12xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
  limits: {nvidia.com/gpu: '16'}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 20s}
status:
  conditions: [{type: Ready, status: 'True'}, {type: NodeClassReady, status: 'True'}]
")
    }

    /// The lab as `lab/up` leaves it.
    fn lab() -> Snapshot {
        let device_plugin: DaemonSet = obj("\
metadata: {name: nvidia-device-plugin, namespace: kube-system}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: nvidia-device-plugin}}
  template:
    metadata: {labels: {app.kubernetes.io/name: nvidia-device-plugin}}
    spec:
      nodeSelector: {eks.amazonaws.com/compute-type: hybrid}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers: [{name: p, image: 'stand-in/nvidia-device-plugin:lab'}]
");
        let ds_pod: Pod = obj(
            "metadata: {name: nvidia-device-plugin-x, namespace: kube-system, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: nvidia-device-plugin, uid: u, controller: true}]}\n\
             spec: {nodeName: hybrid-gpu-1, containers: [{name: p}]}",
        );
        let budget: PodDisruptionBudget = obj("metadata: {name: llm-inference, namespace: inference}\n\
             spec: {maxUnavailable: 2, selector: {matchLabels: {app: llm-inference}}}\n\
             status: {disruptionsAllowed: 2, currentHealthy: 4, desiredHealthy: 2, expectedPods: 4}");
        Snapshot {
            server_minor: Some(34),
            karpenter_versions: vec!["v1".into()],
            karpenter_v1_resources: vec!["nodepools".into(), "nodepools/status".into(), "nodeclaims".into()],
            nodes: vec![
                hybrid_node("hybrid-gpu-1"),
                hybrid_node("hybrid-gpu-2"),
                obj("metadata: {name: cloud-system-1, labels: {node-type: system}}"),
            ],
            on_prem: ["hybrid-gpu-1".to_string(), "hybrid-gpu-2".to_string()].into(),
            pods_on_prem: vec![workload_pod("llm-1", "hybrid-gpu-1"), workload_pod("llm-2", "hybrid-gpu-2"), ds_pod],
            daemonsets: vec![device_plugin],
            pool: PoolLookup::Found(Box::new(pool())),
            node_class: NodeClassLookup::Found(serde_json::json!({
                "kind": "KWOKNodeClass", "metadata": {"name": "default"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            })),
            claims: Vec::new(),
            pods_on_fallback: Vec::new(),
            workload_pods: 4,
            workloads: vec![Workload {
                kind: "Deployment".into(),
                namespace: "inference".into(),
                name: "llm-inference".into(),
                replicas: 4,
                template: obj(TEMPLATE),
                sample_pod: Some(workload_pod("llm-1", "hybrid-gpu-1")),
            }],
            budgets: vec![budget],
        }
    }

    fn run(s: &Snapshot) -> Vec<Finding> {
        evaluate(s, &targets(), &Expectations::default())
    }

    fn with_rto(seconds: u64) -> Expectations {
        Expectations { rto_objective: Some(Duration::from_secs(seconds)), drains: true }
    }

    /// The (check, object) of every finding with this status.
    fn with(findings: &[Finding], status: Status) -> Vec<(CheckId, String)> {
        findings.iter().filter(|f| f.status == status).map(|f| (f.check, f.object.clone())).collect()
    }

    fn only_failure(s: &Snapshot) -> Finding {
        let findings = run(s);
        let failed: Vec<&Finding> = findings.iter().filter(|f| f.status == Status::Fail).collect();
        assert_eq!(failed.len(), 1, "expected exactly one failure: {findings:#?}");
        assert!(with(&findings, Status::Warn).is_empty(), "{findings:#?}");
        assert!(failed[0].fix.is_some(), "a failure says the fix: {:?}", failed[0]);
        failed[0].clone()
    }

    fn template_mut(s: &mut Snapshot) -> &mut PodSpec {
        s.workloads[0].template.spec.as_mut().unwrap()
    }

    #[test]
    fn the_lab_as_set_up_passes_every_check() {
        let findings = run(&lab());
        assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
        assert!(with(&findings, Status::Warn).is_empty(), "{findings:#?}");
        assert!(with(&findings, Status::Skip).is_empty(), "{findings:#?}");
        let seen: BTreeSet<CheckId> = findings.iter().map(|f| f.check).collect();
        assert_eq!(seen.len(), 18, "every check reports: {seen:?}");
        let floor = findings.iter().find(|f| f.check == CheckId::RtoFloor).unwrap();
        assert_eq!(floor.status, Status::Info);
        assert!(floor.message.contains("about 80s after the fault"), "{}", floor.message);
        assert!(floor.message.contains("unreachable 30s (added by the API server's DefaultTolerationSeconds)"));
    }

    #[test]
    fn a_pod_that_does_not_tolerate_the_gpu_taint_is_evidence_of_late_tainting() {
        let mut s = lab();
        let mut intruder = workload_pod("monitoring-agent", "hybrid-gpu-2");
        intruder.metadata.namespace = Some("monitoring".into());
        intruder.spec.as_mut().unwrap().tolerations = None;
        s.pods_on_prem.push(intruder);
        let f = only_failure(&s);
        assert_eq!((f.check, f.object.as_str()), (CheckId::TaintAppliedLate, "Node hybrid-gpu-2"));
        assert!(f.message.contains("monitoring/monitoring-agent"), "{}", f.message);
        assert!(f.fix.unwrap().contains("--register-with-taints=nvidia.com/gpu=Exists:NoSchedule"));
    }

    #[test]
    fn a_hybrid_node_without_the_taint_fails_by_name() {
        let mut s = lab();
        s.nodes[1].spec = None;
        let f = only_failure(&s);
        assert_eq!((f.check, f.object.as_str()), (CheckId::GpuTaint, "Node hybrid-gpu-2"));
    }

    #[test]
    fn a_selector_matching_no_node_fails() {
        let mut s = lab();
        s.on_prem.clear();
        let findings = run(&s);
        assert_eq!(with(&findings, Status::Fail), [(CheckId::GpuTaint, format!("Nodes -l {}", targets().nodes))]);
    }

    fn device_plugin_spec(s: &mut Snapshot) -> &mut PodSpec {
        s.daemonsets[0].spec.as_mut().unwrap().template.spec.as_mut().unwrap()
    }

    #[test]
    fn a_device_plugin_that_lands_on_the_fallback_nodes_fails() {
        let mut s = lab();
        device_plugin_spec(&mut s).node_selector = None;
        let f = only_failure(&s);
        assert_eq!(
            (f.check, f.object.as_str()),
            (CheckId::DevicePluginScope, "DaemonSet kube-system/nvidia-device-plugin")
        );
        assert!(f.message.contains("new nodes of NodePool gpu-fallback"), "{}", f.message);
        assert!(f.fix.unwrap().contains("eks.amazonaws.com/compute-type: hybrid"));
    }

    #[test]
    fn gpu_operator_operands_selected_by_gpu_labels_may_land_on_cloud_gpu_nodes() {
        let mut s = lab();
        let dcgm: DaemonSet = obj("\
metadata: {name: nvidia-dcgm-exporter, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: nvidia-dcgm-exporter}}
  template:
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.dcgm-exporter: 'true'}
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      containers: [{name: e, image: 'nvcr.io/nvidia/k8s/dcgm-exporter:3.3'}]
");
        s.daemonsets.push(dcgm);
        let findings = run(&s);
        assert_eq!(
            with(&findings, Status::Fail),
            [(CheckId::DevicePluginScope, "DaemonSet gpu-operator/nvidia-dcgm-exporter".to_string())]
        );
    }

    #[test]
    fn a_device_plugin_that_misses_hybrid_nodes_warns() {
        let mut s = lab();
        device_plugin_spec(&mut s).tolerations = None;
        let findings = run(&s);
        assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
        assert_eq!(
            with(&findings, Status::Warn),
            [(CheckId::DevicePluginScope, "DaemonSet kube-system/nvidia-device-plugin".to_string())]
        );
        s.daemonsets.clear();
        assert_eq!(
            with(&run(&s), Status::Warn),
            [(CheckId::DevicePluginScope, "DaemonSets (all namespaces)".to_string())]
        );
    }

    #[test]
    fn cloud_gpu_nodes_are_judged_by_the_stack_they_bring() {
        let mut s = lab();
        let bottlerocket: Node = obj("metadata: {name: ip-10-0-1-5, labels: {node-type: inference-cloud}}\n\
             status: {allocatable: {nvidia.com/gpu: '4'}, nodeInfo: {osImage: 'Bottlerocket OS 1.20.0 (aws-k8s-1.31-nvidia)', \
             architecture: amd64, bootID: b, containerRuntimeVersion: c, kernelVersion: k, kubeProxyVersion: p, kubeletVersion: v, \
             machineID: m, operatingSystem: linux, systemUUID: s}}");
        s.nodes.push(bottlerocket);
        device_plugin_spec(&mut s).node_selector = Some([("gpu.model".to_string(), "h200".to_string())].into());
        assert!(with(&run(&s), Status::Fail).is_empty(), "h200 only: not on the Bottlerocket node");
        device_plugin_spec(&mut s).node_selector = None;
        let f = run(&s).into_iter().find(|f| f.status == Status::Fail).unwrap();
        assert!(f.message.contains("ip-10-0-1-5 (runs Bottlerocket"), "{}", f.message);

        // An AL2023 fallback brings drivers but no device plugin: one must be installed for it.
        let mut s = lab();
        let mut p = pool();
        p.spec.template.as_mut().unwrap()["spec"]["nodeClassRef"] =
            serde_json::json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu-fallback"});
        s.pool = PoolLookup::Found(Box::new(p));
        s.node_class =
            NodeClassLookup::Found(serde_json::json!({"spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}}));
        let f = only_failure(&s);
        assert_eq!((f.check, f.object.as_str()), (CheckId::DevicePluginScope, "NodePool gpu-fallback"));
        let cloud_plugin: DaemonSet = obj("\
metadata: {name: nvidia-device-plugin-cloud, namespace: kube-system}
spec:
  selector: {matchLabels: {a: b}}
  template:
    spec:
      nodeSelector: {karpenter.sh/nodepool: gpu-fallback}
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      containers: [{name: p, image: 'nvcr.io/nvidia/k8s-device-plugin:v0.17.0'}]
");
        s.daemonsets.push(cloud_plugin);
        let findings = run(&s);
        assert!(with(&findings, Status::Fail).is_empty() && with(&findings, Status::Warn).is_empty(), "{findings:#?}");
    }

    #[test]
    fn each_nodepool_recommendation_fails_on_its_own() {
        type Break = Box<dyn Fn(&mut NodePool)>;
        let cases: Vec<(CheckId, Break)> = vec![
            (CheckId::NodepoolLimits, Box::new(|p| p.spec.limits = None)),
            (
                CheckId::NodepoolConsolidation,
                Box::new(|p| {
                    p.spec.disruption =
                        Some(serde_json::json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}))
                }),
            ),
            (
                CheckId::NodepoolCapacityType,
                Box::new(|p| {
                    p.spec.template.as_mut().unwrap()["spec"]["requirements"][1]["values"] =
                        serde_json::json!(["spot", "on-demand"])
                }),
            ),
            (
                CheckId::NodepoolTaint,
                Box::new(|p| p.spec.template.as_mut().unwrap()["spec"]["taints"] = serde_json::json!([])),
            ),
            (CheckId::NodepoolReady, Box::new(|p| p.status.as_mut().unwrap().conditions[0].status = "False".into())),
        ];
        for (check, break_it) in cases {
            let mut s = lab();
            let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
            break_it(p);
            let f = only_failure(&s);
            assert_eq!((f.check, f.object.as_str()), (check, "NodePool gpu-fallback"), "{f:?}");
        }
        // Without a limit there is nothing to fit under: that check is skipped, not failed twice.
        let mut s = lab();
        let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
        p.spec.limits = None;
        assert!(run(&s).iter().any(|f| f.check == CheckId::WorkloadFitsLimit && f.status == Status::Skip));
    }

    #[test]
    fn consolidate_after_zero_and_unpinned_capacity_type_warn() {
        let mut s = lab();
        let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
        p.spec.disruption =
            Some(serde_json::json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}));
        p.spec.template.as_mut().unwrap()["spec"]["requirements"] = serde_json::json!([]);
        let findings = run(&s);
        let warned: Vec<CheckId> = with(&findings, Status::Warn).into_iter().map(|(c, _)| c).collect();
        assert_eq!(warned, [CheckId::NodepoolConsolidation, CheckId::NodepoolCapacityType]);
    }

    #[test]
    fn a_missing_nodepool_names_the_existing_ones_and_skips_the_rest() {
        let mut s = lab();
        s.pool = PoolLookup::Missing { existing: vec!["default".into()] };
        let findings = run(&s);
        let f = findings.iter().find(|f| f.status == Status::Fail).unwrap();
        assert_eq!(f.check, CheckId::NodepoolReady);
        assert!(f.message.contains("existing: default"));
        assert_eq!(with(&findings, Status::Fail).len(), 1, "{findings:#?}");
    }

    #[test]
    fn a_nodeclass_that_is_missing_or_not_served_fails() {
        for (lookup, says) in [
            (NodeClassLookup::NotServed, "the NodeClass CRD is not installed"),
            (NodeClassLookup::Missing, "not found"),
        ] {
            let mut s = lab();
            s.node_class = lookup;
            let f = only_failure(&s);
            assert_eq!(
                (f.check, f.object.as_str()),
                (CheckId::NodepoolNodeclass, "KWOKNodeClass.karpenter.kwok.sh default")
            );
            assert!(f.message.contains(says), "{}", f.message);
        }
    }

    #[test]
    fn a_fallback_that_is_not_empty_names_the_pods_holding_it() {
        let mut s = lab();
        s.nodes.push(obj("metadata: {name: fallback-a, labels: {karpenter.sh/nodepool: gpu-fallback}}\nstatus: {allocatable: {nvidia.com/gpu: '4'}}"));
        s.claims.push(obj("metadata: {name: gpu-fallback-x}\nspec: {}"));
        s.pods_on_fallback.push(workload_pod("llm-9", "fallback-a"));
        let findings = run(&s);
        assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
        let f = findings.iter().find(|f| f.status == Status::Warn).unwrap();
        assert_eq!(f.check, CheckId::NodepoolEmpty);
        assert!(f.message.contains("inference/llm-9") && f.message.contains("fallback-a"), "{}", f.message);
    }

    #[test]
    fn a_workload_without_its_toleration_fails_even_when_admission_added_one() {
        let mut s = lab();
        template_mut(&mut s).tolerations = None;
        let f = only_failure(&s);
        assert_eq!((f.check, f.object.as_str()), (CheckId::WorkloadToleration, "Deployment inference/llm-inference"));
        assert!(f.message.contains("ExtendedResourceToleration"), "{}", f.message);
        assert!(f.fix.unwrap().contains("{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}"));
    }

    #[test]
    fn a_workload_without_gpus_or_preference_fails() {
        let mut s = lab();
        template_mut(&mut s).containers[0].resources = None;
        let findings = run(&s);
        assert_eq!(
            with(&findings, Status::Fail),
            [(CheckId::WorkloadGpuRequest, "Deployment inference/llm-inference".into())]
        );

        let mut s = lab();
        template_mut(&mut s).affinity = None;
        let f = only_failure(&s);
        assert_eq!(f.check, CheckId::WorkloadAffinity);

        // Requiring the hybrid nodes is allowed, but it can never fall back.
        let mut s = lab();
        template_mut(&mut s).node_selector = Some([("node-type".to_string(), "hybrid-gpu".to_string())].into());
        let findings = run(&s);
        assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
        assert_eq!(
            with(&findings, Status::Warn),
            [(CheckId::WorkloadAffinity, "Deployment inference/llm-inference".into())]
        );
    }

    #[test]
    fn budgets_must_exist_alone_and_allow_a_disruption() {
        let mut s = lab();
        s.budgets[0].status.as_mut().unwrap().disruptions_allowed = 0;
        let f = only_failure(&s);
        assert_eq!((f.check, f.object.as_str()), (CheckId::WorkloadPdb, "PodDisruptionBudget inference/llm-inference"));
        // Without a drain the budget is in nobody's way: a lost node's taint evicts regardless.
        let findings = evaluate(&s, &targets(), &Expectations { rto_objective: None, drains: false });
        assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
        assert_eq!(with(&findings, Status::Warn).len(), 1);

        let mut s = lab();
        let mut second = s.budgets[0].clone();
        second.metadata.name = Some("another".into());
        s.budgets.push(second);
        assert!(only_failure(&s).message.contains("2 PodDisruptionBudgets cover it"));

        let mut s = lab();
        s.budgets.clear();
        assert_eq!(with(&run(&s), Status::Warn), [(CheckId::WorkloadPdb, "Deployment inference/llm-inference".into())]);
    }

    #[test]
    fn gpu_demand_above_the_fallback_limit_fails() {
        let mut s = lab();
        s.workloads[0].replicas = 5;
        let f = only_failure(&s);
        assert_eq!(f.check, CheckId::WorkloadFitsLimit);
        assert!(f.message.contains("needs 20 GPUs") && f.message.contains("limited to 16"), "{}", f.message);
    }

    #[test]
    fn no_workload_fails_once_and_skips_the_rest() {
        let mut s = lab();
        s.workloads.clear();
        s.workload_pods = 0;
        let findings = run(&s);
        assert_eq!(
            with(&findings, Status::Fail),
            [(CheckId::WorkloadFound, "Pods -n inference -l app=llm-inference".into())]
        );
    }

    #[test]
    fn karpenter_crds_missing_or_too_old_fail_and_the_nodepool_is_not_judged() {
        let mut s = lab();
        s.karpenter_versions.clear();
        s.karpenter_v1_resources.clear();
        s.pool = PoolLookup::NotServed;
        s.node_class = NodeClassLookup::NotLooked;
        let f = only_failure(&s);
        assert_eq!((f.check, f.object.as_str()), (CheckId::KarpenterCrds, "API group karpenter.sh"));
        assert!(f.fix.unwrap().contains("karpenter-crd"));
        assert!(run(&s).iter().any(|f| f.check == CheckId::NodepoolLimits && f.status == Status::Skip));
        s.karpenter_versions = vec!["v1beta1".into()];
        assert!(only_failure(&s).message.contains("served only at v1beta1"));
    }

    #[test]
    fn the_rto_floor_follows_the_tolerations_and_warns_below_the_objective() {
        let s = lab();
        let warned = evaluate(&s, &targets(), &with_rto(60));
        assert_eq!(with(&warned, Status::Warn), [(CheckId::RtoFloor, "Deployment inference/llm-inference".into())]);
        assert!(with(&evaluate(&s, &targets(), &with_rto(900)), Status::Warn).is_empty());

        let mut s = lab();
        s.server_minor = Some(30);
        s.workloads[0].sample_pod.as_mut().unwrap().spec.as_mut().unwrap().tolerations.as_mut().unwrap().pop();
        let floor = run(&s).into_iter().find(|f| f.check == CheckId::RtoFloor).unwrap();
        assert!(
            floor.message.contains("about 40s") && floor.message.contains("evicted as soon as"),
            "{}",
            floor.message
        );

        let mut s = lab();
        template_mut(&mut s)
            .tolerations
            .as_mut()
            .unwrap()
            .push(obj("{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}"));
        s.workloads[0].sample_pod.as_mut().unwrap().spec.as_mut().unwrap().tolerations.as_mut().unwrap()[2]
            .toleration_seconds = None;
        let findings = run(&s);
        let f = findings.iter().find(|f| f.status == Status::Warn).unwrap();
        assert!(
            f.message.contains("tolerates node.kubernetes.io/unreachable forever (set in its pod template)"),
            "{}",
            f.message
        );
    }
}
