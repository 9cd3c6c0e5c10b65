//! The watches that feed the timeline and the view: target nodes, workload pods, the fallback and its events.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Event as KubeEvent, Node, Pod};
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::view::{ClaimState, NodeState, PodState, SharedView, claim_transitions, node_transitions, pod_transitions};
use super::{ConditionStatus, Event, NodeRole, Timeline};
use crate::cluster::autoscaler::{WorkloadScale, controller_resource, hpa_state};
use crate::cluster::collateral::ClaimFacts;
use crate::cluster::karpenter::{GPU_RESOURCE, NODEPOOL_LABEL, NodeClaim, NodePool};
use crate::cluster::quantity::as_integer;
use crate::cluster::{Cluster, to_utc};
use crate::drill::Drill;

/// What one kind of watched object does to the view and the timeline.
trait Handler<K>: Send + 'static {
    fn resource(&self) -> String;
    /// `baseline` is true during the first listing: state is taken, transitions are not recorded.
    fn apply(&mut self, obj: &K, baseline: bool);
    fn delete(&mut self, name: &str);
    fn known(&self) -> Vec<String>;
}

struct Ctx {
    view: SharedView,
    timeline: Timeline,
}

impl Ctx {
    fn record(&self, transitions: Vec<(Event, Option<DateTime<Utc>>)>) {
        for (event, server_time) in transitions {
            self.timeline.record_at(event, server_time);
        }
    }
}

struct Nodes {
    ctx: Ctx,
    role: NodeRole,
}

impl Handler<Node> for Nodes {
    fn resource(&self) -> String {
        format!("{} nodes", super::role_name(self.role))
    }
    fn apply(&mut self, node: &Node, baseline: bool) {
        let after = NodeState::from_node(node, self.role);
        let transitions = self.ctx.view.update(|v| {
            let t = node_transitions(v.nodes.get(&after.name), &after);
            v.nodes.insert(after.name.clone(), after);
            t
        });
        if !baseline {
            self.ctx.record(transitions);
        }
    }
    fn delete(&mut self, name: &str) {
        if self.ctx.view.update(|v| v.nodes.remove(name)).is_some() {
            self.ctx.timeline.record(Event::NodeDeleted { node: name.into(), role: self.role });
        }
    }
    fn known(&self) -> Vec<String> {
        self.ctx.view.read(|v| v.nodes.values().filter(|n| n.role == self.role).map(|n| n.name.clone()).collect())
    }
}

struct Pods {
    ctx: Ctx,
}

impl Handler<Pod> for Pods {
    fn resource(&self) -> String {
        "workload pods".into()
    }
    fn apply(&mut self, pod: &Pod, baseline: bool) {
        let after = PodState::from_pod(pod);
        let transitions = self.ctx.view.update(|v| {
            let t = pod_transitions(v.pods.get(&after.name), &after, |n| v.role_of(n));
            v.pods.insert(after.name.clone(), after);
            t
        });
        if !baseline {
            self.ctx.record(transitions);
        }
    }
    fn delete(&mut self, name: &str) {
        let gone = self.ctx.view.update(|v| {
            v.pods.remove(name).map(|p| {
                let node = p.node.unwrap_or_default();
                let role = v.role_of(&node);
                (node, role)
            })
        });
        if let Some((node, role)) = gone {
            self.ctx.timeline.record(Event::PodDeleted { pod: name.into(), node, role });
        }
    }
    fn known(&self) -> Vec<String> {
        self.ctx.view.read(|v| v.pods.keys().cloned().collect())
    }
}

struct Claims {
    ctx: Ctx,
}

impl Handler<NodeClaim> for Claims {
    fn resource(&self) -> String {
        "fallback NodeClaims".into()
    }
    fn apply(&mut self, claim: &NodeClaim, baseline: bool) {
        let after = ClaimState::from_claim(claim);
        let transitions = self.ctx.view.update(|v| {
            let t = claim_transitions(v.claims.get(&after.name), &after);
            v.claims.insert(after.name.clone(), after);
            t
        });
        if !baseline {
            self.ctx.record(transitions);
        }
    }
    fn delete(&mut self, name: &str) {
        if self.ctx.view.update(|v| v.claims.remove(name)).is_some() {
            self.ctx.timeline.record(Event::NodeClaimDeleted { nodeclaim: name.into() });
        }
    }
    fn known(&self) -> Vec<String> {
        self.ctx.view.read(|v| v.claims.keys().cloned().collect())
    }
}

/// The NodeClaims of every other NodePool: capacity the fault's collateral causes (a displaced batch job's Spot
/// node). Each one created during the run is recorded when created, when Initialized and when gone.
struct OtherClaims {
    ctx: Ctx,
    /// Created during the run, by name: Initialized already, and the facts last read.
    created: BTreeMap<String, (bool, ClaimFacts)>,
    /// Those there before the run: not its doing.
    existing: HashSet<String>,
}

impl Handler<NodeClaim> for OtherClaims {
    fn resource(&self) -> String {
        "other NodePools' NodeClaims".into()
    }
    fn apply(&mut self, claim: &NodeClaim, baseline: bool) {
        let name = claim.name_any();
        if baseline && !self.created.contains_key(&name) {
            self.existing.insert(name);
            return;
        }
        if self.existing.contains(&name) {
            return;
        }
        let initialized = claim.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| c.type_ == "Initialized" && ConditionStatus::parse(&c.status).is_true())
        });
        let milestone = match self.created.get(&name) {
            None => Some("created"),
            Some((false, _)) if initialized => Some("initialized"),
            Some(_) => None,
        };
        let facts = ClaimFacts::of(claim);
        self.created.insert(name, (initialized, facts.clone()));
        if let Some(milestone) = milestone {
            self.ctx.timeline.record(Event::CollateralNodeClaim { claim: facts, milestone: milestone.into() });
        }
    }
    fn delete(&mut self, name: &str) {
        if let Some((_, claim)) = self.created.remove(name) {
            self.ctx.timeline.record(Event::CollateralNodeClaim { claim, milestone: "deleted".into() });
        }
    }
    fn known(&self) -> Vec<String> {
        self.created.keys().cloned().collect()
    }
}

struct Pools {
    ctx: Ctx,
    wanted: Vec<String>,
    /// Per fallback NodePool: its GPUs, its GPU limit and whether it is Ready.
    state: BTreeMap<String, (i64, Option<i64>, Option<bool>)>,
}

impl Pools {
    /// The fallback as one: GPUs summed, a limit only if every pool has one, Ready only if every pool is.
    fn publish(&self) {
        let present = !self.state.is_empty();
        let gpus = self.state.values().map(|s| s.0).sum::<i64>();
        let limit = self.state.values().map(|s| s.1).sum::<Option<i64>>();
        let ready = self.state.values().map(|s| s.2).try_fold(true, |all, r| r.map(|r| all && r));
        self.ctx.view.update(|v| {
            v.pool_gpus = present.then_some(gpus);
            v.pool_limit_gpus = limit.filter(|_| present);
            v.pool_ready = ready.filter(|_| present);
        });
    }
}

impl Handler<NodePool> for Pools {
    fn resource(&self) -> String {
        "fallback NodePool".into()
    }
    fn apply(&mut self, pool: &NodePool, _baseline: bool) {
        let name = pool.metadata.name.clone().unwrap_or_default();
        if !self.wanted.contains(&name) {
            return;
        }
        let status = pool.status.clone().unwrap_or_default();
        let gpus = status.resources.get(GPU_RESOURCE).and_then(as_integer).unwrap_or(0);
        let limit = pool.spec.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE)).and_then(as_integer);
        let ready =
            status.conditions.iter().find(|c| c.type_ == "Ready").map(|c| ConditionStatus::parse(&c.status).is_true());
        self.state.insert(name, (gpus, limit, ready));
        self.publish();
    }
    fn delete(&mut self, name: &str) {
        self.state.remove(name);
        self.publish();
    }
    fn known(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The HPA that scales the workload (its own, or the one KEDA made for its ScaledObject): each change of its bounds
/// is on the timeline.
struct Autoscalers {
    ctx: Ctx,
    last: Option<(u32, u32)>,
}

impl Handler<HorizontalPodAutoscaler> for Autoscalers {
    fn resource(&self) -> String {
        "the workload's HorizontalPodAutoscaler".into()
    }
    fn apply(&mut self, hpa: &HorizontalPodAutoscaler, baseline: bool) {
        let (min_replicas, max_replicas, _) = hpa_state(hpa);
        if !baseline && self.last != Some((min_replicas, max_replicas)) {
            self.ctx.timeline.record(Event::AutoscalerChanged { name: hpa.name_any(), min_replicas, max_replicas });
        }
        self.last = Some((min_replicas, max_replicas));
    }
    fn delete(&mut self, name: &str) {
        self.ctx.timeline.record(Event::Warning {
            message: format!("the workload's HorizontalPodAutoscaler {name} was deleted during the run"),
        });
    }
    fn known(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The workload's controller: its `spec.replicas`, which its autoscaler sets, is what `readyPods` is judged against.
struct ScaleTarget {
    ctx: Ctx,
    target: String,
    last: Option<u32>,
}

impl Handler<DynamicObject> for ScaleTarget {
    fn resource(&self) -> String {
        self.target.clone()
    }
    fn apply(&mut self, obj: &DynamicObject, baseline: bool) {
        let Some(replicas) = obj.data["spec"]["replicas"].as_u64().and_then(|r| u32::try_from(r).ok()) else { return };
        self.ctx.view.update(|v| v.replicas.now = Some(replicas));
        if !baseline && self.last != Some(replicas) {
            self.ctx.timeline.record(Event::ReplicasChanged { target: self.target.clone(), replicas });
        }
        self.last = Some(replicas);
    }
    fn delete(&mut self, _name: &str) {}
    fn known(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Kubernetes Events about the workload and the NodeClaims, from the drill's start on.
struct KubeEvents {
    ctx: Ctx,
    scope: String,
    seen: HashSet<(String, i32)>,
}

impl Handler<KubeEvent> for KubeEvents {
    fn resource(&self) -> String {
        format!("events ({})", self.scope)
    }
    fn apply(&mut self, ev: &KubeEvent, _baseline: bool) {
        let time = ev
            .event_time
            .as_ref()
            .map(|t| to_utc(&t.0))
            .or_else(|| ev.last_timestamp.as_ref().map(|t| to_utc(&t.0)))
            .or_else(|| ev.first_timestamp.as_ref().map(|t| to_utc(&t.0)))
            .or_else(|| ev.metadata.creation_timestamp.as_ref().map(|t| to_utc(&t.0)));
        // Events have whole-second times: keep those from the second the drill started.
        let since = self.ctx.timeline.started_at() - chrono::Duration::seconds(1);
        if time.is_none_or(|t| t < since) {
            return;
        }
        let key = (ev.metadata.uid.clone().unwrap_or_default(), ev.count.unwrap_or(1));
        if !self.seen.insert(key) {
            return;
        }
        self.ctx.timeline.record_at(
            Event::KubeEvent {
                object: event_object(ev),
                reason: ev.reason.clone().unwrap_or_default(),
                message: ev.message.clone().unwrap_or_default(),
            },
            time,
        );
    }
    fn delete(&mut self, _name: &str) {}
    fn known(&self) -> Vec<String> {
        Vec::new()
    }
}

/// `Kind/name` of the object an event is about. Some controllers' events name their object by uid only (Karpenter's
/// `Finalized` on a NodeClaim gone by then): the uid, rather than an empty name, still ties the event to the object in
/// the timeline.
fn event_object(ev: &KubeEvent) -> String {
    let object = &ev.involved_object;
    let name = object.name.clone().filter(|n| !n.is_empty());
    let name = name.or_else(|| object.uid.clone().filter(|u| !u.is_empty()).map(|u| format!("uid:{u}")));
    format!("{}/{}", object.kind.clone().unwrap_or_default(), name.unwrap_or_default())
}

/// The running watches; dropping them stops them.
pub struct Watches {
    handles: Vec<JoinHandle<()>>,
    synced: tokio::sync::mpsc::Receiver<String>,
    sender: tokio::sync::mpsc::Sender<String>,
    pending: usize,
}

impl Watches {
    pub fn start(cluster: &Cluster, drill: &Drill, view: &SharedView, timeline: &Timeline) -> Watches {
        let client = &cluster.client;
        let targets = &drill.spec.targets;
        let fallback_pools = targets.fallback.node_pools.clone();
        let (tx, synced) = tokio::sync::mpsc::channel(16);
        let ctx = || Ctx { view: view.clone(), timeline: timeline.clone() };
        let mut handles = Vec::new();
        let fallback_label = targets.fallback.label_selector();

        let nodes: Api<Node> = Api::all(client.clone());
        handles.push(spawn(
            nodes.clone(),
            watcher::Config::default().labels(targets.on_prem.nodes.as_str()),
            Nodes { ctx: ctx(), role: NodeRole::OnPrem },
            tx.clone(),
        ));
        handles.push(spawn(
            nodes,
            watcher::Config::default().labels(&fallback_label),
            Nodes { ctx: ctx(), role: NodeRole::Fallback },
            tx.clone(),
        ));
        let pods: Api<Pod> = Api::namespaced(client.clone(), &targets.workload.namespace);
        handles.push(spawn(
            pods,
            watcher::Config::default().labels(targets.workload.selector.as_str()),
            Pods { ctx: ctx() },
            tx.clone(),
        ));
        let claims: Api<NodeClaim> = Api::all(client.clone());
        handles.push(spawn(
            claims,
            watcher::Config::default().labels(&fallback_label),
            Claims { ctx: ctx() },
            tx.clone(),
        ));
        // Every other pool's: a NodePool label outside the fallback's.
        let others = format!("{NODEPOOL_LABEL},{NODEPOOL_LABEL} notin ({})", fallback_pools.join(","));
        handles.push(spawn(
            Api::<NodeClaim>::all(client.clone()),
            watcher::Config::default().labels(&others),
            OtherClaims { ctx: ctx(), created: BTreeMap::new(), existing: HashSet::new() },
            tx.clone(),
        ));
        let pools: Api<NodePool> = Api::all(client.clone());
        // One NodePool by its name; several as a list, the others ignored.
        let config = match fallback_pools.as_slice() {
            [one] => watcher::Config::default().fields(&format!("metadata.name={one}")),
            _ => watcher::Config::default(),
        };
        handles.push(spawn(
            pools,
            config,
            Pools { ctx: ctx(), wanted: fallback_pools, state: BTreeMap::new() },
            tx.clone(),
        ));
        let ns_events: Api<KubeEvent> = Api::namespaced(client.clone(), &targets.workload.namespace);
        let scope = targets.workload.namespace.clone();
        handles.push(spawn(
            ns_events,
            watcher::Config::default(),
            KubeEvents { ctx: ctx(), scope, seen: HashSet::new() },
            tx.clone(),
        ));
        // Events of cluster-scoped objects such as NodeClaims are recorded in the default namespace.
        let claim_events: Api<KubeEvent> = Api::namespaced(client.clone(), "default");
        let cfg = watcher::Config::default().fields("involvedObject.kind=NodeClaim");
        handles.push(spawn(
            claim_events,
            cfg,
            KubeEvents { ctx: ctx(), scope: "NodeClaims".into(), seen: HashSet::new() },
            tx.clone(),
        ));
        let pending = handles.len();
        Watches { handles, synced, sender: tx, pending }
    }

    /// Also follows the workload's controller's replicas and its autoscaler's HPA, if any, in the workload's
    /// namespace (see [`ScaleTarget`] and [`Autoscalers`]); before [`Watches::synced`].
    pub fn follow_scale(
        &mut self,
        cluster: &Cluster,
        drill: &Drill,
        scale: &WorkloadScale,
        view: &SharedView,
        timeline: &Timeline,
    ) {
        let namespace = &drill.spec.targets.workload.namespace;
        let ctx = || Ctx { view: view.clone(), timeline: timeline.clone() };
        if let Some((kind, name)) = scale.target_ref()
            && let Some(resource) = controller_resource(kind)
        {
            let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), namespace, &resource);
            let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
            let target = ScaleTarget { ctx: ctx(), target: format!("{kind}/{name}"), last: None };
            self.handles.push(spawn(api, config, target, self.sender.clone()));
            self.pending += 1;
        }
        if let Some(hpa) = scale.autoscaler.as_ref().and_then(|a| a.hpa.as_deref()) {
            let api: Api<HorizontalPodAutoscaler> = Api::namespaced(cluster.client.clone(), namespace);
            let config = watcher::Config::default().fields(&format!("metadata.name={hpa}"));
            self.handles.push(spawn(api, config, Autoscalers { ctx: ctx(), last: None }, self.sender.clone()));
            self.pending += 1;
        }
    }

    /// Waits until every watch has listed its objects once, so the view is complete.
    pub async fn synced(&mut self, within: Duration) -> Result<(), SyncError> {
        let deadline = tokio::time::Instant::now() + within;
        while self.pending > 0 {
            match tokio::time::timeout_at(deadline, self.synced.recv()).await {
                Ok(Some(_)) => self.pending -= 1,
                Ok(None) => return Err(SyncError::Stopped),
                Err(_) => return Err(SyncError::NotListed { pending: self.pending, seconds: within.as_secs() }),
            }
        }
        Ok(())
    }
}

/// Why the view never became complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    #[error("the watches stopped before listing")]
    Stopped,
    #[error("{pending} watches had not listed after {seconds}s")]
    NotListed { pending: usize, seconds: u64 },
}

impl Drop for Watches {
    fn drop(&mut self) {
        for h in &self.handles {
            h.abort();
        }
    }
}

fn spawn<K, H>(
    api: Api<K>,
    config: watcher::Config,
    mut handler: H,
    synced: tokio::sync::mpsc::Sender<String>,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    H: Handler<K> + HasTimeline,
{
    tokio::spawn(async move {
        let mut stream = watcher(api, config).default_backoff().boxed();
        let mut baseline = true;
        let mut listed = HashSet::new();
        let mut in_gap = false;
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(event) => event,
                Err(e) => {
                    if !in_gap {
                        in_gap = true;
                        let error = crate::cluster::first_line(&e.to_string());
                        handler.timeline().record(Event::WatchGap { resource: handler.resource(), error });
                    }
                    continue;
                }
            };
            if in_gap {
                in_gap = false;
                handler.timeline().record(Event::WatchResumed { resource: handler.resource() });
            }
            match event {
                watcher::Event::Init => listed.clear(),
                watcher::Event::InitApply(obj) => {
                    listed.insert(obj.name_any());
                    handler.apply(&obj, baseline);
                }
                watcher::Event::InitDone => {
                    // A relist after a gap: whatever vanished meanwhile was deleted.
                    for name in handler.known() {
                        if !listed.contains(&name) {
                            handler.delete(&name);
                        }
                    }
                    if baseline {
                        baseline = false;
                        let _ = synced.send(handler.resource()).await;
                    }
                }
                watcher::Event::Apply(obj) => handler.apply(&obj, false),
                watcher::Event::Delete(obj) => handler.delete(&obj.name_any()),
            }
        }
    })
}

trait HasTimeline {
    fn timeline(&self) -> &Timeline;
}

macro_rules! has_timeline {
    ($($t:ty),*) => {$(impl HasTimeline for $t { fn timeline(&self) -> &Timeline { &self.ctx.timeline } })*};
}
has_timeline!(Nodes, Pods, Claims, OtherClaims, Pools, KubeEvents, Autoscalers, ScaleTarget);

#[cfg(test)]
mod tests {
    use super::*;

    fn event(involved: serde_json::Value) -> KubeEvent {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "e"}, "involvedObject": involved})).unwrap()
    }

    #[test]
    fn an_event_naming_its_object_by_uid_only_keeps_the_uid() {
        let named = event(serde_json::json!({"kind": "NodeClaim", "name": "gpu-fallback-x7k2p", "uid": "1f2e"}));
        assert_eq!(event_object(&named), "NodeClaim/gpu-fallback-x7k2p");
        let by_uid = event(serde_json::json!({"kind": "NodeClaim", "name": "", "uid": "1f2e"}));
        assert_eq!(event_object(&by_uid), "NodeClaim/uid:1f2e");
        let nameless = event(serde_json::json!({"kind": "NodeClaim"}));
        assert_eq!(event_object(&nameless), "NodeClaim/");
        assert_eq!(
            Event::KubeEvent { object: event_object(&nameless), reason: "Finalized".into(), message: "done".into() }
                .describe(),
            "event Finalized on a NodeClaim it does not name: done"
        );
    }
}
