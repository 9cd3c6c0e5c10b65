//! End-to-end: the fallback's own failures. A drain with the cheapest fallback type out of capacity (lab/capacity,
//! through the drill's hooks) still restores, with the launch on the next type in the report (`history` setting it
//! against the plain drain drill is tests/reports.rs's, on recorded runs); with every allowed type out, the drill
//! aborts on its provisioning timeout, restores (capacity given back) and names the cause; a fallback node lost
//! mid-fallback is measured as a second recovery; a one-node drain is measured; with every type out and the servers
//! down, the service's last tier (the lab's stand-in) serves, measured from t0, and the drill restores.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use serde_json::Value;

use crate::common::lab::{
    drill_run, kubeconfig, lab_port, lab_tool, lock_lab, reset_lab, workload_on_prem_and_fallback_empty,
};
use crate::common::repo;

/// Runs a drill into `reports`: its exit status and report.
fn run(file: &Path, reports: &Path) -> (Output, Value) {
    let out = drill_run(file, reports, kubeconfig()).output().unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

/// A shipped drill with some text replaced (shorter timeouts for the test), written to `dir`.
fn variant(dir: &Path, drill: &str, edits: &[(&str, &str)]) -> PathBuf {
    let mut source = std::fs::read_to_string(repo().join("drills").join(drill)).unwrap();
    for (from, to) in edits {
        assert!(source.contains(from), "drills/{drill} lacks {from:?}");
        source = source.replacen(from, to, 1);
    }
    let path = dir.join(drill);
    std::fs::write(&path, source).unwrap();
    path
}

/// The instance types lab/capacity lists as out: none once a drill has given them back.
fn out_of_capacity_now() -> String {
    let out = lab_tool("capacity").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn context(out: &Output, report: &Value) -> String {
    format!("report: {report:#}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr))
}

#[test]
fn the_cheapest_type_out_moves_the_fallback_to_the_next_type_and_gives_the_capacity_back() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let reports = tempfile::tempdir().unwrap();
    let (out, report) = run(&repo().join("drills/capacity-shortage.yaml"), reports.path());
    assert_eq!(out.status.code(), Some(0), "{}", context(&out, &report));
    assert_eq!(out_of_capacity_now(), "", "the capacity is given back");
    let capacity = &report["fallback_faults"]["capacity"];
    assert_eq!(capacity["instance_types"], serde_json::json!(["g6.12xlarge"]), "{capacity:#}");
    let launches = capacity["launches"].as_array().unwrap();
    assert!(!launches.is_empty(), "{capacity:#}");
    for l in launches {
        assert_eq!(l["instance_type"], "g6e.12xlarge", "every launch moved to the next type: {capacity:#}");
    }
    assert!(capacity["move_seconds"].as_f64().is_some() && capacity["rto_seconds"].as_f64().is_some(), "{capacity:#}");
    let run_dir = std::fs::read_dir(reports.path().join("capacity-shortage")).unwrap().flatten().next().unwrap().path();
    let md = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(md.contains("## Fallback under failure") && md.contains("on g6e.12xlarge, skipping g6.12xlarge"), "{md}");
    let undone = report["rollback"].to_string() + &report["steps"].to_string();
    assert!(undone.contains("capacity given back"), "{report:#}");

    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn with_every_type_out_the_drill_aborts_on_its_timeout_restores_and_names_the_cause() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let reports = tempfile::tempdir().unwrap();
    // The drain's timeout, then the fallback wait's: the lab's budget holds two pods on-prem, so the drain times out.
    let short = [("      timeout: 5m", "      timeout: 20s"), ("      timeout: 5m", "      timeout: 20s")];
    let drill = variant(reports.path(), "no-capacity.yaml", &short);
    let (out, report) = run(&drill, &reports.path().join("reports"));
    assert_eq!(out.status.code(), Some(3), "{}", context(&out, &report));
    let reason = report["abort_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("timed out after 20s") && reason.contains("every allowed type out"), "{reason}");
    let capacity = &report["fallback_faults"]["capacity"];
    assert_eq!(capacity["instance_types"], serde_json::json!(["g6.12xlarge", "g6e.12xlarge"]), "{capacity:#}");
    let failed = capacity["failed_launches"].as_array().unwrap();
    assert!(!failed.is_empty(), "{capacity:#}");
    assert!(failed.iter().all(|f| f["reason"] == "InsufficientCapacityError"), "{capacity:#}");
    assert!(capacity["cause"].as_str().unwrap().contains("no fallback capacity"), "{capacity:#}");
    let rollback = report["rollback"]["undone"].to_string();
    assert!(
        rollback.contains("instance-type/g6.12xlarge") && rollback.contains("instance-type/g6e.12xlarge"),
        "{rollback}"
    );
    assert_eq!(out_of_capacity_now(), "", "the rollback gave the capacity back");
    reset_lab();
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn a_fallback_node_lost_mid_fallback_is_measured_as_a_second_recovery() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let reports = tempfile::tempdir().unwrap();
    let (out, report) = run(&repo().join("drills/lost-fallback-node.yaml"), reports.path());
    assert_eq!(out.status.code(), Some(0), "{}", context(&out, &report));
    let lost = &report["fallback_faults"]["lost_node"];
    assert!(lost["pods"].as_u64().unwrap() >= 1, "{lost:#}");
    // The service dropped below its criterion and came back: the second recovery, on the run's own timeline.
    assert!(lost["service_lost_seconds"].as_f64().is_some(), "{lost:#}");
    let second = lost["recovery_seconds"].as_f64().unwrap_or_else(|| panic!("no second recovery: {lost:#}"));
    assert!(second > 0.0, "{lost:#}");
    assert!(
        lost["lost_at_seconds"].as_f64().unwrap() > report_rto(&report),
        "lost after the first recovery: {report:#}"
    );
    // The replacement is the NodeClaim whose node took the lost pods: gpu-fallback's when its GPU limit allows it,
    // else gpu-spot's (another pool's, seen as collateral), new or already launched for the batch pods.
    let replacement = lost["replacement"].as_str().unwrap_or_else(|| panic!("no replacement named: {lost:#}"));
    assert!(replacement.starts_with("gpu-fallback-") || replacement.starts_with("gpu-spot-"), "{lost:#}");
    assert_ne!(replacement, lost["nodeclaim"].as_str().unwrap(), "{lost:#}");
    assert!(lost["replacement_node"].as_str().is_some_and(|n| n != lost["node"]), "{lost:#}");
    assert!(lost["replacement_scheduled_seconds"].as_f64().is_some_and(|t| t > 0.0), "{lost:#}");
    let run_dir =
        std::fs::read_dir(reports.path().join("lost-fallback-node")).unwrap().flatten().next().unwrap().path();
    let md = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(md.contains(&format!("NodeClaim {replacement}")), "{md}");
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

fn report_rto(report: &Value) -> f64 {
    let phases = report["phases"].as_array().unwrap();
    phases.iter().find(|p| p["name"] == "rto").and_then(|p| p["seconds"].as_f64()).unwrap()
}

#[test]
fn a_one_node_drain_is_measured_and_says_who_filled_the_gap() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let reports = tempfile::tempdir().unwrap();
    let (out, report) = run(&repo().join("drills/partial-drain.yaml"), reports.path());
    assert_eq!(out.status.code(), Some(0), "{}", context(&out, &report));
    let partial = &report["fallback_faults"]["partial"];
    assert_eq!(partial["nodes"], serde_json::json!(["hybrid-gpu-1"]), "{partial:#}");
    assert_eq!(partial["of"], 4, "{partial:#}");
    assert!(partial["rto_seconds"].as_f64().is_some(), "measured: {report:#}");
    let drain = report["steps"].as_array().unwrap().iter().find(|s| s["id"] == "drain-one").unwrap();
    assert!(drain["message"].as_str().unwrap().starts_with("drained hybrid-gpu-1:"), "{drain:#}");
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn with_every_type_out_and_the_servers_down_the_last_tier_serves_and_the_drill_restores() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let reports = tempfile::tempdir().unwrap();
    // This instance's stand-in; the hold on the last tier shortened (what it shows, the refused launches, is the
    // no-capacity test's).
    let stand_in = format!("127.0.0.1:{}", lab_port(29097));
    let edits = [("127.0.0.1:29097", stand_in.as_str()), ("pause: 60s", "pause: 2s")];
    let drill = variant(reports.path(), "last-tier.yaml", &edits);
    let (out, report) = run(&drill, &reports.path().join("reports"));
    assert_eq!(out.status.code(), Some(0), "{}", context(&out, &report));
    let tier = &report["last_tier"];
    let serve = tier["time_to_serve_seconds"].as_f64().unwrap_or_else(|| panic!("never served: {tier:#}"));
    let lost = tier["primary_lost_seconds"].as_f64().unwrap_or_else(|| panic!("the primary never lost: {tier:#}"));
    // The pods go NotReady once the node-monitor grace period (20 s in the fast profile) marks their nodes; the
    // stand-in's gateway checks every second.
    assert!(lost >= 10.0 && serve >= lost && serve - lost < 5.0, "{tier:#}");
    let window = tier["error_window_seconds"].as_f64().unwrap();
    assert!(window > 0.0 && (window - (serve - lost)).abs() < 0.01, "one window, loss to failover: {tier:#}");
    assert!(tier["served_seconds"].as_f64().unwrap() > 0.0, "{tier:#}");
    assert!(tier["stand_in"].as_str().is_some_and(|s| s.contains("lab/last-tier-stand-in")), "{tier:#}");
    let cost = &tier["cost"];
    assert_eq!(cost["last_tier_per_hour"].as_f64(), Some(90.0), "20,000 requests at $0.0045: {cost:#}");
    assert_eq!(cost["fallback_instance_type"], "g6.12xlarge", "{cost:#}");
    assert!(cost["fallback_per_hour"].as_f64().is_some_and(|c| (c - 18.4).abs() < 1e-9), "4 x $4.60: {cost:#}");
    let run_dir = std::fs::read_dir(reports.path().join("reports/last-tier")).unwrap().flatten().next().unwrap().path();
    let md = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(md.contains("## Last tier") && md.contains("served by a stand-in"), "{md}");
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"last-tier\""), "the HTML report has the section");
    // Restored, and in this order: the servers, the workload on-prem (the gateway back on it), the capacity.
    assert_eq!(out_of_capacity_now(), "", "the capacity is given back");
    assert!(workload_on_prem_and_fallback_empty(), "{report:#}");
    let status = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &format!("http://{stand_in}/v1/generate")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "503", "the last tier is on standby again");
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}
