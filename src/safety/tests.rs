//! Request-level tests of the journalled path with kube's mock service: the test plays the API server.

use std::path::Path;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use serde_json::{Value, json};

use super::journal::{self, EntryState, Journal, Mutation};
use super::{Mutator, recover_marks};
use crate::cluster::Cluster;
use crate::cluster::marks::{CUT_LABEL, RUN_ANNOTATION, RunId};
use crate::cluster::policy::PolicyRef;
use crate::timeline::{Event, Timeline};

const RUN: &str = "drain-20261202t101500z";

/// A request as the fake API server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) uri: String,
    pub(crate) body: Value,
}

/// What the fake API server does with a request.
pub(crate) enum Answer {
    /// An HTTP answer with a JSON body.
    Json(u16, Value),
    /// No answer: the connection failed, as when the API server restarts.
    Unreachable,
}

/// A Kubernetes `Status` error answer.
pub(crate) fn status(code: u16, reason: &str) -> Answer {
    Answer::Json(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code,
               "message": format!("the server says {reason}")}),
    )
}

/// Plays the API server of a [`Cluster::mock`]: answers each request with `answer` and returns, once every client
/// is dropped, the requests in the order they came.
pub(crate) fn serve(
    handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    mut answer: impl FnMut(&Seen) -> Answer + Send + 'static,
) -> tokio::task::JoinHandle<Vec<Seen>> {
    tokio::spawn(async move {
        let mut handle = std::pin::pin!(handle);
        let mut seen = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let request = Seen {
                method: parts.method.to_string(),
                uri: parts.uri.to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            match answer(&request) {
                Answer::Json(code, body) => send.send_response(
                    Response::builder().status(code).body(Body::from(serde_json::to_vec(&body).unwrap())).unwrap(),
                ),
                Answer::Unreachable => {
                    send.send_error(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"))
                }
            }
            seen.push(request);
        }
        seen
    })
}

/// Each journal entry as (seq, state), in file order.
fn states(path: &Path) -> Vec<(u64, EntryState)> {
    journal::read(path).unwrap().entries.iter().map(|e| (e.seq, e.state)).collect()
}

/// A journal holding `mutations`, each made (`intent` then `done`).
fn journal_of(path: &Path, mutations: &[Mutation]) {
    let mut journal = Journal::create(path).unwrap();
    for m in mutations {
        let seq = journal.intend(m).unwrap();
        journal.write(seq, EntryState::Done, m, None).unwrap();
    }
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "inference"}})
}

fn node(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}})
}

/// An API server that cannot be reached for the first request, then answers every request with `then`.
fn unreachable_once(then: impl Fn() -> Answer + Send + 'static) -> impl FnMut(&Seen) -> Answer + Send + 'static {
    let mut first = true;
    move |_| if std::mem::take(&mut first) { Answer::Unreachable } else { then() }
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_is_retried_and_the_journal_says_done() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (cluster, handle) = Cluster::mock();
    let server = serve(handle, unreachable_once(|| Answer::Json(200, pod("gpu-0"))));
    let mutator = Mutator::new(cluster.clone(), Journal::create(&path).unwrap(), Timeline::in_memory(), RUN.into());
    assert!(mutator.label_pod("inference", "gpu-0").await.unwrap());
    assert_eq!(cluster.requests_sent(), 2);
    drop((mutator, cluster));
    let seen = server.await.unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for request in &seen {
        assert_eq!(request.method, "PATCH");
        assert!(request.uri.starts_with("/api/v1/namespaces/inference/pods/gpu-0?"), "{}", request.uri);
        assert_eq!(request.body, json!({"metadata": {"labels": {RUN_ANNOTATION: RUN}}}));
    }
    assert_eq!(states(&path), [(0, EntryState::Intent), (0, EntryState::Done)]);
}

#[tokio::test(start_paused = true)]
async fn a_create_retried_after_a_lost_answer_takes_the_conflict_for_its_own_policy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (cluster, handle) = Cluster::mock();
    let server = serve(handle, unreachable_once(|| status(409, "AlreadyExists")));
    let timeline = Timeline::in_memory();
    let mutator = Mutator::new(cluster, Journal::create(&path).unwrap(), timeline.clone(), RUN.into());
    let policy = PolicyRef {
        api_version: "networking.k8s.io/v1".into(),
        kind: "NetworkPolicy".into(),
        name: format!("hybrid-drill-cut-{RUN}"),
        namespace: Some("inference".into()),
    };
    let object = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                        "metadata": {"name": policy.name, "namespace": "inference"}, "spec": {}});
    mutator.create_policy(&policy, object).await.unwrap();
    drop(mutator);
    let seen = server.await.unwrap();
    assert_eq!(seen.iter().map(|r| r.method.as_str()).collect::<Vec<_>>(), ["POST", "POST"]);
    assert!(seen[0].uri.starts_with("/apis/networking.k8s.io/v1/namespaces/inference/networkpolicies?"));
    assert_eq!(states(&path), [(0, EntryState::Intent), (0, EntryState::Done)]);
    assert!(timeline.observations().iter().any(|o| matches!(o.event, Event::PolicyApplied { .. })));
}

#[tokio::test(start_paused = true)]
async fn a_404_on_undo_counts_as_undone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let policy = PolicyRef {
        api_version: "cilium.io/v2".into(),
        kind: "CiliumClusterwideNetworkPolicy".into(),
        name: "hybrid-drill-cut-x".into(),
        namespace: None,
    };
    let label = Mutation::LabelPod { namespace: "inference".into(), pod: "gpu-0".into(), label: RUN_ANNOTATION.into() };
    journal_of(&path, &[label, Mutation::CreatePolicy { policy }]);
    let (cluster, handle) = Cluster::mock();
    let server = serve(handle, |_| status(404, "NotFound"));
    let timeline = Timeline::in_memory();
    let mutator = Mutator::new(cluster, Journal::create(&path).unwrap(), timeline.clone(), RUN.into());
    let outcome = mutator.rollback().await;
    assert_eq!(
        outcome.undone,
        ["create CiliumClusterwideNetworkPolicy/hybrid-drill-cut-x", "label pod/inference/gpu-0"]
    );
    assert!(outcome.restored(), "{:?}", outcome.failed);
    drop(mutator);
    let seen = server.await.unwrap();
    assert_eq!(seen.len(), 2, "a 404 is final, not retried: {seen:?}");
    assert_eq!(seen[0].method, "DELETE");
    assert_eq!(seen[0].uri, "/apis/cilium.io/v2/ciliumclusterwidenetworkpolicies/hybrid-drill-cut-x?");
    assert_eq!(seen[1].method, "PATCH");
    assert_eq!(seen[1].body, json!({"metadata": {"labels": {RUN_ANNOTATION: null}}}));
    // Each undo is journalled before it runs, newest first, and each ends undone.
    let undo: Vec<_> = states(&path).into_iter().skip(4).collect();
    assert_eq!(
        undo,
        [(1, EntryState::Undoing), (1, EntryState::Undone), (0, EntryState::Undoing), (0, EntryState::Undone)]
    );
    let undone = timeline.observations().iter().filter(|o| matches!(o.event, Event::UndoDone { .. })).count();
    assert_eq!(undone, 2);
}

#[tokio::test(start_paused = true)]
async fn a_journal_write_failure_during_rollback_is_reported_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    journal_of(&path, &[Mutation::Cordon { node: "hybrid-gpu-1".into(), was_unschedulable: false }]);
    // Opened read-only: every write the rollback attempts fails, as on a full or vanished disk.
    let unwritable = Journal::writing_to(&path, std::fs::File::open(&path).unwrap());
    let (cluster, handle) = Cluster::mock();
    let server = serve(handle, |_| Answer::Json(200, node("hybrid-gpu-1", json!({}))));
    let mutator = Mutator::new(cluster, unwritable, Timeline::in_memory(), RUN.into());
    let outcome = mutator.rollback().await;
    drop(mutator);
    let seen = server.await.unwrap();
    assert_eq!(seen.len(), 1, "the undo is still made: it is the safe direction");
    assert_eq!(seen[0].uri, "/api/v1/nodes/hybrid-gpu-1?&fieldManager=hybrid-drill");
    assert_eq!(outcome.undone, ["cordon node/hybrid-gpu-1"]);
    assert!(!outcome.restored());
    assert_eq!(outcome.failed.len(), 2, "the undoing and the undone entry: {:?}", outcome.failed);
    for (what, why) in &outcome.failed {
        assert_eq!(what, &path.display().to_string());
        assert!(why.starts_with("cannot journal the undo of cordon node/hybrid-gpu-1: "), "{why}");
    }
    // The journal still lists the cordon, so `recover` makes the (idempotent) undo again.
    assert_eq!(journal::outstanding(&journal::read(&path).unwrap().entries).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn recovery_from_marks_journals_each_undo_before_making_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recover").join("journal.jsonl");
    let (cluster, handle) = Cluster::mock();
    let at_patch = Arc::new(Mutex::new(None));
    let server = serve(handle, {
        let (path, at_patch) = (path.clone(), at_patch.clone());
        move |request| match (request.method.as_str(), request.uri.split('?').next().unwrap_or_default()) {
            ("GET", "/api/v1/nodes") if request.uri.contains("labelSelector=hybrid-drill.io%2Fcut") => Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [
                    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "hybrid-gpu-2", "labels": {CUT_LABEL: RUN}}},
                ]}),
            ),
            ("GET", "/api/v1/nodes") => Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [
                    node("hybrid-gpu-1", json!({RUN_ANNOTATION: RUN})),
                    node("hybrid-gpu-2", json!({RUN_ANNOTATION: "another-20261201t090000z"})),
                    node("cloud-1", json!({})),
                ]}),
            ),
            ("GET", "/api/v1/pods") => {
                Answer::Json(200, json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}))
            }
            ("GET", _) => status(404, "NotFound"),
            _ => {
                *at_patch.lock().unwrap() = Some(states(&path));
                Answer::Json(200, node("hybrid-gpu-1", json!({})))
            }
        }
    });
    let outcome = recover_marks(&cluster, Some(&RunId::new(RUN)), &path).await.unwrap();
    drop(cluster);
    let seen = server.await.unwrap();
    assert_eq!(
        outcome.undone,
        [
            format!("cordon node/hybrid-gpu-1 (marked by run {RUN})"),
            format!("label node/hybrid-gpu-2 (cut by run {RUN})")
        ]
    );
    assert!(outcome.restored());
    let patches: Vec<_> = seen.iter().filter(|r| r.method == "PATCH").collect();
    assert_eq!(patches.len(), 2, "only the named run's nodes: {seen:?}");
    assert_eq!(
        patches[0].body,
        json!({"spec": {"unschedulable": null}, "metadata": {"annotations": {RUN_ANNOTATION: null}}})
    );
    assert_eq!(patches[1].uri, "/api/v1/nodes/hybrid-gpu-2?&fieldManager=hybrid-drill");
    assert_eq!(patches[1].body, json!({"metadata": {"labels": {CUT_LABEL: null}}}));
    assert!(seen.iter().any(|r| r.uri == format!("/api/v1/nodes?&labelSelector=hybrid-drill.io%2Fcut%3D{RUN}")));
    assert!(seen.iter().any(|r| r.uri == format!("/api/v1/pods?&labelSelector=hybrid-drill.io%2Frun-id%3D{RUN}")));
    // The mark is an annotation, so every node is read: in pages.
    assert!(seen.iter().any(|r| r.uri == "/api/v1/nodes?&limit=500"), "{seen:?}");
    assert_eq!(
        *at_patch.lock().unwrap(),
        Some(vec![(0, EntryState::Undoing), (0, EntryState::Undone), (1, EntryState::Undoing)])
    );
    let both: Vec<_> = [0, 1].into_iter().flat_map(|s| [(s, EntryState::Undoing), (s, EntryState::Undone)]).collect();
    assert_eq!(states(&path), both);
}

#[tokio::test]
async fn recovery_from_marks_writes_no_journal_when_nothing_is_marked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recover").join("journal.jsonl");
    let (cluster, handle) = Cluster::mock();
    let server = serve(handle, |request| {
        let kind = if request.uri.starts_with("/api/v1/nodes") { "NodeList" } else { "List" };
        Answer::Json(200, json!({"apiVersion": "v1", "kind": kind, "metadata": {}, "items": []}))
    });
    let outcome = recover_marks(&cluster, None, &path).await.unwrap();
    drop(cluster);
    server.await.unwrap();
    assert!(outcome.undone.is_empty() && outcome.restored());
    assert!(!path.parent().unwrap().exists());
}

#[tokio::test]
async fn a_node_not_back_after_its_cut_is_lifted_gets_its_last_resort_hook_in_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let labelled = |node: &str, hook: &str| Mutation::LabelNode {
        step: "cut".into(),
        node: node.into(),
        label: CUT_LABEL.into(),
        last_resort: Some(journal::LastResort {
            command: vec![hook.into(), node.into()],
            after_seconds: 1,
            timeout_seconds: 10,
            env: Vec::new(),
        }),
    };
    journal_of(&path, &[labelled("back", "false"), labelled("locked-out", "true")]);
    let (cluster, handle) = Cluster::mock();
    let server = serve(handle, nodes_ready_only("back"));
    let timeline = Timeline::in_memory();
    let mutator = Mutator::new(cluster, Journal::create(&path).unwrap(), timeline.clone(), RUN.into());
    let outcome = mutator.rollback().await;
    drop(mutator);
    let seen = server.await.unwrap();
    // Newest first; the node that is back never runs its hook (`false` would fail the undo).
    assert_eq!(outcome.undone, ["label node/locked-out", "label node/back"]);
    assert!(outcome.restored(), "{:?}", outcome.failed);
    assert_eq!(seen[0].body, json!({"metadata": {"labels": {CUT_LABEL: null}}}));
    let hooks: Vec<_> = timeline
        .observations()
        .into_iter()
        .filter_map(|o| match o.event {
            Event::HookRan { step, command, exit_code } => Some((step, command, exit_code)),
            _ => None,
        })
        .collect();
    assert_eq!(hooks, [("cut".to_string(), "true locked-out".to_string(), Some(0))]);
}

/// An API server on which only the node `back` is Ready. The undo of a host cut patches each node by name, then
/// watches it (a list by name, then a watch, which breaks here).
fn nodes_ready_only(back: &'static str) -> impl FnMut(&Seen) -> Answer + Send + 'static {
    move |request| {
        let name = match request.uri.split_once("metadata.name%3D") {
            Some((_, rest)) => rest.split('&').next(),
            None => request.uri.split('/').nth(4).and_then(|n| n.split('?').next()),
        };
        let name = name.unwrap_or_default().to_string();
        let ready = if name == back { "True" } else { "Unknown" };
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                          "status": {"conditions": [{"type": "Ready", "status": ready}]}});
        if request.uri.contains("watch=true") {
            Answer::Unreachable
        } else if request.uri.contains("fieldSelector") {
            Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"},
                                     "items": [node]}),
            )
        } else {
            Answer::Json(200, node)
        }
    }
}

#[tokio::test]
async fn the_last_resorts_of_one_host_cut_run_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let marks = dir.path().to_str().unwrap().to_string();
    // Each hook marks its node powered on, then succeeds only once the other's hook has started too: run one after
    // the other, the first would give up and fail the undo.
    let script =
        r#"touch "$0/$1"; i=0; while [ ! -e "$0/$2" ]; do i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.1; done"#;
    let labelled = |node: &str, other: &str| Mutation::LabelNode {
        step: "cut".into(),
        node: node.into(),
        label: CUT_LABEL.into(),
        last_resort: Some(journal::LastResort {
            command: ["sh", "-c", script, &marks, node, other].map(String::from).to_vec(),
            after_seconds: 1,
            timeout_seconds: 30,
            env: Vec::new(),
        }),
    };
    journal_of(&path, &[labelled("rack-a", "rack-b"), labelled("rack-b", "rack-a")]);
    let (cluster, handle) = Cluster::mock();
    let server = serve(handle, nodes_ready_only("none"));
    let mutator = Mutator::new(cluster, Journal::create(&path).unwrap(), Timeline::in_memory(), RUN.into());
    let outcome = mutator.rollback().await;
    drop(mutator);
    server.await.unwrap();
    assert!(outcome.restored(), "{:?}", outcome.failed);
    assert_eq!(outcome.undone, ["label node/rack-b", "label node/rack-a"]);
}

/// A node as the restored-state check reads it: Ready or not, schedulable or not, unmarked.
fn node_with(name: &str, ready: &str, unschedulable: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
           "spec": {"unschedulable": unschedulable},
           "status": {"conditions": [{"type": "Ready", "status": ready}]}})
}

/// An API server whose nodes are `nodes()`, listed or read one by one; PATCHes succeed, other lists are empty.
fn cluster_showing(nodes: impl Fn() -> Vec<Value> + Send + 'static) -> impl FnMut(&Seen) -> Answer + Send + 'static {
    move |request| match (request.method.as_str(), request.uri.split('?').next().unwrap_or_default()) {
        ("GET", "/api/v1/nodes") => {
            Answer::Json(200, json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": nodes()}))
        }
        ("GET", path) if path.starts_with("/api/v1/nodes/") => {
            let name = &path["/api/v1/nodes/".len()..];
            nodes()
                .into_iter()
                .find(|n| n["metadata"]["name"] == name)
                .map_or_else(|| status(404, "NotFound"), |n| Answer::Json(200, n))
        }
        ("GET", _) => Answer::Json(200, json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []})),
        _ => Answer::Json(200, node_with("hybrid-gpu-1", "True", false)),
    }
}

#[tokio::test(start_paused = true)]
async fn a_rollback_whose_node_does_not_come_back_names_it_and_keeps_the_journal_outstanding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let cut = Mutation::CreatePolicy {
        policy: PolicyRef {
            api_version: "cilium.io/v2".into(),
            kind: "CiliumClusterwideNetworkPolicy".into(),
            name: "hybrid-drill-cut-x".into(),
            namespace: None,
        },
    };
    journal_of(&path, &[Mutation::Cordon { node: "hybrid-gpu-2".into(), was_unschedulable: false }, cut]);
    let (cluster, handle) = Cluster::mock();
    // hybrid-gpu-2 is uncordoned by the rollback but the API server still shows it cordoned (a controller fighting
    // back); the cut's policy is deleted but hybrid-gpu-1, locked out, never hears of it and stays NotReady.
    let server = serve(
        handle,
        cluster_showing(|| vec![node_with("hybrid-gpu-1", "Unknown", false), node_with("hybrid-gpu-2", "True", true)]),
    );
    let mutator = Mutator::new(cluster, Journal::create(&path).unwrap(), Timeline::in_memory(), RUN.into())
        .with_on_prem_nodes(&["hybrid-gpu-1".into(), "hybrid-gpu-2".into()]);
    let outcome = mutator.rollback_verified(std::time::Duration::from_secs(10)).await;
    drop(mutator);
    server.await.unwrap();
    assert_eq!(outcome.undone.len(), 2, "{outcome:?}");
    assert!(!outcome.restored() && outcome.verified.is_empty());
    let failed: Vec<String> = outcome.failed.iter().map(|(what, why)| format!("{what}: {why}")).collect();
    assert_eq!(failed, ["hybrid-gpu-1: NotReady after 10s", "hybrid-gpu-2: still cordoned after 10s"]);
    // Both undos are reopened for `recover`, with what was left as the note.
    let entries = journal::read(&path).unwrap().entries;
    assert_eq!(journal::outstanding(&entries).len(), 2);
    let last = entries.last().unwrap();
    assert_eq!(last.state, EntryState::UndoFailed);
    assert!(last.note.as_deref().unwrap().starts_with("undone, but the restore did not hold: hybrid-gpu-1: NotReady"));

    // Later the nodes are back: `recover` redoes the undos, the check holds, the journal is settled.
    let (cluster, handle) = Cluster::mock();
    let server = serve(
        handle,
        cluster_showing(|| vec![node_with("hybrid-gpu-1", "True", false), node_with("hybrid-gpu-2", "True", false)]),
    );
    // The run's drill file names both on-prem nodes; its journal only the cordoned one.
    let scope = super::RestoreScope {
        run: Some(RunId::new(RUN)),
        nodes: ["hybrid-gpu-1".to_string(), "hybrid-gpu-2".to_string()].into(),
    };
    let outcome = super::recover(&cluster, &path, &scope, false).await.unwrap();
    drop(cluster);
    server.await.unwrap();
    assert!(outcome.restored(), "{:?}", outcome.failed);
    assert_eq!(
        outcome.verified,
        [
            "hybrid-gpu-1: Ready, schedulable, no mark of the run",
            "hybrid-gpu-2: Ready, schedulable, no mark of the run",
            "no policy or pod labelled by the run",
        ]
    );
    assert!(journal::outstanding(&journal::read(&path).unwrap().entries).is_empty());
}
