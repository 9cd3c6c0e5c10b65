//! What a drill disturbs besides its own workload, judged from objects read: the other workloads on the on-prem
//! nodes (the collateral), the NodeClaims created in any NodePool after the drill started, and what still differs
//! from the state before the fault at the drill's end (the leftovers).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use super::drain_selection::{is_daemon_or_mirror, is_finished, pod_gpus};
use super::karpenter::{CAPACITY_TYPE_LABEL, GPU_RESOURCE, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, NodeClaim};
use super::quantity::as_integer;

const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A NodeClaim as the accounting names it: its pool, its shape and where it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimFacts {
    pub name: String,
    pub node_pool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<DateTime<Utc>>,
    #[serde(default)]
    pub gpus: i64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
}

impl ClaimFacts {
    pub fn of(claim: &NodeClaim) -> ClaimFacts {
        let labels = claim.labels();
        let label = |key: &str| labels.get(key).cloned();
        let status = claim.status.clone().unwrap_or_default();
        ClaimFacts {
            name: claim.name_any(),
            node_pool: label(NODEPOOL_LABEL).unwrap_or_default(),
            instance_type: label(INSTANCE_TYPE_LABEL),
            capacity_type: label(CAPACITY_TYPE_LABEL),
            zone: label(ZONE_LABEL),
            node: status.node_name,
            created: claim.metadata.creation_timestamp.as_ref().map(|t| super::to_utc(&t.0)),
            gpus: status.capacity.get(GPU_RESOURCE).and_then(as_integer).unwrap_or(0),
            deleting: claim.metadata.deletion_timestamp.is_some(),
        }
    }

    /// `gpu-spot-x7k2p (gpu-spot, g6.12xlarge, spot, zone-a)`.
    pub fn describe(&self) -> String {
        let shape: Vec<&str> = [Some(self.node_pool.as_str()), self.instance_type.as_deref()]
            .into_iter()
            .chain([self.capacity_type.as_deref(), self.zone.as_deref()])
            .flatten()
            .filter(|s| !s.is_empty())
            .chain(self.deleting.then_some("deleting"))
            .collect();
        format!("{} ({})", self.name, shape.join(", "))
    }
}

/// A workload with pods on the on-prem nodes before the fault, other than the drilled one: the fault displaces it too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bystander {
    /// `Deployment`, `StatefulSet`, `Job`, ... (a ReplicaSet of a Deployment is named by its Deployment); `Pod` for
    /// a bare pod.
    pub kind: String,
    /// `namespace/name`.
    pub workload: String,
    pub pods: usize,
    pub gpus: i64,
}

impl fmt::Display for Bystander {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {} pods, {} GPUs", self.kind, self.workload, self.pods, self.gpus)
    }
}

/// The controller a pod belongs to, as people name it (`Deployment`, `ns/name`); `Pod` and its own name for a bare
/// pod.
pub fn owner_of(pod: &Pod) -> (String, String) {
    let namespace = pod.namespace().unwrap_or_default();
    let (kind, name) = match super::displacement::controller(pod) {
        Some((kind, name, _)) => (kind, name),
        None => ("Pod".to_string(), pod.name_any()),
    };
    (kind, format!("{namespace}/{name}"))
}

/// Whether a pod occupies its node for the accounting: bound, not finished, not a DaemonSet's or a mirror pod.
fn occupies(pod: &Pod) -> bool {
    !is_daemon_or_mirror(pod) && !is_finished(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// Each workload with pods among `on_prem` (the pods of the on-prem nodes before the fault), grouped by owner, less
/// the drilled workload's pods (`drilled` says which) and the protected namespaces.
pub fn bystanders(on_prem: &[Pod], drilled: impl Fn(&Pod) -> bool, protected: &[String]) -> Vec<Bystander> {
    let mut by_owner: BTreeMap<(String, String), Bystander> = BTreeMap::new();
    for pod in on_prem.iter().filter(|p| occupies(p) && !drilled(p)) {
        if protected.contains(&pod.namespace().unwrap_or_default()) {
            continue;
        }
        let (kind, workload) = owner_of(pod);
        let gpus = pod.spec.as_ref().map(pod_gpus).unwrap_or(0);
        let entry =
            by_owner.entry((kind.clone(), workload.clone())).or_insert(Bystander { kind, workload, pods: 0, gpus: 0 });
        entry.pods += 1;
        entry.gpus += gpus;
    }
    by_owner.into_values().collect()
}

/// What kind of difference from the state before the fault is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeftoverKind {
    /// A NodeClaim created after the drill started still exists: cloud capacity that bills.
    NodeClaim,
    /// A displaced workload still has pods off the on-prem nodes.
    WorkloadSplit,
}

/// One thing still different at the drill's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leftover {
    pub kind: LeftoverKind,
    /// `NodeClaim gpu-spot-x7k2p` or `Deployment batch/embeddings`.
    pub object: String,
    /// The NodeClaim's facts, for a NodeClaim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodeclaim: Option<ClaimFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_seconds: Option<i64>,
    /// From the drill's `pricing`, when it prices the instance type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dollars_per_hour: Option<f64>,
    /// The pods on the NodeClaim's node, or the workload's pods off the on-prem nodes, as `namespace/name`.
    #[serde(default)]
    pub pods: Vec<String>,
    /// The drill file declares it (`collateral.leave`): listed as expected.
    pub expected: bool,
    /// One line saying what is left.
    pub message: String,
}

impl Leftover {
    /// One line for the live output and the reports: `EXPECTED` or `LEFTOVER`, then what is left.
    pub fn line(&self) -> String {
        format!("{}: {}: {}", if self.expected { "expected" } else { "LEFTOVER" }, self.object, self.message)
    }
}

/// What the leftovers are judged from, read at the drill's end.
#[derive(Debug, Default)]
pub struct AtEnd {
    /// The names of the NodeClaims that existed before the fault.
    pub before: BTreeSet<String>,
    /// Every NodeClaim now.
    pub claims: Vec<ClaimFacts>,
    /// The pods of the drill-created NodeClaims' nodes and of the bystanders' namespaces.
    pub pods: Vec<Pod>,
    pub bystanders: Vec<Bystander>,
    pub on_prem_nodes: Vec<String>,
    /// The workloads the drill file leaves where they are (`collateral.leave`), as `namespace/name`.
    pub leave: Vec<String>,
    pub pricing: BTreeMap<String, f64>,
}

/// The NodeClaims created since the drill started (any pool): those not there before it.
pub fn caused<'a>(before: &'a BTreeSet<String>, claims: &'a [ClaimFacts]) -> impl Iterator<Item = &'a ClaimFacts> {
    claims.iter().filter(|c| !before.contains(&c.name))
}

/// The pods occupying `node`, as (`namespace/name`, owner's `namespace/name`).
pub fn pods_on<'a>(pods: &'a [Pod], node: &'a str) -> impl Iterator<Item = (String, String)> + 'a {
    pods.iter()
        .filter(move |p| occupies(p) && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .map(|p| (format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()), owner_of(p).1))
}

fn claim_leftover(claim: &ClaimFacts, at: &AtEnd, now: DateTime<Utc>) -> Leftover {
    let on: Vec<(String, String)> = claim.node.as_deref().map(|n| pods_on(&at.pods, n).collect()).unwrap_or_default();
    let expected = !on.is_empty() && on.iter().all(|(_, owner)| at.leave.contains(owner));
    let age = claim.created.map(|c| (now - c).num_seconds().max(0));
    let price = claim.instance_type.as_ref().and_then(|t| at.pricing.get(t)).copied();
    let pods: Vec<String> = on.into_iter().map(|(pod, _)| pod).collect();
    let mut message = format!("{} still running", claim.describe());
    if let Some(age) = age {
        message.push_str(&format!(", {}s old", age));
    }
    if let Some(price) = price {
        message.push_str(&format!(", ${price:.2}/hour"));
    }
    match pods.as_slice() {
        [] => message.push_str(", no pods on it (consolidation has not reclaimed it yet)"),
        _ => message.push_str(&format!(", running {}", pods.join(", "))),
    }
    if claim.deleting {
        message.push_str(", deleting");
    }
    Leftover {
        kind: LeftoverKind::NodeClaim,
        object: format!("NodeClaim {}", claim.name),
        nodeclaim: Some(claim.clone()),
        age_seconds: age,
        dollars_per_hour: price,
        pods,
        expected,
        message,
    }
}

fn split_leftover(b: &Bystander, at: &AtEnd) -> Option<Leftover> {
    let (namespace, _) = b.workload.split_once('/')?;
    let mine: Vec<&Pod> = at
        .pods
        .iter()
        .filter(|p| {
            occupies(p)
                && p.namespace().as_deref() == Some(namespace)
                && owner_of(p) == (b.kind.clone(), b.workload.clone())
        })
        .collect();
    let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
    let off: Vec<String> = mine
        .iter()
        .filter(|p| node(p).is_some_and(|n| !at.on_prem_nodes.contains(&n)))
        .map(|p| format!("{namespace}/{}", p.name_any()))
        .collect();
    if off.is_empty() {
        return None;
    }
    let home = mine.iter().filter(|p| node(p).is_some_and(|n| at.on_prem_nodes.contains(&n))).count();
    Some(Leftover {
        kind: LeftoverKind::WorkloadSplit,
        object: format!("{} {}", b.kind, b.workload),
        nodeclaim: None,
        age_seconds: None,
        dollars_per_hour: None,
        message: format!(
            "{home} of {} pods on-prem (before the fault: {}), {} off the on-prem nodes: {}",
            home + off.len(),
            b.pods,
            off.len(),
            off.join(", ")
        ),
        pods: off,
        expected: at.leave.contains(&b.workload),
    })
}

/// Everything still different at the end: each NodeClaim the drill caused, in any pool, and each displaced workload
/// with pods off the on-prem nodes. Expected when the drill file leaves every workload involved.
pub fn leftovers(at: &AtEnd, now: DateTime<Utc>) -> Vec<Leftover> {
    let claims = caused(&at.before, &at.claims).map(|c| claim_leftover(c, at, now));
    let splits = at.bystanders.iter().filter(|b| b.kind != "Pod").filter_map(|b| split_leftover(b, at));
    claims.chain(splits).collect()
}

/// One workload the fault displaces, grouped by owner, with the NodePools its pods may land on and why the others
/// are closed to them; read before the fault, for the plan, the confirmation and the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlastGroup {
    pub kind: String,
    pub workload: String,
    pub pods: usize,
    pub gpus: i64,
    /// `gpu-spot (spot, no GPU limit)`, one per NodePool its pods may land on.
    pub lands: Vec<String>,
    /// `gpu-fallback (requires karpenter.sh/capacity-type NotIn on-demand)`, one per NodePool closed to it.
    pub cannot: Vec<String>,
}

impl fmt::Display for BlastGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} pods, {} GPUs -> ", self.workload, self.pods, self.gpus)?;
        if self.kind == "Pod" {
            // No controller re-creates a bare pod: once the fault evicts or deletes it, it is gone, wherever it could
            // have landed.
            return f.write_str(
                "a bare pod: deleted for good, nothing re-creates it (on-prem's return does not bring it back)",
            );
        }
        match self.lands.as_slice() {
            [] => f.write_str("no NodePool: its pods stay Pending until on-prem returns")?,
            lands => f.write_str(&lands.join(", "))?,
        }
        if !self.cannot.is_empty() {
            write!(f, "; cannot use {}", self.cannot.join(", "))?;
        }
        Ok(())
    }
}

/// The capacity types a NodePool allows and its GPU limit: `spot, no GPU limit`, `on-demand, GPU limit 16`.
fn pool_terms(pool: &super::karpenter::NodePool) -> String {
    let template = pool.spec.template.clone().unwrap_or_default();
    let capacity = template
        .spec
        .requirements
        .iter()
        .find(|r| r.key == CAPACITY_TYPE_LABEL && r.operator == "In")
        .map(|r| r.values.join("/"))
        .unwrap_or_else(|| "any capacity type".into());
    let limit = pool.spec.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE)).and_then(as_integer);
    match limit {
        Some(l) => format!("{capacity}, GPU limit {l}"),
        None => format!("{capacity}, no GPU limit"),
    }
}

/// Why a pod of `spec` cannot land on the nodes of a pool of `shape`: its first unmet node selector, required
/// affinity expression, or untolerated taint; `None` when it may land there.
fn closed_because(spec: &k8s_openapi::api::core::v1::PodSpec, shape: &super::scheduling::NodeShape) -> Option<String> {
    if !shape.may_be_selected_by(spec) {
        let selector =
            spec.node_selector.iter().flatten().find(|(k, v)| !shape.may_satisfy(k, "In", std::slice::from_ref(v)));
        if let Some((k, v)) = selector {
            return Some(format!("requires {k}={v}"));
        }
        let required = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
        let terms = required.and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
        let unmet = terms
            .into_iter()
            .flat_map(|t| &t.node_selector_terms)
            .flat_map(|t| t.match_expressions.iter().flatten())
            .find(|r| !shape.may_satisfy(&r.key, &r.operator, r.values.as_deref().unwrap_or_default()));
        return Some(match unmet {
            Some(r) => format!("requires {} {} {}", r.key, r.operator, r.values.clone().unwrap_or_default().join(",")),
            None => "its required node affinity matches none of its nodes".into(),
        });
    }
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    let untolerated = shape.untolerated(&tolerations, |_| false);
    untolerated.first().map(|t| format!("does not tolerate its taint {}:{}", t.key, t.effect))
}

/// Every workload among `displaced` (the pods the fault moves), grouped by owner, with where each may land among
/// `pools` (every NodePool of the cluster).
pub fn blast_radius(displaced: &[Pod], pools: &[super::karpenter::NodePool]) -> Vec<BlastGroup> {
    let shapes: Vec<(String, super::scheduling::NodeShape, String)> =
        pools.iter().map(|p| (p.name_any(), super::scheduling::NodeShape::of_pool(p), pool_terms(p))).collect();
    let mut groups: BTreeMap<(String, String), BlastGroup> = BTreeMap::new();
    for pod in displaced.iter().filter(|p| occupies(p)) {
        let (kind, workload) = owner_of(pod);
        let spec = pod.spec.clone().unwrap_or_default();
        let group = groups.entry((kind.clone(), workload.clone())).or_insert_with(|| {
            let (mut lands, mut cannot) = (Vec::new(), Vec::new());
            for (name, shape, terms) in &shapes {
                match closed_because(&spec, shape) {
                    None => lands.push(format!("{name} ({terms})")),
                    Some(why) => cannot.push(format!("{name} ({why})")),
                }
            }
            BlastGroup { kind, workload, pods: 0, gpus: 0, lands, cannot }
        });
        group.pods += 1;
        group.gpus += pod_gpus(&spec);
    }
    groups.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ns: &str, node: &str, owner: Option<(&str, &str)>, gpus: i64) -> Pod {
        let owners = owner.map(|(kind, name)| {
            serde_json::json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": name, "controller": true}])
        });
        let hash = if owner.is_some_and(|(k, _)| k == "ReplicaSet") { "5d9c7" } else { "" };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns, "labels": {"pod-template-hash": hash},
                         "ownerReferences": owners.unwrap_or(serde_json::json!([]))},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    fn claim(name: &str, pool: &str, node: &str) -> ClaimFacts {
        let c: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "creationTimestamp": "2026-12-06T10:00:00Z", "labels": {
                NODEPOOL_LABEL: pool, INSTANCE_TYPE_LABEL: "g6.12xlarge", CAPACITY_TYPE_LABEL: "spot", ZONE_LABEL: "zone-a"}},
            "spec": {}, "status": {"nodeName": node, "capacity": {"nvidia.com/gpu": "4"}}
        }))
        .unwrap();
        ClaimFacts::of(&c)
    }

    #[test]
    fn bystanders_are_every_other_owner_on_the_on_prem_nodes_by_owner() {
        let on_prem = vec![
            pod("llm-5d9c7-a", "inference", "h1", Some(("ReplicaSet", "llm-5d9c7")), 4),
            pod("emb-5d9c7-a", "batch", "h1", Some(("ReplicaSet", "embeddings-5d9c7")), 2),
            pod("emb-5d9c7-b", "batch", "h2", Some(("ReplicaSet", "embeddings-5d9c7")), 2),
            pod("burn-in", "batch", "h2", None, 0),
            pod("dns", "kube-system", "h2", Some(("ReplicaSet", "coredns-5d9c7")), 0),
            pod("plugin", "batch", "h2", Some(("DaemonSet", "plugin")), 0),
        ];
        let drilled = |p: &Pod| p.namespace().as_deref() == Some("inference");
        let found: Vec<String> =
            bystanders(&on_prem, drilled, &["kube-system".into()]).iter().map(ToString::to_string).collect();
        assert_eq!(found, ["Deployment batch/embeddings: 2 pods, 4 GPUs", "Pod batch/burn-in: 1 pods, 0 GPUs"]);
    }

    #[test]
    fn a_claim_the_drill_caused_is_a_leftover_expected_only_when_its_workloads_are_left() {
        let at = |leave: Vec<String>| AtEnd {
            before: BTreeSet::from(["gpu-fallback-old".to_string()]),
            claims: vec![claim("gpu-fallback-old", "gpu-fallback", "fb-0"), claim("gpu-spot-x", "gpu-spot", "spot-1")],
            pods: vec![
                pod("emb-5d9c7-a", "batch", "spot-1", Some(("ReplicaSet", "embeddings-5d9c7")), 2),
                pod("emb-5d9c7-b", "batch", "h1", Some(("ReplicaSet", "embeddings-5d9c7")), 2),
            ],
            bystanders: vec![Bystander {
                kind: "Deployment".into(),
                workload: "batch/embeddings".into(),
                pods: 2,
                gpus: 4,
            }],
            on_prem_nodes: vec!["h1".into()],
            leave,
            pricing: BTreeMap::from([("g6.12xlarge".to_string(), 4.6)]),
        };
        let now = DateTime::parse_from_rfc3339("2026-12-06T10:05:00Z").unwrap().with_timezone(&Utc);
        let found = leftovers(&at(Vec::new()), now);
        let lines: Vec<String> = found.iter().map(Leftover::line).collect();
        assert_eq!(
            lines,
            [
                "LEFTOVER: NodeClaim gpu-spot-x: gpu-spot-x (gpu-spot, g6.12xlarge, spot, zone-a) still running, 300s \
                 old, $4.60/hour, running batch/emb-5d9c7-a",
                "LEFTOVER: Deployment batch/embeddings: 1 of 2 pods on-prem (before the fault: 2), 1 off the on-prem \
                 nodes: batch/emb-5d9c7-a",
            ]
        );
        assert_eq!(found[0].nodeclaim.as_ref().map(|c| c.gpus), Some(4));
        let left = leftovers(&at(vec!["batch/embeddings".into()]), now);
        assert!(left.iter().all(|l| l.expected), "{left:?}");
    }

    fn pool(name: &str, capacity: &str, limit: Option<&str>) -> crate::cluster::karpenter::NodePool {
        let limits = limit.map(|l| serde_json::json!({"nvidia.com/gpu": l}));
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"limits": limits, "template": {"metadata": {}, "spec": {
                "requirements": [{"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [capacity]}],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn the_blast_radius_names_where_each_displaced_workload_can_land_and_why_not_elsewhere() {
        let batch = |name: &str| {
            let mut p = pod(name, "batch", "h1", Some(("ReplicaSet", "embeddings-5d9c7")), 2);
            let spec = p.spec.as_mut().unwrap();
            spec.tolerations = Some(vec![
                serde_json::from_value(
                    serde_json::json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
                )
                .unwrap(),
            ]);
            spec.affinity = Some(
                serde_json::from_value(serde_json::json!({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": CAPACITY_TYPE_LABEL, "operator": "NotIn", "values": ["on-demand"]}]}]}}}))
                .unwrap(),
            );
            p
        };
        let untolerant = pod("cache-1", "batch", "h1", Some(("ReplicaSet", "cache-5d9c7")), 0);
        let pools = [pool("gpu-fallback", "on-demand", Some("16")), pool("gpu-spot", "spot", None)];
        let groups: Vec<String> = blast_radius(&[batch("emb-a"), batch("emb-b"), untolerant], &pools)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            groups,
            [
                "batch/cache: 1 pods, 0 GPUs -> no NodePool: its pods stay Pending until on-prem returns; cannot use \
                 gpu-fallback (does not tolerate its taint nvidia.com/gpu:NoSchedule), gpu-spot (does not tolerate its \
                 taint nvidia.com/gpu:NoSchedule)",
                "batch/embeddings: 2 pods, 4 GPUs -> gpu-spot (spot, no GPU limit); cannot use gpu-fallback (requires \
                 karpenter.sh/capacity-type NotIn on-demand)",
            ]
        );
        let bare = blast_radius(&[pod("debug", "ops", "h1", None, 0)], &pools);
        assert_eq!(
            bare[0].to_string(),
            "ops/debug: 1 pods, 0 GPUs -> a bare pod: deleted for good, nothing re-creates it (on-prem's return does \
             not bring it back)"
        );
    }
}
