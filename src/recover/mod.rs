//! `hybrid-drill recover`: restore a cluster from the journals of interrupted runs, or from the marks a run left,
//! under the drill lock; then seal each crashed run it restored. `safety::recover` undoes one journal; this room
//! finds the journals of the cluster reached, holds the lock, and records what was done in the runs' directories.

mod output;

use std::path::{Path, PathBuf};

use crate::cluster::marks::RunId;
use crate::cluster::{Cluster, KubeContext, ObservedCluster};
use crate::exit::{EXIT_INVALID, EXIT_PASSED, EXIT_REFUSED, EXIT_RESTORE_FAILED};
use crate::record::{find_journals, run_id_of};
use crate::report::Recovery;
use crate::safety::{self, RestoreScope};

/// What `recover` was asked: one run directory, or every run under the reports directory.
pub struct RecoverOptions<'a> {
    pub run_dir: Option<PathBuf>,
    pub reports_dir: &'a Path,
    pub trust_journal: Option<&'a Path>,
    pub target: &'a KubeContext,
    pub signing_key: Option<&'a str>,
    /// `-o json`: one object at the end (see [`output`]) instead of a line per change.
    pub json: bool,
}

/// Why `recover` touched nothing.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Key(#[from] crate::evidence::keys::KeyError),
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    /// Boxed: it names both clusters in full.
    #[error(transparent)]
    Mismatch(Box<ClusterMismatch>),
    #[error(transparent)]
    Lock(#[from] safety::lock::LockError),
}

impl RecoverError {
    /// Refused while another drill or recover holds the lock; any other problem is invalid set-up.
    pub fn exit_code(&self) -> u8 {
        match self {
            RecoverError::Lock(e) if e.is_held() => EXIT_REFUSED,
            _ => EXIT_INVALID,
        }
    }
}

/// Restores what the journals and the marks say is outstanding, then seals the crashed runs restored; the exit code
/// says whether everything is restored and verified. An error: nothing was touched.
pub async fn recover(opts: RecoverOptions<'_>) -> Result<u8, RecoverError> {
    let RecoverOptions { run_dir, reports_dir, trust_journal, target, signing_key, json } = opts;
    // Read before anything is touched: a key that cannot be read would leave a restored run unsealed.
    let key = signing_key.map(crate::evidence::SigningKey::load).transpose()?;
    let journals: Vec<PathBuf> = match &run_dir {
        Some(dir) => vec![dir.join("journal.jsonl")],
        None => find_journals(reports_dir),
    };
    // Marks in the cluster are scoped to the named run; without one, any run's marks are restored.
    let run_id = run_dir.as_ref().and_then(|d| run_id_of(d)).map(RunId::new);
    let marks_journal = marks_journal(run_dir.as_deref(), reports_dir);
    let cluster = Cluster::connect(target).await?;
    cluster.ping().await?;
    // The cluster first: a journal restored against another cluster would "verify" what it never changed there.
    let journals = journals_of_this_cluster(&cluster, run_dir.as_deref(), journals)
        .await
        .map_err(|e| RecoverError::Mismatch(Box::new(e)))?;
    // Recover holds the drill lock too: a drill must not start while a recover restores, nor two recovers run.
    let lock = take_recover_lock(&cluster, run_dir.as_deref(), &journals, reports_dir).await?;
    if let Some(warning) = &lock.took_over {
        eprintln!("warning: {}", crate::secrets::redact(warning));
    }
    // Nodes the drill file selects that cannot be listed are not checked: the restore is then not verified (exit 4).
    let (nodes, unlisted) = match on_prem_nodes_of(&cluster, run_dir.as_deref()).await {
        Ok(nodes) => (nodes, None),
        Err(e) => (Default::default(), Some(e)),
    };
    let mut said = output::Said::new(json);
    if let Some(e) = &unlisted {
        said.error(&e.to_string());
    }
    let scope = RestoreScope { nodes, run: run_id.clone() };
    let trusted = trust_journal.and_then(|d| std::fs::canonicalize(d).ok());
    let (mut code, restored) =
        recover_with(&cluster, journals, &scope, &marks_journal, trusted.as_deref(), &mut said).await;
    if let Some(e) = unlisted {
        said.not_verified(&e.to_string());
        code = EXIT_RESTORE_FAILED;
    }
    if code == EXIT_PASSED {
        // Only once every restore held: a crashed run is called restored only when it was.
        code = seal_crashed_runs(&cluster, run_dir.as_deref(), restored, key.as_ref(), &mut said).await;
    }
    if let Err(e) = lock.release().await {
        eprintln!("warning: the drill lock was not released (it falls free after its duration): {e}");
    }
    said.finish(code);
    Ok(code)
}

/// Where the undos found by the marks are journalled: in the run's own journal when there is a readable one, else in
/// one of their own under the reports directory, where `recover` looks next time (see `recover_marks`).
fn marks_journal(run_dir: Option<&Path>, reports_dir: &Path) -> PathBuf {
    match run_dir {
        Some(dir) if dir.is_dir() && safety::journal::read(&dir.join("journal.jsonl")).is_ok() => {
            dir.join("journal.jsonl")
        }
        _ => {
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
            reports_dir.join("recover").join(stamp).join("journal.jsonl")
        }
    }
}

/// Why `recover` will not act on a run: its cluster is not the one reached, or the one reached cannot be identified.
#[derive(Debug, thiserror::Error)]
pub enum ClusterMismatch {
    #[error(
        "run {run} was against {}, but this is {}: nothing was touched; recover it with the kubeconfig and context of its own cluster (--kubeconfig, --context)",
        then.describe(),
        here.describe()
    )]
    OtherCluster { run: String, then: ObservedCluster, here: ObservedCluster },
    #[error(transparent)]
    Unidentified(#[from] crate::cluster::ClusterError),
}

/// The journals whose run was against the cluster reached, judged on the identity each run recorded
/// (`cluster.json`: the kube-system UID; a context may name another cluster, and one cluster may have many
/// contexts). Named run directory of another cluster: refused, naming both, before anything is touched.
/// Journals found under the reports directory: those of other clusters are left out, each named on stderr. A run that
/// recorded no identity (made before runs recorded one) is trusted to the context, as before.
async fn journals_of_this_cluster(
    cluster: &Cluster,
    run_dir: Option<&Path>,
    journals: Vec<PathBuf>,
) -> Result<Vec<PathBuf>, ClusterMismatch> {
    let recorded = |journal: &PathBuf| journal.parent().and_then(ObservedCluster::read);
    if journals.iter().all(|j| recorded(j).is_none()) {
        return Ok(journals);
    }
    let here = cluster.observe().await?;
    let mut kept = Vec::new();
    for journal in journals {
        match recorded(&journal) {
            Some(then) if then.kube_system_uid != here.kube_system_uid => {
                let run = journal.parent().unwrap_or(&journal).display().to_string();
                if run_dir.is_some() {
                    return Err(ClusterMismatch::OtherCluster { run, then, here });
                }
                eprintln!("note: left out {run}: it was against {}, not this cluster", then.describe());
            }
            _ => kept.push(journal),
        }
    }
    Ok(kept)
}

/// Takes the drill lock for `recover`: the run's own (its drill file's `spec.lock`), else the default one. The lock
/// of a run being recovered is taken over at once when that run's process is gone.
async fn take_recover_lock(
    cluster: &Cluster,
    run_dir: Option<&Path>,
    journals: &[PathBuf],
    reports_dir: &Path,
) -> Result<safety::lock::HeldLock, safety::lock::LockError> {
    let lease = run_dir
        .and_then(|d| crate::drill::load(&d.join("drill.yaml")).ok())
        .map(|loaded| loaded.drill.spec.lock)
        .unwrap_or_default();
    // The runs being recovered: by their timeline, and by the lock their journal says they took (a run that died
    // taking it has no timeline entry yet).
    let mut runs: Vec<String> = journals.iter().filter_map(|j| j.parent().and_then(run_id_of)).collect();
    let journalled = journals.iter().filter_map(|j| safety::journal::read(j).ok()).flat_map(|c| c.entries);
    runs.extend(journalled.filter_map(|e| match e.mutation {
        safety::journal::Mutation::HoldLease { holder, .. } => Some(holder),
        _ => None,
    }));
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string().to_lowercase();
    let claimant =
        crate::cluster::lease::Claimant::this_process(&format!("recover-{stamp}"), run_dir.unwrap_or(reports_dir));
    let claim = safety::lock::Claim::Recover { runs: &runs };
    let mut observer = crate::cluster::lease::Observer::default();
    let say = |text: &str| eprintln!("note: {text}");
    safety::lock::check(cluster, &lease, claim, &claimant.host, &mut observer, &say).await?;
    safety::lock::take(cluster, &lease, &claimant, claim, observer).await
}

/// The on-prem nodes the run's own copy of its drill file selects, which the restored-state check covers besides
/// those its journal names; none when the run directory holds no readable drill file. A list the API server does not
/// answer is an error: the check would silently skip those nodes.
async fn on_prem_nodes_of(
    cluster: &Cluster,
    run_dir: Option<&Path>,
) -> Result<std::collections::BTreeSet<String>, UnlistedNodes> {
    let Some(loaded) = run_dir.and_then(|d| crate::drill::load(&d.join("drill.yaml")).ok()) else {
        return Ok(Default::default());
    };
    let selector = loaded.drill.spec.targets.on_prem.nodes.as_str().to_string();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(cluster.client.clone());
    match nodes.list(&kube::api::ListParams::default().labels(&selector)).await {
        Ok(list) => Ok(list.items.iter().map(kube::ResourceExt::name_any).collect()),
        Err(error) => Err(UnlistedNodes { selector, error }),
    }
}

/// The on-prem nodes of a run's drill file could not be listed, so the restore cannot be checked on them.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot list the on-prem nodes the run's drill file selects ({selector}): {}; the restore was not checked on them",
    crate::cluster::first_line(&.error.to_string())
)]
struct UnlistedNodes {
    selector: String,
    error: kube::Error,
}

/// What `recover` did for one run's journal: each undo, and each check of the restored state that held.
#[derive(Debug, Default)]
struct Restored {
    journal: PathBuf,
    undone: Vec<String>,
    verified: Vec<String>,
}

/// Records what `recover` did in each crashed run it restored and seals its directory (manifest, and signature with
/// `key`): a run directory named on the command line, or one whose journal it restored. A run that finished, or is
/// sealed already, is left as it is.
async fn seal_crashed_runs(
    cluster: &Cluster,
    run_dir: Option<&Path>,
    restored: Vec<Restored>,
    key: Option<&crate::evidence::SigningKey>,
    said: &mut output::Said,
) -> u8 {
    let mut code = EXIT_PASSED;
    let mut by: Option<String> = None;
    for r in restored {
        let Some(dir) = r.journal.parent() else { continue };
        let named = run_dir.is_some_and(|d| d == dir);
        let sealed = dir.join(crate::evidence::manifest::MANIFEST_FILE).exists();
        // Unnamed, a run is sealed only when this recover undid something of it: a run without outstanding changes
        // may be one in progress under another lock.
        let ours = named || !r.undone.is_empty();
        if !crate::report::crashed::is_crashed_run(dir) || sealed || !ours {
            continue;
        }
        if by.is_none() {
            by = Some(match cluster.initiator().await {
                Ok(i) => i.describe(),
                Err(e) => format!("unknown: the API server did not answer a SelfSubjectReview ({})", first_line(&e)),
            });
        }
        let recovery = Recovery {
            at: chrono::Utc::now(),
            by: by.clone().unwrap_or_default(),
            host: crate::cluster::lease::this_host(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            undone: r.undone,
            verified: r.verified,
        };
        match crate::record::seal_crashed_run(dir, &recovery, key) {
            Ok(()) => said.sealed(&dir.display().to_string(), &crate::report::crashed::verdict(Some(&recovery))),
            Err(e) => {
                said.error(&format!("the cluster is restored, but {} was not sealed: {e}", dir.display()));
                code = EXIT_INVALID;
            }
        }
    }
    code
}

fn first_line(e: &impl std::fmt::Display) -> String {
    crate::cluster::first_line(&e.to_string())
}

/// Recovers from each journal with something outstanding, then from the marks in the cluster; an unreadable journal
/// is an error (exit 4), a torn last line a one-line notice. The journal of the run directory `trusted` names has
/// the commands of its unauthenticated lines run too. Returns the exit code and, for each journal read, what was
/// undone and verified for it (the marks' undos count for the run named, whose journal they go to).
async fn recover_with(
    cluster: &Cluster,
    journals: Vec<PathBuf>,
    scope: &RestoreScope,
    marks_journal: &Path,
    trusted: Option<&Path>,
    said: &mut output::Said,
) -> (u8, Vec<Restored>) {
    let mut outcomes = Vec::new();
    let mut restored = Vec::new();
    for journal in journals {
        let contents = match safety::journal::read(&journal) {
            Ok(contents) => contents,
            Err(e) => {
                outcomes.push((journal.display().to_string(), Err(e.into())));
                continue;
            }
        };
        if let Some(torn) = &contents.torn {
            eprintln!("note: {}: ignoring its last line, cut short by a crash mid-write: {torn}", journal.display());
        }
        if safety::journal::outstanding(&contents.entries).is_empty() {
            restored.push(Restored { journal, ..Restored::default() });
            continue;
        }
        let run_dir = journal.parent().and_then(|d| std::fs::canonicalize(d).ok());
        let trusts = trusted.is_some_and(|t| run_dir.as_deref() == Some(t));
        let outcome = safety::recover(cluster, &journal, scope, trusts).await;
        if let Ok(o) = &outcome {
            restored.push(Restored {
                journal: journal.clone(),
                undone: shown(&o.undone),
                verified: shown(&o.verified),
            });
        }
        outcomes.push((journal.display().to_string(), outcome));
    }
    let marks = safety::recover_marks(cluster, scope.run.as_ref(), marks_journal).await;
    // The marks of the run named are that run's changes, whichever journal their undos went to.
    let single = scope.run.is_some() && restored.len() == 1;
    let of_marks = match restored.iter().position(|r| r.journal == marks_journal) {
        Some(i) => Some(i),
        None => single.then_some(0),
    };
    if let (Ok(o), Some(r)) = (&marks, of_marks.and_then(|i| restored.get_mut(i))) {
        r.undone.extend(shown(&o.undone));
        r.verified.extend(shown(&o.verified));
    }
    outcomes.push(("marks in the cluster".to_string(), marks));
    let mut code = EXIT_PASSED;
    for (source, outcome) in outcomes {
        match outcome {
            Ok(outcome) => {
                for u in &outcome.undone {
                    said.restored(&u.to_string(), &source);
                }
                for checked in &outcome.verified {
                    said.verified(&checked.to_string(), &source);
                }
                for (u, why) in &outcome.failed {
                    said.not_restored(&u.to_string(), why, &source);
                    code = EXIT_RESTORE_FAILED;
                }
            }
            Err(e) => {
                said.error(&e.to_string());
                code = EXIT_RESTORE_FAILED;
            }
        }
    }
    if !said.acted() {
        said.nothing();
    }
    (code, restored)
}

fn shown(items: &[impl ToString]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::safety::journal::{EntryState, Journal, Mutation};
    use crate::safety::tests::{Answer, Seen, serve, status};

    /// A cluster with no marks left by any run: every list is empty.
    fn unmarked(request: &Seen) -> Answer {
        match request.method.as_str() {
            "GET" if request.uri.starts_with("/api/v1/nodes/") => Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "hybrid-gpu-1"},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            ),
            "GET" => Answer::Json(200, json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []})),
            _ => Answer::Json(200, json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "hybrid-gpu-1"}})),
        }
    }

    fn cordoned(path: &Path) -> Mutation {
        let cordon = Mutation::Cordon { node: "hybrid-gpu-1".into(), was_unschedulable: false };
        let mut journal = Journal::create(path).unwrap();
        let seq = journal.intend(&cordon).unwrap();
        journal.write(seq, EntryState::Done, &cordon, None).unwrap();
        cordon
    }

    /// `recover` of the one journal `path` against an API server that answers with `answer`.
    async fn recover_one(path: &Path, answer: impl FnMut(&Seen) -> Answer + Send + 'static) -> (u8, Vec<Seen>) {
        recover_trusting(path, answer, None).await
    }

    async fn recover_trusting(
        path: &Path,
        answer: impl FnMut(&Seen) -> Answer + Send + 'static,
        trusted: Option<&Path>,
    ) -> (u8, Vec<Seen>) {
        let (cluster, handle) = Cluster::mock();
        let server = serve(handle, answer);
        let marks_journal = path.with_file_name("marks.jsonl");
        let mut said = output::Said::new(false);
        let scope = RestoreScope::default();
        let (code, _) =
            recover_with(&cluster, vec![path.to_path_buf()], &scope, &marks_journal, trusted, &mut said).await;
        drop(cluster);
        (code, server.await.unwrap())
    }

    /// A run directory holding a cordon journal and, when `uid` is given, the identity of the cluster it ran against.
    fn run_of(parent: &Path, name: &str, uid: Option<&str>) -> PathBuf {
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        cordoned(&dir.join("journal.jsonl"));
        if let Some(uid) = uid {
            let observed = ObservedCluster {
                context: "hybrid-lab".into(),
                server: "https://127.0.0.1:26443/".into(),
                kube_system_uid: uid.into(),
                profile: None,
            };
            observed.write(&dir).unwrap();
        }
        dir.join("journal.jsonl")
    }

    async fn of_this_cluster(
        run_dir: Option<&Path>,
        journals: Vec<PathBuf>,
    ) -> (Result<Vec<PathBuf>, ClusterMismatch>, usize) {
        let (cluster, handle) = Cluster::mock();
        let server = serve(handle, |request| match request.uri.as_str() {
            "/api/v1/namespaces/kube-system" => Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system", "uid": "here"}}),
            ),
            _ => status(500, "InternalError"),
        });
        let kept = journals_of_this_cluster(&cluster, run_dir, journals).await;
        drop(cluster);
        (kept, server.await.unwrap().len())
    }

    #[tokio::test]
    async fn a_run_of_another_cluster_is_refused_by_name_and_left_out_of_a_scan() {
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs, older) = (
            run_of(dir.path(), "a", Some("here")),
            run_of(dir.path(), "b", Some("there")),
            run_of(dir.path(), "c", None),
        );
        let named = theirs.parent().unwrap();
        let (refused, _) = of_this_cluster(Some(named), vec![theirs.clone()]).await;
        let message = refused.unwrap_err().to_string();
        assert!(message.contains("(kube-system UID there)") && message.contains("(kube-system UID here)"), "{message}");
        let (kept, _) = of_this_cluster(None, vec![ours.clone(), theirs, older.clone()]).await;
        assert_eq!(kept.unwrap(), vec![ours.clone(), older.clone()], "a run that recorded no cluster is trusted");
        let (kept, reads) = of_this_cluster(Some(older.parent().unwrap()), vec![older.clone()]).await;
        assert_eq!((kept.unwrap(), reads), (vec![older], 0), "nothing to compare: no read");
    }

    #[tokio::test]
    async fn a_node_list_that_fails_is_an_error_not_an_empty_scope() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/drills/drain.yaml"), dir.path().join("drill.yaml"))
            .unwrap();
        let (cluster, handle) = Cluster::mock();
        let server = serve(handle, |_| status(403, "Forbidden"));
        let listed = on_prem_nodes_of(&cluster, Some(dir.path())).await;
        drop(cluster);
        server.await.unwrap();
        let message = listed.unwrap_err().to_string();
        assert!(
            message.starts_with(
                "cannot list the on-prem nodes the run's drill file selects \
                 (eks.amazonaws.com/compute-type=hybrid,gpu.model=h200): "
            ),
            "{message}"
        );
        assert!(message.ends_with("the restore was not checked on them"), "{message}");
    }

    #[tokio::test]
    async fn recover_fails_on_an_unreadable_journal_instead_of_finding_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        cordoned(&path);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.insert_str(0, "{not an entry}\n");
        std::fs::write(&path, &text).unwrap();
        let (code, seen) = recover_one(&path, unmarked).await;
        assert_eq!(code, EXIT_RESTORE_FAILED);
        assert!(seen.iter().all(|r| r.method == "GET"), "nothing is undone on a guess: {seen:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "the journal is left as found");
    }

    #[tokio::test]
    async fn recover_proceeds_past_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        cordoned(&path);
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, br#"{"seq":0,"at":"2026-12-02T10:15:01Z","state":"und"#).unwrap();
        let (code, seen) = recover_one(&path, unmarked).await;
        assert_eq!(code, EXIT_PASSED);
        assert_eq!(seen.iter().filter(|r| r.method == "PATCH").count(), 1, "{seen:?}");
        let contents = crate::safety::journal::read(&path).unwrap();
        assert_eq!(contents.torn, None);
        assert!(crate::safety::journal::outstanding(&contents.entries).is_empty());
    }

    #[tokio::test]
    async fn recover_reports_a_failed_undo() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        cordoned(&path);
        let (code, _) = recover_one(&path, |request| match request.method.as_str() {
            "PATCH" => status(403, "Forbidden"),
            _ => unmarked(request),
        })
        .await;
        assert_eq!(code, EXIT_RESTORE_FAILED);
        assert_eq!(crate::safety::journal::outstanding(&crate::safety::journal::read(&path).unwrap().entries).len(), 1);
    }

    /// A line appended to a run's journal by someone else (no mac, or a made-up one) names an `exec` undo: recover
    /// runs no command of it, says so with the command and how to trust it, and leaves it outstanding; named with
    /// `--trust-journal`, the same journal's command runs.
    #[tokio::test]
    async fn a_planted_exec_undo_runs_nothing_unless_the_user_trusts_the_journal_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        cordoned(&path);
        let marker = dir.path().join("planted-command-ran");
        let planted = |seq: u64, mac: &str| {
            let mut line = json!({"seq": seq, "at": "2026-12-02T10:15:01Z", "state": "done", "action": "exec",
                                  "step": "x", "command": ["true"], "undo": ["touch", marker]});
            if !mac.is_empty() {
                line["mac"] = mac.into();
            }
            line.to_string() + "\n"
        };
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, planted(7, "").as_bytes()).unwrap();
        std::io::Write::write_all(&mut file, planted(8, &"ab".repeat(32)).as_bytes()).unwrap();
        let contents = crate::safety::journal::read(&path).unwrap();
        assert!(contents.entries.iter().filter(|e| e.seq < 7).all(|e| e.authentic), "the tool's own lines verify");
        assert!(contents.entries.iter().filter(|e| e.seq >= 7).all(|e| !e.authentic), "planted lines do not");

        let (code, _) = recover_one(&path, unmarked).await;
        assert_eq!(code, EXIT_RESTORE_FAILED);
        assert!(!marker.exists(), "a planted command ran");
        let left = crate::safety::journal::outstanding(&crate::safety::journal::read(&path).unwrap().entries);
        assert_eq!(left.len(), 2, "the refused undos stay outstanding: {left:?}");

        let trusted = std::fs::canonicalize(dir.path()).unwrap();
        let (code, _) = recover_trusting(&path, unmarked, Some(&trusted)).await;
        assert_eq!(code, EXIT_PASSED);
        assert!(marker.exists(), "the journal trusted by name runs its commands");
    }
}
