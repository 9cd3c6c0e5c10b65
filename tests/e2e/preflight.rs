//! End-to-end: `hybrid-drill preflight` and the `check: preflight` step against the lab. The lab as set up passes;
//! each recommendation broken in exactly one way fails exactly its check, naming the object; a drill that starts
//! with preflight refuses to touch anything. Every breakage is repaired by a guard, even when an assertion fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::lab::{
    Repair, cordoned_or_marked, drill_run, eventually, hybrid_drill, kubeconfig, kubectl, kubectl_apply, kubectl_json,
    kubectl_quiet, lock_lab, reset_lab, set_max_unavailable,
};
use crate::common::repo;
use serde_json::Value;

const NAMESPACE: &str = "preflight-e2e";

fn preflight(args: &[&str], config: &Path) -> (i32, Value) {
    let out = hybrid_drill()
        .arg("preflight")
        .args(args)
        .args(["--output", "json", "--kubeconfig"])
        .arg(config)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON on stdout ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn preflight_drill() -> (i32, Value) {
    preflight(&[repo().join("drills/drain.yaml").to_str().unwrap()], &kubeconfig())
}

fn with_status<'a>(report: &'a Value, status: &str) -> Vec<&'a Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["status"] == status).collect()
}

fn passes(code: i32, report: &Value) {
    assert_eq!((code, report["verdict"].as_str()), (0, Some("pass")), "{report:#}");
    assert!(with_status(report, "warn").is_empty(), "{report:#}");
}

/// Exactly one finding failed, and no warning: that check, about that object. Returns its message.
fn fails_exactly(code: i32, report: &Value, check: &str, object: &str) -> String {
    let failed = with_status(report, "fail");
    let ids: Vec<(&str, &str)> =
        failed.iter().map(|f| (f["check"].as_str().unwrap(), f["object"].as_str().unwrap())).collect();
    assert_eq!(ids, [(check, object)], "{report:#}");
    assert!(with_status(report, "warn").is_empty(), "{report:#}");
    assert_eq!((code, report["verdict"].as_str()), (5, Some("fail")), "a failed check is a refusal (exit 5)");
    assert!(failed[0]["fix"].as_str().is_some_and(|f| !f.is_empty()), "a failure says the fix: {:#}", failed[0]);
    failed[0]["message"].as_str().unwrap().to_string()
}

fn test_namespace() -> Repair<impl FnMut()> {
    kubectl_apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n"));
    Repair(|| {
        kubectl_quiet(&["delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=120s"]);
    })
}

fn break_pdb() -> Repair<impl FnMut()> {
    let allowed =
        || kubectl_json(&["get", "pdb", "llm-inference", "-n", "inference"])["status"]["disruptionsAllowed"].clone();
    assert!(set_max_unavailable(0));
    let repair = Repair(move || {
        set_max_unavailable(2);
        let deadline = Instant::now() + Duration::from_secs(30);
        while allowed() != 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    eventually("the budget to allow no disruption", Duration::from_secs(30), || allowed() == 0);
    repair
}

/// A pod that does not tolerate the GPU taint, bound to a hybrid node by name as a late taint would have left it. A
/// ReplicaSet's, so a drain may evict it (kubectl drain refuses a pod no controller manages, and so does the drill).
fn intruder_pod(node: &str) {
    kubectl_apply(&format!(
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {{name: monitoring-agent, namespace: {NAMESPACE}}}\n\
         spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: monitoring-agent}}}}\n  template:\n    \
         metadata: {{labels: {{app: monitoring-agent}}}}\n    spec:\n      nodeName: {node}\n      \
         containers: [{{name: agent, image: 'stand-in/monitoring-agent:lab'}}]\n"
    ));
    eventually("the intruder pod bound", Duration::from_secs(30), || {
        kubectl_json(&["get", "pods", "-n", NAMESPACE, "-l", "app=monitoring-agent"])["items"]
            .as_array()
            .is_some_and(|pods| !pods.is_empty())
    });
}

#[test]
fn preflight_passes_on_the_lab_and_each_breakage_fails_exactly_its_check() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let (code, report) = preflight_drill();
    passes(code, &report);
    let checks: std::collections::BTreeSet<&str> =
        report["findings"].as_array().unwrap().iter().map(|f| f["check"].as_str().unwrap()).collect();
    // With a drill file, also what its safety nets lack (drills/drain.yaml declares no expected alert, no warmer).
    assert_eq!(checks.len(), 26, "every check reported: {checks:?}");
    assert!(checks.contains("expected-alerts") && checks.contains("warmers"), "{checks:?}");
    let stateful = report["findings"].as_array().unwrap().iter().find(|f| f["check"] == "statefulset-failover");
    assert_eq!(stateful.unwrap()["status"], "skip", "a drain re-creates StatefulSet pods: {report:#}");
    // The same targets as flags, without a drill file, in the kubeconfig's context.
    let flags = [
        "--nodes",
        "eks.amazonaws.com/compute-type=hybrid,gpu.model=h200",
        "--namespace",
        "inference",
        "--selector",
        "app=llm-inference",
        "--node-pool",
        "gpu-fallback",
        // The drain step's flags in drills/drain.yaml: the lab's bare pod and emptyDir pod would refuse it otherwise.
        "--force",
        "--delete-emptydir-data",
    ];
    let (code, by_flags) = preflight(&flags, &kubeconfig());
    // Without a drill file the fault may be a lost node: the lab's StatefulSet on the hybrid nodes will not fail over.
    assert_eq!((code, by_flags["verdict"].as_str()), (0, Some("warn")), "{by_flags:#}");
    let warned: Vec<(&str, &str)> = with_status(&by_flags, "warn")
        .iter()
        .map(|f| (f["check"].as_str().unwrap(), f["object"].as_str().unwrap()))
        .collect();
    assert_eq!(warned, [("statefulset-failover", "StatefulSet batch/vector-index")], "{by_flags:#}");
    assert_eq!(by_flags["findings"].as_array().unwrap().len() + 2, report["findings"].as_array().unwrap().len());
    let namespace = test_namespace();

    // A device plugin family DaemonSet scoped to no node label: it would land on the fallback's GPU nodes.
    {
        kubectl_apply(&format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: nvidia-dcgm-exporter, namespace: {NAMESPACE}}}\n\
             spec:\n  selector: {{matchLabels: {{app: nvidia-dcgm-exporter}}}}\n  template:\n    metadata: {{labels: {{app: nvidia-dcgm-exporter}}}}\n\
             \x20   spec:\n      tolerations: [{{operator: Exists}}]\n      containers: [{{name: exporter, image: 'stand-in/dcgm-exporter:lab'}}]\n"
        ));
        let _repair = Repair(|| {
            kubectl_quiet(&["delete", "daemonset", "nvidia-dcgm-exporter", "-n", NAMESPACE, "--wait=true"]);
        });
        let (code, report) = preflight_drill();
        let message =
            fails_exactly(code, &report, "device-plugin-scope", &format!("DaemonSet {NAMESPACE}/nvidia-dcgm-exporter"));
        assert!(message.contains("new nodes of NodePool gpu-fallback"), "{message}");
    }

    // The fallback NodePool without its GPU limit.
    {
        kubectl(&[
            "patch",
            "nodepool",
            "gpu-fallback",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/spec/limits"}]"#,
        ]);
        let _repair = Repair(|| {
            let limits = r#"{"spec":{"limits":{"nvidia.com/gpu":16}}}"#;
            kubectl_quiet(&["patch", "nodepool", "gpu-fallback", "--type", "merge", "-p", limits]);
        });
        let (code, report) = preflight_drill();
        fails_exactly(code, &report, "nodepool-limits", "NodePool gpu-fallback");
    }

    // The workload's template without the GPU toleration. Paused, so its pods stay as they are, and resumed with
    // the same template, so no rollout happens.
    {
        let before = kubectl_json(&["get", "deployment", "llm-inference", "-n", "inference"]);
        let tolerations = before["spec"]["template"]["spec"]["tolerations"].clone();
        kubectl(&["rollout", "pause", "deployment/llm-inference", "-n", "inference"]);
        // A JSON patch of the workload's Deployment, for breaking and for repairing.
        let patch = |ops: Value| {
            let ops = ops.to_string();
            kubectl_quiet(&["patch", "deployment", "llm-inference", "-n", "inference", "--type", "json", "-p", &ops])
        };
        let _repair = Repair(move || {
            patch(serde_json::json!([{"op": "add", "path": "/spec/template/spec/tolerations", "value": tolerations}]));
            kubectl_quiet(&["rollout", "resume", "deployment/llm-inference", "-n", "inference"]);
        });
        assert!(patch(serde_json::json!([{"op": "remove", "path": "/spec/template/spec/tolerations"}])));
        let (code, report) = preflight_drill();
        let message = fails_exactly(code, &report, "workload-toleration", "Deployment inference/llm-inference");
        assert!(message.contains("does not tolerate nvidia.com/gpu:NoSchedule"), "{message}");
    }
    let replica_sets = kubectl_json(&["get", "replicasets", "-n", "inference", "-l", "app=llm-inference"]);
    let live: Vec<&Value> =
        replica_sets["items"].as_array().unwrap().iter().filter(|r| r["spec"]["replicas"].as_i64() > Some(0)).collect();
    assert_eq!(live.len(), 1, "restoring the template started a rollout: {replica_sets:#}");

    // The budget at zero: a drain would block.
    {
        let _repair = break_pdb();
        let (code, report) = preflight_drill();
        fails_exactly(code, &report, "workload-pdb", "PodDisruptionBudget inference/llm-inference");
    }

    // A pod that does not tolerate the GPU taint on a GPU node: the taint came late.
    {
        intruder_pod("hybrid-gpu-1");
        let _repair = Repair(|| {
            kubectl_quiet(&["delete", "replicaset", "monitoring-agent", "-n", NAMESPACE, "--cascade=foreground"]);
        });
        let (code, report) = preflight_drill();
        let message = fails_exactly(code, &report, "taint-applied-late", "Node hybrid-gpu-1");
        assert!(message.contains(&format!("{NAMESPACE}/monitoring-agent")), "{message}");
    }

    // Karpenter's CRDs missing: an API server that does not serve karpenter.sh (the lab's, behind a filter), since
    // removing the CRDs from the lab would delete the running Karpenter's objects.
    {
        let proxy = HidingProxy::start("karpenter.sh");
        let (code, report) = preflight(&[repo().join("drills/drain.yaml").to_str().unwrap()], &proxy.kubeconfig);
        let message = fails_exactly(code, &report, "karpenter-crds", "API group karpenter.sh");
        assert!(message.contains("not installed"), "{message}");
        let skipped = with_status(&report, "skip");
        assert!(skipped.iter().any(|f| f["check"] == "nodepool-limits"), "{report:#}");
    }

    drop(namespace);
    let (code, report) = preflight_drill();
    passes(code, &report);
    println!("preflight e2e: 6 breakages checked and repaired in {:.1}s", started.elapsed().as_secs_f64());
}

#[test]
fn a_drill_that_starts_with_preflight_refuses_to_touch_anything() {
    let _lab = lock_lab();
    reset_lab();
    let _namespace = test_namespace();
    intruder_pod("hybrid-gpu-2");

    let plan = hybrid_drill()
        .arg("plan")
        .arg(repo().join("drills/drain.yaml"))
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&plan.stdout);
    // One refusal, one code: `plan`, `preflight` and `run` all exit 5 on the failed check.
    assert_eq!(plan.status.code(), Some(5), "{}", String::from_utf8_lossy(&plan.stderr));
    assert!(text.contains("taint-applied-late") && text.contains("preflight: FAIL (1 failed"), "{text}");
    assert!(text.contains("a run would be refused at step `preflight` (exit 5)"), "{text}");
    let (code, _) = preflight_drill();
    assert_eq!(code, 5);

    let reports = tempfile::tempdir().unwrap();
    let out = drill_run(repo().join("drills/drain.yaml"), reports.path(), kubeconfig()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no report ({e}): {stderr}"));
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert_eq!((report["outcome"].as_str(), report["exit_code"].as_i64()), (Some("refused"), Some(5)));
    let steps = report["steps"].as_array().unwrap();
    assert_eq!((steps[0]["id"].as_str(), steps[0]["outcome"].as_str()), (Some("preflight"), Some("failed")));
    let why = steps[0]["message"].as_str().unwrap();
    assert!(why.contains("taint-applied-late: Node hybrid-gpu-2") && why.contains("fix:"), "{why}");
    assert!(steps[1..].iter().all(|s| s["outcome"] == "skipped"), "{steps:#?}");
    assert!(report["abort_reason"].as_str().unwrap().starts_with("step preflight refused the drill"), "{report:#}");
    assert!(report["rollback"].is_null(), "nothing to restore: {report:#}");
    let run_dir = std::fs::read_dir(reports.path().join("onprem-gpu-drain")).unwrap().flatten().next().unwrap().path();
    let journal = std::fs::read_to_string(run_dir.join("journal.jsonl")).unwrap();
    // The drill lock, taken and released, is all it journals: no change to the cluster.
    assert!(
        journal.lines().all(|l| l.contains(r#""action":"hold-lease""#)),
        "a refused drill journals no change:\n{journal}"
    );
    assert!(run_dir.join("report.md").exists() && run_dir.join("junit.xml").exists());
    assert!(cordoned_or_marked().is_empty(), "nodes touched: {:?}", cordoned_or_marked());
}

/// The lab's API server through `kubectl proxy` and a filter that hides one API group, as a cluster without that
/// group's CRDs would look. GET only: preflight sends nothing else.
struct HidingProxy {
    kubectl: Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl HidingProxy {
    fn start(group: &'static str) -> HidingProxy {
        let mut kubectl = Command::new("kubectl")
            .env("KUBECONFIG", kubeconfig())
            .args(["proxy", "--port=0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(kubectl.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let upstream = line.trim().rsplit(' ').next().unwrap().to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let upstream = upstream.clone();
                std::thread::spawn(move || {
                    let _ = forward(stream, &upstream, group);
                });
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("kubeconfig");
        std::fs::write(
            &config,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: hybrid-lab\nclusters:\n- name: hidden\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\n\
                 contexts:\n- name: hybrid-lab\n  context: {{cluster: hidden, user: proxy}}\nusers:\n- name: proxy\n  user: {{}}\n"
            ),
        )
        .unwrap();
        HidingProxy { kubectl, kubeconfig: config, _dir: dir }
    }
}

impl Drop for HidingProxy {
    fn drop(&mut self) {
        let _ = self.kubectl.kill();
        let _ = self.kubectl.wait();
    }
}

/// One request: 404 under the hidden group, the group removed from `/apis`, everything else passed through.
fn forward(mut client: TcpStream, upstream: &str, group: &str) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte)? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let path = target.split('?').next().unwrap_or_default();
    let (status, body) = if path.starts_with(&format!("/apis/{group}/")) || path == format!("/apis/{group}") {
        let gone = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "the server could not find the requested resource"});
        ("404 Not Found".to_string(), gone.to_string().into_bytes())
    } else {
        let mut up = TcpStream::connect(upstream)?;
        // HTTP/1.0 and no compression: the answer ends when the connection does, in plain bytes.
        write!(up, "GET {target} HTTP/1.0\r\nHost: {upstream}\r\nAccept: application/json\r\n\r\n")?;
        let mut raw = Vec::new();
        up.read_to_end(&mut raw)?;
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").map_or(raw.len(), |i| i + 4);
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let status = head.lines().next().and_then(|l| l.split_once(' ')).map_or("502", |(_, s)| s).to_string();
        let mut body = raw[split..].to_vec();
        if path == "/apis" {
            let mut groups: Value = serde_json::from_slice(&body).unwrap_or_default();
            if let Some(list) = groups["groups"].as_array_mut() {
                list.retain(|g| g["name"] != group);
            }
            body = groups.to_string().into_bytes();
        }
        (status, body)
    };
    write!(
        client,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    client.write_all(&body)?;
    client.flush()
}
