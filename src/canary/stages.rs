//! The canary's live stages: its pod created through the mutator, the waits (each bounded by its own deadline, read
//! from the view the watches keep), the removal, the reclaim, and the check that nothing it caused is left.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::measure::{ANSWER, LAUNCH, REMOVE, launch_refusal, measure};
use super::pod::CANARY_LABEL;
use super::{CanaryOutcome, Deadlines};
use crate::cluster::karpenter::{ClaimCondition, NodeClaim};
use crate::cluster::{Cluster, is_not_found};
use crate::domain::Outcome;
use crate::drill::{Drill, LoadedDrill, ParsedSelector};
use crate::safety::Mutator;
use crate::safety::journal::Mutation;
use crate::timeline::view::{ClaimState, ClusterView, SharedView};
use crate::timeline::watch::Watches;
use crate::timeline::{ConditionStatus, Event, StepOutcome, Timeline};

/// How often a wait reads the view the watches keep (in memory: no request).
const POLL: Duration = Duration::from_millis(200);
/// How long the canary waits for a NodeClaim it deleted itself to be gone.
const DELETED_WITHIN: Duration = Duration::from_secs(120);

/// The fallback's NodeClaims now, by name, read from the API server.
pub async fn fallback_claims(cluster: &Cluster, drill: &Drill) -> Result<Vec<String>, kube::Error> {
    let claims: Api<NodeClaim> = Api::all(cluster.client.clone());
    let params = ListParams::default().labels(&drill.spec.targets.fallback.label_selector());
    Ok(claims.list(&params).await?.items.into_iter().filter_map(|c| c.metadata.name).collect())
}

/// The fallback's nodes now, by name, read from the API server.
pub async fn fallback_nodes(cluster: &Cluster, drill: &Drill) -> Result<Vec<String>, kube::Error> {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let params = ListParams::default().labels(&drill.spec.targets.fallback.label_selector());
    Ok(nodes.list(&params).await?.items.into_iter().filter_map(|n| n.metadata.name).collect())
}

/// How a canary's stages ended, before its record is written.
pub struct Ended {
    pub outcome: CanaryOutcome,
    pub cause: Option<String>,
    pub left_behind: Vec<String>,
    warnings: Mutex<Vec<String>>,
}

impl Ended {
    pub fn warn(&self, message: String) {
        if let Ok(mut w) = self.warnings.lock() {
            w.push(message);
        }
    }

    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// The outcome as a drill's timeline words it (`status` and `recover` read it).
    pub fn drill_outcome(&self) -> Outcome {
        match self.outcome {
            CanaryOutcome::Passed => Outcome::Passed,
            CanaryOutcome::Aborted => Outcome::Aborted,
            CanaryOutcome::LeftBehind | CanaryOutcome::Unfinished => Outcome::LeftBehind,
            _ => Outcome::ObjectiveMissed,
        }
    }
}

type Failed = (CanaryOutcome, String);

/// A canary step that did not do what it should, in words for the timeline and the report's warnings.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StepFailed(String);

pub struct Canary<'a> {
    cluster: &'a Cluster,
    drill: Drill,
    timeline: &'a Timeline,
    mutator: &'a Mutator,
    pod: &'a Pod,
    name: String,
    deadlines: Deadlines,
    view: SharedView,
    warnings: Vec<String>,
}

impl<'a> Canary<'a> {
    pub fn new(
        cluster: &'a Cluster,
        loaded: &LoadedDrill,
        timeline: &'a Timeline,
        mutator: &'a Mutator,
        pod: &'a Pod,
        label: &str,
        deadlines: Deadlines,
    ) -> Canary<'a> {
        // The drill's watches, their workload the canary's pod alone.
        let mut drill = loaded.drill.clone();
        if let Ok(selector) = ParsedSelector::parse(&format!("{CANARY_LABEL}={label}")) {
            drill.spec.targets.workload.selector = selector;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let view = SharedView::default();
        Canary { cluster, drill, timeline, mutator, pod, name, deadlines, view, warnings: Vec::new() }
    }

    /// Every stage: the canary up to its first answer (interrupted by a signal or the lost lock), then, whatever
    /// happened, its removal, the reclaim and the check of what is left.
    pub async fn run(mut self, signals: JoinHandle<&'static str>, lost: watch::Receiver<Option<String>>) -> Ended {
        let mut watches = Watches::start(self.cluster, &self.drill, &self.view, self.timeline);
        let served = match watches.synced(Duration::from_secs(60)).await {
            Err(e) => Err((CanaryOutcome::Aborted, format!("the watches could not list the canary's objects: {e}"))),
            Ok(()) => tokio::select! {
                served = self.serve() => served,
                signal = signals => Err((CanaryOutcome::Aborted, format!("interrupted by {}", signal.unwrap_or("a signal")))),
                message = lock_lost(lost) => Err((CanaryOutcome::Aborted, message)),
            },
        };
        let (mut outcome, mut cause) = match served {
            Ok(()) => (CanaryOutcome::Passed, None),
            Err((outcome, cause)) => (outcome, Some(cause)),
        };
        self.timeline.record(Event::StepStarted { step: REMOVE.into(), action: "delete the canary pod".into() });
        let removed = self.remove().await;
        self.finished(REMOVE, removed);
        if let Some(missed) = self.reclaim(outcome).await
            && outcome == CanaryOutcome::Passed
        {
            (outcome, cause) = (CanaryOutcome::ReclaimMissed, Some(missed));
        }
        let left_behind = self.left_behind().await;
        if !left_behind.is_empty() {
            let was = cause.map(|c| format!(" after {}: {c}", outcome.word())).unwrap_or_default();
            cause = Some(format!("still in the cluster: {}{was}", left_behind.join(", ")));
            outcome = CanaryOutcome::LeftBehind;
        }
        drop(watches);
        Ended { outcome, cause, left_behind, warnings: Mutex::new(self.warnings) }
    }

    fn finished(&mut self, step: &str, result: Result<String, StepFailed>) {
        let (outcome, message) = match result {
            Ok(message) => (StepOutcome::Passed, message),
            Err(StepFailed(message)) => {
                self.warnings.push(format!("{step}: {message}"));
                (StepOutcome::Failed, message)
            }
        };
        self.timeline.record(Event::StepFinished { step: step.into(), outcome, message });
    }

    /// The pod created, then each wait in turn: launched, initialised, serving.
    async fn serve(&self) -> Result<(), Failed> {
        self.timeline.record(Event::StepStarted { step: LAUNCH.into(), action: "create the canary pod".into() });
        let created = self.mutator.create_pod(self.pod).await;
        let message = created.as_ref().map(|()| format!("pod {} created", self.name)).unwrap_or_else(|e| e.to_string());
        let outcome = if created.is_ok() { StepOutcome::Passed } else { StepOutcome::Failed };
        self.timeline.record(Event::StepFinished { step: LAUNCH.into(), outcome, message: message.clone() });
        created.map_err(|_| (CanaryOutcome::Aborted, message))?;

        let d = self.deadlines;
        if !self.until(d.launch, |v| claim(v).is_some_and(|c| c.is(ClaimCondition::Launched))).await {
            return Err((CanaryOutcome::LaunchRefused, self.refusal(d.launch)));
        }
        if !self.until(d.initialise, usable).await {
            return Err((CanaryOutcome::NeverInitialised, self.view.read(|v| uninitialised(v, d.initialise))));
        }
        self.timeline.record(Event::StepStarted { step: ANSWER.into(), action: "the pod's readiness probe".into() });
        let name = self.name.as_str();
        let ready = self.until(d.serve, |v| v.pods.get(name).is_some_and(|p| p.ready && !p.terminating)).await;
        let (outcome, message) = if ready {
            (StepOutcome::Passed, format!("pod {name} Ready: its readiness probe answered"))
        } else {
            (StepOutcome::Failed, self.never_served(d.serve))
        };
        self.timeline.record(Event::StepFinished { step: ANSWER.into(), outcome, message: message.clone() });
        if ready { Ok(()) } else { Err((CanaryOutcome::NeverServed, message)) }
    }

    /// Whether `holds` came true of the view before `within` passed.
    async fn until(&self, within: Duration, holds: impl Fn(&ClusterView) -> bool) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.view.read(&holds) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Why no NodeClaim launched: Karpenter's refusals as a drill reads them, else the last word on the pod.
    fn refusal(&self, within: Duration) -> String {
        let observations = self.timeline.observations();
        if let Some(refused) = launch_refusal(&measure(&observations, &self.name)) {
            return refused;
        }
        let said = last_event(&observations, &format!("Pod/{}", self.name));
        format!(
            "no NodeClaim launched within {}{}",
            humantime::format_duration(within),
            said.map(|s| format!("; the pod's last event: {s}")).unwrap_or_default()
        )
    }

    fn never_served(&self, within: Duration) -> String {
        let said = last_event(&self.timeline.observations(), &format!("Pod/{}", self.name));
        let phase = self.view.read(|v| v.pods.get(&self.name).map(|p| p.phase.clone())).unwrap_or("gone".into());
        format!(
            "pod {} not Ready within {} (phase {phase}){}",
            self.name,
            humantime::format_duration(within),
            said.map(|s| format!("; its last event: {s}")).unwrap_or_default()
        )
    }

    async fn remove(&self) -> Result<String, StepFailed> {
        let undone = self.mutator.revert(|m| matches!(m, Mutation::CreatePod { .. })).await;
        if !undone.restored() {
            let failed: Vec<String> = undone.failed.iter().map(|(what, why)| format!("{what}: {why}")).collect();
            return Err(StepFailed(failed.join("; ")));
        }
        let name = self.name.as_str();
        if self.until(DELETED_WITHIN, |v| !v.pods.contains_key(name)).await {
            Ok(format!("pod {name} deleted"))
        } else {
            Err(StepFailed(format!("pod {name} still there {}s after its deletion", DELETED_WITHIN.as_secs())))
        }
    }

    /// Waits for Karpenter to reclaim what the canary caused; a node that never served is deleted at once (Karpenter
    /// does not consolidate a node that never initialised). Why the reclaim missed, when it did.
    async fn reclaim(&mut self, outcome: CanaryOutcome) -> Option<String> {
        self.timeline.record(Event::StepStarted { step: "reclaim".into(), action: "wait for consolidation".into() });
        let initialised = matches!(outcome, CanaryOutcome::Passed | CanaryOutcome::NeverServed);
        let within = if initialised { self.deadlines.reclaim } else { Duration::ZERO };
        // The Node goes after its NodeClaim's finalizer has terminated the instance: both, or it still bills.
        let gone = self.until(within, nothing_caused).await;
        let missed = (!gone && initialised).then(|| {
            let claims = self.view.read(|v| v.claims.keys().cloned().collect::<Vec<_>>()).join(", ");
            format!(
                "NodeClaim {claims} not reclaimed within {} after the canary left: consolidation did not remove it \
                 (consolidateAfter, a disruption budget, a do-not-disrupt pod?); the canary deleted it",
                humantime::format_duration(within)
            )
        });
        if !gone {
            for (claim, node) in
                self.view.read(|v| v.claims.values().map(|c| (c.name.clone(), c.node.clone())).collect::<Vec<_>>())
            {
                if let Err(e) = self.mutator.delete_nodeclaim(&claim, node.as_deref()).await {
                    self.warnings.push(format!("cannot delete NodeClaim {claim}: {e}"));
                }
            }
            self.until(DELETED_WITHIN, nothing_caused).await;
        }
        let message = if gone { "reclaimed by Karpenter".to_string() } else { "deleted by the canary".to_string() };
        let outcome = if missed.is_some() { StepOutcome::Failed } else { StepOutcome::Passed };
        self.timeline.record(Event::StepFinished { step: "reclaim".into(), outcome, message });
        missed
    }

    /// What the canary caused that the API server still has, read back rather than taken from the view.
    async fn left_behind(&mut self) -> Vec<String> {
        let mut left = Vec::new();
        let namespace = self.pod.metadata.namespace.clone().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &namespace);
        match pods.get(&self.name).await {
            Err(e) if is_not_found(&e) => {}
            Ok(_) => left.push(format!("pod {namespace}/{}", self.name)),
            Err(e) => self.warnings.push(format!("cannot check the canary pod is gone: {e}")),
        }
        match fallback_claims(self.cluster, &self.drill).await {
            Ok(claims) => left.extend(claims.into_iter().map(|c| format!("NodeClaim {c}"))),
            Err(e) => self.warnings.push(format!("cannot check the fallback's NodeClaims are gone: {e}")),
        }
        match fallback_nodes(self.cluster, &self.drill).await {
            Ok(nodes) => left.extend(nodes.into_iter().map(|n| format!("node {n}"))),
            Err(e) => self.warnings.push(format!("cannot check the fallback's nodes are gone: {e}")),
        }
        left
    }
}

/// Neither a fallback NodeClaim nor a fallback node is left.
fn nothing_caused(v: &ClusterView) -> bool {
    v.claims.is_empty() && v.fallback_nodes().next().is_none()
}

/// The NodeClaim the canary caused: the launched one, else the newest.
fn claim(v: &ClusterView) -> Option<&ClaimState> {
    v.claims.values().find(|c| c.is(ClaimCondition::Launched)).or_else(|| v.claims.values().max_by_key(|c| c.created))
}

/// The canary's node can take it: its NodeClaim Initialized and the node Ready with GPUs allocatable.
fn usable(v: &ClusterView) -> bool {
    let Some(c) = claim(v).filter(|c| c.is(ClaimCondition::Initialized)) else { return false };
    c.node.as_ref().and_then(|n| v.nodes.get(n)).is_some_and(|n| n.ready == ConditionStatus::True && n.gpus > 0)
}

/// Why the node is not usable: how far its NodeClaim came, and the node's readiness, GPUs and taints.
fn uninitialised(v: &ClusterView, within: Duration) -> String {
    let Some(c) = claim(v) else { return "its NodeClaim is gone".into() };
    let reached: Vec<&str> = [ClaimCondition::Launched, ClaimCondition::Registered, ClaimCondition::Initialized]
        .into_iter()
        .filter(|k| c.is(*k))
        .map(|k| k.as_str())
        .collect();
    let node = c.node.as_ref().and_then(|n| v.nodes.get(n)).map(|n| {
        let taints: Vec<String> = n.taints.iter().map(|(key, effect, _)| format!("{key}:{effect}")).collect();
        format!(
            "; node {} Ready={}, {} GPUs allocatable, taints [{}] (Karpenter initialises a node once it is Ready, its \
             startup taints are removed and its extended resources registered)",
            n.name,
            n.ready,
            n.gpus,
            taints.join(", ")
        )
    });
    format!(
        "NodeClaim {} not Initialized within {} (reached: {}){}",
        c.name,
        humantime::format_duration(within),
        if reached.is_empty() { "nothing".into() } else { reached.join(", ") },
        node.unwrap_or_else(|| "; no node registered".into())
    )
}

fn last_event(observations: &[crate::timeline::Observation], object: &str) -> Option<String> {
    observations.iter().rev().find_map(|o| match &o.event {
        Event::KubeEvent { object: ob, reason, message } if ob == object => Some(format!("{reason}: {message}")),
        _ => None,
    })
}

async fn lock_lost(mut lost: watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(message) = lost.borrow_and_update().clone() {
            return message;
        }
        if lost.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}
