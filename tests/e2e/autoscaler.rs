//! End-to-end: a drill of an autoscaled workload. The lab's HPA (lab/manifests/41-inference-hpa.yaml) holds the
//! inference Deployment at 4; once the workload is on its way to the fallback the test lowers the HPA's bounds to 2, as
//! a scale-in during an outage would. Judged against the drill file's fixed `readyPods: 4`, the fallback would never be
//! "ready" nor the service "restored" (a false abort); judged against the HPA's desired replicas it passes, and the
//! report says what the HPA did.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::common::lab::{
    KillOnDrop, Repair, drill_run, eventually, kubeconfig, kubectl, kubectl_quiet, lock_lab, reset_lab,
    workload_on_prem_and_fallback_empty,
};
use crate::common::repo;
use serde_json::Value;

fn set_hpa_bounds(replicas: u32) {
    let patch = format!(r#"{{"spec":{{"minReplicas":{replicas},"maxReplicas":{replicas}}}}}"#);
    kubectl(&["patch", "hpa", "llm-inference", "-n", "inference", "--type", "merge", "-p", &patch]);
}

fn timeline(reports: &Path) -> String {
    let Some(run) = walk(reports, 2) else { return String::new() };
    std::fs::read_to_string(run.join("timeline.jsonl")).unwrap_or_default()
}

/// The first directory `depth` levels below `dir` (reports/<drill>/<stamp>).
fn walk(dir: &Path, depth: usize) -> Option<std::path::PathBuf> {
    let next = std::fs::read_dir(dir).ok()?.flatten().next()?.path();
    if depth == 1 { Some(next) } else { walk(&next, depth - 1) }
}

#[test]
fn an_hpa_scaling_in_mid_drill_is_judged_against_its_desired_replicas() {
    let _lab = lock_lab();
    reset_lab();
    let hpa = repo().join("lab/manifests/41-inference-hpa.yaml");
    kubectl(&["apply", "-f", hpa.to_str().unwrap()]);
    let _repair = Repair(|| {
        kubectl_quiet(&["delete", "-f", hpa.to_str().unwrap(), "--ignore-not-found"]);
        kubectl_quiet(&["scale", "deployment/llm-inference", "-n", "inference", "--replicas", "4"]);
    });
    // The HPA controller has synced it once: it holds the bounds from now on (its metric never resolves here).
    eventually("the HPA's status read", Duration::from_secs(30), || {
        kubectl(&["get", "hpa", "llm-inference", "-n", "inference", "-o", "jsonpath={.status.currentReplicas}"]) == "4"
    });
    // The lab's drain drill as it is (readyPods: 4), with waits short enough that a wrong judgement ends the test soon.
    let source =
        std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap().replace("timeout: 15m", "timeout: 75s");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drill.yaml");
    std::fs::write(&file, source).unwrap();
    let reports = tempfile::tempdir().unwrap();
    let mut child = KillOnDrop::new(
        drill_run(&file, reports.path(), kubeconfig()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap(),
    );
    eventually("the drain done and the fallback awaited", Duration::from_secs(90), || {
        timeline(reports.path()).contains(r#""step":"fallback","action""#)
    });
    set_hpa_bounds(2);
    let out = child.take().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{stderr}"));
    assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{stderr}");
    assert_eq!(report["outcome"], "passed");
    let autoscaler = &report["autoscaler"];
    assert_eq!(autoscaler["autoscaler"]["kind"], "HorizontalPodAutoscaler", "{report:#}");
    assert_eq!(autoscaler["autoscaler"]["name"], "llm-inference");
    assert_eq!(autoscaler["autoscaler"]["target"], "Deployment/llm-inference");
    assert_eq!((autoscaler["desired_at_fault"].as_u64(), autoscaler["ready_pods_needed"].as_u64()), (Some(4), Some(4)));
    let changes = autoscaler["changes"].as_array().unwrap();
    assert!(changes.iter().any(|c| c["min_replicas"] == 2 && c["max_replicas"] == 2), "{autoscaler:#}");
    assert!(changes.iter().any(|c| c["desired_replicas"] == 2 && c["ready_pods_needed"] == 2), "{autoscaler:#}");
    let run = walk(reports.path(), 2).unwrap();
    let markdown = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        markdown.contains("## Autoscaler") && markdown.contains("HorizontalPodAutoscaler llm-inference"),
        "{markdown}"
    );
    assert!(std::fs::read_to_string(run.join("report.html")).unwrap().contains(r#"id="autoscaler""#));
    drop(_repair);
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}
