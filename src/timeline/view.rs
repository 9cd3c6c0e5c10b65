//! The current state of the drilled objects, kept by the watches, and the transitions between two states.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};

use super::{ConditionStatus, ContainerStart, Event, NodeRole};
use crate::cluster::karpenter::{ClaimCondition, GPU_RESOURCE, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, NodeClaim};
use crate::cluster::quantity::as_integer;
use crate::cluster::to_utc;

/// A transition seen by a watch: what changed and the object's own time for it.
pub type Transition = (Event, Option<DateTime<Utc>>);

/// The state of the drilled objects before anything is touched (or before an incident was seen).
pub fn baseline(v: &ClusterView, fallback_gpu_limit: Option<i64>) -> Event {
    Event::Baseline {
        on_prem_nodes: v.on_prem_nodes().count(),
        workload_pods: v.pods.len(),
        ready_pods: v.ready_pods(),
        fallback_nodeclaims: v.claims.len(),
        fallback_nodes: v.fallback_nodes().count(),
        fallback_gpu_limit,
        on_prem_pods: v
            .live_pods()
            .filter(|p| p.node.as_deref().is_some_and(|n| v.role_of(n) == NodeRole::OnPrem))
            .map(|p| p.name.clone())
            .collect(),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeState {
    pub name: String,
    pub role: NodeRole,
    pub ready: ConditionStatus,
    pub ready_since: Option<DateTime<Utc>>,
    pub schedulable: bool,
    pub gpus: i64,
    /// `nvidia.com/gpu` capacity: allocatable below it on a Ready node is GPUs the device plugin marked unhealthy.
    pub gpu_capacity: i64,
    pub instance_type: Option<String>,
    pub node_pool: Option<String>,
    pub created: Option<DateTime<Utc>>,
    pub taints: Vec<(String, String, Option<DateTime<Utc>>)>,
    pub run_annotation: Option<String>,
}

impl NodeState {
    pub fn from_node(node: &Node, role: NodeRole) -> NodeState {
        let meta = &node.metadata;
        let status = node.status.as_ref();
        let ready = crate::cluster::readiness::ready_condition(node)
            .map(|c| (ConditionStatus::parse(&c.status), c.last_transition_time.as_ref().map(|t| to_utc(&t.0))));
        let gpus = status
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get(GPU_RESOURCE))
            .and_then(as_integer)
            .unwrap_or(0);
        let gpu_capacity = status
            .and_then(|s| s.capacity.as_ref())
            .and_then(|a| a.get(GPU_RESOURCE))
            .and_then(as_integer)
            .unwrap_or(0);
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| (t.key.clone(), t.effect.clone(), t.time_added.as_ref().map(|x| to_utc(&x.0))))
                    .collect()
            })
            .unwrap_or_default();
        NodeState {
            name: meta.name.clone().unwrap_or_default(),
            role,
            ready: ready.map(|r| r.0).unwrap_or_default(),
            ready_since: ready.and_then(|r| r.1),
            schedulable: !node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            gpus,
            gpu_capacity,
            instance_type: meta.labels.as_ref().and_then(|l| l.get(INSTANCE_TYPE_LABEL)).cloned(),
            node_pool: meta.labels.as_ref().and_then(|l| l.get(NODEPOOL_LABEL)).cloned(),
            created: meta.creation_timestamp.as_ref().map(|t| to_utc(&t.0)),
            taints,
            run_annotation: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::cluster::marks::RUN_ANNOTATION))
                .cloned(),
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.is_true()
    }

    /// Ready, yet fewer GPUs allocatable than it has: failed GPUs on a node that stays up.
    pub fn gpus_failed(&self) -> bool {
        self.is_ready() && self.gpus < self.gpu_capacity
    }
}

pub fn node_transitions(before: Option<&NodeState>, after: &NodeState) -> Vec<Transition> {
    let mut out = Vec::new();
    let (node, role) = (after.name.clone(), after.role);
    let Some(before) = before else {
        out.push((
            Event::NodeAdded {
                node: node.clone(),
                role,
                instance_type: after.instance_type.clone(),
                gpus: after.gpus,
                node_pool: after.node_pool.clone(),
            },
            after.created,
        ));
        if after.is_ready() {
            out.push((Event::NodeReady { node, role, status: after.ready, gpus: after.gpus }, after.ready_since));
        }
        return out;
    };
    if before.ready != after.ready || (after.is_ready() && before.gpus != after.gpus) {
        // A writer that carries an old lastTransitionTime over a change (kwok does when a node heartbeats again)
        // stamps it before the change it follows: no server time is truer than that one.
        let since = after.ready_since.filter(|since| before.ready_since.is_none_or(|previous| *since >= previous));
        out.push((Event::NodeReady { node: node.clone(), role, status: after.ready, gpus: after.gpus }, since));
    }
    if before.schedulable != after.schedulable {
        out.push((Event::NodeSchedulable { node: node.clone(), role, schedulable: after.schedulable }, None));
    }
    for (key, effect, added_at) in &after.taints {
        if !before.taints.iter().any(|(k, e, _)| k == key && e == effect) {
            out.push((
                Event::NodeTaint { node: node.clone(), role, key: key.clone(), effect: effect.clone(), added: true },
                *added_at,
            ));
        }
    }
    for (key, effect, _) in &before.taints {
        if !after.taints.iter().any(|(k, e, _)| k == key && e == effect) {
            out.push((
                Event::NodeTaint { node: node.clone(), role, key: key.clone(), effect: effect.clone(), added: false },
                None,
            ));
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodState {
    pub name: String,
    pub node: Option<String>,
    pub phase: String,
    pub ready: bool,
    pub ready_since: Option<DateTime<Utc>>,
    pub scheduled_at: Option<DateTime<Utc>>,
    pub created: Option<DateTime<Utc>>,
    pub terminating: bool,
    pub deletion_requested: Option<DateTime<Utc>>,
    pub owner_kind: Option<String>,
    /// The controller's template revision (`pod-template-hash`, `controller-revision-hash`): pods of one rollout share it.
    pub revision: Option<String>,
    pub containers: Vec<ContainerStart>,
}

impl PodState {
    pub fn from_pod(pod: &Pod) -> PodState {
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        let condition = |kind: &str| {
            status.and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|c| c.type_ == kind)).map(|c| {
                (ConditionStatus::parse(&c.status).is_true(), c.last_transition_time.as_ref().map(|t| to_utc(&t.0)))
            })
        };
        let ready = condition("Ready");
        let grace = meta.deletion_grace_period_seconds.unwrap_or(0);
        PodState {
            name: meta.name.clone().unwrap_or_default(),
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            phase: status.and_then(|s| s.phase.clone()).unwrap_or_else(|| "Pending".into()),
            ready: ready.is_some_and(|r| r.0),
            ready_since: ready.and_then(|r| r.1),
            scheduled_at: condition("PodScheduled").filter(|c| c.0).and_then(|c| c.1),
            created: meta.creation_timestamp.as_ref().map(|t| to_utc(&t.0)),
            terminating: meta.deletion_timestamp.is_some(),
            // deletionTimestamp is when the grace period ends; the request came that much earlier.
            deletion_requested: meta
                .deletion_timestamp
                .as_ref()
                .map(|t| to_utc(&t.0) - chrono::Duration::seconds(grace)),
            owner_kind: meta.owner_references.as_ref().and_then(|o| o.first()).map(|o| o.kind.clone()),
            revision: meta
                .labels
                .as_ref()
                .and_then(|l| l.get("pod-template-hash").or_else(|| l.get("controller-revision-hash")).cloned()),
            containers: status.map(container_starts).unwrap_or_default(),
        }
    }
}

/// Init containers first, in order, then the others: when each started and (init containers) finished.
fn container_starts(status: &k8s_openapi::api::core::v1::PodStatus) -> Vec<ContainerStart> {
    let one = |c: &k8s_openapi::api::core::v1::ContainerStatus, init: bool| {
        let state = c.state.as_ref();
        let running = state.and_then(|s| s.running.as_ref()).and_then(|r| r.started_at.as_ref());
        let terminated = state.and_then(|s| s.terminated.as_ref());
        ContainerStart {
            name: c.name.clone(),
            init,
            started: running.or_else(|| terminated.and_then(|t| t.started_at.as_ref())).map(|t| to_utc(&t.0)),
            finished: terminated.and_then(|t| t.finished_at.as_ref()).map(|t| to_utc(&t.0)),
        }
    };
    let init = status.init_container_statuses.iter().flatten().map(|c| one(c, true));
    init.chain(status.container_statuses.iter().flatten().map(|c| one(c, false))).collect()
}

pub fn pod_transitions(
    before: Option<&PodState>,
    after: &PodState,
    role_of: impl Fn(&str) -> NodeRole,
) -> Vec<Transition> {
    let mut out = Vec::new();
    let pod = after.name.clone();
    let node = after.node.clone().unwrap_or_default();
    let role = role_of(&node);
    if before.is_none() {
        out.push((Event::PodCreated { pod: pod.clone() }, after.created));
    }
    if after.node.is_some() && before.and_then(|b| b.node.as_ref()).is_none() {
        out.push((Event::PodScheduled { pod: pod.clone(), node: node.clone(), role }, after.scheduled_at));
    }
    let was_ready = before.is_some_and(|b| b.ready);
    if after.ready && !was_ready {
        let containers = after.containers.clone();
        out.push((Event::PodReady { pod: pod.clone(), node: node.clone(), role, containers }, after.ready_since));
    } else if !after.ready && was_ready {
        out.push((Event::PodNotReady { pod: pod.clone(), node: node.clone(), role }, after.ready_since));
    }
    if after.terminating && !before.is_some_and(|b| b.terminating) {
        out.push((Event::PodTerminating { pod, node, role }, after.deletion_requested));
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClaimState {
    pub name: String,
    pub node: Option<String>,
    pub created: Option<DateTime<Utc>>,
    /// The lifecycle conditions a drill times; Karpenter's other conditions are not part of a drill's story.
    pub conditions: BTreeMap<ClaimCondition, (ConditionStatus, Option<DateTime<Utc>>)>,
    pub deleting: bool,
    pub gpus: i64,
}

impl ClaimState {
    pub fn from_claim(claim: &NodeClaim) -> ClaimState {
        let status = claim.status.clone().unwrap_or_default();
        ClaimState {
            name: claim.metadata.name.clone().unwrap_or_default(),
            node: status.node_name.clone(),
            created: claim.metadata.creation_timestamp.as_ref().map(|t| to_utc(&t.0)),
            conditions: status
                .conditions
                .iter()
                .filter_map(|c| {
                    let since = c.last_transition_time.as_ref().map(|t| to_utc(&t.0));
                    Some((ClaimCondition::parse(&c.type_)?, (ConditionStatus::parse(&c.status), since)))
                })
                .collect(),
            deleting: claim.metadata.deletion_timestamp.is_some(),
            gpus: status.capacity.get(GPU_RESOURCE).and_then(as_integer).unwrap_or(0),
        }
    }

    pub fn is(&self, condition: ClaimCondition) -> bool {
        self.conditions.get(&condition).is_some_and(|c| c.0.is_true())
    }
}

pub fn claim_transitions(before: Option<&ClaimState>, after: &ClaimState) -> Vec<Transition> {
    let mut out = Vec::new();
    let name = after.name.clone();
    if before.is_none() {
        out.push((Event::NodeClaimCreated { nodeclaim: name.clone() }, after.created));
    }
    // The map is in lifecycle order, so a batch of changes reads in order.
    for (&condition, &(status, since)) in &after.conditions {
        let old = before.and_then(|b| b.conditions.get(&condition)).map(|c| c.0);
        // A first sight of Unknown is a condition not settled yet; True, or False (a launch that failed), is news.
        if old != Some(status) && (old.is_some() || status != ConditionStatus::Unknown) {
            out.push((Event::NodeClaimCondition { nodeclaim: name.clone(), condition, status }, since));
        }
    }
    if let Some(node) = &after.node
        && before.and_then(|b| b.node.as_ref()) != Some(node)
    {
        out.push((Event::NodeClaimNode { nodeclaim: name.clone(), node: node.clone() }, None));
    }
    if after.deleting && !before.is_some_and(|b| b.deleting) {
        out.push((Event::NodeClaimDeleting { nodeclaim: name }, None));
    }
    out
}

/// The drilled objects as last seen; steps wait on it and the watches feed it.
#[derive(Debug, Default, Clone)]
pub struct ClusterView {
    pub nodes: BTreeMap<String, NodeState>,
    pub pods: BTreeMap<String, PodState>,
    pub claims: BTreeMap<String, ClaimState>,
    pub pool_gpus: Option<i64>,
    pub pool_limit_gpus: Option<i64>,
    pub pool_ready: Option<bool>,
    /// The workload's desired replicas (its autoscaler's, else its controller's) that `readyPods` is judged against.
    pub replicas: crate::drill::ReplicaBasis,
}

impl ClusterView {
    pub fn role_of(&self, node: &str) -> NodeRole {
        self.nodes.get(node).map(|n| n.role).unwrap_or(NodeRole::Other)
    }

    pub fn live_pods(&self) -> impl Iterator<Item = &PodState> {
        self.pods.values().filter(|p| !p.terminating)
    }

    pub fn ready_pods(&self) -> usize {
        self.live_pods().filter(|p| p.ready).count()
    }

    pub fn ready_pods_on(&self, role: NodeRole) -> usize {
        self.live_pods().filter(|p| p.ready && p.node.as_deref().is_some_and(|n| self.role_of(n) == role)).count()
    }

    /// Pods of the workload, terminating or not, still placed on nodes of another role.
    pub fn pods_off(&self, role: NodeRole) -> usize {
        self.pods.values().filter(|p| p.node.as_deref().is_some_and(|n| self.role_of(n) != role)).count()
    }

    pub fn fallback_nodes(&self) -> impl Iterator<Item = &NodeState> {
        self.nodes.values().filter(|n| n.role == NodeRole::Fallback)
    }

    pub fn on_prem_nodes(&self) -> impl Iterator<Item = &NodeState> {
        self.nodes.values().filter(|n| n.role == NodeRole::OnPrem)
    }

    /// GPUs the fallback holds: the NodePool's own count, or what its nodes and claims add up to.
    pub fn fallback_gpus(&self) -> i64 {
        let from_nodes: i64 = self.fallback_nodes().map(|n| n.gpus).sum();
        let from_claims: i64 = self.claims.values().map(|c| c.gpus).sum();
        self.pool_gpus.unwrap_or(0).max(from_nodes).max(from_claims)
    }

    /// Workload pods that wait for a node: the capacity the fallback still has to bring.
    pub fn unscheduled_pods(&self) -> usize {
        self.live_pods().filter(|p| p.node.is_none()).count()
    }

    /// Workload pods still bound to a node that is not Ready: a lost node keeps its pods until their toleration ends.
    pub fn pods_on_lost_nodes(&self) -> usize {
        self.live_pods()
            .filter(|p| p.node.as_ref().and_then(|n| self.nodes.get(n)).is_some_and(|n| !n.is_ready()))
            .count()
    }

    /// No rollout in flight: every workload pod has a node and all run one template revision. Between an old pod's
    /// deletion and its successor's placement the pods can all look on-prem while the successor still lands elsewhere.
    pub fn workload_settled(&self) -> bool {
        let mut revisions = self.live_pods().filter_map(|p| p.revision.as_deref());
        let first = revisions.next();
        self.unscheduled_pods() == 0 && revisions.all(|r| Some(r) == first)
    }

    /// Every fallback NodeClaim Initialized, with its node Ready and GPUs allocatable, and no workload pod left
    /// waiting for a node or on a lost one: the first claims are ready long before the last displaced pods get theirs
    /// (a drain evicts node by node; lost nodes reach the end of their toleration seconds apart).
    pub fn fallback_ready(&self) -> bool {
        !self.claims.is_empty()
            && self.unscheduled_pods() == 0
            && self.pods_on_lost_nodes() == 0
            && self.claims.values().all(|c| {
                c.is(ClaimCondition::Initialized)
                    && c.node.as_ref().and_then(|n| self.nodes.get(n)).is_some_and(|n| n.is_ready() && n.gpus > 0)
            })
    }

    pub fn fallback_empty(&self) -> bool {
        self.claims.is_empty() && self.fallback_nodes().next().is_none()
    }
}

/// Shared, versioned view: every change bumps the version so waiters re-evaluate.
#[derive(Clone)]
pub struct SharedView {
    view: Arc<RwLock<ClusterView>>,
    version: tokio::sync::watch::Sender<u64>,
}

impl Default for SharedView {
    fn default() -> Self {
        SharedView { view: Arc::default(), version: tokio::sync::watch::channel(0).0 }
    }
}

impl SharedView {
    pub fn read<T>(&self, f: impl FnOnce(&ClusterView) -> T) -> T {
        f(&self.view.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn update<T>(&self, f: impl FnOnce(&mut ClusterView) -> T) -> T {
        let out = f(&mut self.view.write().unwrap_or_else(|p| p.into_inner()));
        self.version.send_modify(|v| *v += 1);
        out
    }

    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.version.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> Node {
        serde_json::from_value(serde_json::to_value(serde_json::from_str::<serde_json::Value>(yaml).unwrap()).unwrap())
            .unwrap()
    }

    #[test]
    fn node_state_reads_readiness_gpus_and_taints() {
        let n = node(
            r#"{"metadata":{"name":"n1","creationTimestamp":"2026-01-01T00:00:00Z"},
                "spec":{"unschedulable":true,"taints":[{"key":"nvidia.com/gpu","effect":"NoSchedule"}]},
                "status":{"allocatable":{"nvidia.com/gpu":"8"},
                          "conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:05Z"}]}}"#,
        );
        let s = NodeState::from_node(&n, NodeRole::OnPrem);
        assert!(s.is_ready() && !s.schedulable);
        assert_eq!(s.gpus, 8);
        assert_eq!(s.taints[0].0, "nvidia.com/gpu");
        let t = node_transitions(None, &s);
        assert!(matches!(t[0].0, Event::NodeAdded { gpus: 8, .. }));
        assert!(matches!(t[1].0, Event::NodeReady { .. }));
        let mut later = s.clone();
        later.schedulable = true;
        later.taints.clear();
        let t = node_transitions(Some(&s), &later);
        assert!(matches!(t[0].0, Event::NodeSchedulable { schedulable: true, .. }));
        assert!(matches!(t[1].0, Event::NodeTaint { added: false, .. }));
    }

    #[test]
    fn a_ready_again_that_keeps_an_older_transition_time_has_no_server_time() {
        let at = |s: &str| Some(DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc));
        let ready = NodeState::from_node(
            &node(
                r#"{"metadata":{"name":"n1"},"status":{"conditions":[
                    {"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:05Z"}]}}"#,
            ),
            NodeRole::OnPrem,
        );
        let lost =
            NodeState { ready: ConditionStatus::Unknown, ready_since: at("2026-01-01T00:01:00Z"), ..ready.clone() };
        let t = node_transitions(Some(&lost), &ready);
        assert!(matches!(t[0].0, Event::NodeReady { status: ConditionStatus::True, .. }));
        assert_eq!(t[0].1, None, "kwok's carried-over stamp is not the transition's");
        let t = node_transitions(Some(&ready), &lost);
        assert_eq!(t[0].1, at("2026-01-01T00:01:00Z"));
        let back = NodeState { ready_since: at("2026-01-01T00:02:00Z"), ..ready };
        assert_eq!(node_transitions(Some(&lost), &back)[0].1, at("2026-01-01T00:02:00Z"));
    }

    fn new_claim() -> ClaimState {
        ClaimState {
            name: "c".into(),
            node: None,
            created: None,
            conditions: BTreeMap::new(),
            deleting: false,
            gpus: 4,
        }
    }

    #[test]
    fn claim_conditions_come_in_lifecycle_order() {
        let mut c = new_claim();
        for k in ["Ready", "Initialized", "Launched", "Registered"] {
            c.conditions.insert(ClaimCondition::parse(k).unwrap(), (ConditionStatus::True, None));
        }
        let t = claim_transitions(None, &c);
        let order: Vec<&str> = t
            .iter()
            .filter_map(|(e, _)| match e {
                Event::NodeClaimCondition { condition, .. } => Some(condition.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(order, ["Launched", "Registered", "Initialized", "Ready"]);
    }

    #[test]
    fn a_nodeclaim_first_seen_with_launched_false_is_recorded_and_unknown_is_not() {
        let launched = ClaimCondition::parse("Launched").unwrap();
        let mut c = new_claim();
        c.conditions.insert(launched, (ConditionStatus::Unknown, None));
        assert_eq!(claim_transitions(None, &c).len(), 1, "only its creation");
        c.conditions.insert(launched, (ConditionStatus::False, None));
        let t = claim_transitions(None, &c);
        assert!(
            t.iter().any(|(e, _)| matches!(e, Event::NodeClaimCondition { status: ConditionStatus::False, .. })),
            "{t:?}"
        );
    }

    #[test]
    fn a_ready_stamp_older_than_the_transition_before_it_is_not_a_server_time() {
        let at = |s: &str| Some(s.parse::<DateTime<Utc>>().unwrap());
        let mut lost = NodeState::from_node(&node(r#"{"metadata":{"name":"n"}}"#), NodeRole::OnPrem);
        lost.ready = ConditionStatus::Unknown;
        lost.ready_since = at("2026-01-01T00:20:00Z");
        let mut back = lost.clone();
        back.ready = ConditionStatus::True;
        // kwok's heartbeat after a failure keeps the Ready stamp it set when the lab started.
        back.ready_since = at("2026-01-01T00:00:00Z");
        let stamps: Vec<_> = node_transitions(Some(&lost), &back).into_iter().map(|(_, since)| since).collect();
        assert_eq!(stamps, [None]);
        back.ready_since = at("2026-01-01T00:21:00Z");
        let stamps: Vec<_> = node_transitions(Some(&lost), &back).into_iter().map(|(_, since)| since).collect();
        assert_eq!(stamps, [at("2026-01-01T00:21:00Z")]);
    }

    #[test]
    fn the_fallback_is_not_ready_while_a_displaced_pod_waits_for_a_node_or_sits_on_a_lost_one() {
        let gpu_node = node(
            r#"{"metadata":{"name":"cloud-1"},"status":{"allocatable":{"nvidia.com/gpu":"4"},
                "conditions":[{"type":"Ready","status":"True"}]}}"#,
        );
        let mut view = ClusterView::default();
        view.nodes.insert("cloud-1".into(), NodeState::from_node(&gpu_node, NodeRole::Fallback));
        let mut conditions = BTreeMap::new();
        conditions.insert(ClaimCondition::Initialized, (ConditionStatus::True, None));
        let claim = ClaimState {
            name: "c1".into(),
            node: Some("cloud-1".into()),
            created: None,
            conditions,
            deleting: false,
            gpus: 4,
        };
        view.claims.insert("c1".into(), claim);
        let pod = |name: &str, node: Option<&str>| PodState {
            name: name.into(),
            node: node.map(String::from),
            phase: "Pending".into(),
            ready: false,
            ready_since: None,
            scheduled_at: None,
            created: None,
            terminating: false,
            deletion_requested: None,
            owner_kind: Some("ReplicaSet".into()),
            revision: Some("new".into()),
            containers: Vec::new(),
        };
        view.pods.insert("first".into(), pod("first", Some("cloud-1")));
        view.pods.insert("second".into(), pod("second", None));
        assert_eq!(view.unscheduled_pods(), 1);
        assert!(!view.fallback_ready(), "the second pod has no node yet");
        view.pods.insert("second".into(), pod("second", Some("cloud-1")));
        assert!(view.fallback_ready());
        let lost =
            node(r#"{"metadata":{"name":"hybrid-1"},"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}"#);
        view.nodes.insert("hybrid-1".into(), NodeState::from_node(&lost, NodeRole::OnPrem));
        view.pods.insert("stranded".into(), pod("stranded", Some("hybrid-1")));
        assert_eq!(view.pods_on_lost_nodes(), 1);
        assert!(!view.fallback_ready(), "a pod on a lost node is still to be evicted and replaced");
        view.pods.remove("stranded");
        assert!(view.workload_settled());
        view.pods.insert("old".into(), PodState { revision: Some("old".into()), ..pod("old", Some("cloud-1")) });
        assert!(!view.workload_settled(), "a pod of the previous revision remains");
    }
}
