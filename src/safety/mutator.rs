//! The Mutator: the one holder of a client that writes, and every forward mutation a drill makes through it.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PostParams};

use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{MutationError, api_error};
use super::journal::{self, EntryState, Journal, LastResort, Mutation};
use super::ledger::{Ledger, Settled, Stage, transient_retry};
use super::lock::{self, Claim, HeldLock, LockError};
use super::requests::{FIELD_MANAGER, patch_params, uncordon_node};
use super::undo::{self, RollbackOutcome, UndoBy};
use super::verify::RestoreScope;
use crate::alertmanager::{self, Alertmanager, AlertmanagerError};
use crate::cluster::karpenter::NodeClaim;
use crate::cluster::lease::{Claimant, LeaseRef, Observer};
use crate::cluster::marks::{CUT_LABEL, RUN_ANNOTATION, RunId};
use crate::cluster::policy::{PolicyKind, PolicyRef};
use crate::cluster::scheduling::selector_matches;
use crate::cluster::{Cluster, is_not_found};
use crate::drill::{SilenceSpec, WorkloadKind};
use crate::timeline::{Event, Timeline};
use chrono::{DateTime, Utc};

/// What an eviction request came to; only a budget's block and throttling may end differently if asked again.
#[derive(Debug, Clone, PartialEq)]
pub enum Eviction {
    Evicted,
    AlreadyGone,
    /// 429 with a DisruptionBudget cause: a PodDisruptionBudget allows no disruption now.
    Blocked {
        /// The budget, or the budgets (comma-separated) whose selector matches the pod.
        pdb: Option<String>,
        message: String,
    },
    /// 429 without one: API Priority and Fairness (or another limiter) asks to come back later.
    Throttled {
        retry_after: Option<Duration>,
        message: String,
    },
    /// 500: the pod is under several budgets, which the Eviction API never evicts.
    MultipleBudgets {
        pdbs: Vec<String>,
        message: String,
    },
    /// Any other answer (403, an admission policy or webhook's denial, ...): asking again changes nothing.
    Refused {
        code: u16,
        reason: String,
        message: String,
    },
}

/// Every change a drill makes goes through here: journal the intent, make it, journal the outcome.
pub struct Mutator {
    cluster: Cluster,
    ledger: Ledger,
    run: RunId,
    /// The on-prem nodes a restore must bring back, besides those the journal names.
    on_prem: BTreeSet<String>,
}

impl Mutator {
    pub fn new(cluster: Cluster, journal: Journal, timeline: Timeline, run_id: String) -> Mutator {
        Mutator {
            cluster,
            ledger: Ledger::new(journal, Some(timeline)),
            run: RunId::new(run_id),
            on_prem: BTreeSet::new(),
        }
    }

    /// The on-prem nodes of the drill, which every restore check covers even when the journal names none of them.
    pub fn with_on_prem_nodes(mut self, nodes: &[String]) -> Mutator {
        self.on_prem = nodes.iter().cloned().collect();
        self
    }

    fn scope(&self) -> RestoreScope {
        RestoreScope { run: Some(self.run.clone()), nodes: self.on_prem.clone() }
    }

    pub fn run_id(&self) -> &str {
        self.run.as_str()
    }

    pub fn run_label(&self) -> String {
        self.run.label()
    }

    /// One forward mutation through the ledger; an API error names the mutation.
    async fn mutate<T, F, Fut>(
        &self,
        m: &Mutation,
        announce: Option<Event>,
        call: F,
        settle: impl FnOnce(&Result<T, kube::Error>) -> Settled,
    ) -> Result<T, MutationError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let result = self.ledger.perform(Stage::Forward, m, announce, call, settle).await.checked()?;
        result.map_err(|e| {
            let (action, target) = m.describe();
            api_error(&action, &target, e)
        })
    }

    /// Cordons a node, unless someone already had: a node cordoned before the drill stays as it was.
    pub async fn cordon(&self, node: &str) -> Result<(), MutationError> {
        let nodes: Api<Node> = Api::all(self.cluster.client.clone());
        let current = transient_retry(|| nodes.get(node)).await.map_err(|e| api_error("cordon", node, e))?;
        let was_unschedulable = current.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
        let m = Mutation::Cordon { node: node.into(), was_unschedulable };
        if was_unschedulable {
            // Journalled as a fact so the report and recovery know not to uncordon it.
            let nothing = || async { Ok::<_, kube::Error>(()) };
            let settle =
                |_: &Result<(), kube::Error>| Settled::new(EntryState::Done).note("already cordoned before the drill");
            return self.mutate(&m, None, nothing, settle).await;
        }
        let patch =
            json!({"spec": {"unschedulable": true}, "metadata": {"annotations": {RUN_ANNOTATION: self.run_id()}}});
        let (params, merge) = (patch_params(), Patch::Merge(&patch));
        let event = Event::Cordoned { node: node.into() };
        let call = || async { nodes.patch(node, &params, &merge).await.map(drop) };
        self.mutate(&m, None, call, |r| Settled::forward(r, Some(event))).await
    }

    /// Uncordons a node as part of the drill (the return); the cordon it reverses no longer needs undoing.
    pub async fn uncordon(&self, node: &str) -> Result<(), MutationError> {
        let m = Mutation::Uncordon { node: node.into() };
        let event = Event::Uncordoned { node: node.into() };
        self.mutate(&m, None, || uncordon_node(&self.cluster, node), |r| Settled::forward(r, Some(event))).await?;
        let path = self.ledger.journal_path().await;
        let entries = journal::read(&path)?.entries;
        for (cordon_seq, cordon) in journal::outstanding(&entries) {
            if matches!(&cordon, Mutation::Cordon { node: n, .. } if n == node) {
                let note = Some("uncordoned by the drill".to_string());
                self.ledger.write(cordon_seq, EntryState::Reverted, &cordon, note).await?;
            }
        }
        Ok(())
    }

    /// Asks the Eviction API to evict a pod, which honours its PodDisruptionBudgets.
    pub async fn evict(&self, namespace: &str, pod: &str, node: &str) -> Result<Eviction, MutationError> {
        let m = Mutation::Evict { namespace: namespace.into(), pod: pod.into(), node: node.into() };
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), namespace);
        let shown = format!("{namespace}/{pod}");
        let announce = Event::EvictionRequested { pod: shown.clone(), node: node.into() };
        let params = EvictParams::default();
        let call = || async {
            match pods.evict(pod, &params).await {
                Ok(_) => Ok(Eviction::Evicted),
                Err(e) if is_not_found(&e) => Ok(Eviction::AlreadyGone),
                Err(kube::Error::Api(status)) => Ok(self.refused(namespace, pod, &status).await),
                Err(e) => Err(e),
            }
        };
        let settle = |result: &Result<Eviction, kube::Error>| match result {
            Ok(Eviction::Evicted) => {
                Settled::new(EntryState::Done).event(Event::Evicted { pod: shown.clone(), node: node.into() })
            }
            Ok(Eviction::AlreadyGone) => Settled::new(EntryState::Done).note("already gone"),
            Ok(Eviction::Blocked { pdb, message }) => Settled::new(EntryState::Failed)
                .note(message.clone())
                .event(Event::EvictionBlocked { pod: shown.clone(), pdb: pdb.clone(), message: message.clone() }),
            Ok(refused) => Settled::new(EntryState::Failed).note(eviction_refusal(refused)),
            Err(_) => Settled::forward(result, None),
        };
        self.mutate(&m, Some(announce), call, settle).await
    }

    /// What an error answer to an eviction means, with the budgets named where a budget is the reason.
    async fn refused(&self, namespace: &str, pod: &str, status: &kube::core::Status) -> Eviction {
        match classify_eviction_error(status) {
            Eviction::Blocked { pdb: None, message } => {
                let pdbs = self.pdbs_selecting(namespace, pod).await;
                Eviction::Blocked { pdb: (!pdbs.is_empty()).then(|| pdbs.join(", ")), message }
            }
            Eviction::MultipleBudgets { message, .. } => {
                Eviction::MultipleBudgets { pdbs: self.pdbs_selecting(namespace, pod).await, message }
            }
            other => other,
        }
    }

    /// The PodDisruptionBudgets whose selector matches the pod, when the API server did not name them.
    async fn pdbs_selecting(&self, namespace: &str, pod: &str) -> Vec<String> {
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), namespace);
        let Ok(found) = pods.get(pod).await else { return Vec::new() };
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.cluster.client.clone(), namespace);
        let Ok(list) = pdbs.list(&ListParams::default()).await else { return Vec::new() };
        budgets_selecting(&list.items, found.labels())
    }

    /// A rollout restart, done the way kubectl does it: a new pod-template annotation.
    pub async fn restart(&self, namespace: &str, kind: WorkloadKind, name: &str) -> Result<(), MutationError> {
        let m = Mutation::Restart { namespace: namespace.into(), kind: kind.to_string(), name: name.into() };
        let now = chrono::Utc::now().to_rfc3339();
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": now,
        }}}}});
        let (params, merge) = (patch_params(), Patch::Merge(&patch));
        let client = &self.cluster.client;
        let call = || async {
            match kind {
                WorkloadKind::StatefulSet => Api::<StatefulSet>::namespaced(client.clone(), namespace)
                    .patch(name, &params, &merge)
                    .await
                    .map(drop),
                WorkloadKind::Deployment => Api::<Deployment>::namespaced(client.clone(), namespace)
                    .patch(name, &params, &merge)
                    .await
                    .map(drop),
            }
        };
        let event = Event::RestartTriggered { target: format!("{kind}/{namespace}/{name}") };
        self.mutate(&m, None, call, |r| Settled::forward(r, Some(event))).await
    }

    /// Runs a user's command (a hook); its undo command, if any, runs on rollback.
    pub async fn exec(
        &self,
        step: &str,
        command: &[String],
        undo: Option<Vec<String>>,
        timeout: Duration,
        env: &[String],
    ) -> Result<i32, MutationError> {
        let m = Mutation::Exec { step: step.into(), command: command.to_vec(), undo, env: env.to_vec() };
        super::process::run_hook(&self.ledger, &m, step, command, timeout, env).await
    }

    /// Creates one of a link cut's deny policies; its undo deletes it.
    pub async fn create_policy(&self, policy: &PolicyRef, object: serde_json::Value) -> Result<(), MutationError> {
        let target = policy.to_string();
        let kind = PolicyKind::of(&policy.api_version, &policy.kind)
            .ok_or_else(|| MutationError::UnknownPolicy { target: target.clone() })?;
        let object: DynamicObject = serde_json::from_value(object)
            .map_err(|cause| MutationError::PolicyObject { target: target.clone(), cause })?;
        let m = Mutation::CreatePolicy { policy: policy.clone() };
        let api = kind.api(&self.cluster.client, policy.namespace.as_deref());
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        let mut attempts = 0;
        let call = || {
            attempts += 1;
            // The name is the run's own: a conflict on a second attempt means the first one arrived.
            let retried = attempts > 1;
            let (api, params, object) = (&api, &params, &object);
            async move {
                match api.create(params, object).await {
                    Err(kube::Error::Api(status)) if retried && status.code == 409 => Ok(()),
                    result => result.map(drop),
                }
            }
        };
        let event = Event::PolicyApplied { policy: target };
        self.mutate(&m, None, call, |r| Settled::forward(r, Some(event))).await
    }

    /// Creates the canary's pod (its name the run's own); its undo deletes it, so an interrupted canary is removed by
    /// the rollback or `recover`.
    pub async fn create_pod(&self, pod: &Pod) -> Result<(), MutationError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let m = Mutation::CreatePod { namespace: namespace.clone(), pod: name };
        let api: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &namespace);
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        let mut attempts = 0;
        let call = || {
            attempts += 1;
            // A conflict on a second attempt means the first one arrived.
            let retried = attempts > 1;
            let (api, params) = (&api, &params);
            async move {
                match api.create(params, pod).await {
                    Err(kube::Error::Api(status)) if retried && status.code == 409 => Ok(()),
                    result => result.map(drop),
                }
            }
        };
        self.mutate(&m, None, call, |r| Settled::forward(r, None)).await
    }

    /// Labels a pod with the run's id; `false` when the pod is already gone. Its undo removes the label.
    pub async fn label_pod(&self, namespace: &str, pod: &str) -> Result<bool, MutationError> {
        let m = Mutation::LabelPod { namespace: namespace.into(), pod: pod.into(), label: RUN_ANNOTATION.into() };
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), namespace);
        let patch = json!({"metadata": {"labels": {RUN_ANNOTATION: self.run_label()}}});
        let (params, merge) = (patch_params(), Patch::Merge(&patch));
        let call = || async {
            match pods.patch(pod, &params, &merge).await {
                Ok(_) => Ok(true),
                Err(e) if is_not_found(&e) => Ok(false),
                Err(e) => Err(e),
            }
        };
        let settle = |result: &Result<bool, kube::Error>| match result {
            Ok(false) => Settled::new(EntryState::Done).note("already gone"),
            _ => Settled::forward(result, None),
        };
        self.mutate(&m, None, call, settle).await
    }

    /// Labels an on-prem node with the run's cut label, which the host cut's policy selects; its undo removes the label
    /// and, when the node does not come back, runs `last_resort`.
    pub async fn label_node(
        &self,
        step: &str,
        node: &str,
        last_resort: Option<LastResort>,
    ) -> Result<(), MutationError> {
        let m = Mutation::LabelNode { step: step.into(), node: node.into(), label: CUT_LABEL.into(), last_resort };
        let nodes: Api<Node> = Api::all(self.cluster.client.clone());
        let patch = json!({"metadata": {"labels": {CUT_LABEL: self.run_label()}}});
        let (params, merge) = (patch_params(), Patch::Merge(&patch));
        let call = || async { nodes.patch(node, &params, &merge).await.map(drop) };
        self.mutate(&m, None, call, |r| Settled::forward(r, None)).await
    }

    /// Runs a drill's failure hook (for one node, or for all when `node` is none); its recovery hook is the undo,
    /// journalled first so an abort or `hybrid-drill recover` brings the node back even if the hook half-ran.
    pub async fn fail_node(
        &self,
        step: &str,
        node: Option<&str>,
        command: &[String],
        recover: &[String],
        timeout: Duration,
        env: &[String],
    ) -> Result<i32, MutationError> {
        let m = Mutation::FailNode {
            step: step.into(),
            node: node.map(str::to_string),
            command: command.to_vec(),
            recover: recover.to_vec(),
            timeout_seconds: timeout.as_secs().max(1),
            env: env.to_vec(),
        };
        super::process::run_hook(&self.ledger, &m, step, command, timeout, env).await
    }

    /// Runs a capacity fault's hook for one instance type; its give-back hook is the undo, journalled first so an
    /// abort or `hybrid-drill recover` gives the capacity back even if the hook half-ran.
    pub async fn remove_capacity(
        &self,
        step: &str,
        instance_type: &str,
        command: &[String],
        give_back: &[String],
        timeout: Duration,
        env: &[String],
    ) -> Result<i32, MutationError> {
        let m = Mutation::RemoveCapacity {
            step: step.into(),
            instance_type: instance_type.into(),
            command: command.to_vec(),
            give_back: give_back.to_vec(),
            timeout_seconds: timeout.as_secs().max(1),
            env: env.to_vec(),
        };
        super::process::run_hook(&self.ledger, &m, step, command, timeout, env).await
    }

    /// Deletes a fallback NodeClaim (Karpenter drains its node and terminates the instance); gone already is done.
    pub async fn delete_nodeclaim(&self, nodeclaim: &str, node: Option<&str>) -> Result<(), MutationError> {
        let m = Mutation::DeleteNodeClaim { nodeclaim: nodeclaim.into(), node: node.map(str::to_string) };
        let claims: Api<NodeClaim> = Api::all(self.cluster.client.clone());
        let call = || async {
            match claims.delete(nodeclaim, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(e),
            }
        };
        self.mutate(&m, None, call, |r| Settled::forward(r, None)).await
    }

    /// Takes the drill lock for the run, journalled first (`Claim::Run`: a free lock, or one whose holder stopped
    /// renewing); a refusal is journalled as failed, having changed nothing.
    /// `observer` holds what the run's `lock::check` saw of the Lease.
    pub async fn take_lock(
        &self,
        lease: &LeaseRef,
        claimant: &Claimant,
        observer: Observer,
    ) -> Result<HeldLock, LockError> {
        let m = Mutation::HoldLease {
            namespace: lease.namespace.clone(),
            name: lease.name.clone(),
            holder: claimant.identity.clone(),
        };
        let call = || lock::take(&self.cluster, lease, claimant, Claim::Run, observer.clone());
        let performed = self.ledger.perform(Stage::Forward, &m, None, call, |r| Settled::forward(r, None));
        match performed.await.checked() {
            Ok(result) => result,
            Err(e) => Err(LockError::Unjournalled { lease: lease.to_string(), cause: Box::new(e) }),
        }
    }

    /// Releases the run's drill lock at its end, journalled (`undoing`, then `undone`); another holder's is left alone.
    pub async fn release_lock(&self, held: HeldLock) -> Result<(), MutationError> {
        let path = self.ledger.journal_path().await;
        let entries = journal::read(&path)?.entries;
        let seq = entries.iter().rev().find(|e| matches!(e.mutation, Mutation::HoldLease { .. })).map(|e| e.seq);
        let m = Mutation::HoldLease {
            namespace: held.lease().namespace.clone(),
            name: held.lease().name.clone(),
            holder: self.run_id().to_string(),
        };
        let call = || held.release();
        let settle = |r: &Result<(), kube::Error>| match r {
            Ok(()) => Settled::new(EntryState::Undone).note("released"),
            Err(e) => Settled::new(EntryState::UndoFailed).note(e.to_string()),
        };
        let result = self.ledger.perform(Stage::Undo(seq), &m, None, call, settle).await.checked()?;
        result.map_err(|e| api_error("release", &m.describe().1, e))
    }

    /// Creates the drill's silence in Alertmanager, marked with the run's id, ending by itself at `until` should
    /// nobody expire it; its id.
    pub async fn silence(&self, spec: &SilenceSpec, until: DateTime<Utc>) -> Result<String, MutationError> {
        let comment = alertmanager::run_comment(spec.comment.as_deref(), self.run_id());
        let m = Mutation::Silence {
            alertmanager: spec.alertmanager.clone(),
            matchers: spec.matchers.clone(),
            comment: comment.clone(),
            ends_at: until,
        };
        let failed = |cause| MutationError::Silence { target: m.describe().1, cause };
        let am = Alertmanager::new(&spec.alertmanager).map_err(failed)?;
        let call = || am.create(&spec.matchers, &comment, until);
        let settle = |result: &Result<String, AlertmanagerError>| match result {
            Ok(id) => Settled::new(EntryState::Done).note(format!("silence {id}")),
            Err(e) => Settled::new(EntryState::Failed).note(e.to_string()),
        };
        self.ledger.perform(Stage::Forward, &m, None, call, settle).await.checked()?.map_err(failed)
    }

    /// Expires the drill's silences at its end: journalled as reverted, like a restore step's undo.
    pub async fn expire_silences(&self) -> RollbackOutcome {
        self.revert(is_silence).await
    }

    /// Undoes, as a step of the drill, the outstanding mutations `which` selects (the `restore` of a cut or a node
    /// failure), newest first; they are journalled as reverted so the rollback does not undo them again.
    pub async fn revert(&self, which: impl Fn(&Mutation) -> bool) -> RollbackOutcome {
        undo::undo_journalled(&self.ledger, &self.cluster, which, UndoBy::Drill).await
    }

    /// The mutations the steps left outstanding in the journal, newest first, as the report names them; the silences,
    /// which the end of the run expires after the restore check, are not among them.
    pub async fn outstanding(&self) -> Result<Vec<String>, MutationError> {
        let entries = journal::read(&self.ledger.journal_path().await)?.entries;
        Ok(journal::outstanding(&entries)
            .into_iter()
            .filter(|(_, m)| !is_silence(m))
            .map(|(_, m)| {
                let (action, target) = m.describe();
                format!("{action} {target}")
            })
            .collect())
    }

    /// Undoes every outstanding mutation, newest first, each journalled before and after.
    pub async fn rollback(&self) -> RollbackOutcome {
        undo::undo_journalled(&self.ledger, &self.cluster, |_| true, UndoBy::Rollback).await
    }

    /// The rollback of a run, checked: every outstanding mutation undone, then the restored-state check for up to
    /// `wait`, and only then the silences expired (see [`undo::rollback_then_unsilence`]). What is left fails the
    /// outcome and stays outstanding in the journal.
    pub async fn rollback_verified(&self, wait: Duration) -> RollbackOutcome {
        undo::rollback_then_unsilence(&self.ledger, &self.cluster, &self.scope(), wait, UndoBy::Rollback).await
    }

    /// What the steps left in place undone and checked, the silences kept: the end of a completed run expires them
    /// itself once this returns ([`Mutator::expire_silences`]).
    pub async fn undo_left_in_place(&self, wait: Duration) -> RollbackOutcome {
        let mut outcome =
            undo::undo_journalled(&self.ledger, &self.cluster, |m| !is_silence(m), UndoBy::Rollback).await;
        undo::verify_after(&self.ledger, &self.cluster, &self.scope(), wait, &mut outcome).await;
        outcome
    }

    /// The restored-state check alone (after a restore step), for up to `wait`; what is left reopens the journal's
    /// undone changes, so the rollback undoes them again.
    pub async fn verify_restored(&self, wait: Duration) -> RollbackOutcome {
        let mut outcome = RollbackOutcome::default();
        undo::verify_after(&self.ledger, &self.cluster, &self.scope(), wait, &mut outcome).await;
        outcome
    }
}

fn is_silence(m: &Mutation) -> bool {
    matches!(m, Mutation::Silence { .. })
}

/// Sorts an error answer to an eviction, before the budgets are looked up: a 429 is a budget's block when it says
/// so (a DisruptionBudget cause, or the Eviction API's own words), throttling otherwise; the Eviction API answers 500
/// for a pod under several budgets; anything else is final.
pub(crate) fn classify_eviction_error(status: &kube::core::Status) -> Eviction {
    let causes = status.details.as_ref().map(|d| d.causes.as_slice()).unwrap_or_default();
    let budget_cause = causes.iter().find(|c| c.reason == "DisruptionBudget");
    match status.code {
        429 if budget_cause.is_some() || status.message.contains("disruption budget") => Eviction::Blocked {
            pdb: budget_cause.and_then(|c| pdb_name_from_message(&c.message)),
            message: budget_cause.map_or_else(|| status.message.clone(), |c| c.message.clone()),
        },
        429 => Eviction::Throttled {
            retry_after: status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(u64::from(s))),
            message: status.message.clone(),
        },
        500 if status.message.contains("more than one PodDisruptionBudget") => {
            Eviction::MultipleBudgets { pdbs: Vec::new(), message: status.message.clone() }
        }
        code => Eviction::Refused { code, reason: status.reason.clone(), message: status.message.clone() },
    }
}

/// How a failed eviction reads in the journal, the step's message and the report.
pub fn eviction_refusal(eviction: &Eviction) -> String {
    match eviction {
        Eviction::Evicted | Eviction::AlreadyGone => String::new(),
        Eviction::Blocked { pdb, message } => {
            format!("PodDisruptionBudget {} allows no disruption: {message}", pdb.as_deref().unwrap_or("(unnamed)"))
        }
        Eviction::Throttled { message, .. } => format!("throttled by the API server (429): {message}"),
        Eviction::MultipleBudgets { pdbs, message } => {
            let names = if pdbs.is_empty() { "(none found by selector)".into() } else { pdbs.join(", ") };
            format!(
                "the pod is under several PodDisruptionBudgets ({names}), which the Eviction API refuses: {message}"
            )
        }
        Eviction::Refused { code, reason, message } => format!("the API server refused ({code} {reason}): {message}"),
    }
}

/// "The disruption budget llm-inference needs 4 healthy pods ..." names the budget.
fn pdb_name_from_message(message: &str) -> Option<String> {
    let rest = message.split("disruption budget ").nth(1)?;
    rest.split_whitespace().next().map(str::to_string)
}

/// The names of the budgets whose selector matches a pod's labels; a budget without a selector selects nothing.
fn budgets_selecting(pdbs: &[PodDisruptionBudget], labels: &BTreeMap<String, String>) -> Vec<String> {
    pdbs.iter()
        .filter(|pdb| pdb.spec.as_ref().and_then(|s| s.selector.as_ref()).is_some_and(|s| selector_matches(s, labels)))
        .map(|pdb| pdb.name_any())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: serde_json::Value) -> kube::core::Status {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn eviction_errors_are_sorted_by_what_asking_again_would_do() {
        // What the Eviction API answers when a budget allows no disruption (registry/core/pod/storage/eviction.go).
        let budget = status(json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
            "reason": "TooManyRequests", "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget llm-inference needs 2 healthy pods and has 2 currently"}]}}));
        assert_eq!(
            classify_eviction_error(&budget),
            Eviction::Blocked {
                pdb: Some("llm-inference".into()),
                message: "The disruption budget llm-inference needs 2 healthy pods and has 2 currently".into()
            }
        );
        let budget_without_cause = status(json!({"code": 429, "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget."}));
        assert!(matches!(classify_eviction_error(&budget_without_cause), Eviction::Blocked { pdb: None, .. }));
        // API Priority and Fairness: no budget, a Retry-After in the details.
        let throttled = status(json!({"code": 429, "reason": "TooManyRequests",
            "message": "Too many requests, please try again later.", "details": {"retryAfterSeconds": 7}}));
        assert_eq!(
            classify_eviction_error(&throttled),
            Eviction::Throttled {
                retry_after: Some(Duration::from_secs(7)),
                message: "Too many requests, please try again later.".into()
            }
        );
        let several = status(json!({"code": 500, "reason": "InternalError", "message":
            "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}));
        assert!(matches!(classify_eviction_error(&several), Eviction::MultipleBudgets { .. }));
        let denied = status(json!({"code": 403, "reason": "Forbidden", "message":
            "pods \"p\" is forbidden: ValidatingAdmissionPolicy 'no-evictions' with binding 'no-evictions' denied request: frozen"}));
        let refused = classify_eviction_error(&denied);
        assert!(matches!(&refused, Eviction::Refused { code: 403, reason, .. } if reason == "Forbidden"));
        assert!(
            eviction_refusal(&refused).starts_with("the API server refused (403 Forbidden): pods \"p\" is forbidden")
        );
        let other = status(json!({"code": 500, "reason": "InternalError", "message": "etcd timed out"}));
        assert!(matches!(classify_eviction_error(&other), Eviction::Refused { code: 500, .. }));
    }

    #[test]
    fn pdb_name_is_read_from_the_eviction_cause() {
        assert_eq!(
            pdb_name_from_message("The disruption budget llm-inference needs 4 healthy pods and has 4 currently")
                .as_deref(),
            Some("llm-inference")
        );
        assert_eq!(pdb_name_from_message("something else"), None);
    }

    fn pdb(name: &str, selector: serde_json::Value) -> PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"selector": selector}})).unwrap()
    }

    #[test]
    fn a_blocking_budget_with_match_expressions_is_named_and_so_is_every_other_match() {
        let labels = BTreeMap::from([("app".to_string(), "llm".to_string()), ("tier".to_string(), "gpu".to_string())]);
        let pdbs = [
            pdb("by-expression", json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["llm"]}]})),
            pdb("other-app", json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]})),
            pdb(
                "excludes-gpu",
                json!({"matchLabels": {"app": "llm"}, "matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["gpu"]}]}),
            ),
            pdb("by-label", json!({"matchLabels": {"app": "llm"}})),
            pdb("everything", json!({})),
        ];
        assert_eq!(budgets_selecting(&pdbs, &labels), ["by-expression", "by-label", "everything"]);
        let no_selector: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "none"}})).unwrap();
        assert!(budgets_selecting(&[no_selector], &labels).is_empty());
    }
}
