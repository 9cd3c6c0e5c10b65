use std::path::Path;

use serde_json::json;

use super::*;
use crate::cluster::Cluster;
use crate::safety::journal::{EntryState, Journal, Mutation};
use crate::safety::tests::{Answer, Seen, serve, status};
use crate::timeline::Observation;

const RUN: &str = "drain-20261206t180000z";

fn timeline(dir: &Path, events: Vec<Event>) {
    let lines: Vec<String> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| {
            let o = Observation { seq: i as u64, t_ms: i as u64, received: Utc::now(), server_time: None, event };
            serde_json::to_string(&o).unwrap()
        })
        .collect();
    std::fs::write(dir.join("timeline.jsonl"), lines.join("\n") + "\n").unwrap();
}

fn cordoned(dir: &Path) {
    let cordon = Mutation::Cordon { node: "hybrid-gpu-1".into(), was_unschedulable: false };
    let mut journal = Journal::create(&dir.join("journal.jsonl")).unwrap();
    let seq = journal.intend(&cordon).unwrap();
    journal.write(seq, EntryState::Done, &cordon, None).unwrap();
}

/// A reports directory with one run killed after its first cordon (two NodeClaims seen created, one deleted) and
/// one run that finished.
fn reports() -> tempfile::TempDir {
    let reports = tempfile::tempdir().unwrap();
    let crashed = reports.path().join("drain/20261206T180000Z");
    std::fs::create_dir_all(&crashed).unwrap();
    cordoned(&crashed);
    let started = Event::DrillStarted { drill: "drain".into(), run_id: RUN.into(), context: "hybrid-lab".into() };
    timeline(
        &crashed,
        vec![
            started.clone(),
            Event::NodeClaimCreated { nodeclaim: "gpu-fallback-a".into() },
            Event::NodeClaimCreated { nodeclaim: "gpu-fallback-b".into() },
            Event::NodeClaimDeleted { nodeclaim: "gpu-fallback-b".into() },
        ],
    );
    let finished = reports.path().join("drain/20261205T180000Z");
    std::fs::create_dir_all(&finished).unwrap();
    cordoned(&finished);
    timeline(&finished, vec![started, Event::DrillFinished { outcome: crate::domain::Outcome::Passed }]);
    reports
}

/// The lab after the crash: the lock held by the dead run, its cordon marked, one NodeClaim still there.
fn after_the_crash(request: &Seen) -> Answer {
    let uri = request.uri.as_str();
    if uri.starts_with("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/hybrid-drill") {
        return Answer::Json(
            200,
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "hybrid-drill", "namespace": "kube-system"},
                   "spec": {"holderIdentity": RUN, "leaseDurationSeconds": 60,
                            "acquireTime": "2026-12-06T18:00:00.000000Z", "renewTime": "2026-12-06T18:00:20.000000Z"}}),
        );
    }
    if uri.starts_with("/api/v1/nodes") && !uri.contains("labelSelector") {
        return Answer::Json(
            200,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {},
                   "items": [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                              "metadata": {"name": "hybrid-gpu-1", "annotations": {"hybrid-drill.io/run-id": RUN}}}]}),
        );
    }
    if uri.starts_with("/apis/karpenter.sh/v1/nodeclaims/gpu-fallback-a") {
        return Answer::Json(
            200,
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "gpu-fallback-a"},
                   "spec": {}}),
        );
    }
    quiet(request)
}

/// A cluster no run left anything in.
fn quiet(request: &Seen) -> Answer {
    if request.uri.contains("/leases/") || request.uri.contains("/nodeclaims/") {
        return status(404, "NotFound");
    }
    Answer::Json(200, json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}))
}

async fn gathered(reports: &Path, answer: fn(&Seen) -> Answer) -> (Status, Vec<Seen>) {
    let (cluster, handle) = Cluster::mock();
    let server = serve(handle, answer);
    let reader = cluster.reader();
    let found = gather(&reader, reports, LeaseRef::default()).await.unwrap();
    drop((reader, cluster));
    (found, server.await.unwrap())
}

#[tokio::test]
async fn a_crashed_run_is_named_with_its_lock_marks_and_nodeclaims_reading_only() {
    let reports = reports();
    let (found, seen) = gathered(reports.path(), after_the_crash).await;
    assert!(seen.iter().all(|r| r.method == "GET"), "{:?}", seen.iter().map(|r| &r.method).collect::<Vec<_>>());
    assert!(!found.clean());
    assert_eq!(found.locks[0].holder.as_ref().unwrap().identity, RUN);
    assert_eq!(found.runs.len(), 1, "the finished run is not listed: {:?}", found.runs);
    assert_eq!(found.runs[0].run_id.as_deref(), Some(RUN));
    assert_eq!(found.runs[0].outstanding, ["cordon node/hybrid-gpu-1"]);
    assert_eq!(found.marked.len(), 1, "{:?}", found.marked);
    assert!(found.marked[0].contains("hybrid-gpu-1") && found.marked[0].contains(RUN), "{:?}", found.marked);
    let left: Vec<&str> = found.leftovers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(left, ["gpu-fallback-a"]);
    let shown = text(&found);
    for expected in [&format!("held by {RUN} since 2026-12-06T18:00:00Z"), "left to undo: cordon node/hybrid-gpu-1"] {
        assert!(shown.contains(expected), "{shown}");
    }
    assert!(shown.contains("left over: NodeClaim gpu-fallback-a") && shown.contains("not clean:"), "{shown}");
    let object = json(&found);
    assert_eq!((object["clean"].as_bool(), object["locks"][0]["held"].as_bool()), (Some(false), Some(true)));
    assert_eq!(object["unfinished_runs"][0]["run_id"], RUN);
}

#[tokio::test]
async fn a_recovered_cluster_is_clean() {
    let reports = tempfile::tempdir().unwrap();
    let (found, _) = gathered(reports.path(), quiet).await;
    assert!(found.clean(), "{found:?}");
    assert!(text(&found).contains("drill lock Lease kube-system/hybrid-drill: free\nclean:"), "{}", text(&found));
    assert_eq!(json(&found)["clean"], true);
}

#[test]
fn a_lock_is_named_namespace_slash_name() {
    assert_eq!(parse_lease("ops/drill").unwrap().name, "drill");
    assert!(parse_lease("drill").unwrap_err().to_string().contains("NAMESPACE/NAME"));
    assert!(parse_lease("a/b/c").is_err());
}
