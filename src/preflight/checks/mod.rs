//! The checks: pure functions of a [`Snapshot`], one function per check, in files by check group (one per
//! recommendation of the seed), each finding naming its object and the fix.

mod autoscaler;
mod budget;
mod device_plugin;
mod disruption;
mod diversity;
mod karpenter;
mod node_pool;
mod remediation;
mod rto;
mod stateful;
mod support;
mod taints;
#[cfg(test)]
mod tests;
mod workload;
mod zones;

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::finding::Finding;
use super::snapshot::{PoolLookup, Snapshot};
use super::targets::{Expectations, PreflightTargets};
use crate::cluster::karpenter::NODEPOOL_LABEL;
use crate::cluster::scheduling::NodeShape;
use support::Findings;

/// Whether a check reads this node: an on-prem one, any node with GPUs (a cloud GPU node may bring its own device
/// plugin), or one of the fallback NodePool's. A node's GPUs are in its status, which no selector reaches, so the
/// gathering reads every node in pages and keeps only these.
pub fn reads_node(node: &Node, on_prem: &BTreeSet<String>, node_pool: &str) -> bool {
    on_prem.contains(&node.name_any())
        || support::node_gpus(node) > 0
        || node.labels().get(NODEPOOL_LABEL).is_some_and(|p| p == node_pool)
}

/// Whether a check reads this DaemonSet: only the NVIDIA device plugin's family is judged.
pub fn reads_daemonset(ds: &DaemonSet) -> bool {
    device_plugin::family_member(ds).is_some() || remediation::remediation(ds).is_some()
}

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
    disruption::nodepool_disruption(s, targets, expect, &mut out);
    workload::workloads(s, targets, &on_prem, fallback.as_ref(), expect, &mut out);
    autoscaler::workload_autoscaler(s, expect, &mut out);
    budget::drain_pods(s, expect, &mut out);
    zones::zone_disruption(s, expect, &mut out);
    stateful::statefulset_failover(s, expect, &mut out);
    remediation::gpu_remediation(s, &on_prem, expect, &mut out);
    diversity::fallback_diversity(s, targets, expect, &mut out);
    out.0
}
