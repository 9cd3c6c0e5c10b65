//! Why the fallback is not reclaimed yet, read while the drill waits for it: a NodePool disruption budget at 0 now,
//! a pod with `karpenter.sh/do-not-disrupt`, a PodDisruptionBudget that allows no eviction of a pod still on a
//! fallback node, and Karpenter's own `DisruptionBlocked` events. Each is judged from what the API answers (a pure
//! function of the objects read), so a reclaim that times out names its cause.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Event as KubeEvent, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::cluster::Reader;
use crate::cluster::karpenter::NodePool;
use crate::cluster::nodepool_budgets::{Budgets, Reason};
use crate::cluster::scheduling::selector_matches;
use crate::domain::BlockerCause;

/// The annotation with which a pod keeps Karpenter from disrupting its node voluntarily.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// How far ahead a budget's closed window is looked for, to say when it opens.
const HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

/// One reason a fallback node stays.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Blocker {
    pub node: Option<String>,
    pub cause: BlockerCause,
    pub object: String,
    pub message: String,
}

impl Blocker {
    /// One line for the live output and a timed-out step's message.
    pub fn line(&self) -> String {
        match &self.node {
            Some(node) => format!("{node}: {}: {}", self.object, self.message),
            None => format!("{}: {}", self.object, self.message),
        }
    }
}

/// What the blockers are judged from: the fallback pools and their nodes, the pods on those nodes, the budgets of
/// those pods' namespaces and Karpenter's events since the drill started.
#[derive(Debug, Default)]
pub struct Observed {
    pub pools: Vec<NodePool>,
    /// Fallback node -> its NodePool.
    pub nodes: BTreeMap<String, String>,
    /// Fallback node -> its NodeClaim, to match Karpenter's events on either.
    pub claims: BTreeMap<String, String>,
    pub pods: Vec<Pod>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub events: Vec<KubeEvent>,
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Whether a pod still holds its node: bound there, not finished, not a DaemonSet's (Karpenter ignores those).
fn holds_node(pod: &Pod) -> bool {
    let finished =
        pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|p| p == "Succeeded" || p == "Failed");
    let daemon = pod.owner_references().iter().any(|o| o.kind == "DaemonSet");
    !finished && !daemon && pod.metadata.deletion_timestamp.is_none()
}

fn budget_blockers(o: &Observed, now: DateTime<Utc>, out: &mut Vec<Blocker>) {
    for pool in &o.pools {
        let name = pool.name_any();
        let count = o.nodes.values().filter(|p| **p == name).count() as u32;
        if count == 0 {
            continue;
        }
        let disruption = pool.spec.disruption.as_ref();
        let Ok(budgets) = Budgets::parse(disruption) else { continue };
        let allowance = budgets.allowed(count, Reason::Empty, now);
        if !allowance.blocks() {
            continue;
        }
        let binding = allowance.binding.map(|i| Budgets::describe(disruption, i)).unwrap_or_default();
        let opens = match budgets.next_opening(count, Reason::Empty, now, HORIZON) {
            Some(w) => format!("reclaim is allowed from {}", stamp(w.opens)),
            None => "and no window within a week allows it".into(),
        };
        out.push(Blocker {
            node: None,
            cause: BlockerCause::NodepoolBudget,
            object: format!("NodePool {name}"),
            message: format!("{binding} allows 0 of its {count} nodes to be disrupted now; {opens}"),
        });
    }
}

fn pod_blockers(o: &Observed, out: &mut Vec<Blocker>) {
    for pod in o.pods.iter().filter(|p| holds_node(p)) {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| o.nodes.contains_key(n)) else {
            continue;
        };
        let name = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        if pod.annotations().get(DO_NOT_DISRUPT).is_some_and(|v| v == "true") {
            out.push(Blocker {
                node: Some(node.clone()),
                cause: BlockerCause::DoNotDisrupt,
                object: format!("pod {name}"),
                message: format!("has {DO_NOT_DISRUPT}: \"true\": Karpenter does not disrupt its node while it runs"),
            });
        }
        let covering = o.pdbs.iter().filter(|b| {
            b.namespace() == pod.namespace()
                && b.spec.as_ref().and_then(|s| s.selector.as_ref()).is_some_and(|s| selector_matches(s, pod.labels()))
        });
        for pdb in covering.filter(|b| b.status.as_ref().is_none_or(|s| s.disruptions_allowed == 0)) {
            out.push(Blocker {
                node: Some(node.clone()),
                cause: BlockerCause::PodDisruptionBudget,
                object: format!("PodDisruptionBudget {}/{}", pdb.namespace().unwrap_or_default(), pdb.name_any()),
                message: format!("allows 0 disruptions, and covers pod {name}: its node cannot be drained"),
            });
        }
    }
}

fn event_blockers(o: &Observed, out: &mut Vec<Blocker>) {
    for ev in o.events.iter().filter(|e| e.reason.as_deref() == Some("DisruptionBlocked")) {
        let kind = ev.involved_object.kind.clone().unwrap_or_default();
        let name = ev.involved_object.name.clone().unwrap_or_default();
        let node = match kind.as_str() {
            "Node" => o.nodes.contains_key(&name).then(|| name.clone()),
            "NodeClaim" => o.claims.iter().find(|(_, c)| **c == name).map(|(n, _)| n.clone()),
            _ => None,
        };
        if let Some(node) = node {
            out.push(Blocker {
                node: Some(node),
                cause: BlockerCause::KarpenterEvent,
                object: format!("{kind}/{name}"),
                message: ev.message.clone().unwrap_or_default(),
            });
        }
    }
}

/// Every blocker the objects show at `now`, in a stable order, without repeats.
pub fn find(o: &Observed, now: DateTime<Utc>) -> Vec<Blocker> {
    let mut out = Vec::new();
    budget_blockers(o, now, &mut out);
    pod_blockers(o, &mut out);
    event_blockers(o, &mut out);
    out.sort();
    out.dedup();
    out
}

/// Reads what [`find`] judges: `nodes` (fallback node -> pool) and `claims` (node -> NodeClaim) come from the
/// drill's watches; the pools, pods, budgets and events are read now. Events older than `since` are left out.
pub async fn observe(
    reader: &Reader,
    nodes: BTreeMap<String, String>,
    claims: BTreeMap<String, String>,
    since: DateTime<Utc>,
) -> Result<Observed, kube::Error> {
    let client = reader.client().clone();
    let mut pools = Api::<NodePool>::all(client.clone()).list(&ListParams::default()).await?.items;
    pools.retain(|p| nodes.values().any(|n| *n == p.name_any()));
    let mut pods = Vec::new();
    for node in nodes.keys() {
        pods.extend(reader.pods_on(node).await?);
    }
    let mut pdbs = Vec::new();
    let namespaces: std::collections::BTreeSet<String> = pods.iter().filter_map(|p| p.namespace()).collect();
    for ns in namespaces {
        pdbs.extend(
            Api::<PodDisruptionBudget>::namespaced(client.clone(), &ns).list(&ListParams::default()).await?.items,
        );
    }
    // Karpenter records events of cluster-scoped objects (nodes, NodeClaims) in the default namespace.
    let params = ListParams::default().fields("reason=DisruptionBlocked");
    let mut events = Api::<KubeEvent>::namespaced(client, "default").list(&params).await?.items;
    events.retain(|e| {
        let t = e.last_timestamp.as_ref().map(|t| &t.0).or_else(|| e.event_time.as_ref().map(|t| &t.0));
        t.is_none_or(|t| crate::cluster::to_utc(t) >= since - chrono::Duration::seconds(1))
    });
    Ok(Observed { pools, nodes, claims, pods, pdbs, events })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    /// The recorded answers of a reclaim held four ways: gpu-fallback's budget at 0 in a window covering now, a pod
    /// with do-not-disrupt, a budget allowing 0 disruptions over a pod still on the node, and Karpenter's event.
    fn held() -> Observed {
        let pool: NodePool = obj(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu-fallback"},
            "spec": {"disruption": {"budgets": [{"nodes": "100%"}, {"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}]}}
        }));
        let pod = |name: &str, annotations: serde_json::Value| -> Pod {
            obj(serde_json::json!({
                "metadata": {"name": name, "namespace": "batch", "labels": {"app": name}, "annotations": annotations},
                "spec": {"nodeName": "fb-1", "containers": []}, "status": {"phase": "Running"}
            }))
        };
        let pdb: PodDisruptionBudget = obj(serde_json::json!({
            "metadata": {"name": "trainer", "namespace": "batch"},
            "spec": {"selector": {"matchLabels": {"app": "trainer"}}}, "status": {"disruptionsAllowed": 0,
              "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
        }));
        let event: KubeEvent = obj(serde_json::json!({
            "metadata": {"name": "e", "namespace": "default"}, "reason": "DisruptionBlocked",
            "involvedObject": {"kind": "NodeClaim", "name": "gpu-fallback-abc"},
            "message": "Node is deleting or marked for deletion"
        }));
        Observed {
            pools: vec![pool],
            nodes: [("fb-1".to_string(), "gpu-fallback".to_string())].into(),
            claims: [("fb-1".to_string(), "gpu-fallback-abc".to_string())].into(),
            pods: vec![
                pod("keeper", serde_json::json!({DO_NOT_DISRUPT: "true"})),
                pod("trainer", serde_json::json!({})),
            ],
            pdbs: vec![pdb],
            events: vec![event],
        }
    }

    #[test]
    fn each_blocker_is_named_with_its_object_and_the_budget_window() {
        let noon = DateTime::parse_from_rfc3339("2026-12-07T12:00:00Z").unwrap().with_timezone(&Utc);
        let found = find(&held(), noon);
        let causes: Vec<(BlockerCause, &str)> = found.iter().map(|b| (b.cause, b.object.as_str())).collect();
        assert_eq!(
            causes,
            [
                (BlockerCause::NodepoolBudget, "NodePool gpu-fallback"),
                (BlockerCause::DoNotDisrupt, "pod batch/keeper"),
                (BlockerCause::PodDisruptionBudget, "PodDisruptionBudget batch/trainer"),
                (BlockerCause::KarpenterEvent, "NodeClaim/gpu-fallback-abc"),
            ]
        );
        assert!(found[0].message.contains("allows 0 of its 1 nodes"), "{}", found[0].message);
        assert!(found[0].message.contains("allowed from 2026-12-07T17:00:00Z"), "{}", found[0].message);
        assert_eq!(found[3].node.as_deref(), Some("fb-1"));
        // In the evening the budget no longer holds; the pods still do.
        let evening = DateTime::parse_from_rfc3339("2026-12-07T19:00:00Z").unwrap().with_timezone(&Utc);
        assert!(find(&held(), evening).iter().all(|b| b.cause != BlockerCause::NodepoolBudget));
    }
}
