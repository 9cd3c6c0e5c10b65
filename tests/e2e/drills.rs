//! End-to-end: the real binary against the project's lab (lab/up). The tests share the lab, so they run one at a
//! time, each starting from the lab's steady state and leaving it there.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common::lab::{
    alertmanager_url, assert_fidelity, cordoned_or_marked, drill_run, eventually, freeze_karpenter, hybrid_drill,
    kubeconfig, kubectl, kubectl_apply, kubectl_json, lab_tool, lock_lab, out_of_capacity, pushgateway_url, recover,
    reset_lab, set_max_unavailable, workload_on_prem_and_fallback_empty,
};
use crate::common::repo;
use serde_json::Value;

struct Drill {
    reports: tempfile::TempDir,
}

impl Drill {
    fn new() -> Drill {
        Drill { reports: tempfile::tempdir().unwrap() }
    }

    fn command(&self, file: &Path) -> Command {
        drill_run(file, self.reports.path(), kubeconfig())
    }

    fn run(&self, file: &Path) -> (Output, Value) {
        let out = self.command(file).output().unwrap();
        let report = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
        (out, report)
    }

    fn spawn(&self, file: &Path) -> Child {
        self.command(file).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    /// The run directory once it exists (reports/<drill>/<stamp>/).
    fn run_dir(&self) -> Option<PathBuf> {
        let drill = std::fs::read_dir(self.reports.path()).ok()?.flatten().next()?.path();
        Some(std::fs::read_dir(drill).ok()?.flatten().next()?.path())
    }

    fn timeline_contains(&self, needle: &str) -> bool {
        self.run_dir()
            .and_then(|d| std::fs::read_to_string(d.join("timeline.jsonl")).ok())
            .is_some_and(|t| t.contains(needle))
    }
}

fn finish(child: Child) -> (Output, Value) {
    let out = child.wait_with_output().unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

/// The lab drain drill with some text replaced, written to a temp file.
fn drill_variant(dir: &Path, edits: &[(&str, &str)]) -> PathBuf {
    let mut source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    for (from, to) in edits {
        assert!(source.contains(from), "drills/drain.yaml lacks {from:?}");
        source = source.replacen(from, to, 1);
    }
    let path = dir.join("drill.yaml");
    std::fs::write(&path, source).unwrap();
    path
}

fn seconds_between(a: &str, b: &str) -> f64 {
    let a = chrono::DateTime::parse_from_rfc3339(a).unwrap();
    let b = chrono::DateTime::parse_from_rfc3339(b).unwrap();
    (a - b).num_milliseconds() as f64 / 1000.0
}

#[test]
fn drain_drill_runs_end_to_end_with_every_phase_in_order() {
    let _lab = lock_lab();
    reset_lab();
    let drill = Drill::new();
    let (out, report) = drill.run(&repo().join("drills/drain.yaml"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{stderr}");
    assert_eq!(report["outcome"], "passed");
    assert_eq!(report["schema"], "hybrid-drill.io/report/v1");
    assert_fidelity(&drill.run_dir().unwrap());

    let labels: Vec<&str> =
        report["milestones"].as_array().unwrap().iter().map(|m| m["label"].as_str().unwrap()).collect();
    let chain = [
        "fault injected (t0)",
        "first workload pod evicted from on-prem",
        "replacement pod created (Pending)",
        "first NodeClaim created",
        "first NodeClaim Launched",
        "first NodeClaim Registered",
        "first NodeClaim Initialized",
        "fallback node Ready with GPUs",
        "service restored",
        "return started",
        "workload back on-prem",
        "fallback reclaimed to 0",
    ];
    let seen: Vec<&str> = labels.iter().filter(|l| chain.contains(l)).copied().collect();
    assert_eq!(seen, chain, "milestones missing or out of order: {labels:?}");
    let at = |label: &str| labels.iter().position(|l| *l == label).unwrap_or_else(|| panic!("no {label}: {labels:?}"));
    assert!(at("workload evicted from on-prem") < at("service restored"), "{labels:?}");
    // Each boundary the tool saw agrees with the object's own (whole-second) timestamp.
    for m in report["milestones"].as_array().unwrap() {
        if let Some(server) = m["server_time"].as_str() {
            let lag = seconds_between(m["received"].as_str().unwrap(), server);
            assert!((-1.0..2.0).contains(&lag), "{} seen {lag}s after its server time", m["label"]);
        }
    }
    for phase in report["phases"].as_array().unwrap() {
        for end in ["from", "to"] {
            if let (Some(received), Some(server)) =
                (phase[end]["received"].as_str(), phase[end]["server_time"].as_str())
            {
                let lag = seconds_between(received, server);
                assert!((-1.0..2.0).contains(&lag), "phase {} {end} seen {lag}s after its server time", phase["name"]);
            }
        }
        if phase["parent"].is_null() {
            assert_ne!(phase["verdict"], "incomplete", "phase {} incomplete: {phase:#}", phase["name"]);
        }
    }
    assert!(report["fallback"]["gpu_hours"].as_f64().unwrap() > 0.0);
    assert!(report["api_requests"].as_u64().unwrap() > 0);
    assert!(cordoned_or_marked().is_empty(), "nodes left cordoned or marked: {:?}", cordoned_or_marked());

    let dir = drill.run_dir().unwrap();
    for file in ["drill.yaml", "timeline.jsonl", "journal.jsonl", "report.json", "report.md"] {
        assert!(dir.join(file).exists(), "{file} missing from {}", dir.display());
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("**Verdict: passed**") && md.contains("| provisioning |"), "{md}");
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

/// The instance types of the fallback nodes now running, sorted.
fn fallback_instance_types() -> Vec<String> {
    let nodes = kubectl_json(&["get", "nodes", "-l", "karpenter.sh/nodepool=gpu-fallback"]);
    let mut types: Vec<String> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["labels"]["node.kubernetes.io/instance-type"].as_str().unwrap_or_default().to_string())
        .collect();
    types.sort();
    types.dedup();
    types
}

/// The names of the insufficient-capacity events Karpenter recorded so far (on NodeClaims, which it then deleted).
fn capacity_events() -> Vec<String> {
    let events = kubectl_json(&["get", "events", "-A", "--field-selector", "reason=InsufficientCapacityError"]);
    events["items"].as_array().unwrap().iter().map(|e| e["metadata"]["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_type_out_of_capacity_is_skipped_within_the_launch_and_the_fallback_takes_the_other_type() {
    let _lab = lock_lab();
    reset_lab();
    // The cheaper type, which a launch tries first: as one EC2 Fleet request, it falls through to the other pool.
    let _empty = out_of_capacity("g6.12xlarge");
    let drill = Drill::new();
    let child = drill.spawn(&repo().join("drills/drain.yaml"));
    eventually("fallback nodes up", Duration::from_secs(120), || !fallback_instance_types().is_empty());
    let launched = fallback_instance_types();
    let (out, report) = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{stderr}");
    // The node is labelled with the type the launch took, not the cheapest one the claim allowed.
    assert_eq!(launched, ["g6e.12xlarge"]);
    let fallback = &report["fallback"];
    assert!(fallback["failed_launches"].as_array().is_none_or(Vec::is_empty), "no launch failed: {fallback:#}");
    let billed: Vec<&String> = fallback["by_instance_type"].as_object().unwrap().keys().collect();
    assert_eq!(billed, ["g6e.12xlarge"], "{fallback:#}");
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

#[test]
fn launches_refused_while_every_type_is_out_are_reported_unbilled_and_the_fallback_takes_the_type_given_back() {
    let _lab = lock_lab();
    reset_lab();
    let _g6 = out_of_capacity("g6.12xlarge");
    let mut g6e = Some(out_of_capacity("g6e.12xlarge"));
    let before = capacity_events();
    let drill = Drill::new();
    let child = drill.spawn(&repo().join("drills/drain.yaml"));
    eventually("a launch refused for capacity", Duration::from_secs(120), || {
        capacity_events().iter().any(|e| !before.contains(e))
    });
    // EC2 has g6e.12xlarge again.
    drop(g6e.take());
    let (out, report) = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "report: {report:#}\nstderr:\n{stderr}");
    let fallback = &report["fallback"];
    let failed = fallback["failed_launches"].as_array().unwrap_or_else(|| panic!("no failed launch: {fallback:#}"));
    assert!(!failed.is_empty());
    for f in failed {
        assert_eq!(f["reason"], "InsufficientCapacityError", "{f:#}");
        // The fleet's errors for each pool it tried (both, or only g6e.12xlarge while g6.12xlarge is still in the
        // provider's 3-minute cache of empty pools), or, for a claim of the same batch, the cache's own answer.
        let message = f["message"].as_str().unwrap();
        assert!(
            message.contains("InsufficientInstanceCapacity") && message.contains("g6e.12xlarge")
                || message.contains("all requested instance types were unavailable during launch"),
            "{f:#}"
        );
    }
    let billed: Vec<&String> = fallback["by_instance_type"].as_object().unwrap().keys().collect();
    assert_eq!(billed, ["g6e.12xlarge"], "the failed launches bill nothing: {fallback:#}");
    let md = std::fs::read_to_string(drill.run_dir().unwrap().join("report.md")).unwrap();
    assert!(md.contains("launch failed: NodeClaim"), "{md}");
    assert_fidelity(&drill.run_dir().unwrap());
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

/// Every run directory under a reports directory, oldest first (their names are UTC timestamps).
fn run_dirs(reports: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(reports)
        .unwrap()
        .flatten()
        .flat_map(|drill| std::fs::read_dir(drill.path()).unwrap().flatten().map(|run| run.path()))
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn three_drills_leave_reports_a_browser_ci_and_prometheus_read_and_a_history() {
    let _lab = lock_lab();
    let drill = Drill::new();
    for _ in 0..3 {
        reset_lab();
        let (out, report) = drill.run(&repo().join("drills/drain.yaml"));
        assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let runs = run_dirs(drill.reports.path());
    assert_eq!(runs.len(), 3, "{runs:?}");

    let dir = &runs[0];
    let report: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let phases: Vec<&str> = report["phases"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    let page = crate::common::open_in_chromium(&dir.join("report.html"), "lab-report", 2600);
    assert!(page.console.is_empty(), "console output: {:?}", page.console);
    for phase in &phases {
        assert!(page.dom.contains(&format!(r#"data-phase="{phase}""#)), "no lane for {phase}");
    }
    for kind in ["evictions", "NodeClaims", "nodes", "taints", "service"] {
        assert!(page.dom.contains(&format!(r#"data-kind="{kind}""#)), "no {kind} markers");
    }
    println!("screenshot of a lab run's report: {}", page.screenshot.display());
    crate::common::validate_junit(&dir.join("junit.xml")).unwrap_or_else(|e| panic!("junit.xml: {e}"));
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(junit.contains(r#"<testcase name="RTO within 15m 00.0s""#), "{junit}");
    let metrics = crate::common::parse_prometheus(&std::fs::read_to_string(dir.join("metrics.prom")).unwrap());
    let drill_label = ("drill", "onprem-gpu-drain");
    let rto = crate::common::sample(&metrics, "hybrid_drill_rto_seconds", &[drill_label]).unwrap();
    assert_eq!(
        Some(rto),
        report["phases"].as_array().unwrap().iter().find(|p| p["name"] == "rto").unwrap()["seconds"].as_f64()
    );
    assert_eq!(
        crate::common::sample(&metrics, "hybrid_drill_outcome", &[drill_label, ("outcome", "passed")]),
        Some(1.0)
    );
    assert!(crate::common::sample(&metrics, "hybrid_drill_fallback_gpu_hours", &[drill_label]).unwrap() > 0.0);

    let history = |format: &str| {
        let out = hybrid_drill()
            .arg("history")
            .arg(drill.reports.path())
            .args(["--output", format])
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert!(out.status.success(), "history --output {format}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let json: Value = serde_json::from_slice(&history("json")).unwrap();
    let rows = json["drills"][0]["runs"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in &rows[1..] {
        // every measured phase of a later run carries its change against the one before
        let rto = &row["phases"][0];
        assert!(rto["change_seconds"].is_number() && rto["objective_margin_seconds"].is_number(), "{row:#}");
    }
    // The three runs are one series: one drill on the lab's cluster (its kube-system UID) and its profile, which
    // lab/up labels kube-system with.
    assert_eq!(json["drills"].as_array().unwrap().len(), 1, "{json:#}");
    let series = &json["drills"][0]["series"];
    let uid = kubectl_json(&["get", "namespace", "kube-system"])["metadata"]["uid"].clone();
    assert!(series["cluster"] == uid && series["profile"].is_string(), "{series:#}");
    let text = String::from_utf8(history("text")).unwrap();
    assert!(text.contains("onprem-gpu-drain · cluster ") && text.contains(": 3 runs"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "wider than 80 columns:\n{text}");
    let page_path = drill.reports.path().join("history.html");
    std::fs::write(&page_path, history("html")).unwrap();
    let page = crate::common::open_in_chromium(&page_path, "lab-history", 1800);
    assert!(page.console.is_empty(), "console output: {:?}", page.console);
    assert_eq!(page.dom.matches(r#"<tr class="run">"#).count(), 3);
    for phase in &phases {
        assert!(page.dom.contains(&format!(r#"<figure class="trend" data-phase="{phase}">"#)), "no trend of {phase}");
    }
    println!("screenshot of the history: {}", page.screenshot.display());
    eventually("steady state after the drills", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

/// Sets the workload's budget to N disruptions and waits until the disruption controller reports it.
fn budget_allows(n: u32) {
    assert!(set_max_unavailable(n));
    eventually(&format!("the budget to allow {n} disruptions"), Duration::from_secs(30), || {
        kubectl_json(&["get", "pdb", "llm-inference", "-n", "inference"])["status"]["disruptionsAllowed"] == n
    });
}

#[test]
fn sigint_while_waiting_for_the_fallback_restores_and_reports_aborted() {
    let _lab = lock_lab();
    reset_lab();
    // With Karpenter frozen the wait for the fallback cannot end before the signal, however fast the machine; the
    // budget lets the drain evict every pod at once, as it would otherwise wait for the fallback to take the first.
    budget_allows(4);
    let karpenter = freeze_karpenter();
    let drill = Drill::new();
    let child = drill.spawn(&repo().join("drills/drain.yaml"));
    eventually("the drill waiting for the fallback", Duration::from_secs(120), || {
        drill.timeline_contains(r#""step":"fallback","action":"waitFor fallback-ready""#)
    });
    assert!(cordoned_or_marked().len() == 4, "the drain cordoned the four hybrid nodes");
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let (out, report) = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(report["outcome"], "aborted");
    assert_eq!(report["abort_reason"], "interrupted by SIGINT");
    let undone: Vec<&str> =
        report["rollback"]["undone"].as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
    assert_eq!(undone.len(), 4, "{undone:?}");
    assert!(cordoned_or_marked().is_empty(), "nodes left cordoned: {:?}", cordoned_or_marked());
    let step = report["steps"].as_array().unwrap().iter().find(|s| s["id"] == "fallback").unwrap();
    assert_eq!(step["outcome"], "aborted");
    assert!(drill.run_dir().unwrap().join("report.md").exists());
    drop(karpenter);
    reset_lab();
}

#[test]
fn a_budget_that_allows_no_disruption_times_out_the_drain_and_names_it() {
    let _lab = lock_lab();
    reset_lab();
    budget_allows(0);
    let dir = tempfile::tempdir().unwrap();
    // Preflight would refuse this drill (the budget allows no disruption); here the drain itself is under test.
    let file = drill_variant(
        dir.path(),
        &[
            ("check: preflight", "check: preflight\n      onDeviation: warn"),
            ("timeout: 10m\n    # Karpenter", "timeout: 15s\n    # Karpenter"),
        ],
    );
    let drill = Drill::new();
    let (out, report) = drill.run(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let step = report["steps"].as_array().unwrap().iter().find(|s| s["id"] == "drain").unwrap();
    assert_eq!(step["outcome"], "failed");
    let message = step["message"].as_str().unwrap();
    assert!(
        message.starts_with("timed out after 15s: PodDisruptionBudget llm-inference blocked the eviction of"),
        "{message}"
    );
    assert!(report["abort_reason"].as_str().unwrap().contains("PodDisruptionBudget llm-inference"));
    assert!(cordoned_or_marked().is_empty(), "nodes left cordoned: {:?}", cordoned_or_marked());
    reset_lab();
}

/// A tiny HTTP server standing in for the service's endpoint; it answers 200 to everything until dropped.
struct Endpoint {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Endpoint {
    fn serve(listener: TcpListener) -> Endpoint {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        let mut buf = [0u8; 1024];
                        let _ = stream.read(&mut buf);
                        let _ =
                            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Endpoint { stop }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn an_http_probe_decides_when_the_service_is_restored() {
    let _lab = lock_lab();
    reset_lab();
    // Reserve a port, then free it: nothing answers there until the test says so.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let probe = format!(
        "readyPods: 4\n        http: {{url: \"http://127.0.0.1:{port}/healthz\", consecutive: 2, interval: 500ms, timeout: 1s}}"
    );
    let file = drill_variant(dir.path(), &[("readyPods: 4", &probe)]);
    let drill = Drill::new();
    let child = drill.spawn(&file);
    // The pods come back long before the endpoint does.
    eventually("the fallback pods Ready while the probe fails", Duration::from_secs(240), || {
        drill.timeline_contains(r#""type":"fallback-ready""#)
            && drill.timeline_contains(r#""step":"restored","action""#)
    });
    std::thread::sleep(Duration::from_secs(3));
    assert!(!drill.timeline_contains(r#""type":"service-restored""#), "restored before the endpoint answered");
    let opened = chrono::Utc::now();
    let endpoint = Endpoint::serve(TcpListener::bind(("127.0.0.1", port)).unwrap());
    let (out, report) = finish(child);
    drop(endpoint);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Restored when the criterion first held (the first of the two passes), confirmed by the second 500 ms later.
    let restored = report["milestones"].as_array().unwrap().iter().find(|m| m["label"] == "service restored").unwrap();
    let held_after_open = seconds_between(restored["received"].as_str().unwrap(), &opened.to_rfc3339());
    assert!(
        held_after_open > -0.05,
        "service restored {held_after_open}s after the endpoint opened: before it answered"
    );
    let timeline = std::fs::read_to_string(drill.run_dir().unwrap().join("timeline.jsonl")).unwrap();
    let confirmed: Value = timeline
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|o| o["type"] == "service-restored")
        .unwrap();
    let confirmed_after_open = seconds_between(confirmed["received"].as_str().unwrap(), &opened.to_rfc3339());
    assert!(confirmed_after_open > 0.4, "confirmed {confirmed_after_open}s after the endpoint opened: needs 2 passes");
    assert!(
        confirmed_after_open - held_after_open > 0.4,
        "held at {held_after_open}s, confirmed at {confirmed_after_open}s"
    );
    let rto = report["phases"].as_array().unwrap().iter().find(|p| p["name"] == "rto").unwrap();
    assert!(rto["note"].as_str().unwrap().contains("first held"), "{rto}");
    assert!(
        timeline.contains(r#""type":"probe-result","ok":false"#)
            && timeline.contains(r#""type":"probe-result","ok":true"#)
    );
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

/// The UID of the lab's kube-system namespace, which names the lab in a drill's spec.cluster.kubeSystemUID.
fn kube_system_uid() -> String {
    kubectl(&["get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}"]).trim().to_string()
}

/// A kubeconfig for the lab that authenticates as the hybrid-drill ServiceAccount of deploy/, bound only to the
/// committed roles: a token from the TokenRequest API (`kubectl create token`), no client certificate. Everything in
/// deploy/ is first applied with `--dry-run=server` (its namespace for real, which the rest needs).
fn least_privilege_kubeconfig(dir: &Path) -> (PathBuf, String) {
    kubectl(&["apply", "-f", repo().join("deploy/namespace.yaml").to_str().unwrap()]);
    let dry_run = kubectl(&["apply", "--dry-run=server", "-f", repo().join("deploy").to_str().unwrap()]);
    for object in [
        "cronjob.batch/hybrid-drill-quarterly",
        "configmap/hybrid-drill-drill",
        "role.rbac.authorization.k8s.io/hybrid-drill-lock",
    ] {
        assert!(dry_run.contains(object), "deploy/ lacks {object}:\n{dry_run}");
    }
    for file in
        ["deploy/clusterrole.yaml", "deploy/clusterrolebinding.yaml", "deploy/roles.yaml", "deploy/lock-role.yaml"]
    {
        kubectl_apply(&std::fs::read_to_string(repo().join(file)).unwrap());
    }
    let token =
        kubectl(&["create", "token", "hybrid-drill", "-n", "hybrid-drill", "--duration", "1h"]).trim().to_string();
    let admin = kubectl_json(&["config", "view", "--raw"]);
    let cluster = &admin["clusters"][0]["cluster"];
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: hybrid-lab\nclusters:\n- name: lab\n  cluster:\n    server: {}\n    certificate-authority-data: {}\ncontexts:\n- name: hybrid-lab\n  context: {{cluster: lab, user: drill}}\nusers:\n- name: drill\n  user: {{token: {token}}}\n",
            cluster["server"].as_str().unwrap(),
            cluster["certificate-authority-data"].as_str().unwrap()
        ),
    )
    .unwrap();
    (path, token)
}

/// deploy/'s identity, as `kubectl --as` names it.
const SERVICE_ACCOUNT: &str = "system:serviceaccount:hybrid-drill:hybrid-drill";

/// The drain drill, run with another identity's kubeconfig than the lab admin's.
fn drain_drill_as(kubeconfig: &Path, drill: &Drill) -> Command {
    drill_as(&repo().join("drills/drain.yaml"), kubeconfig, drill)
}

fn drill_as(file: &Path, kubeconfig: &Path, drill: &Drill) -> Command {
    drill_run(file, drill.reports.path(), kubeconfig)
}

#[test]
fn the_drain_drill_passes_with_only_the_committed_role_and_leaks_no_secret() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let (config, token) = least_privilege_kubeconfig(dir.path());
    // As the scheduled drill in a pod would: its cluster named by its kube-system UID alone, which `identify` prints.
    let uid = kube_system_uid();
    let identify = hybrid_drill().arg("identify").arg("--kubeconfig").arg(&config).output().unwrap();
    let printed = String::from_utf8_lossy(&identify.stdout);
    assert!(identify.status.success() && printed.contains(&format!("kube-system UID: {uid}")), "{printed}");

    // Another cluster's UID: refused in one line before anything is touched, no run directory, no lock.
    let other = drill_variant(
        dir.path(),
        &[("    context: hybrid-lab\n", "    kubeSystemUID: 00000000-0000-0000-0000-000000000000\n")],
    );
    let refused = Drill::new();
    let out = drill_as(&other, &config, &refused).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("kube-system UID") && stderr.contains(&uid) && stderr.contains("identify"), "{stderr}");
    assert!(refused.run_dir().is_none(), "a refused drill leaves no run directory");
    assert!(cordoned_or_marked().is_empty(), "{:?}", cordoned_or_marked());
    assert_eq!(lock_holder(), "", "the refused drill took the lock");

    let ours = drill_variant(dir.path(), &[("    context: hybrid-lab\n", &format!("    kubeSystemUID: {uid}\n"))]);
    // Without the grant to restart the collateral (batch/embeddings, which the drain moves to the Spot pool and the
    // return restarts), refused before anything is touched, with the rule to grant or the workload to leave.
    let roles = std::fs::read_to_string(repo().join("deploy/roles.yaml")).unwrap();
    let _rebind = crate::common::lab::Repair(|| kubectl_apply(&roles));
    let may_restart = || {
        crate::common::lab::kubectl_quiet(&[
            "auth",
            "can-i",
            "patch",
            "deployments/embeddings",
            "-n",
            "batch",
            "--as",
            SERVICE_ACCOUNT,
        ])
    };
    kubectl(&["delete", "rolebinding", "hybrid-drill-restart", "-n", "batch"]);
    eventually("the collateral's restart revoked", Duration::from_secs(10), || !may_restart());
    let refused = Drill::new();
    let out = drill_as(&ours, &config, &refused).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("patch apps/deployments `embeddings` in namespace batch"), "{stderr}");
    assert!(stderr.contains("spec.collateral.leave"), "{stderr}");
    assert!(cordoned_or_marked().is_empty() && lock_holder().is_empty(), "{:?}", cordoned_or_marked());
    kubectl_apply(&roles);
    eventually("the collateral's restart granted again", Duration::from_secs(10), may_restart);

    let drill = Drill::new();
    let out = drill_as(&ours, &config, &drill).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(lock_holder(), "", "the drill lock is released at the end");
    let run_dir = drill.run_dir().unwrap();
    let admin = std::fs::read_to_string(kubeconfig()).unwrap();
    let ca = kubectl_json(&["config", "view", "--raw"])["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .unwrap()
        .to_string();
    for entry in std::fs::read_dir(&run_dir).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!text.contains(&token), "{name} contains the token");
        assert!(!text.contains(&ca[..40]), "{name} contains the CA certificate");
        assert!(
            !text.contains("BEGIN ")
                && !text.contains("client-key-data")
                && !text.contains("certificate-authority-data"),
            "{name} contains key material"
        );
        assert!(
            !admin.lines().filter(|l| l.contains("-data:")).any(|l| text.contains(l.split(':').nth(1).unwrap().trim())),
            "{name} contains kubeconfig contents"
        );
    }
    for stream in [String::from_utf8_lossy(&out.stdout), stderr] {
        assert!(!stream.contains(&token), "output contains the token");
    }
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

/// Who holds the drill lock (the Lease kube-system/hybrid-drill): empty when free or never taken.
fn lock_holder() -> String {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig())
        .args(["get", "lease", "hybrid-drill", "-n", "kube-system", "-o", "jsonpath={.spec.holderIdentity}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether the drill lock's holder last renewed it more than its duration ago (the lab's clock is this machine's).
fn lock_expired() -> bool {
    let lease = kubectl_json(&["get", "lease", "hybrid-drill", "-n", "kube-system"]);
    let renewed = chrono::DateTime::parse_from_rfc3339(lease["spec"]["renewTime"].as_str().unwrap()).unwrap();
    let duration = chrono::Duration::seconds(lease["spec"]["leaseDurationSeconds"].as_i64().unwrap());
    chrono::Utc::now() > renewed + duration + chrono::Duration::milliseconds(500)
}

/// The lab drain drill's targets with one `pause` step, no objectives and a short drill lock: it holds the lock and
/// touches nothing.
fn pause_drill(dir: &Path, name: &str, pause: &str) -> PathBuf {
    let source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    let objectives = "  objectives:\n    rto: 15m\n    phases:\n      provisioning: 8m\n      reclaim: 20m\n";
    assert!(source.contains(objectives), "drills/drain.yaml's objectives changed");
    // Without objectives: a pause measures no phase, and a phase not measured would miss its objective.
    let source = source.replace(objectives, "");
    let head = &source[..source.find("  steps:\n").unwrap()];
    let path = dir.join(name);
    std::fs::write(&path, format!("{head}  lock: {{duration: 6s}}\n  steps:\n    - {{id: hold, pause: {pause}}}\n"))
        .unwrap();
    path
}

#[test]
fn one_drill_at_a_time_a_second_is_refused_and_a_killed_runs_lock_is_taken_over_once_expired() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let first = Drill::new();
    let mut holder = first.spawn(&pause_drill(dir.path(), "long.yaml", "60s"));
    eventually("the first run holds the drill lock", Duration::from_secs(60), || {
        lock_holder().starts_with("onprem-gpu-drain-")
    });
    let first_dir = first.run_dir().unwrap();

    let second = Drill::new();
    let out = second.command(&pause_drill(dir.path(), "short.yaml", "1s")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("another drill holds the cluster's drill lock (Lease kube-system/hybrid-drill)"),
        "{stderr}"
    );
    assert!(stderr.contains(&lock_holder()) && stderr.contains(" since "), "{stderr}");
    assert!(stderr.contains(&format!("run directory {}", first_dir.display())), "{stderr}");
    assert!(second.run_dir().is_none(), "the refused run left a directory");

    // Killed like a lost machine: the lock stays held until its holder has not renewed it for its duration.
    holder.kill().unwrap();
    holder.wait().unwrap();
    eventually("the killed run's lock expires", Duration::from_secs(60), lock_expired);
    let (out, report) = second.run(&pause_drill(dir.path(), "short.yaml", "1s"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("took over the drill lock") && warnings.contains("stopped renewing"), "{warnings}");
    assert_eq!(lock_holder(), "", "released at the end");
    let journal = std::fs::read_to_string(second.run_dir().unwrap().join("journal.jsonl")).unwrap();
    assert!(journal.contains(r#""state":"undone","action":"hold-lease""#), "the release is journalled:\n{journal}");
    // The killed run changed nothing: its recover finds nothing to do, and takes and frees the lock itself.
    let (code, text) = recover(&first_dir);
    assert_eq!(code, 0, "{text}");
    // Named, the crashed run is sealed with what recover found: nothing.
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("nothing to recover"), "{text}");
    assert!(
        lines.all(|l| l.starts_with(&format!("sealed: {} (crashed; restored by recover at ", first_dir.display())))
    );
    assert_eq!(lock_holder(), "");
}

/// Tokens issued so far by the lab's exec credential plugin (one line each in its log).
fn exec_tokens_issued() -> usize {
    let log = kubeconfig().with_file_name("logs").join("exec-credential.log");
    std::fs::read_to_string(log).map(|text| text.lines().count()).unwrap_or(0)
}

#[test]
fn the_drain_drill_passes_as_an_exec_plugin_user_whose_token_expires_mid_drill() {
    let _lab = lock_lab();
    reset_lab();
    // As an EKS user through `aws eks get-token`: short-lived tokens from an exec plugin, refused by the API server's
    // token webhook once expired, and only the committed role (lab/manifests/50-operator-rbac.yaml).
    let exec_kubeconfig = kubeconfig().with_file_name("kubeconfig-exec");
    let before = exec_tokens_issued();
    let drill = Drill::new();
    let out = drain_drill_as(&exec_kubeconfig, &drill)
        // Clients refresh 60 s before expiry: a 75 s token is replaced 15 s into the drill, well before its end.
        .env("LAB_TOKEN_TTL", "75")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "report: {stdout}\nstderr:\n{stderr}");
    let issued = exec_tokens_issued() - before;
    assert!(issued >= 2, "the drill ran on {issued} token(s): the exec credential was never refreshed mid-drill");
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

fn deployment_spec() -> Value {
    let mut spec = kubectl_json(&["get", "deployment", "llm-inference", "-n", "inference"])["spec"].clone();
    // kubectl's own restart mark is the one change a return step makes on purpose.
    spec["template"]["metadata"]["annotations"] = Value::Null;
    spec
}

/// The run dies like `kill -9` at one mutation (HYBRID_DRILL_CRASH_AT); `recover` must leave the cluster as it was.
fn crash_then_recover(point: &str) {
    reset_lab();
    let before = deployment_spec();
    let drill = Drill::new();
    let out = drill.command(&repo().join("drills/drain.yaml")).env("HYBRID_DRILL_CRASH_AT", point).output().unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "the run should have died at {point}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_dir = drill.run_dir().unwrap();
    let (code, text) = recover(&run_dir);
    assert_eq!(code, 0, "{text}");
    assert!(cordoned_or_marked().is_empty(), "after recover at {point}: {:?} left cordoned", cordoned_or_marked());
    assert_eq!(deployment_spec(), before, "the workload changed at {point}");
    let (code, again) = recover(&run_dir);
    assert_eq!((code, again.trim()), (0, "nothing to recover"), "recover is not idempotent at {point}");
}

#[test]
fn a_run_killed_at_a_mutation_is_restored_by_recover() {
    let _lab = lock_lab();
    // The drill lock is mutation 0, the four cordons 1 to 4: the first cordon made, and the first eviction about to
    // be made (the lock held by the dead run, which recover takes over); scripts/crash-sweep covers every point.
    for point in ["1:after", "5:before"] {
        crash_then_recover(point);
    }
    reset_lab();
}

/// Runs the drill, sends it SIGTERM once `step` has started (within 4 minutes) and waits for its report.
fn sigterm_once_step_starts(drill: &Drill, file: &Path, step: &str) -> (Output, Value) {
    let mut child = drill.spawn(file);
    let started = format!(r#""step":"{step}","action""#);
    let mut ended = false;
    eventually(&format!("the drill in step {step}"), Duration::from_secs(240), || {
        ended = child.try_wait().unwrap().is_some();
        ended || drill.timeline_contains(&started)
    });
    if ended {
        let out = child.wait_with_output().unwrap();
        panic!(
            "the drill ended before its step {step}: {:?}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    finish(child)
}

#[test]
fn sigterm_during_the_reclaim_wait_stops_cleanly_with_a_report() {
    let _lab = lock_lab();
    reset_lab();
    let drill = Drill::new();
    let (out, report) = sigterm_once_step_starts(&drill, &repo().join("drills/drain.yaml"), "reclaim");
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["abort_reason"], "interrupted by SIGTERM");
    assert!(cordoned_or_marked().is_empty());
    // The workload was back on-prem before the signal: nothing to bring back.
    let warnings = report["warnings"].to_string();
    assert!(!warnings.contains("workload pods are not on the on-prem nodes"), "{warnings}");
    reset_lab();
}

#[test]
fn an_abort_while_the_workload_runs_on_the_fallback_brings_it_home_and_the_fallback_is_reclaimed() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let held =
        drill_variant(dir.path(), &[("    - id: return\n", "    - id: hold\n      pause: 10m\n    - id: return\n")]);
    let drill = Drill::new();
    let (out, report) = sigterm_once_step_starts(&drill, &held, "hold");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(cordoned_or_marked().is_empty(), "nodes left cordoned: {:?}", cordoned_or_marked());
    // The rollback was verified, then the drill's own return restart brought the workload back on-prem.
    let verified = report["rollback"]["verified"].to_string();
    for node in ["hybrid-gpu-1", "hybrid-gpu-2", "hybrid-gpu-3", "mi-0a1b2c3d4e5f67890"] {
        assert!(verified.contains(&format!("{node}: Ready, schedulable, no mark of the run")), "{verified}");
    }
    let timeline = std::fs::read_to_string(drill.run_dir().unwrap().join("timeline.jsonl")).unwrap();
    let aborted = timeline.find(r#""type":"rollback-finished""#).expect("no rollback in the timeline");
    assert!(
        timeline[aborted..].contains(r#""target":"deployment/inference/llm-inference""#),
        "no restart after the rollback"
    );
    let warnings = report["warnings"].to_string();
    assert!(!warnings.contains("workload pods are not on the on-prem nodes"), "{warnings}");
    // The cloud nodes outlive the run: the report says so, and its cost counts them up to the end of the rollback.
    assert!(warnings.contains("fallback nodes") && warnings.contains("consolidation reclaims them"), "{warnings}");
    assert!(report["fallback"]["gpu_hours"].as_f64().unwrap() > 0.0, "{:#}", report["fallback"]);
    // Nothing holds the cloud nodes any more: consolidation takes the fallback back to 0.
    eventually("the fallback reclaimed to 0", Duration::from_secs(240), workload_on_prem_and_fallback_empty);
}

/// Runs `hybrid-drill validate` and `plan` on a drill file: what each printed.
fn validate_and_plan(file: &Path) -> (String, String) {
    let validate = hybrid_drill().arg("validate").arg(file).output().unwrap();
    assert!(validate.status.success(), "{}", String::from_utf8_lossy(&validate.stderr));
    let plan = hybrid_drill().arg("plan").arg(file).arg("--kubeconfig").arg(kubeconfig()).output().unwrap();
    assert!(plan.status.success(), "{}", String::from_utf8_lossy(&plan.stderr));
    (String::from_utf8_lossy(&validate.stdout).into_owned(), String::from_utf8_lossy(&plan.stdout).into_owned())
}

#[test]
fn a_drill_that_ends_with_its_nodes_cordoned_is_undone_at_its_end_unless_it_keeps_them() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    // The drain drill cut after its `restored` step: it drains and never returns.
    let source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    let cut_at = source.find("    # Uncordon on-prem, then a rollout restart").unwrap();
    let drained = dir.path().join("drained.yaml");
    std::fs::write(&drained, &source[..cut_at]).unwrap();
    let (validated, planned) = validate_and_plan(&drained);
    let left = "step `drain` cordons the on-prem nodes and no later step uncordons them (`uncordon` or `return`): the \
                run undoes it at its end";
    assert!(validated.contains(left), "{validated}");
    assert!(planned.contains(left), "{planned}");
    let drill = Drill::new();
    let (out, report) = drill.run(&drained);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // It never returns: the workload ends on the fallback, whose NodeClaims are cloud capacity left running. The run
    // names them and exits 4 as left behind (the cordons undone, nothing failed to restore).
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(report["outcome"], "left-behind", "{report:#}");
    let leftovers = report["leftovers"].to_string();
    assert!(leftovers.contains("NodeClaim gpu-fallback-"), "{leftovers}");
    assert!(cordoned_or_marked().is_empty(), "nodes left cordoned: {:?}", cordoned_or_marked());
    let undone = report["rollback"]["undone"].to_string();
    for node in ["hybrid-gpu-1", "hybrid-gpu-2", "hybrid-gpu-3", "mi-0a1b2c3d4e5f67890"] {
        assert!(undone.contains(&format!("cordon node/{node}")), "{undone}");
    }
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("the drill's steps left changes in place; undone at its end: cordon node/"),
        "{warnings}"
    );
    let md = std::fs::read_to_string(drill.run_dir().unwrap().join("report.md")).unwrap();
    assert!(md.contains("undone at its end"), "{md}");
    reset_lab();

    // With `keepChanges` the cordons stay, the report lists them, and `recover` undoes them later.
    let steady_end = source.find("    # Cordon, then evict through the Eviction API").unwrap();
    let kept_source = source[..steady_end].replace("  steps:\n", "  keepChanges: true\n  steps:\n")
        + "    - id: cordon\n      cordon: onPrem\n";
    let kept = dir.path().join("kept.yaml");
    std::fs::write(&kept, kept_source).unwrap();
    let (validated, planned) = validate_and_plan(&kept);
    for text in [&validated, &planned] {
        assert!(text.contains("kept at the end of the run (spec.keepChanges: true)"), "{text}");
    }
    let drill = Drill::new();
    let (out, report) = drill.run(&kept);
    assert_ne!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(cordoned_or_marked().len(), 4, "the kept cordons");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains(
            "left in place at the end, as spec.keepChanges asks: cordon node/mi-0a1b2c3d4e5f67890, cordon \
             node/hybrid-gpu-3, cordon node/hybrid-gpu-2, cordon node/hybrid-gpu-1"
        ),
        "{warnings}"
    );
    let (code, text) = recover(&drill.run_dir().unwrap());
    assert_eq!(code, 0, "{text}");
    assert!(cordoned_or_marked().is_empty(), "{text}");
    reset_lab();
}

#[test]
fn the_drain_drill_survives_an_api_server_restart_with_its_phases_intact() {
    let _lab = lock_lab();
    reset_lab();
    let drill = Drill::new();
    let child = drill.spawn(&repo().join("drills/drain.yaml"));
    // Once the fallback is ready, while the drill waits for the service: every watch is open and the workload's
    // pods are still starting. Not while Karpenter launches: the lab's kwok provider creates the Node itself, and a
    // create refused by the stopped API server leaves a claim Launched with no node for Karpenter's 15-minute
    // registration timeout, where a real instance would boot and register by itself.
    eventually("the drill waiting for the service on the fallback", Duration::from_secs(240), || {
        drill.timeline_contains(r#""step":"restored","action""#)
    });
    let restart = lab_tool("restart").args(["kube-apiserver", "5"]).output().unwrap();
    assert!(restart.status.success(), "lab/restart: {}", String::from_utf8_lossy(&restart.stderr));
    let (out, report) = finish(child);
    assert_eq!(
        out.status.code(),
        Some(0),
        "abort: {}\nsteps: {:#}\nstderr:\n{}",
        report["abort_reason"],
        report["steps"],
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report["watch_gaps"].as_u64().unwrap() > 0, "the restart left no gap in the timeline");
    let timeline = std::fs::read_to_string(drill.run_dir().unwrap().join("timeline.jsonl")).unwrap();
    assert!(timeline.contains(r#""type":"watch-resumed""#));
    for phase in report["phases"].as_array().unwrap() {
        if phase["parent"].is_null() {
            assert_ne!(
                phase["verdict"], "incomplete",
                "phase {} incomplete after the restart: {phase:#}",
                phase["name"]
            );
        }
    }
    assert!(cordoned_or_marked().is_empty());
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

fn running_pods(namespace: &str, selector: &str) -> Vec<Value> {
    let pods = kubectl_json(&["get", "pods", "-n", namespace, "-l", selector]);
    pods["items"].as_array().unwrap().iter().filter(|p| p["status"]["phase"] == "Running").cloned().collect()
}

fn step<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["steps"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap_or_else(|| panic!("no step {id}"))
}

#[test]
fn kubectl_drain_refuses_bare_and_empty_dir_pods_until_flagged_and_never_evicts_the_protected_pod() {
    let _lab = lock_lab();
    reset_lab();
    // lab/up's own: the bare pod on hybrid-gpu-3 and the emptyDir pod on the SSM-named node (manifests/45-batch.yaml).
    let cache = running_pods("batch", "app=feature-cache")[0]["metadata"]["name"].as_str().unwrap().to_string();
    let protected = || running_pods("kube-system", "app.kubernetes.io/name=coredns-on-prem");
    let coredns = protected();
    assert_eq!(coredns.len(), 1, "lab/up puts one coredns-on-prem pod on hybrid-gpu-1");
    let (coredns_name, coredns_uid) =
        (coredns[0]["metadata"]["name"].as_str().unwrap(), coredns[0]["metadata"]["uid"].clone());

    // Without the flags: plan, preflight and run refuse before anything is touched, naming both pods and flags.
    let dir = tempfile::tempdir().unwrap();
    let unflagged = drill_variant(
        dir.path(),
        &[("drain: {nodes: onPrem, force: true, deleteEmptyDirData: true}", "drain: onPrem")],
    );
    let drill = Drill::new();
    let bare_clause = "batch/gpu-burn-in on hybrid-gpu-3 (no controller: it will be lost; allow with `force: true`)";
    let cache_clause = format!(
        "batch/{cache} on mi-0a1b2c3d4e5f67890 (its emptyDir data (scratch) will be deleted; allow with `deleteEmptyDirData: true`)"
    );
    let plan = hybrid_drill().arg("plan").arg(&unflagged).arg("--kubeconfig").arg(kubeconfig()).output().unwrap();
    let run = drill.command(&unflagged).output().unwrap();
    for (what, out) in [("plan", &plan), ("run", &run)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{what}: {stderr}");
        assert!(stderr.contains(bare_clause) && stderr.contains(&cache_clause), "{what}: {stderr}");
    }
    assert!(drill.run_dir().is_none(), "a refused run left a run directory");
    assert!(cordoned_or_marked().is_empty(), "a refused run touched nodes: {:?}", cordoned_or_marked());
    let preflight = hybrid_drill()
        .arg("preflight")
        .arg(&unflagged)
        .args(["--output", "json", "--kubeconfig"])
        .arg(kubeconfig())
        .output()
        .unwrap();
    let findings: Value = serde_json::from_slice(&preflight.stdout).unwrap();
    assert_eq!(preflight.status.code(), Some(5), "the same refusal as plan and run: {findings:#}");
    let failed: Vec<&str> = findings["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == "fail")
        .map(|f| f["object"].as_str().unwrap())
        .collect();
    assert_eq!(
        failed,
        ["Pod batch/gpu-burn-in on hybrid-gpu-3".to_string(), format!("Pod batch/{cache} on mi-0a1b2c3d4e5f67890")],
        "{findings:#}"
    );

    // The shipped drill sets both flags and passes: both pods evicted, their loss said; the protected pod left alone
    // and named; the second GPU workload falls back to the Spot pool.
    let drill = Drill::new();
    let (out, report) = drill.run(&repo().join("drills/drain.yaml"));
    assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let drain = step(&report, "drain");
    assert_eq!(drain["action"], "drain onPrem (force, deleteEmptyDirData)");
    let message = drain["message"].as_str().unwrap();
    for said in [
        "batch/gpu-burn-in on hybrid-gpu-3: no controller: it will be lost".to_string(),
        format!("batch/{cache} on mi-0a1b2c3d4e5f67890: its emptyDir data (scratch) will be deleted"),
        format!("left alone (protected namespace): kube-system/{coredns_name} on hybrid-gpu-1"),
    ] {
        assert!(message.contains(&said), "{message}");
    }
    let journal = std::fs::read_to_string(drill.run_dir().unwrap().join("journal.jsonl")).unwrap();
    assert!(!journal.contains(coredns_name), "the protected pod's eviction was journalled");
    assert!(journal.contains("\"gpu-burn-in\""), "the bare pod's eviction is journalled");
    let now = protected();
    assert_eq!(now.len(), 1);
    assert_eq!(now[0]["metadata"]["uid"], coredns_uid, "the protected pod was replaced");
    assert!(!crate::common::lab::kubectl_quiet(&["-n", "batch", "get", "pod", "gpu-burn-in"]), "the bare pod survived");
    // Not necessarily all four on gpu-fallback: Karpenter counts every node of a pool against its limit, those it
    // is still deleting included, and launches what the limit leaves on the Spot pool, as a real cluster does.
    let pools = &report["fallback"]["by_node_pool"];
    assert!(pools["gpu-fallback"]["nodes"].as_u64().unwrap() >= 1, "{:#}", report["fallback"]);
    // Re-applying the lab's manifests brings the bare pod back, as lab/up does.
    reset_lab();
}

/// An admission policy, built into the API server, that denies every eviction in `inference`: a change freeze.
const FREEZE: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: hybrid-drill-test-eviction-freeze}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods/eviction]}
  validations:
    - {expression: "false", message: "evictions are frozen during the change freeze"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: hybrid-drill-test-eviction-freeze}
spec:
  policyName: hybrid-drill-test-eviction-freeze
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: inference}}
"#;

/// A second budget over the workload, written with `matchExpressions`: the Eviction API then refuses its pods (500).
const SECOND_BUDGET: &str = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: llm-inference-extra, namespace: inference}
spec:
  maxUnavailable: 1
  selector:
    matchExpressions: [{key: app, operator: In, values: [llm-inference]}]
"#;

/// Whether a dry-run eviction of a workload pod is denied by the freeze: the policy is in force.
fn eviction_denied() -> bool {
    let pod = kubectl(&["get", "pods", "-n", "inference", "-l", "app=llm-inference", "-o", "name"]);
    let name = pod.lines().next().unwrap().trim_start_matches("pod/").to_string();
    let body = format!(
        r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{name}","namespace":"inference"}},"deleteOptions":{{"dryRun":["All"]}}}}"#
    );
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig())
        .args(["create", "--raw", &format!("/api/v1/namespaces/inference/pods/{name}/eviction"), "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(body.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stderr).contains("evictions are frozen")
}

#[test]
fn kubectl_drain_fails_at_once_when_admission_denies_an_eviction_or_two_budgets_cover_a_pod() {
    let _lab = lock_lab();
    reset_lab();
    let _repair = crate::common::lab::Repair(|| {
        for (kind, name) in [
            ("validatingadmissionpolicybinding", "hybrid-drill-test-eviction-freeze"),
            ("validatingadmissionpolicy", "hybrid-drill-test-eviction-freeze"),
        ] {
            crate::common::lab::kubectl_quiet(&["delete", kind, name, "--ignore-not-found"]);
        }
        crate::common::lab::kubectl_quiet(&[
            "delete",
            "pdb",
            "-n",
            "inference",
            "llm-inference-extra",
            "--ignore-not-found",
        ]);
    });
    let dir = tempfile::tempdir().unwrap();
    // Preflight would refuse the second run (two budgets); the drain itself is under test.
    let file = drill_variant(dir.path(), &[("check: preflight", "check: preflight\n      onDeviation: warn")]);
    let drain_fails_at_once = |expect: &[&str]| {
        let drill = Drill::new();
        let (out, report) = drill.run(&file);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "report: {report:#}\nstderr:\n{stderr}");
        let drain = step(&report, "drain");
        assert_eq!(drain["outcome"], "failed");
        let message = drain["message"].as_str().unwrap();
        for said in expect {
            assert!(message.contains(said), "{said:?} not in {message}");
        }
        // At once, not after the step's 10m timeout spent retrying what cannot change.
        assert!(drain["seconds"].as_f64().unwrap() < 30.0, "{drain:#}");
        assert!(!message.contains("timed out"), "{message}");
        assert!(cordoned_or_marked().is_empty(), "nodes left cordoned: {:?}", cordoned_or_marked());
        assert!(workload_on_prem_and_fallback_empty(), "the workload left on-prem though nothing was evicted");
        report
    };

    kubectl_apply(FREEZE);
    eventually("the eviction freeze in force", Duration::from_secs(30), eviction_denied);
    let report = drain_fails_at_once(&[
        "failed: the API server refused (422 Invalid): ",
        "ValidatingAdmissionPolicy 'hybrid-drill-test-eviction-freeze' with binding 'hybrid-drill-test-eviction-freeze' denied request: evictions are frozen during the change freeze",
    ]);
    assert!(report["abort_reason"].as_str().unwrap().contains("evictions are frozen"), "{report:#}");
    kubectl(&["delete", "validatingadmissionpolicybinding", "hybrid-drill-test-eviction-freeze"]);
    kubectl(&["delete", "validatingadmissionpolicy", "hybrid-drill-test-eviction-freeze"]);
    eventually("the eviction freeze lifted", Duration::from_secs(30), || !eviction_denied());

    kubectl_apply(SECOND_BUDGET);
    drain_fails_at_once(&[
        "the pod is under several PodDisruptionBudgets (llm-inference, llm-inference-extra), which the Eviction API refuses: ",
        "This pod has more than one PodDisruptionBudget",
    ]);
    kubectl(&["delete", "pdb", "-n", "inference", "llm-inference-extra"]);
    reset_lab();
}

/// A webhook on 127.0.0.1 that answers 200 to everything and keeps each request's body, until dropped.
struct Webhook {
    url: String,
    received: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    _endpoint: Endpoint,
}

impl Webhook {
    fn serve() -> Webhook {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, kept) = (stop.clone(), received.clone());
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((mut stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                let body = loop {
                    let n = stream.read(&mut buf).unwrap_or(0);
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head.lines().find_map(|l| {
                            l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap())
                        });
                        if body.len() >= length.unwrap_or(0) {
                            break body.to_string();
                        }
                    }
                    if n == 0 {
                        break String::new();
                    }
                };
                kept.lock().unwrap().push(serde_json::from_str(&body).unwrap_or(Value::String(body)));
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
            }
        });
        Webhook { url, received, _endpoint: Endpoint { stop } }
    }

    fn received(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

/// GET from one of the lab's Prometheus parts (Alertmanager, the Pushgateway), as JSON.
fn lab_api(url: &str) -> Value {
    let out = Command::new("curl").args(["-sf", url]).output().unwrap();
    assert!(out.status.success(), "GET {url} failed: is the lab up with Alertmanager and the Pushgateway?");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The lab's Alertmanager's silences whose comment starts with `comment`, as (id, state).
fn silences(comment: &str) -> Vec<(String, String)> {
    let all = lab_api(&format!("{}/api/v2/silences", alertmanager_url()));
    all.as_array()
        .unwrap()
        .iter()
        .filter(|s| s["comment"].as_str().is_some_and(|c| c.starts_with(comment)))
        .map(|s| (s["id"].as_str().unwrap().to_string(), s["status"]["state"].as_str().unwrap().to_string()))
        .collect()
}

/// The drain drill with a silence of the nodes' NotReady alerts in the lab's Alertmanager, commented `comment`.
fn silenced_drill(dir: &Path, comment: &str, edits: &[(&str, &str)]) -> PathBuf {
    let alertmanager = alertmanager_url();
    let silence = format!(
        "  silences:\n    - alertmanager: {alertmanager}\n      matchers: ['alertname=\"KubeNodeNotReady\"', \
         'node=~\"hybrid-gpu-.*\"']\n      comment: {comment}\n  steps:\n"
    );
    let mut all = vec![("  steps:\n", silence.as_str())];
    all.extend_from_slice(edits);
    drill_variant(dir, &all)
}

#[test]
fn a_drill_tells_its_webhooks_holds_its_silence_and_its_metrics_reach_the_real_pushgateway() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let comment = format!("e2e-notify-{}", std::process::id());
    // An objective no drain meets, so the run also tells of a missed objective: the RTO (a provisioning objective
    // is met at 0 s when the last wave's pods land on a fallback node the first wave brought).
    let file = silenced_drill(dir.path(), &comment, &[("rto: 15m", "rto: 1ms")]);
    let (json, slack) = (Webhook::serve(), Webhook::serve());
    let drill = Drill::new();
    let child = drill
        .command(&file)
        .args(["--notify", &json.url, "--notify", &format!("slack={}", slack.url), "--pushgateway", &pushgateway_url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut active = None;
    eventually("the drill's silence active in Alertmanager", Duration::from_secs(240), || {
        active = silences(&comment).into_iter().find(|(_, state)| state == "active");
        active.is_some()
    });
    let (id, _) = active.unwrap();
    assert!(drill.timeline_contains(r#""type":"drill-started""#));
    let (out, report) = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the 1ms objective is missed: {report:#}\n{stderr}");
    let journal = std::fs::read_to_string(drill.run_dir().unwrap().join("journal.jsonl")).unwrap();
    assert!(journal.contains(&format!("silence {id}")), "the journal names the silence it made: {journal}");
    assert_eq!(silences(&comment), [(id, "expired".to_string())], "the silence outlived the drill");
    let warnings = report["warnings"].to_string();
    assert!(!warnings.contains("notification") && !warnings.contains("not pushed"), "{warnings}");

    // Each message, in order, to both webhooks.
    let run_dir = drill.run_dir().unwrap();
    let events = json.received();
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["started", "objective-missed", "finished"], "{events:#?}");
    assert!(events.iter().all(|e| e["schema"] == "hybrid-drill.io/event/v1" && e["run_id"] == report["run_id"]));
    assert_eq!(events[0]["run_dir"], run_dir.display().to_string());
    assert_eq!(events[1]["phase"], "rto");
    assert_eq!(events[1]["verdict"], "missed");
    assert_eq!(events[2]["outcome"], "objective-missed");
    let rto = report["phases"].as_array().unwrap().iter().find(|p| p["name"] == "rto").unwrap()["seconds"].clone();
    assert_eq!(events[2]["rto_seconds"], rto);
    assert!(Path::new(events[2]["report"].as_str().unwrap()).is_file(), "{}", events[2]);
    let texts: Vec<String> = slack.received().iter().map(|m| m["text"].as_str().unwrap().to_string()).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts[0].contains("*onprem-gpu-drain* started against `hybrid-lab`"), "{}", texts[0]);
    assert!(texts[1].contains("missed its rto objective"), "{}", texts[1]);
    assert!(texts[2].contains("finished: objective missed (exit 1); RTO "), "{}", texts[2]);

    // The run's metrics, read back from the real Pushgateway's API.
    let groups = lab_api(&format!("{}/api/v1/metrics", pushgateway_url()));
    let group = groups["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["labels"]["job"] == "hybrid-drill" && g["labels"]["drill"] == "onprem-gpu-drain")
        .unwrap_or_else(|| panic!("no hybrid-drill group in the Pushgateway: {groups:#}"));
    let pushed: f64 = group["hybrid_drill_rto_seconds"]["metrics"][0]["value"].as_str().unwrap().parse().unwrap();
    assert!((pushed - rto.as_f64().unwrap()).abs() < 1e-3, "pushed {pushed}, report {rto}: {group:#}");
    let outcome = group["hybrid_drill_outcome"]["metrics"].as_array().unwrap();
    assert!(outcome.iter().any(|m| m["labels"]["outcome"] == "objective-missed" && m["value"] == "1"), "{outcome:#?}");
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

#[test]
fn a_run_killed_after_silencing_has_its_silence_expired_by_recover() {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let comment = format!("e2e-crash-{}", std::process::id());
    let file = silenced_drill(dir.path(), &comment, &[]);
    let drill = Drill::new();
    // Change 0 is the silence, 1 the first cordon: die once that is made, like kill -9.
    let out = drill.command(&file).env("HYBRID_DRILL_CRASH_AT", "1:after").output().unwrap();
    assert_eq!(out.status.code(), None, "the run should have died: {}", String::from_utf8_lossy(&out.stderr));
    let held = silences(&comment);
    assert!(held.len() == 1 && held[0].1 == "active", "{held:?}");
    let run_dir = drill.run_dir().unwrap();
    let (code, text) = recover(&run_dir);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("silence {alertname=\"KubeNodeNotReady\""), "{text}");
    assert_eq!(silences(&comment), [(held[0].0.clone(), "expired".to_string())], "{text}");
    assert!(cordoned_or_marked().is_empty(), "{:?} left cordoned", cordoned_or_marked());
    let (code, again) = recover(&run_dir);
    assert_eq!((code, again.trim()), (0, "nothing to recover"));
    reset_lab();
}

/// The fallback as two NodePools: with the on-demand pool's GPU limit at 8, half the inference pods land on the Spot
/// pool. They count as fallen back (the wait for the fallback and the restore hold), and the report gives each pool
/// its nodes. The reclaim is left out, so the run ends with the fallback's NodeClaims still running: named as
/// leftovers, exit 4.
#[test]
fn pods_landing_on_the_spot_pool_count_as_fallback_and_are_attributed_to_their_nodepool() {
    let _lab = lock_lab();
    reset_lab();
    let limit = |gpus: u32| {
        let patch = format!(r#"{{"spec":{{"limits":{{"nvidia.com/gpu":{gpus}}}}}}}"#);
        crate::common::lab::kubectl_quiet(&["patch", "nodepool", "gpu-fallback", "--type", "merge", "-p", &patch])
    };
    assert!(limit(8), "cannot lower gpu-fallback's GPU limit");
    let _repair = crate::common::lab::Repair(move || {
        limit(16);
    });
    let dir = tempfile::tempdir().unwrap();
    let file = drill_variant(
        dir.path(),
        &[
            ("nodePool: gpu-fallback", "nodePools: [gpu-fallback, gpu-spot]"),
            // No reclaim: this test is about the attribution by pool; the reclaim's wait for every pool is the
            // collateral tests' to prove.
            ("    - id: reclaim\n      waitFor: fallback-empty\n      timeout: 30m\n", ""),
            ("      reclaim: 20m\n", ""),
        ],
    );
    let drill = Drill::new();
    let (out, report) = drill.run(&file);
    assert_eq!(out.status.code(), Some(4), "report: {report:#}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["outcome"], "left-behind", "{report:#}");
    // The run ends once the workload is back on-prem, less than consolidateAfter after the fallback's nodes emptied.
    assert!(report["leftovers"].to_string().contains("NodeClaim gpu-fallback-"), "{:#}", report["leftovers"]);
    let pools = &report["fallback"]["by_node_pool"];
    assert!(pools["gpu-fallback"]["nodes"].as_u64().is_some_and(|n| n >= 2), "{:#}", report["fallback"]);
    assert!(pools["gpu-spot"]["nodes"].as_u64().is_some_and(|n| n >= 1), "{:#}", report["fallback"]);
    let preflight = step(&report, "preflight")["message"].as_str().unwrap().to_string();
    assert!(!preflight.contains("workload-fits-limit"), "the Spot pool has no limit: {preflight}");
    let md = std::fs::read_to_string(drill.run_dir().unwrap().join("report.md")).unwrap();
    assert!(md.contains("- By NodePool: gpu-fallback ") && md.contains(", gpu-spot "), "{md}");
    drop(_repair);
    reset_lab();
}
