//! End-to-end: the link-cut and node-failure drills against the lab (with its host firewall stand-in), their
//! phases, the overlap window, the cost guard, and that nothing of a run is left in the cluster afterwards.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common::lab::{
    Repair, assert_fidelity, cordoned_or_marked, drill_run, eventually, hybrid_drill, kubeconfig, kubectl,
    kubectl_json, kubectl_quiet, lab_tool, lock_lab, recover, reset_lab, workload_on_prem_and_fallback_empty,
};
use crate::common::repo;
use serde_json::Value;

const RUN_LABEL: &str = "hybrid-drill.io/run-id";
const POLICY_KINDS: &str = "networkpolicies.networking.k8s.io,ciliumclusterwidenetworkpolicies.cilium.io,globalnetworkpolicies.crd.projectcalico.org";

/// Everything a run labelled and left behind: policies and pods carrying the run label.
fn leftovers() -> Vec<String> {
    let mut left = Vec::new();
    for kinds in [POLICY_KINDS, "pods"] {
        let list = kubectl_json(&["get", kinds, "-A", "-l", RUN_LABEL]);
        left.extend(
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap())),
        );
    }
    left
}

const CUT_LABEL: &str = "hybrid-drill.io/cut";
/// The lab's hybrid nodes, as the API lists them: the shipped drills' on-prem selector matches all four.
const HYBRID: [&str; 4] = ["hybrid-gpu-1", "hybrid-gpu-2", "hybrid-gpu-3", "mi-0a1b2c3d4e5f67890"];
/// Stand-in annotation (lab/host-firewall-stand-in): a node whose host policies nothing enforces.
const UNENFORCED: &str = "hybrid-lab.io/unenforced";
/// Stand-in annotation on a node its host firewall agent cut off.
const CUT_BY_STAND_IN: &str = "hybrid-lab/host-firewall";

fn hybrid_nodes() -> Vec<Value> {
    kubectl_json(&["get", "nodes", "-l", "eks.amazonaws.com/compute-type=hybrid"])["items"].as_array().unwrap().clone()
}

/// Nodes carrying a host cut's run label.
fn cut_labelled() -> Vec<String> {
    let list = kubectl_json(&["get", "nodes", "-l", CUT_LABEL]);
    list["items"].as_array().unwrap().iter().map(|n| n["metadata"]["name"].as_str().unwrap().to_string()).collect()
}

/// Hybrid nodes not heartbeating: failed by a hook or cut off by the stand-in.
fn failed_nodes() -> Vec<String> {
    kubectl_json(&["get", "nodes", "-l", "eks.amazonaws.com/compute-type=hybrid"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["metadata"]["labels"]["kwok.x-k8s.io/node"] != "fake")
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn hybrid_nodes_ready() -> bool {
    kubectl_json(&["get", "nodes", "-l", "eks.amazonaws.com/compute-type=hybrid"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| {
            n["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        })
}

/// Removes whatever a cut or a node failure left (policies, pod labels, failed nodes) without panicking: it runs
/// from a Drop guard when a test fails.
fn repair_quietly() {
    kubectl_quiet(&["delete", POLICY_KINDS, "-A", "-l", RUN_LABEL, "--wait=false"]);
    kubectl_quiet(&["label", "pods", "-A", "-l", RUN_LABEL, &format!("{RUN_LABEL}-")]);
    let mut down = Vec::new();
    for node in hybrid_nodes() {
        let name = node["metadata"]["name"].as_str().unwrap().to_string();
        kubectl_quiet(&["annotate", "node", &name, &format!("{UNENFORCED}-")]);
        kubectl_quiet(&["label", "node", &name, &format!("{CUT_LABEL}-")]);
        if node["metadata"]["labels"]["kwok.x-k8s.io/node"] != "fake"
            || !node["metadata"]["annotations"][CUT_BY_STAND_IN].is_null()
        {
            down.push(name);
        }
    }
    // A cut node comes back only through a power cycle (its agent no longer hears the policy's deletion), which also
    // recovers a failed one; the nodes that need it, all at once.
    let reboots: Vec<_> = down
        .iter()
        .filter_map(|node| {
            lab_tool("node-reboot")
                .arg(node)
                .env("KUBECONFIG", kubeconfig())
                .env("LAB_REBOOT_SECONDS", "0")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .ok()
        })
        .collect();
    for mut reboot in reboots {
        let _ = reboot.wait();
    }
}

/// The lab in steady state with no cut left: run at the start of each test and, through [`Repair`], at its end.
fn reset() {
    repair_quietly();
    eventually("the hybrid nodes Ready", Duration::from_secs(60), hybrid_nodes_ready);
    reset_lab();
}

/// A fault on every on-prem node displaces the lab's batch workloads too: each is named as collateral, and a drill
/// that passed left nothing behind in any pool.
fn assert_collateral_accounted(report: &Value) {
    let collateral: Vec<&str> =
        report["collateral"].as_array().unwrap().iter().filter_map(|b| b["workload"].as_str()).collect();
    assert!(collateral.contains(&"batch/embeddings"), "{collateral:?}");
    assert!(!collateral.contains(&"inference/llm-inference"), "the drilled workload is not collateral: {collateral:?}");
    assert_eq!(report["leftovers"], serde_json::json!([]), "{:#}", report["leftovers"]);
}

fn guard() -> Repair<impl FnMut()> {
    Repair(repair_quietly)
}

fn run(file: &Path, reports: &Path) -> Command {
    let mut cmd = drill_run(file, reports, kubeconfig());
    cmd.current_dir(repo());
    cmd
}

fn report_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)))
}

fn finish(child: Child) -> (Output, Value) {
    let out = child.wait_with_output().unwrap();
    let report = report_of(&out);
    (out, report)
}

/// The run directory once it exists (reports/<drill>/<stamp>/).
fn run_dir(reports: &Path) -> Option<PathBuf> {
    let drill = std::fs::read_dir(reports).ok()?.flatten().next()?.path();
    Some(std::fs::read_dir(drill).ok()?.flatten().next()?.path())
}

fn timeline_contains(reports: &Path, needle: &str) -> bool {
    run_dir(reports)
        .and_then(|d| std::fs::read_to_string(d.join("timeline.jsonl")).ok())
        .is_some_and(|t| t.contains(needle))
}

/// A drill file of drills/ with some text replaced, written to `dir`.
fn variant(name: &str, dir: &Path, edits: &[(&str, &str)]) -> PathBuf {
    let mut source = std::fs::read_to_string(repo().join("drills").join(name)).unwrap();
    for (from, to) in edits {
        assert!(source.contains(from), "drills/{name} lacks {from:?}");
        source = source.replacen(from, to, 1);
    }
    let path = dir.join(name);
    std::fs::write(&path, source).unwrap();
    path
}

fn labels(report: &Value) -> Vec<String> {
    report["milestones"].as_array().unwrap().iter().map(|m| m["label"].as_str().unwrap().to_string()).collect()
}

fn assert_chain(report: &Value, chain: &[&str]) {
    let labels = labels(report);
    let seen: Vec<&str> = labels.iter().map(String::as_str).filter(|l| chain.contains(l)).collect();
    assert_eq!(seen, chain, "milestones missing or out of order: {labels:?}");
}

fn phase<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["phases"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no phase {name}"))
}

fn seconds(report: &Value, name: &str) -> f64 {
    phase(report, name)["seconds"].as_f64().unwrap_or_else(|| panic!("phase {name} not measured: {report:#}"))
}

/// The phase table as the closing note shows it: phase, seconds, and where it starts and ends.
fn print_phases(report: &Value) {
    for p in report["phases"].as_array().unwrap() {
        let indent = if p["parent"].is_null() { "" } else { "  " };
        println!(
            "{indent}{:<14} {:>8} {} -> {}",
            p["name"].as_str().unwrap(),
            p["seconds"].as_f64().map_or("-".into(), |s| format!("{s:.1}s")),
            p["from"]["label"].as_str().unwrap_or("-"),
            p["to"]["label"].as_str().unwrap_or("-"),
        );
    }
}

/// The shape shared by the host cut and the node failure: a lost node's path, then the fallback, restore, return.
fn assert_lost_node_path(report: &Value, restored_label: &str) {
    assert_chain(
        report,
        &[
            "fault injected (t0)",
            "on-prem node Unknown",
            "node.kubernetes.io/unreachable:NoExecute taint",
            "first workload pod evicted from on-prem",
            "first NodeClaim created",
            "fallback node Ready with GPUs",
            "service restored",
            "on-prem nodes Ready",
            "return started",
        ],
    );
    // Home and reclaimed after the service was restored: after the return, or before it when the restore brought
    // nodes back one by one (a last resort's reboots) and Karpenter's consolidation moved the workload onto them on
    // its own; then return and reclaim end where they start.
    for end in ["workload back on-prem", "fallback reclaimed to 0"] {
        assert_chain(report, &["service restored", end]);
        let name = if end == "workload back on-prem" { "return" } else { "reclaim" };
        let p = phase(report, name);
        assert!(p["seconds"].as_f64().is_some() && p["verdict"] != "inconsistent", "{p:#}");
    }
    // A revert that waits for its node (a recovery hook with --wait, a last resort that reboots it) returns after the
    // node is Ready: the two are in either order, both after the service was restored and before the return.
    assert_chain(report, &["service restored", restored_label, "return started"]);
    assert_ne!(phase(report, "rejoin")["verdict"], "inconsistent", "{:#}", phase(report, "rejoin"));
    let (restore, revert, rejoin) = (seconds(report, "restore"), seconds(report, "revert"), seconds(report, "rejoin"));
    assert!((revert + rejoin - restore).abs() < 0.01, "revert {revert} + rejoin {rejoin} != restore {restore}");
    // The lab's node-monitor grace period is 20 s and the pods tolerate unreachable for 30 s (lab/README.md).
    let detection = seconds(report, "detection");
    assert!((15.0..40.0).contains(&detection), "detection {detection}s");
    let toleration = seconds(report, "toleration");
    assert!((29.0..40.0).contains(&toleration), "toleration {toleration}s: the eviction must wait for it");
    let note = phase(report, "toleration")["note"].as_str().unwrap_or_default();
    assert!(note.contains("node.kubernetes.io/unreachable: evicted after 30s (4 pods)"), "{note}");
    for p in report["phases"].as_array().unwrap() {
        if p["parent"].is_null() {
            assert_ne!(p["verdict"], "incomplete", "phase {} incomplete: {p:#}", p["name"]);
        }
    }
    let overlap = &report["overlap"];
    assert!(overlap["seconds"].as_f64().is_some_and(|s| s > 0.0), "no overlap window: {overlap:#}");
    assert_eq!(overlap["from"]["label"], "first replacement Ready on a fallback node");
    assert_eq!(overlap["to"]["label"], "last on-prem pod confirmed gone");
}

/// What the run's rollback undid, sorted.
fn undone_sorted(report: &Value) -> Vec<&str> {
    let mut undone: Vec<&str> =
        report["rollback"]["undone"].as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
    undone.sort();
    undone
}

/// Puts one of lab/manifests back as lab/up applies it.
fn apply_lab_manifest(name: &str) {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig())
        .args(["apply", "-f"])
        .arg(repo().join("lab/manifests").join(name))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn assert_nothing_left() {
    assert!(leftovers().is_empty(), "the run left labelled objects: {:?}", leftovers());
    assert!(cut_labelled().is_empty(), "nodes still carry the cut label: {:?}", cut_labelled());
    assert!(failed_nodes().is_empty(), "nodes still failed: {:?}", failed_nodes());
    assert!(cordoned_or_marked().is_empty(), "nodes left cordoned or marked: {:?}", cordoned_or_marked());
}

#[test]
fn the_host_cut_drill_pins_its_run_label_brings_its_locked_out_nodes_back_with_its_last_resort_and_leaves_nothing() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    let reports = tempfile::tempdir().unwrap();
    let child = run(&repo().join("drills/dx-cut.yaml"), reports.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let policies = || kubectl_json(&["get", "ciliumclusterwidenetworkpolicies.cilium.io", "-l", RUN_LABEL]);
    eventually("the cut's policy in place", Duration::from_secs(60), || {
        !policies()["items"].as_array().unwrap().is_empty()
    });
    let policy = policies()["items"][0].clone();
    let pinned = cut_labelled();
    let (out, report) = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{stderr}");
    assert_collateral_accounted(&report);
    // The policy selects by the run's own label alone, which exactly the resolved on-prem nodes carry.
    let run_label = policy["metadata"]["labels"][RUN_LABEL].as_str().unwrap();
    assert_eq!(policy["spec"]["nodeSelector"], serde_json::json!({"matchLabels": {CUT_LABEL: run_label}}));
    assert!(!policy["spec"].to_string().contains("kubernetes.io"), "{policy:#}");
    assert_eq!(pinned, HYBRID);
    // The policy allows no API server: each node's agent, cut off, never heard it was deleted, and each node needed
    // its last resort.
    let timeline = std::fs::read_to_string(run_dir(reports.path()).unwrap().join("timeline.jsonl")).unwrap();
    let md = std::fs::read_to_string(run_dir(reports.path()).unwrap().join("report.md")).unwrap();
    for node in HYBRID {
        let ran = format!(r#""step":"cut","command":"lab/node-reboot {node}","exit_code":0"#);
        assert!(timeline.contains(&ran), "{timeline}");
        assert!(md.contains(&format!("ran `lab/node-reboot {node}` (exit 0)")), "{md}");
    }
    // The verdict does not stand alone: every node's power cycle is said beside it, in every format.
    // The head: from the verdict to the run's facts table.
    let head: Vec<&str> =
        md.lines().skip_while(|l| !l.starts_with("**Verdict: ")).take_while(|l| !l.starts_with("| |")).collect();
    assert_eq!(head[0], "**Verdict: passed**", "{md}");
    let last_resort = head.iter().find(|l| l.starts_with("- **LAST RESORT**: ")).unwrap_or_else(|| panic!("{md}"));
    assert!(last_resort.contains("all 4 on-prem nodes did not come back once the cut was lifted"), "{last_resort}");
    assert_eq!(report["headline"][0]["kind"], "last-resort", "{:#}", report["headline"]);
    assert_eq!(report["last_resort"].as_array().unwrap().len(), HYBRID.len());
    let html = std::fs::read_to_string(run_dir(reports.path()).unwrap().join("report.html")).unwrap();
    let verdict = html.find(r#"id="verdict""#).unwrap();
    let beside = html.find("LAST RESORT:").unwrap();
    assert!(beside > verdict && beside < html.find(r#"<svg id="gantt""#).unwrap(), "the last resort under the verdict");
    print_phases(&report);
    println!("overlap: {}", report["overlap"]);
    assert_fidelity(&run_dir(reports.path()).unwrap());
    assert_lost_node_path(&report, "link restored");
    let fidelity = report["fidelity"].as_str().unwrap();
    assert!(
        fidelity.starts_with("link cut, host fidelity (Cilium host policy, selecting the on-prem nodes"),
        "{fidelity}"
    );
    // What a host policy does not block is said, not "all traffic denied".
    assert!(fidelity.contains("Not blocked: the pods' own traffic"), "{fidelity}");
    for node in HYBRID {
        assert!(fidelity.contains(&format!("{node} went Unknown")), "{fidelity}");
    }
    let dir = run_dir(reports.path()).unwrap();
    let timeline = std::fs::read_to_string(dir.join("timeline.jsonl")).unwrap();
    assert!(timeline.contains(r#""type":"tolerations-read""#));
    assert!(
        timeline
            .contains(r#""type":"policy-applied","policy":"CiliumClusterwideNetworkPolicy/hybrid-drill-cut-dx-cut-"#)
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## Overlap window (split brain)") && md.contains("| └ toleration |"), "{md}");
    assert_nothing_left();
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

#[test]
fn the_plan_shows_the_expected_eviction_delay_and_refuses_a_missing_cni_before_touching_anything() {
    let _lab = lock_lab();
    let plan = |file: &Path| {
        hybrid_drill().arg("plan").arg(file).arg("--kubeconfig").arg(kubeconfig()).current_dir(repo()).output().unwrap()
    };
    let out = plan(&repo().join("drills/dx-cut.yaml"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("expected eviction delay once an on-prem node stops answering"), "{stdout}");
    assert!(stdout.contains("node.kubernetes.io/unreachable: evicted after 30s (4 pods)"), "{stdout}");
    assert!(
        stdout.contains("host cut `cut`: labels the nodes hybrid-drill.io/cut=<run id> and selects that label alone"),
        "{stdout}"
    );
    // The lab serves Calico's backing CRD; a CRD that is not there is one line, and nothing is touched.
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(plan(&variant("dx-cut.yaml", dir.path(), &[("cni: cilium", "cni: calico")])).status.code(), Some(0));
    kubectl_quiet(&["delete", "crd", "globalnetworkpolicies.crd.projectcalico.org"]);
    let no_crd = plan(&variant("dx-cut.yaml", dir.path(), &[("cni: cilium", "cni: calico")]));
    apply_lab_manifest("15-host-firewall-crds.yaml");
    eventually("the Calico stand-in CRD served again", Duration::from_secs(30), || {
        kubectl_quiet(&["get", "globalnetworkpolicies.crd.projectcalico.org"])
    });
    // An allowed API server (the lab's is 127.0.0.1, the kubeconfig's server) would leave the nodes connected.
    let open = variant(
        "dx-cut.yaml",
        dir.path(),
        &[("cni: cilium\n", "cni: cilium\n        allowCidrs: [10.0.0.0/8, 127.0.0.1/32]\n")],
    );
    let api_allowed = plan(&open);
    // Cilium's host firewall off: the policy would be stored and cut nothing.
    let patch = r#"{"data":{"enable-host-firewall":"false"}}"#;
    kubectl(&["patch", "configmap", "cilium-config", "-n", "kube-system", "--type", "merge", "-p", patch]);
    let off = plan(&repo().join("drills/dx-cut.yaml"));
    apply_lab_manifest("16-cni-config.yaml");
    let refusals = [
        (no_crd, "error: a host-level cut with `cni: calico` needs Calico's GlobalNetworkPolicy"),
        (api_allowed, "error: allowCidrs entry `127.0.0.1/32` contains the API server's address 127.0.0.1"),
        (
            off,
            "error: Cilium's host firewall is off in context `hybrid-lab` (kube-system/cilium-config has enable-host-firewall: \"false\")",
        ),
    ];
    for (out, expected) in refusals {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(expected), "{stderr}");
    }
    assert!(leftovers().is_empty() && cut_labelled().is_empty(), "a refused plan touched the cluster");
}

#[test]
fn a_cut_that_no_node_feels_ends_cut_had_no_effect_with_everything_restored() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    // No agent enforces host policies on these nodes: the policy is stored and cuts nothing.
    for node in HYBRID {
        kubectl(&["annotate", "node", node, &format!("{UNENFORCED}=true"), "--overwrite"]);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = variant("dx-cut.yaml", dir.path(), &[("cni: cilium\n", "cni: cilium\n        effectWithin: 30s\n")]);
    let reports = tempfile::tempdir().unwrap();
    let out = run(&file, reports.path()).output().unwrap();
    let report = report_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "report: {report:#}\nstderr:\n{stderr}");
    let reason = report["abort_reason"].as_str().unwrap();
    assert!(reason.contains("cut had no effect: no on-prem node lost contact within 30s"), "{reason}");
    let fidelity = report["fidelity"].as_str().unwrap();
    assert!(fidelity.starts_with("link cut, host fidelity, without effect:"), "{fidelity}");
    let undone = undone_sorted(&report);
    assert_eq!(undone.len(), 5, "{undone:?}");
    assert_eq!(undone[1..], HYBRID.map(|n| format!("label node/{n}")));
    assert!(hybrid_nodes_ready(), "the nodes were never cut");
    let timeline = std::fs::read_to_string(run_dir(reports.path()).unwrap().join("timeline.jsonl")).unwrap();
    assert!(!timeline.contains(r#""status":"Unknown""#), "a node went Unknown: no cut should have happened");
    assert_nothing_left();
}

#[test]
fn sigint_in_the_middle_of_a_host_cut_lifts_it_and_leaves_nothing() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    let reports = tempfile::tempdir().unwrap();
    let mut child = run(&repo().join("drills/dx-cut.yaml"), reports.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Every cut node Unknown: one the control plane still shows Ready looks back to the last resort's check, which
    // then skips it although its agent never hears the cut lifted (the restore then fails, exit 4).
    let all_unknown = || {
        hybrid_nodes().iter().all(|n| {
            n["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "Unknown"))
        })
    };
    eventually("the cut nodes Unknown while the drill waits for the fallback", Duration::from_secs(120), || {
        child.try_wait().unwrap().is_some()
            || timeline_contains(reports.path(), r#""step":"fallback","action""#) && all_unknown()
    });
    if child.try_wait().unwrap().is_some() {
        let (out, report) = finish(child);
        panic!("the drill ended before the test interrupted it: {report:#}\n{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(!leftovers().is_empty(), "the cut's policy should be in place");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let (out, report) = finish(child);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["abort_reason"], "interrupted by SIGINT");
    let undone: Vec<&str> =
        report["rollback"]["undone"].as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
    assert!(
        undone.len() == 5 && undone[0].starts_with("create CiliumClusterwideNetworkPolicy/hybrid-drill-cut-dx-cut-"),
        "{undone:?}"
    );
    // Undone in the reverse order of the labelling.
    let mut labels = HYBRID.map(|n| format!("label node/{n}"));
    labels.reverse();
    assert_eq!(undone[1..], labels);
    assert!(leftovers().is_empty(), "the abort left {:?}", leftovers());
    // The rollback lifted the cut and, as no agent heard of it, ran the last resort for each node.
    eventually("the hybrid nodes Ready after the abort", Duration::from_secs(60), hybrid_nodes_ready);
    assert_nothing_left();
    reset();
}

#[test]
fn a_run_killed_after_its_cut_is_lifted_by_recover_even_without_its_journal() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    let reports = tempfile::tempdir().unwrap();
    let out = run(&repo().join("drills/dx-cut.yaml"), reports.path())
        // The drill lock is mutation 0, the four nodes' cut labels 1 to 4, the policy 5.
        .env("HYBRID_DRILL_CRASH_AT", "5:after")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), None, "the run should have died: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(leftovers().len(), 1, "{:?}", leftovers());
    assert_eq!(cut_labelled(), HYBRID);
    let dir = run_dir(reports.path()).unwrap();
    // The crashed run left no report.json: one is rebuilt from its timeline and journal, marked so, and history
    // lists the run rather than skip it.
    let out = hybrid_drill().arg("report").arg(&dir).output().unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{md}{}", String::from_utf8_lossy(&out.stderr));
    assert!(md.contains("**Verdict: crashed; not yet recovered**"), "{md}");
    assert!(
        md.contains("journalled and never undone: create CiliumClusterwideNetworkPolicy/hybrid-drill-cut-"),
        "{md}"
    );
    let out = hybrid_drill().arg("history").arg(reports.path()).env("COLUMNS", "80").output().unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("dx-cut · ") && listed.contains("crashed; not yet"), "{listed}");
    // With the journal gone, the run id label in the cluster is all that is left to go by.
    std::fs::remove_file(dir.join("journal.jsonl")).unwrap();
    let out = hybrid_drill().arg("recover").arg(&dir).arg("--kubeconfig").arg(kubeconfig()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("restored: create CiliumClusterwideNetworkPolicy/hybrid-drill-cut-dx-cut-"), "{stdout}");
    assert!(stdout.contains("label node/hybrid-gpu-1 (cut by run dx-cut-"), "{stdout}");
    assert!(leftovers().is_empty(), "{:?}", leftovers());
    assert!(cut_labelled().is_empty(), "{:?}", cut_labelled());
    // Without its journal, recover knows no last resort: a node the policy cut in its few seconds stays cut (its
    // agent never hears of the deletion) until a power cycle, which reset() does.
    reset();
}

#[test]
fn the_pod_network_drill_isolates_the_pods_and_says_the_nodes_stayed_ready_without_fallback() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    let dir = tempfile::tempdir().unwrap();
    let file = variant("dx-cut-pod-network.yaml", dir.path(), &[("pause: 1m", "pause: 15s")]);
    let reports = tempfile::tempdir().unwrap();
    let child = run(&file, reports.path()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    eventually("the partition in place", Duration::from_secs(60), || {
        timeline_contains(reports.path(), r#""step":"observe","action""#)
    });
    let isolated =
        kubectl_json(&["get", "pods", "-n", "inference", "-l", RUN_LABEL])["items"].as_array().unwrap().len();
    let policies = kubectl_json(&["get", "networkpolicies", "-n", "inference", "-l", RUN_LABEL]);
    let (out, report) = finish(child);
    assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    print_phases(&report);
    assert_eq!(isolated, 4, "the on-prem pods carry the run label during the cut");
    let policy = &policies["items"][0];
    assert_eq!(policy["spec"]["podSelector"]["matchLabels"][RUN_LABEL], policy["metadata"]["labels"][RUN_LABEL]);
    let fidelity = report["fidelity"].as_str().unwrap();
    assert!(fidelity.starts_with("link cut, pod-network fidelity"), "{fidelity}");
    assert!(
        fidelity.ends_with(
            "Observed: the on-prem nodes stayed Ready throughout; no workload pod was evicted from them; no fallback was triggered (no NodeClaim created)."
        ),
        "{fidelity}"
    );
    assert_eq!(report["fallback"]["nodes"], 0);
    assert!(report["overlap"].is_null());
    assert_eq!(phase(&report, "detection")["verdict"], "incomplete");
    assert_nothing_left();
}

#[test]
fn the_node_failure_drill_passes_with_its_hooks() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    let reports = tempfile::tempdir().unwrap();
    let out = run(&repo().join("drills/node-failure.yaml"), reports.path()).output().unwrap();
    let report = report_of(&out);
    assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_collateral_accounted(&report);
    print_phases(&report);
    // The lab's StatefulSet on a hybrid node: preflight said it would not fail over, and the report says it did not,
    // beside the Deployments whose replacements run elsewhere.
    let fidelity = report["fidelity"].as_str().unwrap();
    let steps = report["steps"].as_array().unwrap();
    let preflight = steps.iter().find(|s| s["id"] == "preflight").unwrap()["message"].as_str().unwrap();
    assert!(
        preflight.contains("statefulset-failover: StatefulSet batch/vector-index: its pods (vector-index-0 on ")
            && preflight.contains("will stay Terminating on the lost nodes"),
        "{preflight}"
    );
    let stuck = "StatefulSet batch/vector-index (vector-index-0 on ";
    assert!(fidelity.contains("(Terminating); 0 elsewhere: a StatefulSet creates no replacement"), "{fidelity}");
    let at = |needle: &str| fidelity.find(needle).unwrap_or_else(|| panic!("no {needle:?} in {fidelity}"));
    let workload = at("Deployment inference/llm-inference (");
    assert!(at("replaced elsewhere: ") < workload && workload < at("; DID NOT MOVE: "), "{fidelity}");
    assert!(at("; DID NOT MOVE: ") < at(stuck), "{fidelity}");
    println!("fidelity: {fidelity}");
    let md = std::fs::read_to_string(run_dir(reports.path()).unwrap().join("report.md")).unwrap();
    assert!(md.contains(stuck), "{md}");
    // The tool stamps the fault and the restore as it starts their hooks (the moment it asked the BMC); the lab's
    // hooks are kubectl writes that land within the hooks' run, which scripts/fidelity maps them to.
    assert_fidelity(&run_dir(reports.path()).unwrap());
    assert_lost_node_path(&report, "recovery hooks ran");
    // All four nodes of zone onprem-dc1, the cloud zones healthy: a full disruption, evicted at the normal rate.
    let abort = report["abort_reason"].to_string();
    assert!(!abort.contains("evictions held"), "{abort}");
    let timeline = std::fs::read_to_string(run_dir(reports.path()).unwrap().join("timeline.jsonl")).unwrap();
    for hook in ["lab/node-fail hybrid-gpu-1", "lab/node-fail hybrid-gpu-2", "lab/node-recover hybrid-gpu-1"] {
        assert!(timeline.contains(&format!(r#""command":"{hook}","exit_code":0"#)), "{hook} did not run");
    }
    assert!(fidelity.starts_with("node failure: the drill's own hooks (`lab/node-fail {node}`)"), "{fidelity}");
    assert_nothing_left();
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

/// Three of the four nodes of zone onprem-dc1 fail: more than 2 and at least 55% of a zone of at most 50 nodes is a
/// partial disruption, where the node lifecycle controller stops tainting. Preflight warns before; the wait ends
/// "evictions held by zone disruption" naming the rule, not a slow fallback; the drill restores the nodes.
#[test]
fn three_of_four_nodes_of_a_small_zone_failed_are_held_by_zone_disruption_and_restored() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    let dir = tempfile::tempdir().unwrap();
    let three = "eks.amazonaws.com/compute-type=hybrid,gpu.model=h200,kubernetes.io/hostname!=mi-0a1b2c3d4e5f67890";
    let file = variant(
        "node-failure.yaml",
        dir.path(),
        &[
            ("nodes: eks.amazonaws.com/compute-type=hybrid,gpu.model=h200", &format!("nodes: {three}")),
            // An inference pod may run on the node left out (the scheduler spreads them over the four), which the
            // steady-state check counts as off the drill's on-prem nodes: only warn.
            ("check: steady-state", "check: steady-state\n      onDeviation: warn"),
        ],
    );
    let reports = tempfile::tempdir().unwrap();
    let out = run(&file, reports.path()).output().unwrap();
    let report = report_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let steps = report["steps"].as_array().unwrap();
    let preflight = steps.iter().find(|s| s["id"] == "preflight").unwrap()["message"].as_str().unwrap();
    assert!(
        preflight.contains("zone-disruption: Zone onprem/onprem-dc1: the fault takes 3 of its 4 nodes NotReady")
            && preflight.contains("evictions held by zone disruption"),
        "{preflight}"
    );
    assert!(failed_nodes().is_empty(), "the drill left nodes failed: {:?}", failed_nodes());
    // The rule holds a zone whose nodes the node lifecycle controller saw go NotReady in one of its passes (2 s apart
    // in the fast profile; one pass writes its nodes' status within a second). Three servers failed by three hooks,
    // their leases last renewed up to a renew interval apart, can cross the line pass by pass instead: the first is
    // tainted while the zone still counts as healthy and its pods fall back, as preflight warns may happen.
    let timeline = std::fs::read_to_string(run_dir(reports.path()).unwrap().join("timeline.jsonl")).unwrap();
    let spread = not_ready_spread_ms(&timeline, &HYBRID[..3]);
    if spread > 1000 {
        eprintln!(
            "the three nodes went NotReady {spread} ms apart, over several controller passes: not held as a zone"
        );
        eventually("the hybrid nodes Ready after the drill", Duration::from_secs(60), hybrid_nodes_ready);
        reset();
        return;
    }
    assert_eq!(out.status.code(), Some(3), "report: {report:#}\nstderr:\n{stderr}");
    let reason = report["abort_reason"].as_str().unwrap();
    assert!(reason.contains("evictions held by zone disruption: "), "{reason}\nreport: {report:#}\nstderr:\n{stderr}");
    assert!(reason.contains("zone onprem/onprem-dc1 has 3 of 4 nodes NotReady"), "{reason}");
    assert!(reason.contains("--unhealthy-zone-threshold 0.55, --large-cluster-size-threshold 50"), "{reason}");
    let eviction = phase(&report, "eviction");
    assert!(
        eviction["note"].as_str().unwrap_or_default().contains("evictions held by zone disruption: a partial"),
        "{eviction:#}"
    );
    let undone = undone_sorted(&report);
    assert_eq!(undone, HYBRID[..3].iter().map(|n| format!("fail node/{n}")).collect::<Vec<_>>());
    eventually("the hybrid nodes Ready after the drill", Duration::from_secs(60), hybrid_nodes_ready);
    reset();
}

/// How far apart, in the timeline's milliseconds, the nodes' first Ready condition other than True came.
fn not_ready_spread_ms(timeline: &str, nodes: &[&str]) -> u64 {
    let firsts: Vec<u64> = nodes
        .iter()
        .map(|node| {
            timeline
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .find(|e| e["type"] == "node-ready" && e["node"] == *node && e["status"] != "True")
                .and_then(|e| e["t_ms"].as_u64())
                .unwrap_or_else(|| panic!("{node} never went NotReady in the timeline"))
        })
        .collect();
    firsts.iter().max().unwrap() - firsts.iter().min().unwrap()
}

#[test]
fn a_ceiling_below_the_fallback_aborts_recovers_the_nodes_and_reports_the_overrun() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    let dir = tempfile::tempdir().unwrap();
    let file = variant("node-failure.yaml", dir.path(), &[("maxFallbackGpus: 24", "maxFallbackGpus: 4")]);
    let reports = tempfile::tempdir().unwrap();
    let out = run(&file, reports.path()).output().unwrap();
    let report = report_of(&out);
    assert_eq!(out.status.code(), Some(3), "report: {report:#}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let reason = report["abort_reason"].as_str().unwrap();
    assert!(reason.starts_with("guard maxFallbackGpus tripped: the fallback holds"), "{reason}");
    assert!(reason.ends_with("GPUs, above the drill's ceiling of 4"), "{reason}");
    let fallback = &report["fallback"];
    assert_eq!(
        (fallback["ceiling"].as_i64(), fallback["over_ceiling"].as_bool()),
        (Some(4), Some(true)),
        "{fallback:#}"
    );
    assert!(fallback["max_gpus"].as_i64().unwrap() > 4, "{fallback:#}");
    let undone = undone_sorted(&report);
    assert_eq!(undone, HYBRID.map(|n| format!("fail node/{n}")));
    assert!(failed_nodes().is_empty(), "the abort left nodes failed: {:?}", failed_nodes());
    let md = std::fs::read_to_string(run_dir(reports.path()).unwrap().join("report.md")).unwrap();
    assert!(md.contains("- Drill ceiling (guards.maxFallbackGpus): 4 — **EXCEEDED**"), "{md}");
    eventually("the hybrid nodes Ready after the abort", Duration::from_secs(60), hybrid_nodes_ready);
    reset();
}

/// The last journal state of each entry whose action is `action`.
fn last_states(run_dir: &Path, action: &str) -> Vec<String> {
    let journal = std::fs::read_to_string(run_dir.join("journal.jsonl")).unwrap();
    let mut last = std::collections::BTreeMap::new();
    for line in journal.lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        if entry["action"] == action {
            last.insert(entry["seq"].as_u64().unwrap(), entry["state"].as_str().unwrap().to_string());
        }
    }
    last.into_values().collect()
}

#[test]
fn a_node_that_does_not_come_back_exits_4_naming_it_until_recover_verifies_it() {
    let _lab = lock_lab();
    reset();
    let _repair = guard();
    let dir = tempfile::tempdir().unwrap();
    // The recovery hook brings nothing back (the node stays NotReady, as a locked-out host would); it records the
    // address `{internalIP}` gave it, read from each Node object.
    let seen = dir.path().join("recover-hook-addresses");
    let hook = format!(r#"recover: [sh, -c, 'echo "$0" >> {}', "{{internalIP}}"]"#, seen.display());
    let file = variant(
        "node-failure.yaml",
        dir.path(),
        &[
            (r#"recover: [lab/node-recover, "{node}"]"#, &hook),
            // Long enough for the lab's 20 s node-monitor grace period: the nodes are NotReady when restored.
            (
                "    - id: fallback\n      waitFor: fallback-ready\n      timeout: 20m\n",
                "    - id: down\n      pause: 30s\n",
            ),
            ("    - id: restored\n      waitFor: workload-restored\n      timeout: 15m\n", ""),
            ("      restore: node-failure\n      timeout: 10m\n", "      restore: node-failure\n      timeout: 15s\n"),
        ],
    );
    let reports = tempfile::tempdir().unwrap();
    let out = run(&file, reports.path()).output().unwrap();
    let report = report_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "report: {report:#}\nstderr:\n{stderr}");
    assert_eq!(report["outcome"], "restore-failed");
    let failed = report["rollback"]["failed"].to_string();
    for node in HYBRID {
        assert!(failed.contains(&format!("{node}: NotReady after 30s")), "{failed}");
    }
    // The restore step's hooks and the rollback's each ran once per node, with each node's InternalIP.
    let addresses = std::fs::read_to_string(&seen).unwrap();
    let mut lines: Vec<&str> = addresses.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["10.0.1.21", "10.0.1.21", "10.0.1.22", "10.0.1.22", "10.0.1.23", "10.0.1.23", "10.0.1.24", "10.0.1.24"]
    );
    // The journal keeps the failures outstanding for `recover`.
    let run_dir = run_dir(reports.path()).unwrap();
    assert_eq!(last_states(&run_dir, "fail-node"), ["undo-failed"; 4]);
    let (code, text) = recover(&run_dir);
    assert_eq!(code, 4, "recover cannot finish while the nodes are down: {text}");
    assert!(text.contains("NOT RESTORED: hybrid-gpu-1: NotReady"), "{text}");

    // The operator brings the nodes back out of band; `recover` then verifies and finishes.
    for node in HYBRID {
        let back = lab_tool("node-recover").args([node, "--wait"]).env("KUBECONFIG", kubeconfig()).output().unwrap();
        assert!(back.status.success(), "{}", String::from_utf8_lossy(&back.stderr));
    }
    let (code, text) = recover(&run_dir);
    assert_eq!(code, 0, "{text}");
    for node in HYBRID {
        assert!(text.contains(&format!("verified: {node}: Ready, schedulable, no mark of the run")), "{text}");
    }
    assert_eq!(last_states(&run_dir, "fail-node"), ["undone"; 4]);
    assert_eq!(recover(&run_dir), (0, "nothing to recover\n".to_string()));
    reset();
}
