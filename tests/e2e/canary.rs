//! End-to-end: `hybrid-drill canary` against the lab: one replica of the inference workload on `gpu-fallback` passes
//! and leaves no NodeClaim; with every fallback type out of capacity (lab/capacity) the launch is refused with
//! Karpenter's cause; with a startup taint nothing removes (the NodePool's `startupTaints`, as a GPU operator that
//! never finishes leaves it) the node never initialises, named with its taint, and the canary deletes the NodeClaim.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::lab::{
    Repair, eventually, hybrid_drill, kubeconfig, kubectl, kubectl_json, lock_lab, out_of_capacity, reset_lab,
};
use crate::common::repo;

/// `hybrid-drill canary drills/drain.yaml --yes -o json` with the lab's short deadlines and `extra` flags.
fn canary(reports: &Path, extra: &[&str]) -> (Output, Value) {
    let out = hybrid_drill()
        .arg("canary")
        .arg(repo().join("drills/drain.yaml"))
        .args(["--yes", "-o", "json", "--reclaim-timeout", "90s", "--reports-dir"])
        .arg(reports)
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .args(extra)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("no canary.json on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr))
    });
    (out, report)
}

fn context(out: &Output, report: &Value) -> String {
    format!("canary.json: {report:#}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr))
}

/// Neither a canary pod nor a NodeClaim in the cluster.
fn nothing_left() -> bool {
    let claims = kubectl_json(&["get", "nodeclaims"]);
    let pods = kubectl_json(&["get", "pods", "-A", "-l", "hybrid-drill.io/canary"]);
    claims["items"].as_array().unwrap().is_empty() && pods["items"].as_array().unwrap().is_empty()
}

fn phase(report: &Value, name: &str) -> Option<f64> {
    report["phases"].as_array().unwrap().iter().find(|p| p["name"] == name).and_then(|p| p["seconds"].as_f64())
}

#[test]
fn the_canary_passes_and_leaves_no_nodeclaim() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let reports = tempfile::tempdir().unwrap();
    let (out, report) = canary(reports.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", context(&out, &report));
    assert_eq!(report["outcome"], "passed", "{}", context(&out, &report));
    for name in ["launched", "registered", "initialized", "gpu-allocatable", "image-pull", "load", "reclaim"] {
        assert!(phase(&report, name).is_some(), "{name} not measured: {report:#}");
    }
    let answer = report["first_answer_seconds"].as_f64().unwrap();
    assert!(answer > 0.0 && answer < 60.0, "{report:#}");
    assert_eq!(report["left_behind"], serde_json::json!([]), "{report:#}");
    assert!(report["nodeclaim"].as_str().unwrap().starts_with("gpu-fallback-"), "{report:#}");
    assert!(report["estimated_cost"].as_f64().is_some_and(|c| c > 0.0), "priced from spec.pricing: {report:#}");
    assert!(nothing_left(), "the canary said nothing is left: {}", kubectl(&["get", "nodeclaims,pods", "-A"]));
    let dir = std::fs::read_dir(reports.path().join("onprem-gpu-drain")).unwrap().flatten().next().unwrap().path();
    for file in ["canary.json", "report.md", "metrics.prom", "journal.jsonl", "timeline.jsonl", "manifest.json"] {
        assert!(dir.join(file).is_file(), "{file} missing in {}", dir.display());
    }
    let metrics = std::fs::read_to_string(dir.join("metrics.prom")).unwrap();
    assert!(metrics.contains("hybrid_drill_canary_success{drill=\"onprem-gpu-drain\"} 1"), "{metrics}");
    let history = hybrid_drill().arg("history").arg(reports.path()).output().unwrap();
    let text = String::from_utf8_lossy(&history.stdout);
    assert!(history.status.success() && text.contains("Fallback canaries") && text.contains("passed"), "{text}");
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn a_canary_with_every_fallback_type_out_of_capacity_names_the_refused_launches() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let _cheap = out_of_capacity("g6.12xlarge");
    let _next = out_of_capacity("g6e.12xlarge");
    let reports = tempfile::tempdir().unwrap();
    let (out, report) = canary(reports.path(), &["--launch-timeout", "20s"]);
    assert_eq!(out.status.code(), Some(1), "{}", context(&out, &report));
    assert_eq!(report["outcome"], "launch-refused", "{}", context(&out, &report));
    let cause = report["cause"].as_str().unwrap();
    // Karpenter's words, with the pools EC2 refused (a type already in the 3-minute cache of refused types is not
    // asked for again, so not every message names both).
    assert!(cause.contains("InsufficientCapacityError") && cause.contains("no capacity for g6"), "{cause}");
    assert!(!report["failed_launches"].as_array().unwrap().is_empty(), "{report:#}");
    assert_eq!(report["first_answer_seconds"], Value::Null, "{report:#}");
    assert_eq!(report["left_behind"], serde_json::json!([]), "{report:#}");
    assert!(nothing_left(), "{}", kubectl(&["get", "nodeclaims,pods", "-A"]));
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn a_canary_whose_node_never_initialises_names_its_taint_and_deletes_the_nodeclaim() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let taint = r#"{"spec":{"template":{"spec":{"startupTaints":[{"key":"hybrid-lab.io/never-initialised","effect":"NoSchedule"}]}}}}"#;
    kubectl(&["patch", "nodepool", "gpu-fallback", "--type", "merge", "-p", taint]);
    let _untaint = Repair(|| {
        kubectl(&[
            "patch",
            "nodepool",
            "gpu-fallback",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/spec/template/spec/startupTaints"}]"#,
        ]);
    });
    let reports = tempfile::tempdir().unwrap();
    let (out, report) = canary(reports.path(), &["--initialise-timeout", "15s"]);
    assert_eq!(out.status.code(), Some(1), "{}", context(&out, &report));
    assert_eq!(report["outcome"], "never-initialised", "{}", context(&out, &report));
    let cause = report["cause"].as_str().unwrap();
    assert!(
        cause.contains("not Initialized within 15s") && cause.contains("hybrid-lab.io/never-initialised"),
        "{cause}"
    );
    assert!(phase(&report, "launched").is_some() && phase(&report, "initialized").is_none(), "{report:#}");
    assert_eq!(report["left_behind"], serde_json::json!([]), "{report:#}");
    eventually("no canary pod and no NodeClaim", Duration::from_secs(30), nothing_left);
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}
