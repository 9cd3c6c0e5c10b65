//! End-to-end: the start gates refuse a drill before anything is touched (a firing alert, a change-freeze window, the
//! cluster's freeze marker), an override lets one through on the record, and the emergency stop (an annotation on
//! the drill lock's Lease, set by an on-call identity bound only to deploy/oncall-roles.yaml) aborts a drain run as
//! the in-cluster CronJob's ServiceAccount and restores within seconds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::lab::{
    KillOnDrop, Repair, alertmanager_url, cordoned_or_marked, drill_run, eventually, hybrid_drill, kubeconfig, kubectl,
    kubectl_json, kubectl_quiet, lock_lab, reset_lab,
};
use crate::common::repo;

/// The lab drain drill's targets without its objectives, with `extra` spec (gates) and `steps`.
fn drill_with(dir: &Path, name: &str, extra: &str, steps: &str) -> PathBuf {
    let source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    let objectives = "  objectives:\n    rto: 15m\n    phases:\n      provisioning: 8m\n      reclaim: 20m\n";
    assert!(source.contains(objectives), "drills/drain.yaml's objectives changed");
    let source = source.replace(objectives, "");
    let head = &source[..source.find("  steps:\n").unwrap()];
    let head = &head[..head.find("  gates:\n").unwrap_or(head.len())];
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, format!("{head}{extra}  steps:\n{steps}")).unwrap();
    path
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The run directories a reports directory holds (none for a refused drill).
fn runs(reports: &Path) -> usize {
    let runs = reports.join("onprem-gpu-drain");
    std::fs::read_dir(runs).map(|d| d.flatten().count()).unwrap_or(0)
}

/// Whether the drill lock's Lease names a holder: a refused drill must not have taken it.
fn lock_held() -> bool {
    let lease = kubectl_json(&["get", "leases", "-n", "kube-system"]);
    lease["items"].as_array().unwrap().iter().any(|l| {
        l["metadata"]["name"] == "hybrid-drill" && l["spec"]["holderIdentity"].as_str().is_some_and(|h| !h.is_empty())
    })
}

/// Posts an alert firing for the next five minutes to the lab's Alertmanager.
fn fire_alert(name: &str) {
    let now = chrono::Utc::now();
    let alert = serde_json::json!([{
        "labels": {"alertname": name, "severity": "page"},
        "startsAt": now.to_rfc3339(), "endsAt": (now + chrono::Duration::minutes(5)).to_rfc3339()
    }]);
    let out = Command::new("curl")
        .args(["-sf", "-X", "POST", "-H", "Content-Type: application/json", "--data"])
        .arg(alert.to_string())
        .arg(format!("{}/api/v2/alerts", alertmanager_url()))
        .output()
        .unwrap();
    assert!(out.status.success(), "cannot post the alert: {}", text(&out));
}

#[test]
fn a_firing_alert_refuses_touching_nothing_and_an_override_lets_it_through_on_the_record() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    // A name of this run's own: Alertmanager keeps alerts until they end, and a later test must not see this one.
    let alert = format!("GateTest{}", std::process::id());
    let gates =
        format!("  gates:\n    alerts:\n      - {{alertmanager: \"{}\", alert: {alert}}}\n", alertmanager_url());
    let file = drill_with(dir.path(), "alert-gate", &gates, "    - {id: hold, pause: 1s}\n");
    let reports = dir.path().join("reports");

    let open = drill_run(&file, &reports, kubeconfig()).output().unwrap();
    assert_eq!(open.status.code(), Some(0), "the gate is open while the alert is not firing: {}", text(&open));

    fire_alert(&alert);
    let before = runs(&reports);
    let refused = drill_run(&file, &reports, kubeconfig()).output().unwrap();
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(5), "{said}");
    assert!(said.contains("start gate `alert` is closed"), "{said}");
    assert!(said.contains(&format!("{alert} fires in {}", alertmanager_url())), "{said}");
    assert!(said.contains("--override-gate alert --reason TEXT"), "the fix is named: {said}");
    assert!(said.contains("nothing was touched"), "{said}");
    assert_eq!(runs(&reports), before, "a refused drill leaves no run directory");
    assert!(!lock_held() && cordoned_or_marked().is_empty(), "a refused drill touches nothing");

    let plan = hybrid_drill().arg("plan").arg(&file).arg("--kubeconfig").arg(kubeconfig()).output().unwrap();
    assert_eq!(plan.status.code(), Some(5), "plan says a run would be refused: {}", text(&plan));
    assert!(text(&plan).contains("CLOSED  alert:"), "plan shows the closed gate: {}", text(&plan));

    let why = "the alert is the one the drill itself causes";
    let dry = drill_run(&file, &reports, kubeconfig())
        .args(["--dry-run", "--override-gate", "alert", "--reason", why])
        .output()
        .unwrap();
    assert_eq!(dry.status.code(), Some(0), "a dry run with the override would start: {}", text(&dry));
    assert!(text(&dry).contains(&format!("overridden: {why}")), "{}", text(&dry));
    let through =
        drill_run(&file, &reports, kubeconfig()).args(["--override-gate", "alert", "--reason", why]).output().unwrap();
    assert_eq!(through.status.code(), Some(0), "{}", text(&through));
    let report: Value = serde_json::from_slice(&through.stdout).unwrap();
    let overridden = &report["gates_overridden"][0];
    assert_eq!(overridden["gate"], "alert", "{report:#}");
    assert_eq!(overridden["reason"], why);
    assert!(overridden["closed"].as_str().unwrap().contains(&alert), "{overridden}");
    // The lab's admin is a client certificate the API server names; the local account and host follow.
    assert!(overridden["by"].as_str().unwrap().contains('@'), "{overridden}");
    let deviations = report["deviations"].as_array().unwrap();
    assert!(
        deviations.iter().any(|d| d["kind"] == "overridden-gate"
            && d["what"].as_str().unwrap().starts_with("start gate `alert` overridden by")
            && d["what"].as_str().unwrap().contains(why)),
        "the override is a deviation: {deviations:#?}"
    );
    let headline = report["headline"].to_string();
    assert!(headline.contains("started with start gate `alert` overridden by"), "the verdict says so: {headline}");
}

#[test]
fn a_freeze_window_and_the_clusters_freeze_marker_refuse_with_their_fix() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    let hold = "    - {id: hold, pause: 1s}\n";
    // A window open over the whole test, read in a zone that is not the machine's.
    let window = "  gates:\n    freezeWindows:\n      - {name: release-train, timezone: Asia/Tokyo, start: \
                  \"2020-01-01T00:00\", end: \"2099-01-01T00:00\", reason: the release train is rolling}\n";
    let frozen = drill_with(dir.path(), "freeze-window", window, hold);
    let refused = drill_run(&frozen, &reports, kubeconfig()).output().unwrap();
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(5), "{said}");
    assert!(said.contains("start gate `freeze-window` is closed"), "{said}");
    assert!(
        said.contains("release-train (2020-01-01T00:00 to 2099-01-01T00:00 Asia/Tokyo): the release train is rolling"),
        "{said}"
    );

    // The marker a release process sets, honoured by a drill that says nothing of gates.
    let plain = drill_with(dir.path(), "plain", "", hold);
    let _lift = Repair(|| {
        kubectl_quiet(&["delete", "configmap", "hybrid-drill-freeze", "-n", "kube-system", "--ignore-not-found"]);
    });
    kubectl(&["create", "configmap", "hybrid-drill-freeze", "-n", "kube-system", "--from-literal=reason=release 4.2"]);
    let refused = drill_run(&plain, &reports, kubeconfig()).output().unwrap();
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(5), "{said}");
    assert!(said.contains("start gate `cluster-freeze` is closed: the cluster is frozen"), "{said}");
    assert!(said.contains("release 4.2"), "the reason is named: {said}");
    assert!(said.contains("kubectl -n kube-system delete configmap hybrid-drill-freeze"), "the fix: {said}");
    assert_eq!(runs(&reports), 0, "refused drills leave no run directory");
    assert!(!lock_held() && cordoned_or_marked().is_empty(), "a refused drill touches nothing");
    kubectl(&["delete", "configmap", "hybrid-drill-freeze", "-n", "kube-system"]);
    let lifted = drill_run(&plain, &reports, kubeconfig()).output().unwrap();
    assert_eq!(lifted.status.code(), Some(0), "{}", text(&lifted));
}

/// A copy of the lab's kubeconfig whose admin impersonates `user`: the identity a pod's ServiceAccount token has.
fn service_account_kubeconfig(dir: &Path, user: &str) -> PathBuf {
    let mut config: Value = serde_json::from_str(&kubectl(&["config", "view", "--raw", "-o", "json"])).unwrap();
    for entry in config["users"].as_array_mut().unwrap() {
        entry["user"]["as"] = Value::from(user);
    }
    // JSON is YAML: kubectl and kube read it as a kubeconfig.
    let path = dir.join("service-account.kubeconfig");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// The time an observation of `kind` was received, from a run's timeline.
fn seen_at(timeline: &str, kind: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    timeline
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|o| (o["type"] == kind).then(|| o["received"].as_str().unwrap().parse().unwrap()))
}

#[test]
fn the_emergency_stop_aborts_a_running_drain_within_seconds_and_restores() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let steps = "    - {id: drain, drain: {nodes: onPrem, force: true, deleteEmptyDirData: true}}\n    - {id: hold, \
                 pause: 120s}\n";
    let file = drill_with(dir.path(), "stopped", "", steps);
    // The run as the in-cluster CronJob makes it: its ServiceAccount with deploy/'s grants and nothing else, so the
    // stop is proven to reach the schedule's runs, not only an admin's.
    let rbac = ["clusterrole.yaml", "clusterrolebinding.yaml", "roles.yaml", "lock-role.yaml"];
    for manifest in rbac {
        kubectl(&["apply", "-f", repo().join("deploy").join(manifest).to_str().unwrap()]);
    }
    let as_cronjob = service_account_kubeconfig(dir.path(), "system:serviceaccount:hybrid-drill:hybrid-drill");
    let child = drill_run(&file, dir.path().join("reports"), &as_cronjob)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop::new(child);
    let run_dir = || {
        let runs = dir.path().join("reports/onprem-gpu-drain");
        Some(std::fs::read_dir(runs).ok()?.flatten().next()?.path())
    };
    let timeline = || std::fs::read_to_string(run_dir()?.join("timeline.jsonl")).ok();
    eventually("the run drained and holds", Duration::from_secs(60), || {
        timeline().is_some_and(|t| t.contains(r#""step":"hold","action""#))
    });
    assert!(!cordoned_or_marked().is_empty(), "the run cordoned nothing");

    // On call, with the stop Role alone (impersonated by the lab's admin): the documented command, and nothing
    // else on the Lease.
    for manifest in ["oncall-roles.yaml", "admission-policy.yaml"] {
        kubectl(&["apply", "-f", repo().join("deploy").join(manifest).to_str().unwrap()]);
    }
    let oncall = ["--as=alice", "--as-group=hybrid-drill-oncall", "-n", "kube-system", "auth", "can-i"];
    for (verb, allowed) in [("patch", true), ("get", true), ("update", false), ("delete", false)] {
        let can = kubectl_quiet(&[&oncall[..], &[verb, "lease/hybrid-drill"]].concat());
        assert_eq!(can, allowed, "on call may {verb} the Lease: {allowed}");
    }
    assert!(!kubectl_quiet(&[&oncall[..], &["patch", "lease/other"]].concat()), "only the drill's Lease");
    // Patch would reach the holder too: the admission policy lets it set the stop alone.
    let as_oncall = ["--as=alice", "--as-group=hybrid-drill-oncall", "-n", "kube-system"];
    let take = [
        &as_oncall[..],
        &["patch", "lease/hybrid-drill", "--type=merge", "-p", r#"{"spec":{"holderIdentity":"alice"}}"#],
    ];
    assert!(!kubectl_quiet(&take.concat()), "on call may not take the lock");
    let other =
        [&as_oncall[..], &["annotate", "lease/hybrid-drill", "hybrid-drill.io/run-dir=/elsewhere", "--overwrite"]];
    assert!(!kubectl_quiet(&other.concat()), "on call may not change the holder's annotations");
    let pulled = chrono::Utc::now();
    let started = Instant::now();
    kubectl(&[
        "--as=alice",
        "--as-group=hybrid-drill-oncall",
        "-n",
        "kube-system",
        "annotate",
        "lease/hybrid-drill",
        "hybrid-drill.io/stop=checkout errors rising",
        "hybrid-drill.io/stopped-by=alice",
    ]);
    let out = child.take().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no report ({e}):\n{stderr}"));
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let timeline = timeline().unwrap();
    let aborted = seen_at(&timeline, "aborted").expect("an aborted event");
    let within = (aborted - pulled).to_std().unwrap_or_default();
    assert!(within < Duration::from_secs(5), "aborted {within:?} after the stop was pulled");
    assert_eq!(report["abort_reason"], "emergency stop pulled by alice: checkout errors rising", "{stderr}");
    let initiator = &report["provenance"]["initiator"]["user"];
    assert_eq!(initiator, "system:serviceaccount:hybrid-drill:hybrid-drill", "run as the CronJob's identity");
    let stop = &report["emergency_stop"];
    assert_eq!((stop["reason"].as_str(), stop["by"].as_str()), (Some("checkout errors rising"), Some("alice")));
    assert!(stop["seen_at"].is_string(), "{stop}");
    // When the API server wrote the annotation (its managed fields, to the second) to the abort in the timeline.
    let set_at: chrono::DateTime<chrono::Utc> = stop["set_at"].as_str().expect("set_at").parse().unwrap();
    let from_write = (aborted - set_at).to_std().unwrap_or_default();
    assert!(from_write < Duration::from_secs(5), "aborted {from_write:?} after the annotation was written");
    let deviations = report["deviations"].to_string();
    assert!(deviations.contains("emergency stop pulled by alice"), "the stop is a deviation: {deviations}");
    assert!(cordoned_or_marked().is_empty(), "left cordoned: {:?}", cordoned_or_marked());
    assert!(!lock_held(), "the lock, and its stop annotation with it, is released");
    let lease = kubectl_json(&["get", "lease", "hybrid-drill", "-n", "kube-system"]);
    assert!(lease["metadata"]["annotations"]["hybrid-drill.io/stop"].is_null(), "{lease}");
    eprintln!("stopped and restored {:?} after the stop was pulled", started.elapsed());
}
