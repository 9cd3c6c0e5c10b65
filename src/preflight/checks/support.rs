//! What several checks share: the findings being collected, and how they name nodes, pods and taints.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;

use crate::cluster::karpenter::GPU_RESOURCE;
use crate::cluster::quantity::as_integer;
use crate::preflight::finding::{CheckId, Finding, Status};

/// The findings of one run, in check order.
#[derive(Default)]
pub(super) struct Findings(pub(super) Vec<Finding>);

impl Findings {
    pub(super) fn add(
        &mut self,
        check: CheckId,
        status: Status,
        object: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.0.push(Finding { check, status, object: object.into(), message: message.into(), fix: None });
    }

    pub(super) fn fix(
        &mut self,
        check: CheckId,
        status: Status,
        object: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.0.push(Finding { check, status, object: object.into(), message: message.into(), fix: Some(fix.into()) });
    }

    pub(super) fn skip(&mut self, checks: &[CheckId], object: &str, why: &str) {
        for check in checks {
            self.add(*check, Status::Skip, object, format!("not checked: {why}"));
        }
    }
}

pub(super) fn names(items: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    items.into_iter().map(|s| s.as_ref().to_string()).collect::<Vec<_>>().join(", ")
}

pub(super) fn taint_text(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

pub(super) fn is_gpu_taint(t: &Taint) -> bool {
    t.key == GPU_RESOURCE && (t.effect == "NoSchedule" || t.effect == "NoExecute")
}

pub(super) fn gpu_taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| is_gpu_taint(t))
        .cloned()
        .collect()
}

/// The most `nvidia.com/gpu` any of these resource lists names (requests and limits, allocatable and capacity).
pub(super) fn most_gpus<'a>(lists: impl IntoIterator<Item = Option<&'a BTreeMap<String, Quantity>>>) -> i64 {
    lists.into_iter().flatten().filter_map(|m| m.get(GPU_RESOURCE).and_then(as_integer)).max().unwrap_or(0)
}

pub(super) fn node_gpus(node: &Node) -> i64 {
    let status = node.status.as_ref();
    most_gpus([status.and_then(|s| s.allocatable.as_ref()), status.and_then(|s| s.capacity.as_ref())])
}

pub(super) fn pod_name(p: &Pod) -> String {
    format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any())
}

pub(super) fn tolerations(spec: Option<&PodSpec>) -> &[Toleration] {
    spec.and_then(|s| s.tolerations.as_deref()).unwrap_or_default()
}
