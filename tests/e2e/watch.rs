//! End-to-end: `hybrid-drill watch` against the lab. A node failure (lab/node-fail, lab/node-recover) is one incident
//! whose phases agree with the node-failure drill's, its episode seen on the metrics endpoint while it lasted; a plain
//! `kubectl drain` is one incident caused by a drain; a watch killed mid-episode and restarted writes one report with
//! what it missed marked unknown; a drain drill run while it watches is recorded as a drill, not an incident; GPUs
//! failing on a Ready node (lab/gpu-fault, quarantined by the remediation stand-in) are one incident cut into the GPU
//! fault drill's phases. Every
//! on-prem node is failed or drained, as the node-failure drill does: with one of the four gone its pods would find
//! room on the other three and nothing would fall back.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::lab::{
    KillOnDrop, Repair, drill_run, eventually, hybrid_drill, hybrid_nodes, kubeconfig, kubectl, kubectl_quiet,
    lab_tool, lock_lab, lock_two_labs, reset_lab, with_instance,
};
use crate::common::repo;
use serde_json::Value;

const DRILL: &str = "drills/node-failure.yaml";
/// The variable the watch's signing key (a seed in hex) is read from, through a secret reference.
const SEED_VAR: &str = "LAB_WATCH_SIGNING_SEED";

/// The lab's noise between a drill and an incident of the same fault, per phase: the node lifecycle controller
/// looks every 5 s (node-monitor-period), Karpenter batches pending pods for up to 10 s, kwok's stages tick every
/// second. A phase of the incident must be within this of the drill's.
const NOISE_SECONDS: f64 = 10.0;
/// Detection differs by definition besides: the drill's t0 is its hook's start, the incident's the node's last Lease
/// renewal before it, up to one renew interval earlier (kwok renews every 10 s).
const DETECTION_NOISE_SECONDS: f64 = NOISE_SECONDS + 10.0;

/// Runs a lab hook on every on-prem node, one after the other as the drill's `{node}` hooks do.
/// Runs `lab/NAME` on every hybrid node at once, as one outage takes them: one after another they would be lost
/// seconds apart (each hook waits out a lease renewal), and the incident's t0, the first node's, would run ahead of
/// the drill's.
fn hook(name: &str) {
    let children: Vec<_> = hybrid_nodes()
        .into_iter()
        .map(|node| {
            let child = lab_tool(name)
                .arg(&node)
                .env("KUBECONFIG", kubeconfig())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (node, child)
        })
        .collect();
    for (node, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "lab/{name} {node}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// Puts the lab back whatever a test left: the nodes heartbeating, uncordoned, the workload on-prem.
fn repair_quietly() {
    for node in hybrid_nodes() {
        let _ = lab_tool("node-recover").arg(&node).env("KUBECONFIG", kubeconfig()).output();
        kubectl_quiet(&["uncordon", &node]);
    }
}

fn steady() {
    repair_quietly();
    reset_lab();
}

struct Watch {
    child: Child,
    port: u16,
}

impl Watch {
    fn start(reports: &Path) -> Watch {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = hybrid_drill()
            .arg("watch")
            .arg(DRILL)
            .arg("--reports-dir")
            .arg(reports)
            .args(["--episodes", "1", "--metrics-addr", &format!("127.0.0.1:{port}")])
            .args(["--signing-key", &format!("${{env:{SEED_VAR}}}")])
            .env(SEED_VAR, "07".repeat(32))
            .arg("--kubeconfig")
            .arg(kubeconfig())
            .current_dir(repo())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let watch = Watch { child, port };
        // A fault injected before the watch has listed the cluster is seen half (its start missed), as it would be
        // on a real cluster.
        eventually("the watch in sync with the cluster", Duration::from_secs(90), || {
            watch
                .metrics()
                .is_some_and(|m| m.lines().any(|l| l.starts_with("hybrid_drill_watch_synced{") && l.ends_with(" 1")))
        });
        watch
    }

    /// The endpoint's text, if it answers.
    fn metrics(&self) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        text.starts_with("HTTP/1.1 200").then_some(text)
    }

    fn episode_in_progress(&self) -> bool {
        self.metrics().is_some_and(|m| {
            m.lines().any(|l| l.starts_with("hybrid_drill_watch_episode_in_progress{") && l.ends_with(" 1"))
        })
    }

    /// Waits for the watch to close its one episode and exit; its stdout is the run directory.
    fn finish(mut self, within: Duration) -> PathBuf {
        let deadline = Instant::now() + within;
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let out = self.child.wait_with_output().unwrap();
                panic!(
                    "the watch did not close its episode within {within:?}:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let out = self.child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("watch:\n{stderr}");
        assert!(out.status.success(), "watch failed:\n{stderr}");
        let run = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        // Each incident's record is signed as a drill's is: `verify` checks it against the key's public half.
        let public = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key().to_bytes();
        let public: String = public.iter().map(|b| format!("{b:02x}")).collect();
        let key_file = run.with_file_name(".watch-key.pub");
        std::fs::write(&key_file, public).unwrap();
        let verified = hybrid_drill().arg("verify").arg(&run).arg("--public-key").arg(&key_file).output().unwrap();
        let said = String::from_utf8_lossy(&verified.stdout);
        assert_eq!(verified.status.code(), Some(0), "the incident's signed manifest does not verify: {said}");
        std::fs::remove_file(&key_file).unwrap();
        run
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        let _ = self.child.wait();
    }
}

/// Every run directory under the reports directory.
fn run_dirs(reports: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for drill in std::fs::read_dir(reports).unwrap().flatten().filter(|e| e.path().is_dir()) {
        dirs.extend(std::fs::read_dir(drill.path()).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    dirs
}

fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

fn phase<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["phases"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap_or(&Value::Null)
}

/// The workload serving again wherever it is, then its restart so it goes back on-prem: the operators' return.
fn bring_the_workload_home() {
    kubectl(&["rollout", "restart", "deployment/llm-inference", "-n", "inference"]);
}

fn fallback_serving() -> bool {
    let claims = kubectl(&["get", "nodeclaims", "-o", "name"]);
    let ready = kubectl(&[
        "get",
        "pods",
        "-n",
        "inference",
        "-l",
        "app=llm-inference",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.deletionTimestamp}{":"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
    ]);
    !claims.trim().is_empty() && ready.lines().filter(|l| *l == ":True").count() >= 4
}

fn print_phases(what: &str, report: &Value) {
    println!("{what}:");
    for p in report["phases"].as_array().unwrap() {
        println!(
            "  {:<14} {:>8} {}",
            p["name"].as_str().unwrap(),
            p["seconds"].as_f64().map_or("-".into(), |s| format!("{s:.1}")),
            p["note"].as_str().unwrap_or("")
        );
    }
}

#[test]
fn a_node_failure_is_one_incident_whose_phases_agree_with_the_drill_and_the_metrics_showed_it() {
    // The node-failure drill on a second lab instance, alike in every setting, at the same time as the incident on
    // this one: the same fault, failing the same nodes, measured by the drill there and by the watch here.
    let (_lab, twin) = lock_two_labs();
    let twin_instance = twin.instance();
    with_instance(twin_instance, steady);
    steady();
    let _repair = Repair(repair_quietly);
    let _twin_repair = Repair(move || with_instance(twin_instance, repair_quietly));
    let drills = tempfile::tempdir().unwrap();
    let drill_child = with_instance(twin_instance, || {
        drill_run(DRILL, drills.path(), kubeconfig()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    });
    // Stopped if the test fails first, so the drill never outlives its hold on the twin.
    let mut drill_run = KillOnDrop::new(drill_child);

    let reports = tempfile::tempdir().unwrap();
    let watch = Watch::start(reports.path());
    assert!(!watch.episode_in_progress());
    hook("node-fail");
    eventually("the episode open on the metrics endpoint", Duration::from_secs(120), || watch.episode_in_progress());
    eventually("the workload serving from the fallback", Duration::from_secs(300), fallback_serving);
    assert!(watch.episode_in_progress(), "the episode is open as long as the workload is on the fallback");
    hook("node-recover");
    eventually("the nodes Ready again", Duration::from_secs(60), || {
        hybrid_nodes().iter().all(|node| {
            kubectl(&["get", "node", node, "-o", r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#])
                == "True"
        })
    });
    bring_the_workload_home();
    let run = watch.finish(Duration::from_secs(300));
    let out = drill_run.take().wait_with_output().unwrap();
    let drill: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the drill failed: {} {}\n{}",
        drill["abort_reason"],
        drill["steps"],
        String::from_utf8_lossy(&out.stderr)
    );
    with_instance(twin_instance, steady);

    assert_eq!(run_dirs(reports.path()), vec![run.clone()], "exactly one incident");
    let incident = report(&run);
    assert_eq!(incident["kind"], "incident");
    // Four nodes lost within one node-monitor period look, from the API server, like the link they share going down
    // (a whole rack losing power does too): the watch names the link, and the phases are cut alike either way.
    assert_eq!(incident["incident"]["cause"], "link-loss", "{:#}", incident["incident"]);
    assert_eq!(incident["incident"]["nodes"], serde_json::json!(hybrid_nodes()));
    for f in ["report.md", "report.html", "junit.xml", "metrics.prom", "timeline.jsonl", "drill.yaml"] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    print_phases("drill", &drill);
    print_phases("incident", &incident);
    for name in ["detection", "taint", "toleration", "pending", "provisioning", "scheduling", "startup", "rto"] {
        let (d, i) = (phase(&drill, name)["seconds"].as_f64(), phase(&incident, name)["seconds"].as_f64());
        let (Some(d), Some(i)) = (d, i) else { panic!("{name}: drill {d:?}, incident {i:?}: both must be measured") };
        let noise = if name == "detection" || name == "rto" { DETECTION_NOISE_SECONDS } else { NOISE_SECONDS };
        assert!((d - i).abs() <= noise, "{name}: drill {d:.1}s, incident {i:.1}s: more than {noise}s apart");
    }
    steady();
}

#[test]
fn a_plain_kubectl_drain_is_one_incident_caused_by_a_drain() {
    let _lab = lock_lab();
    steady();
    let _repair = Repair(repair_quietly);
    let reports = tempfile::tempdir().unwrap();
    let watch = Watch::start(reports.path());
    // As an operator drains the rack: every on-prem node, the bare pod deleted for good (reset_lab re-creates it).
    let on_prem = "--selector=eks.amazonaws.com/compute-type=hybrid";
    kubectl(&["drain", on_prem, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=120s"]);
    eventually("the workload serving from the fallback", Duration::from_secs(300), fallback_serving);
    kubectl(&["uncordon", on_prem]);
    bring_the_workload_home();
    let run = watch.finish(Duration::from_secs(300));
    assert_eq!(run_dirs(reports.path()), vec![run.clone()], "exactly one incident");
    let incident = report(&run);
    print_phases("incident", &incident);
    assert_eq!(incident["incident"]["cause"], "drain", "{:#}", incident["incident"]);
    let evidence = incident["incident"]["evidence"].to_string();
    assert!(evidence.contains("cordon"), "{evidence}");
    assert!(phase(&incident, "eviction")["seconds"].as_f64().is_some(), "{incident:#}");
    for seen in ["return", "reclaim"] {
        assert!(phase(&incident, seen)["seconds"].as_f64().is_some(), "the uncordon was seen: {incident:#}");
    }
    steady();
}

/// The nodes of the workload's pods once all four are Ready.
fn workload_nodes() -> Option<Vec<String>> {
    let out = kubectl(&[
        "get",
        "pods",
        "-n",
        "inference",
        "-l",
        "app=llm-inference",
        "-o",
        r#"jsonpath={range .items[*]}{.spec.nodeName}{":"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
    ]);
    let ready: Vec<String> = out.lines().filter_map(|l| l.strip_suffix(":True")).map(str::to_string).collect();
    (ready.len() >= 4 && out.lines().count() == ready.len()).then_some(ready)
}

/// Whether `node`'s workload pods have left it.
fn no_workload_pod_on(node: &str) -> bool {
    let field = format!("spec.nodeName={node}");
    kubectl(&["get", "pods", "-n", "inference", "-l", "app=llm-inference", "--field-selector", &field, "-o", "name"])
        .trim()
        .is_empty()
}

#[test]
fn a_gpu_fault_on_a_ready_node_is_one_incident_cut_into_the_gpu_fault_drills_phases() {
    let _lab = lock_lab();
    steady();
    let _repair = Repair(|| {
        for node in hybrid_nodes() {
            let _ = lab_tool("gpu-recover").arg(&node).env("KUBECONFIG", kubeconfig()).output();
        }
        repair_quietly();
    });
    let reports = tempfile::tempdir().unwrap();
    let watch = Watch::start(reports.path());
    // A node serving the workload: the lab spreads four replicas over four on-prem nodes unevenly, and a fault on a
    // node without one degrades nobody.
    let on_prem = hybrid_nodes();
    let node =
        workload_nodes().unwrap_or_default().into_iter().find(|n| on_prem.contains(n)).expect("a workload pod on-prem");
    // Its GPUs fail, the node stays Ready; the remediation stand-in quarantines and drains it 3 s later.
    let gpu_tool = |name: &str| {
        let out =
            lab_tool(name).arg(&node).env("KUBECONFIG", kubeconfig()).env("LAB_GPU_REMEDIATION_SECONDS", "3").output();
        let out = out.unwrap();
        assert!(out.status.success(), "lab/{name} {node}: {}", String::from_utf8_lossy(&out.stderr));
    };
    gpu_tool("gpu-fault");
    eventually("the faulty node drained", Duration::from_secs(60), || no_workload_pod_on(&node));
    eventually("the workload's pods Ready again", Duration::from_secs(120), || workload_nodes().is_some());
    // A real GPU stays broken for hours; the lab's is repaired within seconds. Repaired before a loaded watch had
    // synced and held the signs for its settle time, the fault was never an episode, and none closed.
    eventually("the episode open", Duration::from_secs(120), || watch.episode_in_progress());
    gpu_tool("gpu-recover");
    // Restarted only if a pod went to the fallback: a needless restart surges pods onto a fallback node too.
    if workload_nodes().unwrap_or_default().iter().any(|n| !on_prem.contains(n)) {
        bring_the_workload_home();
    }
    let run = watch.finish(Duration::from_secs(180));
    assert_eq!(run_dirs(reports.path()), vec![run.clone()], "exactly one incident");
    let incident = report(&run);
    print_phases("incident", &incident);
    assert_eq!(incident["incident"]["cause"], "gpu-fault", "{:#}", incident["incident"]);
    assert!(incident["incident"]["evidence"].to_string().contains("nvidia.com/gpu allocatable 0 of 8"), "{incident:#}");
    let seconds = |name| phase(&incident, name)["seconds"].as_f64();
    for name in ["gpu-detection", "quarantine", "degraded"] {
        assert!(seconds(name).is_some(), "phase {name} not measured: {:#}", incident["phases"]);
    }
    // The stand-in quarantines 3 s after the fault, which the watch saw no later than the GPUs' drop.
    assert!(seconds("gpu-detection").unwrap() <= seconds("quarantine").unwrap());
    assert!(seconds("quarantine").unwrap() >= 2.0, "{:#}", incident["phases"]);
    assert_eq!(incident["gpu_fault"]["fallbackTriggered"], true, "{:#}", incident["gpu_fault"]);
    // `history` reads the phases by name: the GPU ones among them.
    let history = hybrid_drill().arg("history").arg(reports.path()).output().unwrap();
    let history = String::from_utf8_lossy(&history.stdout);
    assert!(history.contains("gpu-detection") && history.contains("quarantine"), "{history}");
    steady();
}

#[test]
fn a_watch_killed_mid_episode_and_restarted_writes_one_report_with_what_it_missed_unknown() {
    let _lab = lock_lab();
    steady();
    let _repair = Repair(repair_quietly);
    let reports = tempfile::tempdir().unwrap();
    let first = Watch::start(reports.path());
    hook("node-fail");
    eventually("the episode open", Duration::from_secs(120), || first.episode_in_progress());
    first.kill();
    // What happens while no watch runs is not observed.
    eventually("the workload serving from the fallback", Duration::from_secs(300), fallback_serving);
    let second = Watch::start(reports.path());
    eventually("the restarted watch taking the open episode up", Duration::from_secs(60), || {
        second.episode_in_progress()
    });
    hook("node-recover");
    bring_the_workload_home();
    let run = second.finish(Duration::from_secs(300));
    assert_eq!(run_dirs(reports.path()), vec![run.clone()], "one episode, one report");
    let incident = report(&run);
    print_phases("incident", &incident);
    let unknown = incident["incident"]["unknown"].to_string();
    assert!(unknown.contains("the watch was not running"), "{unknown}");
    let rto = phase(&incident, "rto");
    assert!(rto["seconds"].is_null(), "the service's return fell in the gap: {rto}");
    let scheduling = phase(&incident, "scheduling");
    assert!(scheduling["seconds"].is_null(), "seen by no watch, never invented: {scheduling}");
    assert!(scheduling["note"].as_str().unwrap().contains("unknown"), "{scheduling}");
    steady();
}

/// A drill run while the watch runs is recognised by its marks and its lock: recorded as a drill, never an incident,
/// and shown on its own gauge while the incident gauge stays 0.
#[test]
fn a_drill_run_while_the_watch_runs_is_recorded_as_a_drill_not_an_incident() {
    let _lab = lock_lab();
    steady();
    let _repair = Repair(repair_quietly);
    let reports = tempfile::tempdir().unwrap();
    let watch = Watch::start(reports.path());
    let drills = tempfile::tempdir().unwrap();
    let drill_child = drill_run("drills/drain.yaml", drills.path(), kubeconfig())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut drill_run = KillOnDrop::new(drill_child);
    let gauge = |m: &str, name: &str| m.lines().any(|l| l.starts_with(name) && l.ends_with(" 1"));
    let mut seen_drill = false;
    eventually("the watch seeing the drill", Duration::from_secs(120), || {
        let m = watch.metrics().unwrap_or_default();
        assert!(!gauge(&m, "hybrid_drill_watch_episode_in_progress{"), "a drill paged as an incident:\n{m}");
        seen_drill |= gauge(&m, "hybrid_drill_watch_drill_in_progress{");
        seen_drill
    });
    let out = drill_run.take().wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the drill failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = watch.finish(Duration::from_secs(300));
    let recorded = report(&run);
    assert_eq!(recorded["kind"], "drill", "{:#}", recorded["incident"]);
    let drill: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(recorded["incident"]["drill_run"], drill["run_id"], "{:#}", recorded["incident"]);
}
