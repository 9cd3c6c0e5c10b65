//! End-to-end: the fallback NodePool's disruption budgets judged by `preflight` at a planned time. A budget of 0
//! nodes on a weekday schedule warns when `--at` falls inside its window, naming the budget and when reclaim is
//! allowed, and passes outside it. The NodePool's budgets are restored by a guard, even when an assertion fails.

use std::time::Instant;

use serde_json::Value;

use crate::common::lab::{Repair, hybrid_drill, kubeconfig, kubectl, kubectl_json, kubectl_quiet, lock_lab, reset_lab};
use crate::common::repo;

fn preflight_at(at: &str) -> (i32, Value) {
    let out = hybrid_drill()
        .arg("preflight")
        .arg(repo().join("drills/drain.yaml"))
        .args(["--at", at, "--output", "json", "--kubeconfig"])
        .arg(kubeconfig())
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("no JSON ({e}): {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out.status.code().unwrap_or(-1), report)
}

fn disruption_finding(report: &Value) -> Value {
    report["findings"].as_array().unwrap().iter().find(|f| f["check"] == "nodepool-disruption").cloned().unwrap()
}

/// Sets gpu-fallback's budgets; the guard puts back the ones it had.
fn set_budgets(budgets: Value) -> Repair<impl FnMut()> {
    let before = kubectl_json(&["get", "nodepool", "gpu-fallback"])["spec"]["disruption"]["budgets"].clone();
    let patch = |b: &Value| serde_json::json!({"spec": {"disruption": {"budgets": b}}}).to_string();
    kubectl(&["patch", "nodepool", "gpu-fallback", "--type", "merge", "-p", &patch(&budgets)]);
    Repair(move || {
        kubectl_quiet(&["patch", "nodepool", "gpu-fallback", "--type", "merge", "-p", &patch(&before)]);
    })
}

#[test]
fn preflight_at_a_time_inside_a_zero_budget_window_warns_with_the_window() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let _budgets = set_budgets(serde_json::json!([
        {"nodes": "100%"},
        {"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h", "reasons": ["Empty", "Underutilized"]}
    ]));
    // Monday noon: inside the business-hours window.
    let (code, report) = preflight_at("2026-12-07T12:00:00Z");
    let finding = disruption_finding(&report);
    assert_eq!(finding["status"], "warn", "{report:#}");
    let message = finding["message"].as_str().unwrap();
    assert!(message.contains("budget 1 (nodes: 0, schedule: \"0 9 * * 1-5\" for 8h"), "{message}");
    assert!(message.contains("at 2026-12-07T12:00:00Z"), "{message}");
    assert!(message.contains("2026-12-07T17:00:00Z until 2026-12-08T09:00:00Z"), "{message}");
    assert_eq!((code, report["verdict"].as_str()), (0, Some("warn")), "a warning alone does not fail: {report:#}");
    // Monday evening: outside it.
    let (_, evening) = preflight_at("2026-12-07T19:00:00Z");
    assert_eq!(disruption_finding(&evening)["status"], "pass", "{evening:#}");
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}
