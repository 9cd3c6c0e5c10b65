//! The fallback NodePool's checks: nodepool-ready, -nodeclass, -limits, -consolidation, -capacity-type, -taint and
//! -empty, one function each, run once the NodePool is found.

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::support::{Findings, is_gpu_taint, names, pod_name, taint_text};
use crate::cluster::drain_selection::is_evictable;
use crate::cluster::karpenter::{CAPACITY_TYPE_LABEL, GPU_RESOURCE, KarpenterCondition, NODEPOOL_LABEL, NodePool};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{NodeClassLookup, PoolLookup, Snapshot};
use crate::preflight::targets::PreflightTargets;

const POOL_CHECKS: &[CheckId] = &[
    CheckId::NodepoolReady,
    CheckId::NodepoolNodeclass,
    CheckId::NodepoolLimits,
    CheckId::NodepoolConsolidation,
    CheckId::NodepoolCapacityType,
    CheckId::NodepoolTaint,
    CheckId::NodepoolEmpty,
];

/// Every NodePool check, or the reason none can run.
pub(super) fn node_pool(s: &Snapshot, targets: &PreflightTargets, out: &mut Findings) {
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
    ready(pool, &object, &targets.node_pool, out);
    node_class(pool, &s.node_class, &object, &targets.node_pool, out);
    limits(pool, &object, out);
    consolidation(pool, &object, out);
    capacity_type(pool, &object, out);
    taint(pool, &object, out);
    empty(s, &object, &targets.node_pool, out);
}

fn condition<'a>(conditions: &'a [KarpenterCondition], kind: &str) -> Option<&'a str> {
    conditions.iter().find(|c| c.type_ == kind).map(|c| c.status.as_str())
}

/// nodepool-ready: the NodePool is Ready.
fn ready(pool: &NodePool, object: &str, pool_name: &str, out: &mut Findings) {
    let conditions = pool.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    if condition(conditions, "Ready") == Some("True") {
        out.add(CheckId::NodepoolReady, Status::Pass, object, "Ready");
        return;
    }
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
        object,
        if not_true.is_empty() {
            "has no Ready condition yet".into()
        } else {
            format!("not Ready: {}", names(&not_true))
        },
        format!("`kubectl describe nodepool {pool_name}` and Karpenter's logs say why"),
    );
}

/// nodepool-nodeclass: its nodeClassRef names a NodeClass that exists and is Ready.
fn node_class(pool: &NodePool, class: &NodeClassLookup, object: &str, pool_name: &str, out: &mut Findings) {
    let id = CheckId::NodepoolNodeclass;
    let Some(r) = pool.node_class_ref() else {
        out.fix(
            id,
            Status::Fail,
            object,
            "its template names no nodeClassRef",
            "set spec.template.spec.nodeClassRef to the NodeClass of the GPU fallback (group, kind, name)",
        );
        return;
    };
    match class {
        NodeClassLookup::NotServed => out.fix(
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
        NodeClassLookup::Missing => out.fix(
            id,
            Status::Fail,
            r.object(),
            format!("not found: NodePool {pool_name} cannot launch nodes"),
            format!("create {} {} or point nodeClassRef at an existing one", r.kind, r.name),
        ),
        NodeClassLookup::Unreadable(why) => out.fix(
            id,
            Status::Warn,
            r.object(),
            format!("cannot read it: {why}"),
            format!("grant get on {} ({}) to the identity running hybrid-drill", r.kind, r.group),
        ),
        NodeClassLookup::Found(o) => {
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
        NodeClassLookup::NotLooked => out.add(id, Status::Skip, r.object(), "not checked"),
    }
}

/// nodepool-limits: its `limits` cap `nvidia.com/gpu`.
fn limits(pool: &NodePool, object: &str, out: &mut Findings) {
    match pool.spec.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE)) {
        Some(q) => out.add(
            CheckId::NodepoolLimits,
            Status::Pass,
            object,
            format!("caps nvidia.com/gpu at {} (eventually consistent: a burst can overrun it)", q.0),
        ),
        None => out.fix(
            CheckId::NodepoolLimits,
            Status::Fail,
            object,
            "has no nvidia.com/gpu limit: a burst of pending GPU pods can launch any number of cloud GPU nodes",
            "add spec.limits: {nvidia.com/gpu: 16} sized to the fallback's budget, with EC2 quotas and AWS Budgets \
             alerts behind it",
        ),
    }
}

/// nodepool-consolidation: its consolidation policy and `consolidateAfter` reclaim idle fallback nodes.
fn consolidation(pool: &NodePool, object: &str, out: &mut Findings) {
    let disruption = pool.spec.disruption.clone().unwrap_or_default();
    let consolidation_fix =
        "set spec.disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5m}";
    match (disruption.consolidation_policy.as_deref(), disruption.consolidate_after.as_deref()) {
        (Some(p), Some("Never")) => out.fix(
            CheckId::NodepoolConsolidation,
            Status::Fail,
            object,
            format!("{p} with consolidateAfter: Never: idle fallback GPU nodes are never reclaimed"),
            consolidation_fix,
        ),
        (Some(p), Some(a)) if humantime::parse_duration(a).is_ok_and(|d| d.is_zero()) => out.fix(
            CheckId::NodepoolConsolidation,
            Status::Warn,
            object,
            format!("{p} with consolidateAfter {a} (Karpenter's default): a node is reclaimed the moment it empties"),
            "set consolidateAfter explicitly, e.g. 5m, so a restarting pod does not lose its node",
        ),
        (Some(p), Some(a)) => {
            out.add(CheckId::NodepoolConsolidation, Status::Pass, object, format!("{p}, consolidateAfter {a}"))
        }
        _ => out.fix(
            CheckId::NodepoolConsolidation,
            Status::Fail,
            object,
            "no consolidation policy and consolidateAfter: idle fallback GPU nodes may never be reclaimed",
            consolidation_fix,
        ),
    }
}

/// nodepool-capacity-type: it provisions on-demand capacity.
fn capacity_type(pool: &NodePool, object: &str, out: &mut Findings) {
    let requirements = pool.spec.template.as_ref().map(|t| t.spec.requirements.as_slice()).unwrap_or_default();
    let capacity = requirements.iter().find(|r| r.key == CAPACITY_TYPE_LABEL);
    let id = CheckId::NodepoolCapacityType;
    match capacity.map(|r| (r.operator.as_str(), &r.values)) {
        None => out.fix(
            id,
            Status::Warn,
            object,
            "does not pin karpenter.sh/capacity-type (Karpenter picks on-demand unless told otherwise)",
            "add the requirement {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
        ),
        Some(("In", values)) if values.iter().all(|v| v != "spot") => {
            out.add(id, Status::Pass, object, format!("capacity type {}", names(values)))
        }
        Some(("NotIn", values)) if values.iter().any(|v| v == "spot") => {
            out.add(id, Status::Pass, object, format!("capacity type not {}", names(values)))
        }
        Some((op, values)) => out.fix(
            id,
            Status::Fail,
            object,
            format!(
                "capacity type {op} [{}] allows spot: a fallback can be reclaimed in the middle of an incident",
                names(values)
            ),
            "use on-demand for the fallback ({key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}); \
             put spot bursts in a separate NodePool",
        ),
    }
}

/// nodepool-taint: its nodes carry the GPU taint.
fn taint(pool: &NodePool, object: &str, out: &mut Findings) {
    let taints = pool.spec.template.as_ref().map(|t| t.spec.taints.as_slice()).unwrap_or_default();
    match taints.iter().find(|t| is_gpu_taint(t)) {
        Some(taint) => out.add(
            CheckId::NodepoolTaint,
            Status::Pass,
            object,
            format!("its nodes are tainted {}", taint_text(taint)),
        ),
        None => out.fix(
            CheckId::NodepoolTaint,
            Status::Fail,
            object,
            "its nodes carry no nvidia.com/gpu taint: any pod can land on a costly fallback GPU node",
            "add to spec.template.spec.taints: {key: nvidia.com/gpu, effect: NoSchedule}",
        ),
    }
}

/// nodepool-empty: it is at 0 NodeClaims and nodes now.
fn empty(s: &Snapshot, object: &str, pool_name: &str, out: &mut Findings) {
    let nodes: Vec<&Node> =
        s.nodes.iter().filter(|n| n.labels().get(NODEPOOL_LABEL).is_some_and(|p| p == pool_name)).collect();
    if s.claims.is_empty() && nodes.is_empty() {
        out.add(CheckId::NodepoolEmpty, Status::Pass, object, "at 0 NodeClaims and 0 nodes");
        return;
    }
    let holders: Vec<String> = s.pods_on_fallback.iter().filter(|p| is_evictable(p)).map(pod_name).collect();
    out.fix(
        CheckId::NodepoolEmpty,
        Status::Warn,
        object,
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
