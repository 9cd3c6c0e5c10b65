//! End-to-end: the drill's SLIs read from the lab's real Prometheus, which scrapes the service stand-in. A service
//! outside its objective refuses the drill with nothing touched; a stop condition aborts a drain that leaves no
//! endpoint Ready and restores, and the report carries the users' impact; Prometheus stopped mid-drill follows the
//! drill's policy.

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::common::lab::{
    cordoned_or_marked, drill_run, kubeconfig, lab_port, lab_tool, lock_lab, reset_lab, set_max_unavailable,
};
use crate::common::repo;

/// drills/drain-slo.yaml for the held instance, with `edits` (from, to) applied.
fn drill_file(dir: &tempfile::TempDir, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(repo().join("drills/drain-slo.yaml")).unwrap();
    text = text.replace("127.0.0.1:29090", &format!("127.0.0.1:{}", lab_port(29090)));
    for (from, to) in edits {
        assert!(text.contains(from), "drills/drain-slo.yaml has no `{from}`");
        text = text.replace(from, to);
    }
    let path = dir.path().join("drill.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(file: &PathBuf, reports: &tempfile::TempDir) -> (Output, Value) {
    let out = drill_run(file, reports.path(), kubeconfig()).output().unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn slo_a_service_outside_its_objective_refuses_the_drill_with_nothing_touched() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let file = drill_file(&dir, &[("atLeast: 0.99", "atLeast: 1.5")]);
    let (out, report) = run(&file, &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit 5, as every refusal that touches nothing (a failed preflight check, a held drill lock).
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert_eq!(report["outcome"], "refused", "{report:#}");
    let reason = report["abort_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("SLI success-ratio") && reason.contains(">= 1.5"), "{reason}");
    assert!(cordoned_or_marked().is_empty(), "a refused drill touched nodes: {:?}", cordoned_or_marked());
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn slo_a_stop_condition_aborts_the_drain_restores_and_the_report_carries_the_impact() {
    let _lab = lock_lab();
    reset_lab();
    // Every replica evicted at once: no endpoint is Ready until the cloud replacements are.
    assert!(set_max_unavailable(4));
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let file = drill_file(&dir, &[("below: 0.2\n        for: 30s", "below: 0.9\n        for: 4s")]);
    let (out, report) = run(&file, &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    set_max_unavailable(2);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let impact = &report["impact"];
    let stop = &impact["stop"];
    assert!(stop["condition"].as_str().unwrap().contains("success-ratio"), "{impact:#}");
    assert!(stop["value"].as_f64().unwrap() <= 0.9, "{stop:#}");
    // Within its `for` (4 s) plus two scrape intervals (2 s each).
    let held = (time(&stop["at"]) - time(&stop["since"])).num_milliseconds();
    assert!((4000..=8000).contains(&held), "the condition held {held} ms before the abort: {stop:#}");
    assert!(report["rollback"]["failed"].as_array().unwrap().is_empty(), "{report:#}");
    assert!(cordoned_or_marked().is_empty(), "not restored: {:?}", cordoned_or_marked());
    // The users' impact: both SLIs, requests failed while no endpoint was Ready, the stand-in named.
    let names: Vec<&str> = impact["slis"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["success-ratio", "p99-latency"], "{impact:#}");
    let success = &impact["slis"][0];
    assert!(
        !success["met"].as_bool().unwrap() && success["whole"]["seconds_outside_objective"].as_f64().unwrap() > 0.0
    );
    assert!(!success["series"].as_array().unwrap().is_empty() && success["series"].as_array().unwrap().len() <= 240);
    assert!(impact["requests"]["failed"].as_f64().unwrap() > 0.0, "{impact:#}");
    assert!(impact["stand_in"].as_str().unwrap().contains("stand-in"), "{impact:#}");
    let junit = std::fs::read_to_string(run_dir(&dir).join("junit.xml")).unwrap();
    assert!(junit.contains("SLO success-ratio"), "{junit}");
    let metrics = std::fs::read_to_string(run_dir(&dir).join("metrics.prom")).unwrap();
    assert!(metrics.contains("hybrid_drill_sli_seconds_outside_objective{"), "{metrics}");
    reset_lab();
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

fn run_dir(reports: &tempfile::TempDir) -> PathBuf {
    let drill = std::fs::read_dir(reports.path()).unwrap().flatten().find(|e| e.path().is_dir()).unwrap().path();
    std::fs::read_dir(drill).unwrap().flatten().next().unwrap().path()
}

#[test]
fn slo_prometheus_stopped_mid_drill_aborts_as_the_policy_says() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let file = drill_file(&dir, &[]);
    let child = drill_run(&file, dir.path(), kubeconfig())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(6));
    let restart = lab_tool("restart").args(["prometheus", "8"]).status().unwrap();
    assert!(restart.success());
    let out = child.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let errors = report["impact"]["prometheus_errors"].as_array().unwrap();
    assert!(!errors.is_empty() && errors[0]["action"] == "abort", "{report:#}");
    assert!(cordoned_or_marked().is_empty(), "not restored: {:?}", cordoned_or_marked());
    reset_lab();
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}
