//! The restored-state check: after a rollback, a restore step or a recovery, the on-prem nodes of a run are read back
//! until they are Ready, schedulable (unless cordoned before the drill), free of the run's marks, and no policy or pod
//! of the run is left; a bounded wait, never an assumption. When it does not hold, the journal reopens the run's
//! undone changes so a later `recover` redoes them and checks again.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::journal::{self, Entry, EntryState, Mutation};
use super::ledger::{Ledger, transient_retry};
use crate::cluster::marks::{self, RunId};
use crate::cluster::policy;
use crate::cluster::readiness::is_ready;
use crate::cluster::{Cluster, first_line, is_not_found};

/// Every annotation and label a run puts on an object starts with this.
const MARK_PREFIX: &str = "hybrid-drill.io/";

/// How often the check reads the cluster again while it waits.
const POLL: Duration = Duration::from_secs(2);

/// How long a restore may take to hold: a real server takes minutes to boot and its CNI agent to hear that a policy
/// is gone; the lab's kwok nodes answer in seconds.
pub fn restore_wait(cluster: &Cluster) -> Duration {
    if cluster.is_lab() { Duration::from_secs(30) } else { Duration::from_secs(300) }
}

/// The nodes and the run a check covers.
#[derive(Debug, Clone, Default)]
pub struct RestoreScope {
    /// The run whose marks and policies must be gone; none: any run's.
    pub run: Option<RunId>,
    /// The on-prem nodes of the run, besides those its journal names.
    pub nodes: BTreeSet<String>,
}

/// Something the check found not restored: a node, a policy or a pod, and what is left of the run on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Leftover {
    pub object: String,
    pub left: String,
}

impl fmt::Display for Leftover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.left)
    }
}

/// What the journal says about the nodes: which it names, which the run itself cordoned, and what the run still
/// means to change (a cordon or a node failure not yet undone, a policy or pod label not yet removed): a restore
/// step ends one fault while the drill's other changes stay, and an undo that failed is reported as such already.
#[derive(Debug, Default)]
struct JournalNodes {
    named: BTreeSet<String>,
    cordoned_by_run: BTreeSet<String>,
    still_cordoned: BTreeSet<String>,
    still_failed: BTreeSet<String>,
    still_present: BTreeSet<String>,
}

fn journal_nodes(entries: &[Entry]) -> JournalNodes {
    let mut nodes = JournalNodes::default();
    for (_, m) in journal::outstanding(entries) {
        let (set, key) = match m {
            Mutation::Cordon { node, .. } => (&mut nodes.still_cordoned, node),
            Mutation::FailNode { node: Some(node), .. } => (&mut nodes.still_failed, node),
            Mutation::CreatePolicy { policy } => (&mut nodes.still_present, format!("{}/{}", policy.kind, policy.name)),
            Mutation::LabelPod { namespace, pod, .. } => (&mut nodes.still_present, format!("pod/{namespace}/{pod}")),
            _ => continue,
        };
        set.insert(key);
    }
    for e in entries {
        match &e.mutation {
            Mutation::Cordon { node, was_unschedulable } => {
                nodes.named.insert(node.clone());
                if !was_unschedulable {
                    nodes.cordoned_by_run.insert(node.clone());
                }
            }
            Mutation::Uncordon { node } | Mutation::FailNode { node: Some(node), .. } => {
                nodes.named.insert(node.clone());
            }
            _ => {}
        }
    }
    nodes
}

/// Whether a journal holds a change whose undo acts on the cluster: a run that changed nothing has nothing to check.
pub(super) fn changed_anything(entries: &[Entry]) -> bool {
    entries.iter().any(|e| e.mutation.needs_undo())
}

/// The run's marks among an object's annotations and labels: keys of the tool whose value names the run.
fn marks_of(run: Option<&RunId>, maps: [&BTreeMap<String, String>; 2]) -> Vec<String> {
    let ours = |value: &String| run.is_none_or(|r| value == r.as_str() || *value == r.label());
    let mut found: Vec<String> = maps
        .iter()
        .flat_map(|m| m.iter())
        .filter(|(k, v)| k.starts_with(MARK_PREFIX) && ours(v))
        .map(|(k, _)| k.clone())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// What is left on `nodes` (as listed) of the scope's run; a node that no longer exists has nothing left to restore.
fn node_leftovers(scope: &RestoreScope, journal: &JournalNodes, listed: &[Node]) -> Vec<Leftover> {
    let mut left = Vec::new();
    for name in scope.nodes.union(&journal.named) {
        let Some(node) = listed.iter().find(|n| n.name_any() == *name) else { continue };
        let mut problems = Vec::new();
        if !is_ready(node) && !journal.still_failed.contains(name) {
            problems.push("NotReady".to_string());
        }
        let mut marks = marks_of(scope.run.as_ref(), [node.annotations(), node.labels()]);
        if journal.still_cordoned.contains(name) {
            marks.retain(|m| m != marks::RUN_ANNOTATION);
        }
        let unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
        // A node someone else cordoned before the drill carries no mark of the run and is left as found.
        if unschedulable
            && !journal.still_cordoned.contains(name)
            && (journal.cordoned_by_run.contains(name) || !marks.is_empty())
        {
            problems.push("still cordoned".into());
        }
        if !marks.is_empty() {
            problems.push(format!("still marked {}", marks.join(", ")));
        }
        if !problems.is_empty() {
            left.push(Leftover { object: name.clone(), left: problems.join(", ") });
        }
    }
    left
}

/// One reading of the cluster against the scope.
async fn read_leftovers(cluster: &Cluster, scope: &RestoreScope, journal: &JournalNodes) -> Vec<Leftover> {
    let unreadable = |what: &str, e: kube::Error| Leftover {
        object: what.into(),
        left: format!("could not be read: {}", first_line(&e.to_string())),
    };
    // Each node in scope by name, not a list of every node: the check repeats while it waits, and a list would grow
    // with the cluster. A node that is gone has nothing of the run left on it.
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let mut read = Vec::new();
    for name in scope.nodes.union(&journal.named) {
        match transient_retry(|| nodes.get_opt(name)).await {
            Ok(node) => read.extend(node),
            Err(e) => return vec![unreadable(&format!("node/{name}"), e)],
        }
    }
    let mut left = node_leftovers(scope, journal, &read);
    let labelled = ListParams::default().labels(&marks::label_selector(scope.run.as_ref()));
    for kind in policy::ALL {
        let api = kind.api(&cluster.client, None);
        match transient_retry(|| api.list(&labelled)).await {
            Ok(list) => left.extend(list.items.iter().map(|o| Leftover {
                object: format!("{}/{}", kind.kind, o.name_any()),
                left: "policy of the run still present".into(),
            })),
            // Not served here, so the run cannot have created one.
            Err(e) if is_not_found(&e) => {}
            Err(e) => left.push(unreadable(kind.plural, e)),
        }
    }
    let pods: Api<Pod> = Api::all(cluster.client.clone());
    match transient_retry(|| pods.list(&labelled)).await {
        Ok(list) => left.extend(list.items.iter().map(|p| Leftover {
            object: format!("pod/{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
            left: "still labelled by the run".into(),
        })),
        Err(e) => left.push(unreadable("pods", e)),
    }
    left.retain(|l| !journal.still_present.contains(&l.object));
    left
}

/// Reads the cluster until nothing of the run is left or `wait` has passed. Ok: what was checked, one line per node;
/// Err: what is left.
pub(super) async fn check(
    cluster: &Cluster,
    scope: &RestoreScope,
    entries: &[Entry],
    wait: Duration,
) -> Result<Vec<String>, Vec<Leftover>> {
    let journal = journal_nodes(entries);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = read_leftovers(cluster, scope, &journal).await;
        if left.is_empty() {
            let mut checked: Vec<String> = scope
                .nodes
                .union(&journal.named)
                .map(|n| format!("{n}: Ready, schedulable, no mark of the run"))
                .collect();
            checked.push("no policy or pod labelled by the run".into());
            return Ok(checked);
        }
        if tokio::time::Instant::now() + POLL > deadline {
            return Err(left);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// After a check that did not hold: every change of the journal that was undone or reverted is reopened
/// (`undo-failed`, with what is left as the note), so the rollback or a later `recover` undoes it again and checks
/// again. Undoing twice is safe: each undo treats "already undone" as done.
pub(super) async fn reopen(ledger: &Ledger, left: &[Leftover]) -> Result<(), super::MutationError> {
    let path = ledger.journal_path().await;
    let entries = journal::read(&path)?.entries;
    let note = format!(
        "undone, but the restore did not hold: {}",
        left.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    );
    let mut last: BTreeMap<u64, &Entry> = BTreeMap::new();
    for e in &entries {
        last.insert(e.seq, e);
    }
    for e in last.values() {
        if matches!(e.state, EntryState::Undone | EntryState::Reverted) && e.mutation.needs_undo() {
            ledger.write(e.seq, EntryState::UndoFailed, &e.mutation, Some(note.clone())).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const RUN: &str = "node-failure-20261203t101500z";

    fn node(name: &str, ready: &str, unschedulable: bool, annotations: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .unwrap()
    }

    fn scope(nodes: &[&str]) -> RestoreScope {
        RestoreScope { run: Some(RunId::new(RUN)), nodes: nodes.iter().map(|n| n.to_string()).collect() }
    }

    #[test]
    fn each_node_is_named_with_what_is_left() {
        let listed = [
            node("hybrid-1", "Unknown", false, json!({})),
            node("hybrid-2", "True", true, json!({marks::RUN_ANNOTATION: RUN})),
            node("hybrid-3", "True", false, json!({})),
        ];
        let left = node_leftovers(&scope(&["hybrid-1", "hybrid-2", "hybrid-3"]), &JournalNodes::default(), &listed);
        let shown: Vec<String> = left.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["hybrid-1: NotReady", "hybrid-2: still cordoned, still marked hybrid-drill.io/run-id"],
            "{left:?}"
        );
    }

    #[test]
    fn a_node_cordoned_before_the_drill_and_a_node_gone_are_not_leftovers() {
        let listed = [node("hybrid-1", "True", true, json!({})), node("hybrid-2", "True", false, json!({}))];
        assert!(node_leftovers(&scope(&["hybrid-1", "gone"]), &JournalNodes::default(), &listed).is_empty());
        // Another run's mark is that run's business.
        let other = [node("hybrid-2", "True", false, json!({marks::RUN_ANNOTATION: "drain-20261101t000000z"}))];
        assert!(node_leftovers(&scope(&["hybrid-2"]), &JournalNodes::default(), &other).is_empty());
    }

    #[test]
    fn a_node_the_run_cordoned_is_still_cordoned_even_without_its_mark() {
        let cordon = |was| Entry {
            seq: 0,
            at: chrono::Utc::now(),
            state: EntryState::Undone,
            mutation: Mutation::Cordon { node: "hybrid-1".into(), was_unschedulable: was },
            note: None,
            authentic: true,
        };
        let listed = [node("hybrid-1", "True", true, json!({}))];
        let journal = journal_nodes(&[cordon(false)]);
        assert_eq!(node_leftovers(&scope(&[]), &journal, &listed)[0].to_string(), "hybrid-1: still cordoned");
        assert!(node_leftovers(&scope(&[]), &journal_nodes(&[cordon(true)]), &listed).is_empty());
    }

    #[test]
    fn what_the_drill_still_means_to_change_is_not_a_leftover_of_a_restore_step() {
        let entry = |mutation| Entry {
            seq: 0,
            at: chrono::Utc::now(),
            state: EntryState::Done,
            mutation,
            note: None,
            authentic: true,
        };
        // A drain's cordon stays while a later `restore: cut` ends the cut.
        let journal = journal_nodes(&[entry(Mutation::Cordon { node: "hybrid-1".into(), was_unschedulable: false })]);
        let listed = [node("hybrid-1", "True", true, json!({marks::RUN_ANNOTATION: RUN}))];
        assert!(node_leftovers(&scope(&["hybrid-1"]), &journal, &listed).is_empty());
    }

    #[test]
    fn a_run_scoped_label_of_the_tool_counts_as_a_mark() {
        let label = marks::run_label(RUN);
        let with_label = BTreeMap::from([("hybrid-drill.io/cut".to_string(), label)]);
        let unrelated = BTreeMap::from([("hybrid-lab/node-fail".to_string(), "x".to_string())]);
        assert_eq!(marks_of(Some(&RunId::new(RUN)), [&with_label, &unrelated]), ["hybrid-drill.io/cut"]);
    }
}
