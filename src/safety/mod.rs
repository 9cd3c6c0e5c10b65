//! Safety: the one place that mutates a cluster (journalled first), rollback, and recovery from a journal.

pub mod journal;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::Mutex;

use crate::cluster::policy::{self, PolicyKind, PolicyRef};
use crate::cluster::{Cluster, first_line, is_not_found};
use crate::timeline::{Event, Timeline};
use journal::{EntryState, Journal, Mutation};

/// Annotation that marks every object a run changed, so the cluster itself records what a run touched. Objects a
/// run creates or labels also carry it as a label (value: [`run_label`]), so recovery can list them.
pub const RUN_ANNOTATION: &str = "hybrid-drill.io/run-id";

/// A run's id as a label value: label values stop at 63 characters, so a long drill name is shortened and the
/// timestamp kept.
pub fn run_label(run_id: &str) -> String {
    if run_id.len() <= 63 {
        return run_id.to_string();
    }
    let (name, stamp) = run_id.rsplit_once('-').unwrap_or((run_id, ""));
    let keep = 63usize.saturating_sub(stamp.len() + 1);
    let name = name[..keep.min(name.len())].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{name}-{stamp}")
}
const FIELD_MANAGER: &str = "hybrid-drill";

#[derive(Debug, thiserror::Error)]
pub enum MutationError {
    #[error("cannot write the journal {path}: {source}")]
    Journal { path: String, source: std::io::Error },
    #[error("{action} {target} failed: {message}")]
    Api { action: String, target: String, message: String },
    #[error("command `{command}` could not run: {message}")]
    Spawn { command: String, message: String },
    #[error("command `{command}` did not finish within {seconds}s")]
    CommandTimeout { command: String, seconds: u64 },
}

/// Names the environment variable that makes a run die on the spot at one mutation, to prove recovery:
/// `N:before` dies once mutation N's intent is journalled, before it is made; `N:after` once it is made, before its
/// outcome is journalled. Like `kill -9`, nothing is rolled back; `hybrid-drill recover` must finish the job.
pub const CRASH_AT_ENV: &str = "HYBRID_DRILL_CRASH_AT";

#[derive(PartialEq)]
enum CrashWhen {
    Before,
    After,
}

fn crash_point(seq: u64, when: CrashWhen) {
    let Ok(spec) = std::env::var(CRASH_AT_ENV) else { return };
    let Some((n, at)) = spec.split_once(':') else { return };
    let wanted = match at {
        "before" => CrashWhen::Before,
        "after" => CrashWhen::After,
        _ => return,
    };
    if n.parse() == Ok(seq) && wanted == when {
        eprintln!("{CRASH_AT_ENV}={spec}: dying without restoring");
        std::process::abort();
    }
}

/// What an eviction request came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Eviction {
    Evicted,
    AlreadyGone,
    /// The API server answered 429: a PodDisruptionBudget allows no disruption now.
    Blocked {
        pdb: Option<String>,
        message: String,
    },
}

/// Every change a drill makes goes through here: journal the intent, make it, journal the outcome.
pub struct Mutator {
    cluster: Cluster,
    journal: Mutex<Journal>,
    timeline: Timeline,
    run_id: String,
}

impl Mutator {
    pub fn new(cluster: Cluster, journal: Journal, timeline: Timeline, run_id: String) -> Mutator {
        Mutator { cluster, journal: Mutex::new(journal), timeline, run_id }
    }

    async fn intend(&self, m: &Mutation) -> Result<u64, MutationError> {
        let mut j = self.journal.lock().await;
        let seq =
            j.intend(m).map_err(|source| MutationError::Journal { path: j.path().display().to_string(), source })?;
        crash_point(seq, CrashWhen::Before);
        Ok(seq)
    }

    async fn settle(
        &self,
        seq: u64,
        state: EntryState,
        m: &Mutation,
        note: Option<String>,
    ) -> Result<(), MutationError> {
        if matches!(state, EntryState::Done | EntryState::Failed) {
            crash_point(seq, CrashWhen::After);
        }
        let mut j = self.journal.lock().await;
        j.write(seq, state, m, note)
            .map_err(|source| MutationError::Journal { path: j.path().display().to_string(), source })
    }

    /// Cordons a node, unless someone already had: a node cordoned before the drill stays as it was.
    pub async fn cordon(&self, node: &str) -> Result<(), MutationError> {
        let nodes: Api<Node> = Api::all(self.cluster.client.clone());
        let current = transient_retry(|| nodes.get(node)).await.map_err(|e| api_error("cordon", node, &e))?;
        let was_unschedulable = current.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
        let m = Mutation::Cordon { node: node.into(), was_unschedulable };
        if was_unschedulable {
            // Journalled as a fact so the report and recovery know not to uncordon it.
            let seq = self.intend(&m).await?;
            return self.settle(seq, EntryState::Done, &m, Some("already cordoned before the drill".into())).await;
        }
        let seq = self.intend(&m).await?;
        let patch =
            json!({"spec": {"unschedulable": true}, "metadata": {"annotations": {RUN_ANNOTATION: self.run_id}}});
        let (params, merge) = (patch_params(), Patch::Merge(&patch));
        match transient_retry(|| nodes.patch(node, &params, &merge)).await {
            Ok(_) => {
                self.settle(seq, EntryState::Done, &m, None).await?;
                self.timeline.record(Event::Cordoned { node: node.into() });
                Ok(())
            }
            Err(e) => {
                self.settle(seq, EntryState::Failed, &m, Some(e.to_string())).await?;
                Err(api_error("cordon", node, &e))
            }
        }
    }

    /// Uncordons a node as part of the drill (the return); the cordon it reverses no longer needs undoing.
    pub async fn uncordon(&self, node: &str) -> Result<(), MutationError> {
        let m = Mutation::Uncordon { node: node.into() };
        let seq = self.intend(&m).await?;
        match uncordon_node(&self.cluster, node).await {
            Ok(()) => {
                self.settle(seq, EntryState::Done, &m, None).await?;
                let entries = journal::read(Path::new(&self.journal_path_async().await)).unwrap_or_default();
                for (cordon_seq, cordon) in journal::outstanding(&entries) {
                    if matches!(&cordon, Mutation::Cordon { node: n, .. } if n == node) {
                        self.settle(cordon_seq, EntryState::Reverted, &cordon, Some("uncordoned by the drill".into()))
                            .await?;
                    }
                }
                self.timeline.record(Event::Uncordoned { node: node.into() });
                Ok(())
            }
            Err(message) => {
                self.settle(seq, EntryState::Failed, &m, Some(message.clone())).await?;
                Err(MutationError::Api { action: "uncordon".into(), target: format!("node/{node}"), message })
            }
        }
    }

    async fn journal_path_async(&self) -> String {
        self.journal.lock().await.path().display().to_string()
    }

    /// Asks the Eviction API to evict a pod, which honours its PodDisruptionBudgets.
    pub async fn evict(&self, namespace: &str, pod: &str, node: &str) -> Result<Eviction, MutationError> {
        let m = Mutation::Evict { namespace: namespace.into(), pod: pod.into(), node: node.into() };
        let seq = self.intend(&m).await?;
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), namespace);
        self.timeline.record(Event::EvictionRequested { pod: format!("{namespace}/{pod}"), node: node.into() });
        let evict_params = EvictParams::default();
        match transient_retry(|| pods.evict(pod, &evict_params)).await {
            Ok(_) => {
                self.settle(seq, EntryState::Done, &m, None).await?;
                self.timeline.record(Event::Evicted { pod: format!("{namespace}/{pod}"), node: node.into() });
                Ok(Eviction::Evicted)
            }
            Err(e) if is_not_found(&e) => {
                self.settle(seq, EntryState::Done, &m, Some("already gone".into())).await?;
                Ok(Eviction::AlreadyGone)
            }
            Err(kube::Error::Api(status)) if status.code == 429 => {
                let cause =
                    status.details.as_ref().and_then(|d| d.causes.iter().find(|c| c.reason == "DisruptionBudget"));
                let mut pdb = cause.and_then(|c| pdb_name_from_message(&c.message));
                if pdb.is_none() {
                    pdb = self.blocking_pdb(namespace, pod).await;
                }
                let message = cause.map(|c| c.message.clone()).unwrap_or_else(|| status.message.clone());
                self.settle(seq, EntryState::Failed, &m, Some(message.clone())).await?;
                self.timeline.record(Event::EvictionBlocked {
                    pod: format!("{namespace}/{pod}"),
                    pdb: pdb.clone(),
                    message: message.clone(),
                });
                Ok(Eviction::Blocked { pdb, message })
            }
            Err(e) => {
                self.settle(seq, EntryState::Failed, &m, Some(e.to_string())).await?;
                Err(api_error("evict", &format!("pod/{namespace}/{pod}"), &e))
            }
        }
    }

    /// The PodDisruptionBudget whose selector matches the pod, when the API server did not name it.
    async fn blocking_pdb(&self, namespace: &str, pod: &str) -> Option<String> {
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), namespace);
        let labels = pods.get(pod).await.ok()?.labels().clone();
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.cluster.client.clone(), namespace);
        let list = pdbs.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .find(|pdb| {
                let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
                selector
                    .and_then(|s| s.match_labels.as_ref())
                    .is_some_and(|ml| ml.iter().all(|(k, v)| labels.get(k) == Some(v)))
            })
            .map(|pdb| pdb.name_any())
    }

    /// A rollout restart, done the way kubectl does it: a new pod-template annotation.
    pub async fn restart(&self, namespace: &str, kind: &str, name: &str) -> Result<(), MutationError> {
        let m = Mutation::Restart { namespace: namespace.into(), kind: kind.into(), name: name.into() };
        let seq = self.intend(&m).await?;
        let now = chrono::Utc::now().to_rfc3339();
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": now,
        }}}}});
        let params = patch_params();
        let client = self.cluster.client.clone();
        let merge = Patch::Merge(&patch);
        let result = match kind {
            "statefulset" => {
                let api = Api::<StatefulSet>::namespaced(client, namespace);
                transient_retry(|| api.patch(name, &params, &merge)).await.map(|_| ())
            }
            _ => {
                let api = Api::<Deployment>::namespaced(client, namespace);
                transient_retry(|| api.patch(name, &params, &merge)).await.map(|_| ())
            }
        };
        match result {
            Ok(()) => {
                self.settle(seq, EntryState::Done, &m, None).await?;
                self.timeline.record(Event::RestartTriggered { target: format!("{kind}/{namespace}/{name}") });
                Ok(())
            }
            Err(e) => {
                self.settle(seq, EntryState::Failed, &m, Some(e.to_string())).await?;
                Err(api_error("restart", &format!("{kind}/{namespace}/{name}"), &e))
            }
        }
    }

    /// Runs a user's command (a hook); its undo command, if any, runs on rollback.
    pub async fn exec(
        &self,
        step: &str,
        command: &[String],
        undo: Option<Vec<String>>,
        timeout: Duration,
    ) -> Result<i32, MutationError> {
        let m = Mutation::Exec { step: step.into(), command: command.to_vec(), undo };
        self.run_hook(&m, step, command, timeout).await
    }

    /// Journals `m`, runs `command` with a deadline, records it in the timeline and journals how it ended.
    async fn run_hook(
        &self,
        m: &Mutation,
        step: &str,
        command: &[String],
        timeout: Duration,
    ) -> Result<i32, MutationError> {
        let seq = self.intend(m).await?;
        let outcome = run_command(command, timeout).await;
        let code = outcome.as_ref().ok().copied();
        self.timeline.record(Event::HookRan { step: step.into(), command: command.join(" "), exit_code: code });
        let state = if code == Some(0) { EntryState::Done } else { EntryState::Failed };
        self.settle(seq, state, m, outcome.as_ref().err().map(|e| e.to_string())).await?;
        outcome
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn run_label(&self) -> String {
        run_label(&self.run_id)
    }

    /// Creates one of a link cut's deny policies; its undo deletes it.
    pub async fn create_policy(&self, policy: &PolicyRef, object: serde_json::Value) -> Result<(), MutationError> {
        let target = policy.to_string();
        let kind = PolicyKind::of(&policy.api_version, &policy.kind).ok_or_else(|| MutationError::Api {
            action: "create".into(),
            target: target.clone(),
            message: "a policy kind this tool does not know".into(),
        })?;
        let object: DynamicObject = serde_json::from_value(object).map_err(|e| MutationError::Api {
            action: "create".into(),
            target: target.clone(),
            message: e.to_string(),
        })?;
        let m = Mutation::CreatePolicy { policy: policy.clone() };
        let seq = self.intend(&m).await?;
        let api = kind.api(&self.cluster.client, policy.namespace.as_deref());
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        match api.create(&params, &object).await {
            Ok(_) => {
                self.settle(seq, EntryState::Done, &m, None).await?;
                self.timeline.record(Event::PolicyApplied { policy: target });
                Ok(())
            }
            Err(e) => {
                self.settle(seq, EntryState::Failed, &m, Some(e.to_string())).await?;
                Err(api_error("create", &target, &e))
            }
        }
    }

    /// Labels a pod with the run's id; `false` when the pod is already gone. Its undo removes the label.
    pub async fn label_pod(&self, namespace: &str, pod: &str) -> Result<bool, MutationError> {
        let m = Mutation::LabelPod { namespace: namespace.into(), pod: pod.into(), label: RUN_ANNOTATION.into() };
        let seq = self.intend(&m).await?;
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), namespace);
        let patch = json!({"metadata": {"labels": {RUN_ANNOTATION: self.run_label()}}});
        match pods.patch(pod, &patch_params(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                self.settle(seq, EntryState::Done, &m, None).await?;
                Ok(true)
            }
            Err(e) if is_not_found(&e) => {
                self.settle(seq, EntryState::Done, &m, Some("already gone".into())).await?;
                Ok(false)
            }
            Err(e) => {
                self.settle(seq, EntryState::Failed, &m, Some(e.to_string())).await?;
                Err(api_error("label", &format!("pod/{namespace}/{pod}"), &e))
            }
        }
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
    ) -> Result<i32, MutationError> {
        let m = Mutation::FailNode {
            step: step.into(),
            node: node.map(str::to_string),
            command: command.to_vec(),
            recover: recover.to_vec(),
            timeout_seconds: timeout.as_secs().max(1),
        };
        self.run_hook(&m, step, command, timeout).await
    }

    /// Undoes, as a step of the drill, the outstanding mutations `which` selects (the `restore` of a cut or a node
    /// failure), newest first; they are journalled as reverted so the rollback does not undo them again.
    pub async fn revert(&self, which: impl Fn(&Mutation) -> bool) -> RollbackOutcome {
        self.undo_outstanding(which, true).await
    }

    /// Undoes every outstanding mutation, newest first, each retried with backoff and journalled.
    pub async fn rollback(&self) -> RollbackOutcome {
        self.undo_outstanding(|_| true, false).await
    }

    /// `by_drill`: a step undoes them as part of the drill (journalled `reverted`), not the rollback of a stop.
    async fn undo_outstanding(&self, which: impl Fn(&Mutation) -> bool, by_drill: bool) -> RollbackOutcome {
        let path = self.journal_path_async().await;
        let entries = match journal::read(Path::new(&path)) {
            Ok(e) => e,
            Err(e) => return RollbackOutcome { undone: Vec::new(), failed: vec![(path, e.to_string())] },
        };
        let mut outcome = RollbackOutcome::default();
        for (seq, m) in journal::outstanding(&entries).into_iter().filter(|(_, m)| which(m)) {
            let (action, target) = m.describe();
            let result = undo_with_retries(&self.cluster, &m).await;
            if let Mutation::FailNode { step, recover, .. } = &m {
                let exit_code = result.is_ok().then_some(0);
                self.timeline.record(Event::HookRan { step: step.clone(), command: recover.join(" "), exit_code });
            }
            match result {
                Ok(()) if by_drill => {
                    let _ = self.settle(seq, EntryState::Reverted, &m, Some("restored by the drill".into())).await;
                    outcome.undone.push(format!("{action} {target}"));
                }
                Ok(()) => {
                    let _ = self.settle(seq, EntryState::Undone, &m, None).await;
                    self.timeline.record(Event::UndoDone { action: action.clone(), target: target.clone() });
                    outcome.undone.push(format!("{action} {target}"));
                }
                Err(error) => {
                    let _ = self.settle(seq, EntryState::UndoFailed, &m, Some(error.clone())).await;
                    self.timeline.record(Event::UndoFailed {
                        action: action.clone(),
                        target: target.clone(),
                        error: error.clone(),
                    });
                    outcome.failed.push((format!("{action} {target}"), error));
                }
            }
        }
        outcome
    }
}

#[derive(Debug, Default, Clone)]
pub struct RollbackOutcome {
    pub undone: Vec<String>,
    pub failed: Vec<(String, String)>,
}

impl RollbackOutcome {
    pub fn restored(&self) -> bool {
        self.failed.is_empty()
    }
}

/// "The disruption budget llm-inference needs 4 healthy pods ..." names the budget.
fn pdb_name_from_message(message: &str) -> Option<String> {
    let rest = message.split("disruption budget ").nth(1)?;
    rest.split_whitespace().next().map(str::to_string)
}

/// Retries a request while the API server cannot be reached (a restart, a dropped connection), for up to a minute.
/// Answers from the server, errors included, are returned at once: only the transport is retried.
async fn transient_retry<T, F, Fut>(mut request: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut delay = Duration::from_millis(500);
    loop {
        match request().await {
            Err(e) if !matches!(e, kube::Error::Api(_)) && tokio::time::Instant::now() + delay < give_up => {
                tracing::warn!("API server unreachable, retrying in {delay:?}: {e}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            result => return result,
        }
    }
}

/// Patches are attributed to the tool in each object's managedFields, for whoever audits the cluster later.
fn patch_params() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

fn api_error(action: &str, target: &str, e: &kube::Error) -> MutationError {
    MutationError::Api { action: action.into(), target: target.into(), message: first_line(&e.to_string()) }
}

async fn uncordon_node(cluster: &Cluster, node: &str) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let patch = json!({"spec": {"unschedulable": null}, "metadata": {"annotations": {RUN_ANNOTATION: null}}});
    let (params, merge) = (patch_params(), Patch::Merge(&patch));
    match transient_retry(|| nodes.patch(node, &params, &merge)).await {
        Ok(_) => Ok(()),
        // A node that is gone has nothing left to restore.
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(first_line(&e.to_string())),
    }
}

async fn undo(cluster: &Cluster, m: &Mutation) -> Result<(), String> {
    match m {
        Mutation::Cordon { node, was_unschedulable: false } => uncordon_node(cluster, node).await,
        Mutation::Exec { undo: Some(command), .. } => run_undo_command(command, Duration::from_secs(300)).await,
        Mutation::FailNode { recover, timeout_seconds, .. } => {
            run_undo_command(recover, Duration::from_secs(*timeout_seconds)).await
        }
        Mutation::CreatePolicy { policy } => delete_policy(cluster, policy).await,
        Mutation::LabelPod { namespace, pod, label } => {
            let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), namespace);
            let patch = json!({"metadata": {"labels": {label.as_str(): null}}});
            match pods.patch(pod, &patch_params(), &Patch::Merge(&patch)).await {
                Ok(_) => Ok(()),
                // A pod that is gone carries no label any more.
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(first_line(&e.to_string())),
            }
        }
        _ => Ok(()),
    }
}

async fn run_undo_command(command: &[String], timeout: Duration) -> Result<(), String> {
    match run_command(command, timeout).await {
        Ok(0) => Ok(()),
        Ok(code) => Err(format!("undo command `{}` exited {code}", command.join(" "))),
        Err(e) => Err(e.to_string()),
    }
}

async fn delete_policy(cluster: &Cluster, policy: &PolicyRef) -> Result<(), String> {
    let kind = PolicyKind::of(&policy.api_version, &policy.kind)
        .ok_or_else(|| format!("{policy}: a policy kind this tool does not know"))?;
    match kind.api(&cluster.client, policy.namespace.as_deref()).delete(&policy.name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        // Gone already, or its CRD with it: nothing is left to cut.
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(first_line(&e.to_string())),
    }
}

async fn undo_with_retries(cluster: &Cluster, m: &Mutation) -> Result<(), String> {
    let mut delay = Duration::from_millis(500);
    let mut last = String::new();
    for _ in 0..6 {
        match undo(cluster, m).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(8));
    }
    Err(last)
}

/// Runs a program (no shell) with a deadline, its output passed through to the terminal's stderr.
pub async fn run_command(command: &[String], timeout: Duration) -> Result<i32, MutationError> {
    let shown = command.join(" ");
    let Some((program, args)) = command.split_first() else {
        return Err(MutationError::Spawn { command: shown, message: "empty command".into() });
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| MutationError::Spawn { command: shown.clone(), message: e.to_string() })?;
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => Ok(status.code().unwrap_or(-1)),
        Ok(Err(e)) => Err(MutationError::Spawn { command: shown, message: e.to_string() }),
        Err(_) => {
            let _ = child.kill().await;
            Err(MutationError::CommandTimeout { command: shown, seconds: timeout.as_secs() })
        }
    }
}

/// Restores a cluster from a run's journal: what `recover` does after a crash. Safe to repeat.
pub async fn recover(cluster: &Cluster, journal_path: &Path) -> Result<RollbackOutcome, MutationError> {
    let entries = journal::read(journal_path)
        .map_err(|source| MutationError::Journal { path: journal_path.display().to_string(), source })?;
    let mut journal = Journal::create(journal_path)
        .map_err(|source| MutationError::Journal { path: journal_path.display().to_string(), source })?;
    let mut outcome = RollbackOutcome::default();
    for (seq, m) in journal::outstanding(&entries) {
        let (action, target) = m.describe();
        let result = undo_with_retries(cluster, &m).await;
        let (state, note) = match &result {
            Ok(()) => (EntryState::Undone, Some("recovered".to_string())),
            Err(e) => (EntryState::UndoFailed, Some(e.clone())),
        };
        journal
            .write(seq, state, &m, note)
            .map_err(|source| MutationError::Journal { path: journal_path.display().to_string(), source })?;
        match result {
            Ok(()) => outcome.undone.push(format!("{action} {target}")),
            Err(e) => outcome.failed.push((format!("{action} {target}"), e)),
        }
    }
    Ok(outcome)
}

/// Restores what the cluster itself says a run changed, for when its journal is gone: every node still carrying
/// the run annotation (of `run_id`, or of any run) is uncordoned and unmarked; every cut policy labelled with the
/// run is deleted and every pod labelled with it unlabelled.
pub async fn recover_marks(cluster: &Cluster, run_id: Option<&str>) -> Result<RollbackOutcome, MutationError> {
    let mut outcome = recover_node_marks(cluster, run_id).await?;
    let selector = match run_id {
        Some(id) => format!("{RUN_ANNOTATION}={}", run_label(id)),
        None => RUN_ANNOTATION.to_string(),
    };
    let mut marked = Vec::new();
    for kind in policy::ALL {
        let list = match kind.api(&cluster.client, None).list(&ListParams::default().labels(&selector)).await {
            Ok(l) => l,
            // Not installed here, so no run created one.
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(api_error("list", kind.plural, &e)),
        };
        marked.extend(list.items.into_iter().map(|o| {
            let m = Mutation::CreatePolicy {
                policy: PolicyRef {
                    api_version: kind.api_version(),
                    kind: kind.kind.into(),
                    name: o.name_any(),
                    namespace: o.namespace(),
                },
            };
            (m, o.labels().get(RUN_ANNOTATION).cloned().unwrap_or_default())
        }));
    }
    let pods: Api<Pod> = Api::all(cluster.client.clone());
    let list = pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| api_error("list", "pods", &e))?;
    marked.extend(list.items.into_iter().map(|p| {
        let m = Mutation::LabelPod {
            namespace: p.namespace().unwrap_or_default(),
            pod: p.name_any(),
            label: RUN_ANNOTATION.into(),
        };
        (m, p.labels().get(RUN_ANNOTATION).cloned().unwrap_or_default())
    }));
    for (m, mark) in marked {
        let (action, target) = m.describe();
        let what = format!("{action} {target} (labelled by run {mark})");
        match undo_with_retries(cluster, &m).await {
            Ok(()) => outcome.undone.push(what),
            Err(e) => outcome.failed.push((what, e)),
        }
    }
    Ok(outcome)
}

async fn recover_node_marks(cluster: &Cluster, run_id: Option<&str>) -> Result<RollbackOutcome, MutationError> {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let list = nodes.list(&ListParams::default()).await.map_err(|e| api_error("list", "nodes", &e))?;
    let mut outcome = RollbackOutcome::default();
    for node in list.items {
        let Some(mark) = node.annotations().get(RUN_ANNOTATION) else { continue };
        if run_id.is_some_and(|id| id != mark) {
            continue;
        }
        let name = node.name_any();
        let undo = Mutation::Cordon { node: name.clone(), was_unschedulable: false };
        match undo_with_retries(cluster, &undo).await {
            Ok(()) => outcome.undone.push(format!("cordon node/{name} (marked by run {mark})")),
            Err(e) => outcome.failed.push((format!("cordon node/{name} (marked by run {mark})"), e)),
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_labels_fit_a_label_value() {
        assert_eq!(run_label("dx-cut-20261202t101500z"), "dx-cut-20261202t101500z");
        let long = format!("{}-20261202t101500z", "a-very-long-drill-name-".repeat(2) + "that-ends");
        let label = run_label(&long);
        assert!(label.len() <= 63 && label.ends_with("-20261202t101500z"), "{label}");
        assert!(label.starts_with("a-very-long-drill-name-a-very-long-drill-n"), "{label}");
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
}
