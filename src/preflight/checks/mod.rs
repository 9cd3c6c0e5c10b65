//! The checks: pure functions of a [`Snapshot`], one function per check, in files by check group (one per
//! recommendation of the seed), each finding naming its object and the fix.

mod budget;
mod device_plugin;
mod karpenter;
mod node_pool;
mod rto;
mod support;
mod taints;
#[cfg(test)]
mod tests;
mod workload;
mod zones;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::finding::Finding;
use super::snapshot::{PoolLookup, Snapshot};
use super::targets::{Expectations, PreflightTargets};
use crate::cluster::scheduling::NodeShape;
use support::Findings;

/// Every check against one snapshot, in the order they are reported.
pub fn evaluate(s: &Snapshot, targets: &PreflightTargets, expect: &Expectations) -> Vec<Finding> {
    let mut out = Findings::default();
    karpenter::karpenter_crds(s, &mut out);
    let on_prem: Vec<&Node> = s.nodes.iter().filter(|n| s.on_prem.contains(&n.name_any())).collect();
    taints::gpu_taint(&on_prem, targets, &mut out);
    taints::taint_applied_late(&on_prem, s, &mut out);
    // The nodes the fallback NodePool would create, as far as placement goes.
    let fallback = match &s.pool {
        PoolLookup::Found(pool) => Some(NodeShape::of_pool(pool)),
        _ => None,
    };
    device_plugin::device_plugin_scope(s, &on_prem, fallback.as_ref(), targets, &mut out);
    node_pool::node_pool(s, targets, &mut out);
    workload::workloads(s, targets, &on_prem, fallback.as_ref(), expect, &mut out);
    budget::drain_pods(s, expect, &mut out);
    zones::zone_disruption(s, expect, &mut out);
    out.0
}
