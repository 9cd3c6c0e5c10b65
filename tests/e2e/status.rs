//! `hybrid-drill status` after a run killed mid-way: it names the dead run's lock, its unfinished run directory and
//! the marks it left, reading only; after `recover` it says the cluster is clean.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::common::lab::{
    admin_writes, audit_lines, cordoned_or_marked, drill_run, eventually, hybrid_drill, kubeconfig, lock_lab, recover,
    reset_lab,
};
use crate::common::repo;

fn status(reports: &Path, args: &[&str]) -> Output {
    hybrid_drill()
        .arg("status")
        .arg("--reports-dir")
        .arg(reports)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .output()
        .unwrap()
}

fn status_json(reports: &Path) -> (Option<i32>, Value) {
    let out = status(reports, &["-o", "json"]);
    let found = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), found)
}

#[test]
fn status_names_what_a_killed_run_left_reading_only_and_is_clean_after_recover() {
    let lab = lock_lab();
    reset_lab();
    let reports = tempfile::tempdir().unwrap();
    // The drill lock is mutation 0, the first cordon 1: the run dies holding the lock with one node cordoned.
    let out = drill_run(repo().join("drills/drain.yaml"), reports.path(), kubeconfig())
        .env("HYBRID_DRILL_CRASH_AT", "1:after")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), None, "the run should have died: {}", String::from_utf8_lossy(&out.stderr));
    let drill_dir = reports.path().join("onprem-gpu-drain");
    let run_dir = std::fs::read_dir(drill_dir).unwrap().flatten().next().unwrap().path();
    let cordoned = cordoned_or_marked();
    assert_eq!(cordoned.len(), 1, "{cordoned:?}");

    let from = audit_lines(lab.instance());
    let (code, found) = status_json(reports.path());
    assert_eq!(code, Some(6), "{found:#}");
    assert_eq!(found["clean"], false);
    let lock = &found["locks"][0];
    assert_eq!((lock["lease"].as_str(), lock["held"].as_bool()), (Some("kube-system/hybrid-drill"), Some(true)));
    let run_id = lock["holder"]["identity"].as_str().unwrap().to_string();
    assert!(run_id.starts_with("onprem-gpu-drain-"), "{lock:#}");
    assert_eq!(lock["process_gone"], true, "the killed run ran here: {lock:#}");
    let runs = found["unfinished_runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{found:#}");
    assert_eq!(runs[0]["run_dir"].as_str(), Some(run_dir.to_str().unwrap()));
    assert_eq!(runs[0]["run_id"].as_str(), Some(run_id.as_str()));
    let undo = format!("cordon node/{}", cordoned[0]);
    assert!(runs[0]["outstanding"].as_array().unwrap().iter().any(|o| o == undo.as_str()), "{found:#}");
    let marked = found["marked"].as_array().unwrap();
    assert!(
        marked.iter().any(|m| m.as_str().unwrap().contains(&cordoned[0]) && m.as_str().unwrap().contains(&run_id)),
        "{found:#}"
    );
    let text = status(reports.path(), &[]);
    let shown = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(6), "{shown}");
    for expected in [
        &format!("drill lock Lease kube-system/hybrid-drill: held by {run_id} since "),
        &format!("unfinished run {run_id} in {}", run_dir.display()),
        &format!("left to undo: {undo}"),
        &format!("marked in the cluster: cordon node/{}", cordoned[0]),
    ] {
        assert!(shown.contains(expected.as_str()), "{expected}:\n{shown}");
    }
    // The API server's own record: status read the lock, and nothing was written as the tool's identity.
    eventually("status's reads in the audit log", std::time::Duration::from_secs(10), || {
        let log = std::fs::read_to_string(crate::common::lab::run_dir_of(lab.instance()).join("logs/audit.log"));
        log.unwrap_or_default().lines().skip(from).any(|l| l.contains("/leases/hybrid-drill"))
    });
    assert_eq!(admin_writes(lab.instance(), from), Vec::<String>::new(), "status wrote to the cluster");
    assert_eq!(cordoned_or_marked(), cordoned, "status changed the nodes");

    // `recover -o json`: one object saying what it restored, checked and sealed, for a script or the schedule.
    let out =
        hybrid_drill().arg("recover").arg(&run_dir).args(["-o", "json", "--kubeconfig"]).arg(kubeconfig()).output();
    let out = out.unwrap();
    let recovered: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("recover -o json: no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{recovered:#}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        (recovered["schema"].as_str(), recovered["exit_code"].as_u64()),
        (Some("hybrid-drill.io/recover/v1"), Some(0))
    );
    let restored = recovered["restored"].as_array().unwrap();
    assert!(restored.iter().any(|r| r["what"].as_str().unwrap().starts_with("cordon node/")), "{recovered:#}");
    assert!(recovered["not_restored"].as_array().unwrap().is_empty(), "{recovered:#}");
    assert_eq!(recovered["nothing_to_recover"], false, "{recovered:#}");
    let sealed = recovered["sealed"].as_array().unwrap();
    assert_eq!(sealed.len(), 1, "{recovered:#}");
    assert_eq!(sealed[0]["run_dir"], run_dir.display().to_string(), "{recovered:#}");
    // Safe to repeat: nothing left, said as such.
    let (code, text) = recover(&run_dir);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("nothing to recover"), "{text}");
    let (code, found) = status_json(reports.path());
    assert_eq!((code, found["clean"].as_bool()), (Some(0), Some(true)), "{found:#}");
    assert_eq!(found["locks"][0]["held"], false, "{found:#}");
    assert!(found["unfinished_runs"].as_array().unwrap().is_empty() && found["marked"].as_array().unwrap().is_empty());
    reset_lab();
}
