//! End-to-end: the design's safety nets proven by one drain drill (drills/safety-nets.yaml) against the lab's real
//! Prometheus, Alertmanager and Karpenter: the fallback-activation alert fires (silenced by the drill) and is timed
//! from the fault, an expected alert that cannot fire misses the drill's objective (exit 1), a warmer in effect is
//! credited with the time it saved and one not in effect is named with an action item.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::lab::{drill_run, hybrid_drill, kubeconfig, lab_port, lock_lab, reset_lab};
use crate::common::repo;

/// drills/safety-nets.yaml for the held instance, with `edits` (from, to) applied.
fn drill_file(dir: &tempfile::TempDir, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(repo().join("drills/safety-nets.yaml")).unwrap();
    text = text.replace("127.0.0.1:29090", &format!("127.0.0.1:{}", lab_port(29090)));
    text = text.replace("127.0.0.1:29093", &format!("127.0.0.1:{}", lab_port(29093)));
    for (from, to) in edits {
        assert!(text.contains(from), "drills/safety-nets.yaml has no `{from}`");
        text = text.replace(from, to);
    }
    let path = dir.path().join("drill.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array().unwrap().iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("no {name} in {list:#}"))
}

#[test]
fn nets_alerts_are_timed_from_the_fault_a_missing_one_misses_and_warmers_are_credited_or_named() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    // The NodePool limit is 16 GPUs and the drill needs fewer: the overrun alert cannot fire. The lab has no
    // placeholder pods running, so every replacement waits for a new NodeClaim: warm capacity is not in effect.
    let file = drill_file(
        &dir,
        &[
            (
                "      - {name: GpuPodsPending,",
                "      - {name: FallbackNodePoolLimitOverrun, within: 20s}\n      - {name: GpuPodsPending,",
            ),
            (
                "  warmers:\n",
                "  warmers:\n    - {name: gpu-placeholders, kind: warmCapacity, priorityClass: gpu-placeholder, withoutIt: 3m}\n",
            ),
        ],
    );
    let out = drill_run(&file, dir.path(), kubeconfig()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{stderr}"));
    // A missed expected alert is a missed objective: exit 1, the drill otherwise complete and restored.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(report["outcome"], "objective-missed", "{report:#}");
    assert!(report["leftovers"].as_array().is_none_or(|l| l.is_empty()), "{report:#}");
    let nets = &report["safety_nets"];

    let fired = named(&nets["alerts"], "FallbackActivated");
    assert_eq!(fired["verdict"], "fired", "{nets:#}");
    // Silenced by the drill's own silence, and still seen: the check reads silenced alerts too.
    assert_eq!(fired["silenced"], true, "{nets:#}");
    let detect = fired["detect_seconds"].as_f64().unwrap();
    let seen = fired["seen_seconds"].as_f64().unwrap();
    // After the fault, within its deadline; read no later than a few reading intervals after it fired.
    assert!(detect > 0.0 && detect <= 120.0 && seen >= detect - 1.0 && seen <= detect + 6.0, "{fired:#}");
    let pending = named(&nets["alerts"], "GpuPodsPending");
    assert_eq!(pending["verdict"], "fired", "{nets:#}");
    assert_eq!(pending["silenced"], false, "{nets:#}");

    let missing = named(&nets["alerts"], "FallbackNodePoolLimitOverrun");
    assert_eq!(missing["verdict"], "missing", "{nets:#}");
    let items = report["action_items"].as_array().unwrap();
    assert!(
        items.iter().any(|i| i["objective"].as_str().unwrap().contains("FallbackNodePoolLimitOverrun")),
        "{items:#?}"
    );

    // The image's pull on the fallback node took the lab's pull time, under its bound: credited with the rest.
    let image = named(&nets["warmers"], "llm-image-cache");
    assert_eq!(image["verdict"], "in-effect", "{nets:#}");
    let (measured, saved) = (image["measured_seconds"].as_f64().unwrap(), image["saved_seconds"].as_f64().unwrap());
    assert!(measured < 30.0 && (saved - (150.0 - measured)).abs() < 0.01, "{image:#}");
    assert!(image["on"].as_str().unwrap().contains(" on "), "{image:#}");
    let placeholders = named(&nets["warmers"], "gpu-placeholders");
    assert_eq!(placeholders["verdict"], "not-in-effect", "{nets:#}");
    assert!(placeholders["saved_seconds"].is_null(), "{placeholders:#}");
    assert!(placeholders["detail"].as_str().unwrap().contains("waited for a new NodeClaim"), "{placeholders:#}");
    assert!(
        items.iter().any(|i| i["source"] == "warmer" && i["objective"].as_str().unwrap().contains("gpu-placeholders")),
        "{items:#?}"
    );
    let runs = dir.path().join("safety-nets");
    let run_dir = std::fs::read_dir(&runs).unwrap().flatten().next().unwrap().path();
    let md = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(
        md.contains("## Safety nets") && md.contains("warmer gpu-placeholders (warmCapacity): NOT IN EFFECT"),
        "{md}"
    );
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        html.contains("id=\"safety-nets\"") && html.contains("alert FallbackActivated: fired"),
        "no safety nets in report.html"
    );
}

#[test]
fn nets_preflight_warns_of_an_expected_alert_prometheus_has_no_rule_for() {
    let _lab = lock_lab();
    let dir = tempfile::tempdir().unwrap();
    let file = drill_file(&dir, &[("{name: FallbackActivated, within: 2m}", "{name: FallbackActivatd, within: 2m}")]);
    let out = hybrid_drill()
        .arg("preflight")
        .arg(&file)
        .args(["--output", "json", "--kubeconfig"])
        .arg(kubeconfig())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let nets: Vec<(&str, &str)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "expected-alerts" || f["check"] == "warmers")
        .map(|f| (f["object"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    // Read from the lab's real Prometheus: the misspelt name has no rule, the other one has.
    assert_eq!(nets, [("alert FallbackActivatd", "warn"), ("alert GpuPodsPending", "pass")], "{report:#}");
    assert_eq!(report["verdict"], "warn", "{report:#}");
}
