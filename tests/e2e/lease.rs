//! End-to-end: the drill lock cannot lapse under a run. A run that can no longer renew its lock stops acting on the
//! cluster: it aborts, restores what it changed, and says why.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::lab::{
    KillOnDrop, Repair, cordoned_or_marked, drill_run, eventually, kubeconfig, kubectl, kubectl_quiet, lock_lab,
    reset_lab,
};
use crate::common::repo;

/// The lab drain drill's targets, a 6 s drill lock, and two steps: cordon the on-prem nodes, then wait.
fn cordon_and_wait(dir: &std::path::Path) -> std::path::PathBuf {
    let source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    let objectives = "  objectives:\n    rto: 15m\n    phases:\n      provisioning: 8m\n      reclaim: 20m\n";
    assert!(source.contains(objectives), "drills/drain.yaml's objectives changed");
    let source = source.replace(objectives, "");
    let head = &source[..source.find("  steps:\n").unwrap()];
    let path = dir.join("cordon-and-wait.yaml");
    let steps = "  steps:\n    - {id: cordon, cordon: onPrem}\n    - {id: hold, pause: 60s}\n";
    std::fs::write(&path, format!("{head}  lock: {{duration: 6s}}\n{steps}")).unwrap();
    path
}

#[test]
fn a_run_that_cannot_renew_its_drill_lock_aborts_and_restores_within_its_renew_deadline() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let file = cordon_and_wait(dir.path());
    // As the lab's exec-plugin operator, whose grant of the lock the test can withdraw without touching the rest.
    let operator = kubeconfig().with_file_name("kubeconfig-exec");
    let child = drill_run(&file, dir.path().join("reports"), &operator)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop::new(child);
    let timeline = || {
        let runs = dir.path().join("reports/onprem-gpu-drain");
        let run = std::fs::read_dir(runs).ok()?.flatten().next()?.path();
        std::fs::read_to_string(run.join("timeline.jsonl")).ok()
    };
    eventually("the run cordoned and waits", Duration::from_secs(60), || {
        timeline().is_some_and(|t| t.contains(r#""step":"hold","action""#))
    });
    assert!(!cordoned_or_marked().is_empty(), "the run cordoned nothing");

    // The operators' grant of the lock withdrawn: every renewal is refused (403) from now on.
    let rbac = repo().join("lab/manifests/50-operator-rbac.yaml");
    let _grant = Repair(move || {
        kubectl_quiet(&["apply", "-f", rbac.to_str().unwrap()]);
        // The run could not free its Lease either: free it for the next test.
        kubectl_quiet(&["delete", "lease", "hybrid-drill", "-n", "kube-system", "--ignore-not-found"]);
    });
    kubectl(&["delete", "rolebinding", "hybrid-drill-operators-lock", "-n", "kube-system"]);
    let withdrawn = Instant::now();
    let out = child.take().wait_with_output().unwrap();
    let stopped = withdrawn.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no report ({e}):\n{stderr}"));
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // Renew deadline 4 s (two thirds of 6 s) from the last good renewal, then the restore's uncordon and check.
    assert!(stopped < Duration::from_secs(30), "stopped {stopped:?} after the grant was withdrawn: {stderr}");
    let reason = report["abort_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("cannot prove this run still holds the drill lock (Lease kube-system/hybrid-drill)"),
        "{reason}"
    );
    assert!(reason.contains("forbidden") || reason.contains("Forbidden"), "the cause is named: {reason}");
    assert!(cordoned_or_marked().is_empty(), "left cordoned: {:?}", cordoned_or_marked());
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("the drill lock was not released"), "the release's failure is reported: {warnings}");
}
