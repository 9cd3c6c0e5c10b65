//! End-to-end: the GPU fault drill on the lab's GPU stand-in (lab/gpu-fault), with and without the remediation
//! stand-in: quarantined and fallen back, or "fallback never triggered" with the degraded time and exit 1; in both,
//! the GPUs and the nodes back as before.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::common::lab::{
    Repair, cordoned_or_marked, drill_run, eventually, hybrid_nodes, kubeconfig, kubectl_json, kubectl_quiet, lab_port,
    lab_tool, lock_lab, reset_lab, workload_on_prem_and_fallback_empty,
};
use crate::common::repo;
use serde_json::Value;

/// Each hybrid node's allocatable GPUs, its taints' keys and whether it is schedulable.
fn gpu_nodes() -> Vec<(String, String, String, bool)> {
    kubectl_json(&["get", "nodes", "-l", "eks.amazonaws.com/compute-type=hybrid"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let taints: Vec<String> = n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| format!("{}:{}", t["key"].as_str().unwrap(), t["effect"].as_str().unwrap()))
                .collect();
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                n["status"]["allocatable"]["nvidia.com/gpu"].as_str().unwrap_or("0").to_string(),
                taints.join(","),
                n["spec"]["unschedulable"] != Value::Bool(true),
            )
        })
        .collect()
}

/// Sets the workload budget's unhealthyPodEvictionPolicy (`None`: the default, IfHealthyBudget).
fn unhealthy_pod_eviction(policy: Option<&str>) -> bool {
    let value = policy.map_or("null".to_string(), |p| format!("\"{p}\""));
    let patch = format!(r#"{{"spec":{{"unhealthyPodEvictionPolicy":{value}}}}}"#);
    kubectl_quiet(&["patch", "pdb", "llm-inference", "-n", "inference", "--type", "merge", "-p", &patch])
}

/// Heals every hybrid node's GPUs and puts the budget back whatever a failed test left: runs from a Drop guard.
fn guard() -> Repair<impl FnMut()> {
    Repair(|| {
        for node in hybrid_nodes() {
            let _ = lab_tool("gpu-recover").arg(&node).output();
        }
        unhealthy_pod_eviction(None);
    })
}

fn run(file: &Path, reports: &Path, remediation: Option<&str>) -> (Output, Value) {
    let mut command = drill_run(file, reports, kubeconfig());
    match remediation {
        Some(seconds) => command.env("LAB_GPU_REMEDIATION_SECONDS", seconds),
        None => command.env_remove("LAB_GPU_REMEDIATION_SECONDS"),
    };
    let out = command.output().unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

fn phase_seconds(report: &Value, name: &str) -> Option<f64> {
    report["phases"].as_array().unwrap().iter().find(|p| p["name"] == name).and_then(|p| p["seconds"].as_f64())
}

/// drills/gpu-fault.yaml with its quarantine bound replaced and its Prometheus the instance's, written to `dir`.
fn drill(dir: &Path, quarantine_within: &str) -> PathBuf {
    let source = std::fs::read_to_string(repo().join("drills/gpu-fault.yaml")).unwrap();
    assert!(source.contains("quarantineWithin: 45s") && source.contains("127.0.0.1:29090"));
    let path = dir.join("gpu-fault.yaml");
    let text = source
        .replacen("quarantineWithin: 45s", &format!("quarantineWithin: {quarantine_within}"), 1)
        .replace("127.0.0.1:29090", &format!("127.0.0.1:{}", lab_port(29090)));
    std::fs::write(&path, text).unwrap();
    path
}

/// The lab's DCGM stand-in reports Xid 79 on every failed GPU; the step's `detectedBy` query read it.
fn assert_xid_79_seen(fault: &Value) {
    let errors = &fault["gpuErrors"];
    assert_eq!(errors["value"].as_f64(), Some(79.0), "{fault:#}");
    assert!(!errors["nodes"].as_array().unwrap().is_empty(), "{fault:#}");
    assert!(fault["detectedBy"].is_string(), "{fault:#}");
}

fn assert_back_as_before(before: &[(String, String, String, bool)]) {
    assert_eq!(gpu_nodes(), before, "the hybrid nodes' GPUs, taints and cordons differ from before the drill");
    assert!(cordoned_or_marked().is_empty(), "nodes left cordoned or marked: {:?}", cordoned_or_marked());
}

#[test]
fn a_remediated_gpu_fault_is_detected_quarantined_and_falls_back_then_the_gpus_come_back() {
    let _lab = lock_lab();
    reset_lab();
    let _repair = guard();
    // Every on-prem GPU failed leaves every replica unready: under the default IfHealthyBudget the budget then refuses
    // to evict them and the drainer is stuck (runbooks/gpu-fault.md); AlwaysAllow lets it evict unready pods.
    assert!(unhealthy_pod_eviction(Some("AlwaysAllow")));
    let before = gpu_nodes();
    let dir = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let (out, report) = run(&drill(dir.path(), "45s"), reports.path(), Some("3"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}\nreport: {report:#}");
    for name in ["gpu-detection", "quarantine", "degraded", "eviction", "provisioning", "rto", "return", "reclaim"] {
        let seconds = phase_seconds(&report, name);
        println!("{name}: {seconds:?}");
        assert!(seconds.is_some(), "phase {name} not measured: {:#}", report["phases"]);
    }
    // The stand-in quarantines 3 s after its hook: the quarantine cannot come before that, nor the detection after it.
    assert!(phase_seconds(&report, "quarantine").unwrap() >= 3.0);
    assert!(phase_seconds(&report, "gpu-detection").unwrap() <= phase_seconds(&report, "quarantine").unwrap());
    let fault = &report["gpu_fault"];
    assert_eq!(fault["fallbackTriggered"], true, "{fault:#}");
    assert!(fault["quarantinedBy"].as_str().unwrap().contains("cordoned"), "{fault:#}");
    assert_xid_79_seen(fault);
    assert!(report["fidelity"].as_str().unwrap().starts_with("GPU fault: the drill's own hooks"));
    assert_back_as_before(&before);
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

#[test]
fn a_gpu_fault_nothing_remediates_says_the_fallback_never_triggered_exits_1_and_restores() {
    let _lab = lock_lab();
    reset_lab();
    let _repair = guard();
    let before = gpu_nodes();
    let dir = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let (out, report) = run(&drill(dir.path(), "15s"), reports.path(), None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}\nreport: {report:#}");
    let fault = &report["gpu_fault"];
    assert_eq!(fault["fallbackTriggered"], false, "{fault:#}");
    let degraded = fault["degradedSeconds"].as_f64().expect("the degraded time");
    assert!(degraded >= 10.0, "degraded {degraded} s, the bound was 15 s: {fault:#}");
    assert!(!fault["degradedNodes"].as_array().unwrap().is_empty(), "{fault:#}");
    assert_xid_79_seen(fault);
    assert!(report["objectives_missed"].as_array().unwrap().contains(&Value::from("quarantine")), "{report:#}");
    // No fallback was asked for: no NodeClaim, the steps between the fault and the restore skipped.
    let steps = report["steps"].as_array().unwrap();
    let fallback = steps.iter().find(|s| s["id"] == "fallback").unwrap();
    assert_eq!(fallback["outcome"], "skipped", "{fallback:#}");
    let md = std::fs::read_to_string(
        std::fs::read_dir(std::fs::read_dir(reports.path()).unwrap().flatten().next().unwrap().path())
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path()
            .join("report.md"),
    )
    .unwrap();
    assert!(md.contains("fallback never triggered: GPUs failed on"), "{md}");
    assert!(md.contains("served by a degraded set of pods"), "{md}");
    assert!(md.contains("NVSentinel"), "{md}");
    assert!(md.contains("the detectedBy query answered 79"), "{md}");
    assert_back_as_before(&before);
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}
