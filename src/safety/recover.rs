//! Recovery after a run that could not restore the cluster itself (kill -9, a lost machine): from its journal, or,
//! when the journal is gone, from the marks the run left in the cluster.

use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, PartialObjectMeta};
use kube::{Api, ResourceExt};

use super::error::{MutationError, api_error};
use super::journal::{self, Journal, Mutation};
use super::ledger::{Ledger, transient_retry};
use super::undo::{self, RollbackOutcome, ToUndo, UndoBy};
use super::verify::{RestoreScope, restore_wait};
use crate::cluster::marks::{self, CUT_LABEL, RUN_ANNOTATION, RunId};
use crate::cluster::paged::list_paged;
use crate::cluster::policy::{self, PolicyRef};
use crate::cluster::{Cluster, is_not_found};

/// Restores a cluster from a run's journal: what `recover` does after a crash. Safe to repeat. An unreadable journal
/// is an error; a torn last line is not (see [`journal::read`]) and is cut off before the undos are journalled.
/// Ends with the restored-state check over the journal's nodes and `scope`'s (see [`super::verify`]): what is left
/// fails the outcome and stays outstanding, so the next `recover` tries again. The commands of journal lines the tool
/// cannot authenticate are not run unless `trusted` (the user named this run's journal): they fail the outcome,
/// each with its command, and stay outstanding.
pub async fn recover(
    cluster: &Cluster,
    journal_path: &Path,
    scope: &RestoreScope,
    trusted: bool,
) -> Result<RollbackOutcome, MutationError> {
    journal::read(journal_path)?;
    let ledger = Ledger::new(open(journal_path)?.trusted_by_user(trusted), None);
    Ok(undo::rollback_then_unsilence(&ledger, cluster, scope, restore_wait(cluster), UndoBy::Recover).await)
}

/// Restores what the cluster itself says a run changed, for when its journal is gone: every node still carrying
/// the run annotation (of `run`, or of any run) is uncordoned and unmarked; every cut policy labelled with the run
/// is deleted, every pod labelled with it unlabelled, and every node carrying its cut label unlabelled (without a
/// last-resort hook: only the journal knows the drill's).
///
/// Each undo is journalled before it is made, in `journal_path`, which is opened (directory included) only when
/// something is marked. `hybrid-drill recover RUN_DIR` passes the run's own `journal.jsonl` (when it reads), so a
/// later `recover` sees what was undone; otherwise it passes `REPORTS_DIR/recover/<timestamp>/journal.jsonl`, where a
/// later `recover` without a run directory looks too, so an interrupted recovery is finished by the next one.
pub async fn recover_marks(
    cluster: &Cluster,
    run: Option<&RunId>,
    journal_path: &Path,
) -> Result<RollbackOutcome, MutationError> {
    let marked = marked(&cluster.client, run).await?;
    if marked.is_empty() {
        return Ok(RollbackOutcome::default());
    }
    if let Some(dir) = journal_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|cause| MutationError::Journal { path: journal_path.display().to_string(), cause })?;
    }
    let ledger = Ledger::new(open(journal_path)?, None);
    Ok(undo::undo_all(&ledger, cluster, marked, UndoBy::Marks).await)
}

fn open(journal_path: &Path) -> Result<Journal, MutationError> {
    Journal::create(journal_path)
        .map_err(|cause| MutationError::Journal { path: journal_path.display().to_string(), cause })
}

/// What `recover` would undo from the marks the cluster shows, one line each, read through `client` (`status` passes
/// one that can only read).
pub async fn marked_changes(client: &kube::Client, run: Option<&RunId>) -> Result<Vec<String>, MutationError> {
    Ok(marked(client, run).await?.into_iter().map(|u| u.shown).collect())
}

/// Every change of `run` (or of any run) the cluster still shows: marked nodes, labelled policies, cut nodes, pods.
async fn marked(client: &kube::Client, run: Option<&RunId>) -> Result<Vec<ToUndo>, MutationError> {
    let mut marked = Vec::new();
    let nodes: Api<Node> = Api::all(client.clone());
    // The cordon mark is an annotation, which no selector reaches: every node is read, its metadata only and in pages.
    let fetch = |params: ListParams| {
        let nodes = nodes.clone();
        async move { transient_retry(|| nodes.list_metadata(&params)).await }
    };
    let keep = |node: PartialObjectMeta<Node>| {
        let mark = marks::annotated_by(node.annotations(), run)?;
        let name = node.name_any();
        Some(ToUndo {
            seq: None,
            shown: format!("cordon node/{name} (marked by run {mark})"),
            mutation: Mutation::Cordon { node: name, was_unschedulable: false },
        })
    };
    let cordoned = list_paged(&ListParams::default(), fetch, keep).await.map_err(|e| api_error("list", "nodes", e))?;
    marked.extend(cordoned);
    let labelled = ListParams::default().labels(&marks::label_selector(run));
    for kind in policy::ALL {
        let api = kind.api(client, None);
        let list = match transient_retry(|| api.list(&labelled)).await {
            Ok(l) => l,
            // Not installed here, so no run created one.
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(api_error("list", kind.plural, e)),
        };
        marked.extend(list.items.into_iter().map(|o| {
            let policy = PolicyRef {
                api_version: kind.api_version(),
                kind: kind.kind.into(),
                name: o.name_any(),
                namespace: o.namespace(),
            };
            labelled_by_run(Mutation::CreatePolicy { policy }, o.labels())
        }));
    }
    let cut = ListParams::default().labels(&marks::cut_selector(run));
    let list = transient_retry(|| nodes.list(&cut)).await.map_err(|e| api_error("list", "nodes", e))?;
    marked.extend(list.items.into_iter().map(|n| {
        let mark = n.labels().get(CUT_LABEL).cloned().unwrap_or_default();
        let node = n.name_any();
        ToUndo {
            seq: None,
            shown: format!("label node/{node} (cut by run {mark})"),
            mutation: Mutation::LabelNode { step: "recover".into(), node, label: CUT_LABEL.into(), last_resort: None },
        }
    }));
    let pods: Api<Pod> = Api::all(client.clone());
    let list = transient_retry(|| pods.list(&labelled)).await.map_err(|e| api_error("list", "pods", e))?;
    marked.extend(list.items.into_iter().map(|p| {
        let mutation = Mutation::LabelPod {
            namespace: p.namespace().unwrap_or_default(),
            pod: p.name_any(),
            label: RUN_ANNOTATION.into(),
        };
        labelled_by_run(mutation, p.labels())
    }));
    Ok(marked)
}

fn labelled_by_run(mutation: Mutation, labels: &std::collections::BTreeMap<String, String>) -> ToUndo {
    let (action, target) = mutation.describe();
    let mark = labels.get(RUN_ANNOTATION).cloned().unwrap_or_default();
    ToUndo { seq: None, shown: format!("{action} {target} (labelled by run {mark})"), mutation }
}
