//! The workload's checks: workload-found, -gpu-request, -toleration, -affinity and -fits-limit, per controller of
//! the workload's pods; its budget and RTO floor are judged in their own files.

use k8s_openapi::api::core::v1::{Container, Node, PodSpec, Taint};

use super::budget::{other_displaced_gpu_pods, workload_budget};
use super::rto::rto_floor;
use super::support::{Findings, gpu_taints, is_gpu_taint, most_gpus, names, taint_text, tolerations};
use crate::cluster::karpenter::{GPU_RESOURCE, NodePool};
use crate::cluster::quantity::as_integer;
use crate::cluster::scheduling::{NodeShape, tolerates};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{PoolLookup, Snapshot, Workload};
use crate::preflight::targets::{Expectations, PreflightTargets};
use kube::ResourceExt;

const TOLERATION_FIX: &str =
    "add to the pod template: tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]";

const WORKLOAD_CHECKS: &[CheckId] = &[
    CheckId::WorkloadGpuRequest,
    CheckId::WorkloadToleration,
    CheckId::WorkloadAffinity,
    CheckId::WorkloadPdb,
    CheckId::WorkloadFitsLimit,
    CheckId::RtoFloor,
];

fn pod_gpus(spec: &PodSpec) -> i64 {
    let of = |c: &Container| {
        let r = c.resources.as_ref();
        most_gpus([r.and_then(|r| r.requests.as_ref()), r.and_then(|r| r.limits.as_ref())])
    };
    let containers: i64 = spec.containers.iter().map(of).sum();
    let init = spec.init_containers.iter().flatten().map(of).max().unwrap_or(0);
    containers.max(init)
}

/// Every workload check, per controller of the workload's pods, or the reason none can run.
pub(super) fn workloads(
    s: &Snapshot,
    targets: &PreflightTargets,
    on_prem: &[&Node],
    fallback: Option<&NodeShape>,
    expect: &Expectations,
    out: &mut Findings,
) {
    let selection = format!("Pods -n {} -l {}", targets.namespace, targets.selector);
    if !found(s, targets, &selection, out) {
        out.skip(WORKLOAD_CHECKS, &selection, "no workload found");
        return;
    }
    let must_tolerate = must_tolerate(on_prem, fallback);
    let hybrid: Vec<NodeShape> = on_prem.iter().map(|n| NodeShape::from_node(n)).collect();
    let mut demand = Vec::new();
    for w in &s.workloads {
        let object = w.object();
        let Some(spec) = w.template.spec.as_ref() else {
            out.skip(&WORKLOAD_CHECKS[..4], &object, "it has no pod template");
            continue;
        };
        if let Some(gpus) = gpu_request(spec, &object, out) {
            demand.push((w, gpus));
        }
        workload_toleration(w, spec, &must_tolerate, &object, out);
        workload_affinity(spec, &hybrid, fallback, &object, out);
        workload_budget(s, w, &object, expect.drains, out);
    }
    fits_limit(s, &demand, expect, &selection, fallback, targets, out);
    rto_floor(s, &s.workloads[0], expect.rto_objective, out);
}

/// workload-found: the workload selector matches pods, and their controllers.
fn found(s: &Snapshot, targets: &PreflightTargets, selection: &str, out: &mut Findings) -> bool {
    if s.workloads.is_empty() {
        out.fix(
            CheckId::WorkloadFound,
            Status::Fail,
            selection,
            "no pod matches the workload selector",
            format!("check it with `kubectl get pods -n {} -l '{}'`", targets.namespace, targets.selector),
        );
        return false;
    }
    out.add(
        CheckId::WorkloadFound,
        Status::Pass,
        selection,
        format!("{} pods of {}", s.workload_pods, names(s.workloads.iter().map(Workload::object))),
    );
    true
}

/// The taints the workload must tolerate: the GPU taints of the hybrid nodes and of the fallback's nodes.
fn must_tolerate(on_prem: &[&Node], fallback: Option<&NodeShape>) -> Vec<Taint> {
    let mut taints: Vec<Taint> = on_prem.iter().flat_map(|n| gpu_taints(n)).collect();
    if let Some(f) = fallback {
        taints.extend(f.taints.iter().filter(|t| is_gpu_taint(t)).cloned());
    }
    taints.sort_by_key(taint_text);
    taints.dedup_by_key(|t| taint_text(t));
    if taints.is_empty() {
        taints.push(Taint { key: GPU_RESOURCE.into(), effect: "NoSchedule".into(), ..Default::default() });
    }
    taints
}

/// workload-gpu-request: the workload requests `nvidia.com/gpu`; the GPUs each pod requests, if any.
fn gpu_request(spec: &PodSpec, object: &str, out: &mut Findings) -> Option<i64> {
    let gpus = pod_gpus(spec);
    if gpus > 0 {
        out.add(CheckId::WorkloadGpuRequest, Status::Pass, object, format!("each pod requests {gpus} nvidia.com/gpu"));
        return Some(gpus);
    }
    out.fix(
        CheckId::WorkloadGpuRequest,
        Status::Fail,
        object,
        "requests no nvidia.com/gpu: Karpenter will not launch a GPU node for it",
        "request the GPUs in resources.limits: {nvidia.com/gpu: N}",
    );
    None
}

/// workload-fits-limit: the GPU demand of every controller, and of every other GPU pod a lost on-prem node sends
/// to the fallback, fits under the fallback NodePool's GPU limit. A displaced pod whose nodeSelector or required
/// affinity keeps it off the pool's nodes (batch work that asks for Spot only, say) lands elsewhere or stays
/// Pending: it takes none of the limit.
fn fits_limit(
    s: &Snapshot,
    demand: &[(&Workload, i64)],
    expect: &Expectations,
    selection: &str,
    fallback: Option<&NodeShape>,
    targets: &PreflightTargets,
    out: &mut Findings,
) {
    let id = CheckId::WorkloadFitsLimit;
    let gpu_limit = |pool: &NodePool| pool.spec.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE)).and_then(as_integer);
    let limit = match &s.pool {
        PoolLookup::Found(pool) => gpu_limit(pool),
        _ => None,
    };
    // Further fallback pools (a Spot pool, say) add their limits; one without a limit takes what the others leave.
    let missing: Vec<&String> =
        targets.more_pools.iter().filter(|name| !s.more_pools.iter().any(|p| &p.name_any() == *name)).collect();
    let unlimited: Vec<String> = s.more_pools.iter().filter(|p| gpu_limit(p).is_none()).map(|p| p.name_any()).collect();
    let limit = limit.map(|l| l + s.more_pools.iter().filter_map(gpu_limit).sum::<i64>());
    let shapes: Vec<NodeShape> =
        fallback.cloned().into_iter().chain(s.more_pools.iter().map(NodeShape::of_pool)).collect();
    if !missing.is_empty() {
        return out.fix(
            id,
            Status::Fail,
            selection,
            format!("fallback NodePool {} not found", names(missing.iter().map(|m| m.as_str()))),
            "fix spec.targets.fallback.nodePools; list them with `kubectl get nodepools`",
        );
    }
    let objects = names(demand.iter().map(|(w, _)| w.object()));
    let limit = match limit {
        _ if demand.is_empty() => {
            return out.add(id, Status::Skip, selection, "not checked: no GPU demand (see workload-gpu-request)");
        }
        None => {
            return out.add(
                id,
                Status::Skip,
                &objects,
                "not checked: the fallback has no GPU limit (see nodepool-limits)",
            );
        }
        Some(_) if !unlimited.is_empty() => {
            return out.add(
                id,
                Status::Pass,
                &objects,
                format!("NodePool {} has no GPU limit: it takes what the others' limits leave", names(&unlimited)),
            );
        }
        Some(limit) => limit,
    };
    let (total, parts) = fallback_demand(s, demand, expect, &shapes);
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
                "needs {total} GPUs on the fallback ({parts}) but {} limited to {limit}: some pods \
                 would stay Pending",
                pools_are(targets)
            ),
            format!(
                "raise the NodePool's nvidia.com/gpu limit to at least {total}, or run fewer replicas (every GPU pod on \
                 the on-prem nodes falls back, not only the workload's)"
            ),
        );
    }
}

/// The GPUs the fallback must hold: every controller's replicas, and every other GPU pod a lost on-prem node
/// displaces that the fallback's nodes may take; with the sum written out.
fn fallback_demand(
    s: &Snapshot,
    demand: &[(&Workload, i64)],
    expect: &Expectations,
    shapes: &[NodeShape],
) -> (i64, String) {
    let others: Vec<_> = other_displaced_gpu_pods(s, expect)
        .into_iter()
        .filter(|p| {
            shapes.is_empty()
                || p.pod.spec.as_ref().is_none_or(|spec| shapes.iter().any(|f| f.may_be_selected_by(spec)))
        })
        .collect();
    let total: i64 = demand.iter().map(|(w, g)| i64::from(w.replicas) * g).sum::<i64>()
        + others.iter().map(|p| p.gpus()).sum::<i64>();
    let parts = names(
        demand
            .iter()
            .map(|(w, g)| format!("{} x {g}", w.replicas))
            .chain(others.iter().map(|p| format!("{} x {}", p.name(), p.gpus()))),
    );
    (total, parts)
}

/// The fallback pools as the subject of a sentence: `NodePool a is`, `NodePools a, b together are`.
fn pools_are(targets: &PreflightTargets) -> String {
    let pools = std::iter::once(&targets.node_pool).chain(&targets.more_pools).cloned().collect::<Vec<_>>();
    match pools.as_slice() {
        [one] => format!("NodePool {one} is"),
        many => format!("NodePools {} together are", many.join(", ")),
    }
}

/// workload-toleration: its pod template tolerates the GPU taint explicitly.
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

/// workload-affinity: it prefers (or requires) the hybrid nodes, and may still fall back.
fn workload_affinity(
    spec: &PodSpec,
    hybrid: &[NodeShape],
    fallback: Option<&NodeShape>,
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
                && fallback.is_none_or(|f| !f.may_match_term(&p.preference))
        });
    if fallback.is_some_and(|f| !f.may_be_selected_by(spec)) {
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
