//! What undoes each mutation, and undoing them: the rollback after a stop, a restore step's revert, and recovery.

use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch};
use kube::runtime::wait::await_condition;
use serde_json::json;

use super::error::MutationError;
use super::journal::{self, EntryState, LastResort, Mutation};
use super::ledger::{Ledger, Performed, Settled, Stage, Transient};
use super::process::run_command;
use super::requests::{patch_params, uncordon_node};
use super::verify::{self, RestoreScope};
use crate::alertmanager::{Alertmanager, AlertmanagerError, Matcher};
use crate::cluster::policy::{PolicyKind, PolicyRef};
use crate::cluster::readiness::is_ready;
use crate::cluster::{Cluster, first_line, is_not_found};
use crate::timeline::Event;

/// How long an `exec` step's undo command may run.
const EXEC_UNDO_TIMEOUT: Duration = Duration::from_secs(300);

/// The action that undoes a mutation.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Undo {
    Nothing,
    Uncordon { node: String },
    DeletePolicy(PolicyRef),
    DeletePod { namespace: String, pod: String },
    Unlabel { namespace: String, pod: String, label: String },
    UnlabelNode { node: String, label: String, last_resort: Option<LastResort> },
    Run { command: Vec<String>, timeout: Duration, env: Vec<String> },
    ExpireSilence { alertmanager: String, matchers: Vec<Matcher>, comment: String },
}

impl Mutation {
    /// What undoes this mutation. There is no wildcard arm on purpose: a new kind of mutation does not compile until
    /// its undo is written here.
    pub(super) fn undo(&self) -> Undo {
        match self {
            Mutation::Cordon { node, was_unschedulable: false } => Undo::Uncordon { node: node.clone() },
            // Cordoned before the drill: it stays as it was found.
            Mutation::Cordon { was_unschedulable: true, .. } => Undo::Nothing,
            // An uncordon is itself the undo of a cordon.
            Mutation::Uncordon { .. } => Undo::Nothing,
            // The pod's controller recreates an evicted pod.
            Mutation::Evict { .. } => Undo::Nothing,
            // A rollout restart is its own repair.
            Mutation::Restart { .. } => Undo::Nothing,
            Mutation::Exec { undo: Some(command), env, .. } => {
                Undo::Run { command: command.clone(), timeout: EXEC_UNDO_TIMEOUT, env: env.clone() }
            }
            // The drill gave the command no undo.
            Mutation::Exec { undo: None, .. } => Undo::Nothing,
            Mutation::CreatePolicy { policy } => Undo::DeletePolicy(policy.clone()),
            Mutation::LabelPod { namespace, pod, label } => {
                Undo::Unlabel { namespace: namespace.clone(), pod: pod.clone(), label: label.clone() }
            }
            Mutation::LabelNode { node, label, last_resort, .. } => {
                Undo::UnlabelNode { node: node.clone(), label: label.clone(), last_resort: last_resort.clone() }
            }
            Mutation::FailNode { recover, timeout_seconds, env, .. } => {
                Undo::Run { command: recover.clone(), timeout: Duration::from_secs(*timeout_seconds), env: env.clone() }
            }
            Mutation::RemoveCapacity { give_back, timeout_seconds, env, .. } => Undo::Run {
                command: give_back.clone(),
                timeout: Duration::from_secs(*timeout_seconds),
                env: env.clone(),
            },
            // Karpenter replaces a deleted NodeClaim while pods need it, and an instance lost is not brought back.
            Mutation::DeleteNodeClaim { .. } => Undo::Nothing,
            Mutation::CreatePod { namespace, pod } => {
                Undo::DeletePod { namespace: namespace.clone(), pod: pod.clone() }
            }
            // The lock changes nothing the drill is about: its holder releases it at its end (safety/lock.rs), and a
            // rollback, which runs under it, must never free it.
            Mutation::HoldLease { .. } => Undo::Nothing,
            Mutation::Silence { alertmanager, matchers, comment, .. } => Undo::ExpireSilence {
                alertmanager: alertmanager.clone(),
                matchers: matchers.clone(),
                comment: comment.clone(),
            },
        }
    }

    /// Whether undoing this mutation needs an action on the cluster.
    pub fn needs_undo(&self) -> bool {
        self.undo() != Undo::Nothing
    }
}

#[derive(Debug, thiserror::Error)]
pub(super) enum UndoError {
    #[error("{}", first_line(&.0.to_string()))]
    Api(kube::Error),
    #[error("{0}: a policy kind this tool does not know")]
    UnknownPolicyKind(String),
    #[error("undo command `{command}` exited {code}")]
    Exited { command: String, code: i32 },
    #[error("{0}")]
    Command(MutationError),
    #[error(transparent)]
    Alertmanager(AlertmanagerError),
    #[error("{node} not Ready {after}s after its cut was lifted, and its last-resort hook `{command}` {outcome}")]
    LastResort { node: String, after: u64, command: String, code: Option<i32>, outcome: String },
}

impl Transient for UndoError {
    fn is_transient(&self) -> bool {
        match self {
            UndoError::Api(e) => e.is_transient(),
            // An undo command is the only way back and is written to be run again (`recover` re-runs it), so a
            // failed run is tried again like a dropped connection.
            UndoError::Exited { .. } => true,
            UndoError::Alertmanager(e) => e.is_transient(),
            // A power cycle is not repeated on its own: `recover` or the operator runs it again.
            UndoError::UnknownPolicyKind(_) | UndoError::Command(_) | UndoError::LastResort { .. } => false,
        }
    }
}

/// How soon an undo watches again a node it waits for after the watch broke.
const WATCH_RETRY: Duration = Duration::from_secs(1);

impl Undo {
    /// One attempt; whatever is already undone (a 404) counts as undone. `Some(command)` when a last-resort hook had
    /// to run and exited 0.
    async fn perform(&self, cluster: &Cluster) -> Result<Option<String>, UndoError> {
        match self {
            Undo::UnlabelNode { node, label, last_resort } => unlabel_node(cluster, node, label, last_resort).await,
            other => other.perform_plain(cluster).await.map(|()| None),
        }
    }

    async fn perform_plain(&self, cluster: &Cluster) -> Result<(), UndoError> {
        match self {
            Undo::Nothing | Undo::UnlabelNode { .. } => Ok(()),
            Undo::Uncordon { node } => uncordon_node(cluster, node).await.map_err(UndoError::Api),
            Undo::DeletePolicy(policy) => {
                let kind = PolicyKind::of(&policy.api_version, &policy.kind)
                    .ok_or_else(|| UndoError::UnknownPolicyKind(policy.to_string()))?;
                let api = kind.api(&cluster.client, policy.namespace.as_deref());
                match api.delete(&policy.name, &DeleteParams::default()).await {
                    // Gone already, or its CRD with it: nothing is left to cut.
                    Err(e) if is_not_found(&e) => Ok(()),
                    result => result.map(drop).map_err(UndoError::Api),
                }
            }
            Undo::DeletePod { namespace, pod } => {
                let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), namespace);
                match pods.delete(pod, &DeleteParams::default()).await {
                    Err(e) if is_not_found(&e) => Ok(()),
                    result => result.map(drop).map_err(UndoError::Api),
                }
            }
            Undo::Unlabel { namespace, pod, label } => {
                let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), namespace);
                let patch = json!({"metadata": {"labels": {label.as_str(): null}}});
                match pods.patch(pod, &patch_params(), &Patch::Merge(&patch)).await {
                    // A pod that is gone carries no label any more.
                    Err(e) if is_not_found(&e) => Ok(()),
                    result => result.map(drop).map_err(UndoError::Api),
                }
            }
            Undo::ExpireSilence { alertmanager, matchers, comment } => {
                let am = Alertmanager::new(alertmanager).map_err(UndoError::Alertmanager)?;
                am.expire_matching(matchers, comment).await.map(drop).map_err(UndoError::Alertmanager)
            }
            Undo::Run { command, timeout, env } => match run_command(command, *timeout, env).await {
                Ok(0) => Ok(()),
                Ok(code) => Err(UndoError::Exited { command: command.join(" "), code }),
                Err(e) => Err(UndoError::Command(e)),
            },
        }
    }
}

/// Removes a host cut's label from a node; with a last-resort hook, waits (bounded) for the node to be Ready, and runs
/// the hook when it is not: a node whose CNI agent cannot reach the API server never hears its cut was lifted.
async fn unlabel_node(
    cluster: &Cluster,
    node: &str,
    label: &str,
    last_resort: &Option<LastResort>,
) -> Result<Option<String>, UndoError> {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let patch = json!({"metadata": {"labels": {label: null}}});
    match nodes.patch(node, &patch_params(), &Patch::Merge(&patch)).await {
        Err(e) if is_not_found(&e) => return Ok(None),
        result => result.map(drop).map_err(UndoError::Api)?,
    }
    let Some(hook) = last_resort else { return Ok(None) };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(hook.after_seconds);
    // Watch-driven: the node is Ready the moment the watch says so; a broken watch is opened again until the deadline.
    loop {
        let ready = await_condition(nodes.clone(), node, |n: Option<&Node>| n.is_some_and(is_ready));
        match tokio::time::timeout_at(deadline, ready).await {
            Ok(Ok(_)) => return Ok(None),
            Ok(Err(_)) => tokio::time::sleep(WATCH_RETRY).await,
            Err(_) => break,
        }
    }
    let command = hook.command.join(" ");
    let failed = |code: Option<i32>, outcome: String| UndoError::LastResort {
        node: node.into(),
        after: hook.after_seconds,
        command: command.clone(),
        code,
        outcome,
    };
    match run_command(&hook.command, Duration::from_secs(hook.timeout_seconds), &hook.env).await {
        Ok(0) => Ok(Some(command.clone())),
        Ok(code) => Err(failed(Some(code), format!("exited {code}"))),
        Err(e) => Err(failed(None, format!("failed: {e}"))),
    }
}

/// Why mutations are being undone, which decides how the journal and the timeline record it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum UndoBy {
    /// A step of the drill (a restore): journalled `reverted`, so the rollback does not undo it again.
    Drill,
    /// The rollback after a stop.
    Rollback,
    /// `hybrid-drill recover`, from a run's journal.
    Recover,
    /// `hybrid-drill recover`, from the marks a run left in the cluster.
    Marks,
}

impl UndoBy {
    fn undone(self) -> Settled {
        match self {
            UndoBy::Drill => Settled::new(EntryState::Reverted).note("restored by the drill"),
            UndoBy::Rollback => Settled::new(EntryState::Undone),
            UndoBy::Recover => Settled::new(EntryState::Undone).note("recovered"),
            UndoBy::Marks => Settled::new(EntryState::Undone).note("recovered from the run's mark in the cluster"),
        }
    }
}

/// One mutation to undo: its journal entry (none when only the cluster's marks know of it) and how to name it.
pub(super) struct ToUndo {
    pub(super) seq: Option<u64>,
    pub(super) mutation: Mutation,
    pub(super) shown: String,
}

impl ToUndo {
    fn journalled(seq: u64, mutation: Mutation) -> ToUndo {
        let (action, target) = mutation.describe();
        ToUndo { seq: Some(seq), mutation, shown: format!("{action} {target}") }
    }
}

/// What a rollback, a revert or a recovery undid, and what it could not (what, why).
#[derive(Debug, Default, Clone)]
pub struct RollbackOutcome {
    pub undone: Vec<String>,
    pub failed: Vec<(String, String)>,
    /// What the restored-state check read back, once it held; empty when it did not run or did not hold.
    pub verified: Vec<String>,
}

impl RollbackOutcome {
    pub fn restored(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Undoes the outstanding mutations of the ledger's journal that `which` selects, newest first.
pub(super) async fn undo_journalled(
    ledger: &Ledger,
    cluster: &Cluster,
    which: impl Fn(&Mutation) -> bool,
    by: UndoBy,
) -> RollbackOutcome {
    let path = ledger.journal_path().await;
    let entries = match journal::read(&path) {
        Ok(contents) => contents.entries,
        Err(e) => {
            return RollbackOutcome {
                failed: vec![(path.display().to_string(), e.to_string())],
                ..RollbackOutcome::default()
            };
        }
    };
    let trusted = ledger.journal_trusted_by_user().await;
    let mut refused = Vec::new();
    let mut items = Vec::new();
    for (seq, mutation, authentic) in journal::outstanding_authenticated(&entries) {
        if !which(&mutation) {
            continue;
        }
        match mutation.runs_commands() {
            Some(command) if !authentic && !trusted => match mutation.without_commands() {
                // The label is still lifted; the hook it names is not run.
                Some(lifted) => items.push(ToUndo::journalled(seq, lifted)),
                None => refused.push(refused_command(&path, seq, &mutation, &command)),
            },
            _ => items.push(ToUndo::journalled(seq, mutation)),
        }
    }
    let mut outcome = undo_all(ledger, cluster, items, by).await;
    outcome.failed.extend(refused);
    outcome
}

/// Why the command of an unauthenticated journal line was not run, and how to run it once read.
fn refused_command(path: &std::path::Path, seq: u64, mutation: &Mutation, command: &[String]) -> (String, String) {
    let (action, target) = mutation.describe();
    let run_dir = path.parent().map(|d| d.display().to_string()).unwrap_or_default();
    (
        format!("{action} {target}"),
        format!(
            "not run: journal line {seq} is not authenticated (no valid mac under {}), so the tool cannot tell it \
             wrote it; its command is `{}`: if that is the drill's, run `hybrid-drill recover --trust-journal {run_dir}`",
            journal::JOURNAL_KEY_ENV,
            command.join(" ")
        ),
    )
}

impl Mutation {
    /// The command this mutation's undo runs, when it runs one (an `exec` undo, a recovery or give-back hook, a
    /// host cut's last resort).
    pub(super) fn runs_commands(&self) -> Option<Vec<String>> {
        match self.undo() {
            Undo::Run { command, .. } => Some(command),
            Undo::UnlabelNode { last_resort: Some(hook), .. } => Some(hook.command),
            _ => None,
        }
    }

    /// This mutation with the commands its undo would run taken out, when what is left still undoes something.
    fn without_commands(&self) -> Option<Mutation> {
        match self {
            Mutation::LabelNode { step, node, label, .. } => Some(Mutation::LabelNode {
                step: step.clone(),
                node: node.clone(),
                label: label.clone(),
                last_resort: None,
            }),
            _ => None,
        }
    }
}

/// Undoes each in turn, each through the ledger: `undoing` journalled before it runs, its end after. A journal that
/// cannot be written is reported as a failure (the journal's path and the cause), never dropped. Consecutive host-cut
/// labels are lifted together: each may wait for its node and power-cycle it, and a site's servers boot side by side,
/// so lifting them one by one would add every node's wait and boot to the restore.
pub(super) async fn undo_all(ledger: &Ledger, cluster: &Cluster, items: Vec<ToUndo>, by: UndoBy) -> RollbackOutcome {
    let mut outcome = RollbackOutcome::default();
    for batch in side_by_side(items) {
        let performed = join_all(batch.iter().map(|item| undo_one(ledger, cluster, item, by))).await;
        for (item, performed) in batch.iter().zip(performed) {
            match performed.result {
                Some(Ok(_)) => outcome.undone.push(item.shown.clone()),
                Some(Err(e)) => outcome.failed.push((item.shown.clone(), e.to_string())),
                None => {
                    outcome.failed.push((item.shown.clone(), "not undone: its undo could not be journalled".into()))
                }
            }
            for failure in performed.journal_failures {
                outcome.failed.push(match failure {
                    MutationError::Journal { path, cause } => {
                        (path, format!("cannot journal the undo of {}: {cause}", item.shown))
                    }
                    other => (item.shown.clone(), other.to_string()),
                });
            }
        }
    }
    outcome
}

async fn undo_one(
    ledger: &Ledger,
    cluster: &Cluster,
    item: &ToUndo,
    by: UndoBy,
) -> Performed<Option<String>, UndoError> {
    let undo = item.mutation.undo();
    let settle = |result: &Result<Option<String>, UndoError>| settled(&item.mutation, by, result);
    ledger.perform(Stage::Undo(item.seq), &item.mutation, None, || undo.perform(cluster), settle).await
}

/// The undos in their order, in batches: a run of host-cut labels is one batch, anything else a batch of its own.
fn side_by_side(items: Vec<ToUndo>) -> Vec<Vec<ToUndo>> {
    let mut batches: Vec<Vec<ToUndo>> = Vec::new();
    for item in items {
        let is_label = matches!(item.mutation, Mutation::LabelNode { .. });
        match batches.last_mut() {
            Some(last) if is_label && matches!(last[0].mutation, Mutation::LabelNode { .. }) => last.push(item),
            _ => batches.push(vec![item]),
        }
    }
    batches
}

/// How the journal and the timeline record the end of one undo.
fn settled(m: &Mutation, by: UndoBy, result: &Result<Option<String>, UndoError>) -> Settled {
    let (action, target) = m.describe();
    let mut settled = match result {
        Ok(_) => by.undone(),
        Err(e) => Settled::new(EntryState::UndoFailed).note(e.to_string()),
    };
    if let Mutation::FailNode { step, recover: hook, .. } | Mutation::RemoveCapacity { step, give_back: hook, .. } = m {
        let exit_code = result.is_ok().then_some(0);
        settled = settled.event(Event::HookRan { step: step.clone(), command: hook.join(" "), exit_code });
    }
    if let Mutation::LabelNode { step, .. } = m {
        let hook = match result {
            Ok(Some(command)) => Some((command.clone(), Some(0))),
            Err(UndoError::LastResort { command, code, .. }) => Some((command.clone(), *code)),
            _ => None,
        };
        if let Some((command, exit_code)) = hook {
            settled = settled.event(Event::HookRan { step: step.clone(), command, exit_code });
        }
    }
    match result {
        Ok(_) if by == UndoBy::Rollback => settled.event(Event::UndoDone { action, target }),
        Ok(_) => settled,
        Err(e) => settled.event(Event::UndoFailed { action, target, error: e.to_string() }),
    }
}

/// A rollback (or a recovery) in the order the on-call needs: every change but the silences undone, the restored-state
/// check for up to `wait`, and only then the silences expired, whether the check held or its wait ran out. The restore
/// itself pages (nodes coming back, pods rescheduled), so a silence expired before the check would page the on-call
/// for the drill's own restore.
pub(super) async fn rollback_then_unsilence(
    ledger: &Ledger,
    cluster: &Cluster,
    scope: &RestoreScope,
    wait: Duration,
    by: UndoBy,
) -> RollbackOutcome {
    let is_silence = |m: &Mutation| matches!(m, Mutation::Silence { .. });
    let mut outcome = undo_journalled(ledger, cluster, |m| !is_silence(m), by).await;
    verify_after(ledger, cluster, scope, wait, &mut outcome).await;
    let silences = undo_journalled(ledger, cluster, is_silence, by).await;
    outcome.undone.extend(silences.undone);
    outcome.failed.extend(silences.failed);
    outcome
}

/// Ends a rollback or a recovery with the restored-state check: what it read back goes into the outcome; what is left
/// fails it, one failure per node, and reopens the journal's undone changes for a later `recover`.
pub(super) async fn verify_after(
    ledger: &Ledger,
    cluster: &Cluster,
    scope: &RestoreScope,
    wait: Duration,
    outcome: &mut RollbackOutcome,
) {
    let path = ledger.journal_path().await;
    let entries = match journal::read(&path) {
        Ok(contents) => contents.entries,
        Err(e) => return outcome.failed.push((path.display().to_string(), e.to_string())),
    };
    if !verify::changed_anything(&entries) {
        return;
    }
    match verify::check(cluster, scope, &entries, wait).await {
        Ok(checked) => {
            outcome.verified = checked;
            ledger.record(Event::RestoreChecked { held: true, left: Vec::new() });
        }
        Err(left) => {
            let shown = left.iter().map(|l| format!("{}: {}", l.object, l.left)).collect();
            ledger.record(Event::RestoreChecked { held: false, left: shown });
            let waited = humantime::format_duration(wait);
            outcome.failed.extend(left.iter().map(|l| (l.object.clone(), format!("{} after {waited}", l.left))));
            if let Err(e) = verify::reopen(ledger, &left).await {
                outcome.failed.push((path.display().to_string(), e.to_string()));
            }
        }
    }
}
