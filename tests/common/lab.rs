//! The lab as the end-to-end tests share it: its lock, kubectl against it, and the reset to its steady state.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::repo;

/// Holds the lab for one test: tests, in this process or another, take it in turn. How long each held it is
/// appended to lab/.run/e2e-times.tsv (seconds, test), which ./test prints at its end: where the suite's time goes.
pub struct LabLock {
    _held: std::fs::File,
    since: Instant,
    times: PathBuf,
}

pub fn lock_lab() -> LabLock {
    let path = kubeconfig().with_file_name("e2e.lock");
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).unwrap();
    file.lock().unwrap();
    LabLock { _held: file, since: Instant::now(), times: path.with_file_name("e2e-times.tsv") }
}

// Runs while a failed test unwinds too: nothing in it may panic.
impl Drop for LabLock {
    fn drop(&mut self) {
        let test = std::thread::current().name().unwrap_or("unnamed").to_string();
        let line = format!("{:.0}\t{test}\n", self.since.elapsed().as_secs_f64());
        if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(&self.times) {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

pub fn kubeconfig() -> PathBuf {
    let path = std::env::var_os("HYBRID_LAB_KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("lab/.run/kubeconfig"));
    assert!(
        path.exists(),
        "the lab is not up ({} missing): run lab/up first, or ./test which starts it",
        path.display()
    );
    path
}

pub fn kubectl(args: &[&str]) -> String {
    let out = Command::new("kubectl").env("KUBECONFIG", kubeconfig()).args(args).output().expect("kubectl runs");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// kubectl for repairs, which run in Drop and must not panic: whether it succeeded.
pub fn kubectl_quiet(args: &[&str]) -> bool {
    Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn kubectl_json(args: &[&str]) -> Value {
    let mut full = args.to_vec();
    full.extend(["-o", "json"]);
    serde_json::from_str(&kubectl(&full)).unwrap()
}

pub fn kubectl_apply(yaml: &str) {
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig())
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(yaml.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "kubectl apply failed for:\n{yaml}");
}

pub fn eventually(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "lab did not reach: {what} within {within:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Nodes cordoned by anyone, or marked by a drill.
pub fn cordoned_or_marked() -> Vec<String> {
    kubectl_json(&["get", "nodes"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["spec"]["unschedulable"] == Value::Bool(true)
                || !n["metadata"]["annotations"]["hybrid-drill.io/run-id"].is_null()
        })
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// What a drill targeting the inference workload and `gpu-fallback` leaves: the workload back on-prem, that pool at
/// 0. The batch pods may still be on the Spot pool, and a forced drain deleted the bare pod: [`reset_lab`] puts
/// those back.
pub fn workload_on_prem_and_fallback_empty() -> bool {
    let hybrid = hybrid_nodes();
    let pods = kubectl_json(&["get", "pods", "-n", "inference", "-l", "app=llm-inference"]);
    let pods = pods["items"].as_array().unwrap();
    let ready_on_prem = pods.iter().filter(|p| ready_on(p, &hybrid)).count();
    let claims = kubectl_json(&["get", "nodeclaims", "-l", "karpenter.sh/nodepool=gpu-fallback"])["items"]
        .as_array()
        .unwrap()
        .len();
    ready_on_prem == 4 && pods.len() == 4 && claims == 0
}

/// The lab's steady state: the workload on-prem, the batch, bare and emptyDir pods on-prem, no NodeClaim at all.
fn lab_steady() -> bool {
    workload_on_prem_and_fallback_empty()
        && batch_on_prem()
        && kubectl_json(&["get", "nodeclaims"])["items"].as_array().unwrap().is_empty()
}

fn ready_on(pod: &Value, nodes: &[String]) -> bool {
    pod["metadata"]["deletionTimestamp"].is_null()
        && nodes.iter().any(|h| pod["spec"]["nodeName"].as_str() == Some(h))
        && pod["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// The lab's on-prem nodes, by name.
pub fn hybrid_nodes() -> Vec<String> {
    kubectl_json(&["get", "nodes", "-l", "eks.amazonaws.com/compute-type=hybrid"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// The rest of what lab/up puts on the hybrid nodes (manifests/45-batch.yaml): the 2 batch pods, the bare pod and
/// the emptyDir pod, each Ready there.
fn batch_on_prem() -> bool {
    let hybrid = hybrid_nodes();
    let pods = kubectl_json(&["get", "pods", "-n", "batch"]);
    let pods = pods["items"].as_array().unwrap();
    let app = |p: &Value| p["metadata"]["labels"]["app"].as_str().unwrap_or_default().to_string();
    let count = |name: &str| pods.iter().filter(|p| app(p) == name).count();
    let ready = |name: &str| pods.iter().filter(|p| app(p) == name && ready_on(p, &hybrid)).count();
    ready("embeddings") == 2
        && count("embeddings") == 2
        && ready("gpu-burn-in") == 1
        && ready("feature-cache") == 1
        && count("feature-cache") == 1
}

/// Sets the workload's PodDisruptionBudget (2 in steady state: one hybrid node's worth); quiet, for repairs too.
pub fn set_max_unavailable(n: u32) -> bool {
    let patch = format!(r#"{{"spec":{{"maxUnavailable":{n}}}}}"#);
    kubectl_quiet(&["patch", "pdb", "llm-inference", "-n", "inference", "--type", "merge", "-p", &patch])
}

/// Brings the lab back to its steady state whatever a test left: schedulable nodes, workload on-prem, fallback at 0.
pub fn reset_lab() {
    for node in cordoned_or_marked() {
        kubectl(&["uncordon", &node]);
        kubectl(&["annotate", "node", &node, "hybrid-drill.io/run-id-"]);
    }
    assert!(set_max_unavailable(2), "cannot restore the workload's PodDisruptionBudget");
    if !lab_steady() {
        if !workload_on_prem_and_fallback_empty() {
            kubectl(&["rollout", "restart", "deployment/llm-inference", "-n", "inference"]);
        }
        // The batch pods fall back to the Spot pool and stay there; a forced drain deleted the bare pod for good.
        if !batch_on_prem() {
            kubectl(&["rollout", "restart", "deployment/embeddings", "-n", "batch"]);
            kubectl(&["apply", "-f", repo().join("lab/manifests/45-batch.yaml").to_str().unwrap()]);
        }
        eventually("the lab's steady state (workloads on-prem, no NodeClaim)", Duration::from_secs(300), lab_steady);
    }
}

/// Runs its repair when dropped, so a failing test still leaves the lab as it found it.
pub struct Repair<F: FnMut()>(pub F);

impl<F: FnMut()> Drop for Repair<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Freezes the lab's Karpenter (SIGSTOP) so a drill waits for the fallback for as long as a test needs, however fast
/// the machine; it resumes when the returned guard is dropped, a failing test included.
pub fn freeze_karpenter() -> Repair<impl FnMut()> {
    let pid_file = kubeconfig().with_file_name("pids").join("karpenter.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()));
    let pid = pid.trim().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success(), "cannot freeze Karpenter");
    Repair(move || {
        let _ = Command::new("kill").args(["-CONT", &pid]).status();
    })
}

/// EC2 runs out of `instance_type` (lab/capacity): every launch of it fails for insufficient capacity until the
/// returned guard is dropped, a failing test included.
pub fn out_of_capacity(instance_type: &str) -> Repair<impl FnMut()> {
    let capacity = |state: &str, instance_type: &str| {
        let out = Command::new(repo().join("lab/capacity")).args([state, instance_type]).output().unwrap();
        assert!(out.status.success(), "lab/capacity {state} {instance_type}: {}", String::from_utf8_lossy(&out.stderr));
    };
    capacity("none", instance_type);
    let instance_type = instance_type.to_string();
    Repair(move || capacity("available", &instance_type))
}

/// Runs `hybrid-drill recover RUN_DIR` from the repository root (where the lab drills' hooks are): its exit code and
/// everything it printed.
pub fn recover(run_dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hybrid-drill"))
        .arg("recover")
        .arg(run_dir)
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .current_dir(repo())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// Checks every milestone of a run against the lab API server's audit log with scripts/fidelity, printing its table:
/// each must map to the audit event that made it true, within the bounds the script states. No exception: a
/// milestone unmapped or out of bounds fails the test.
pub fn assert_fidelity(run_dir: &std::path::Path) {
    let audit = kubeconfig().with_file_name("logs").join("audit.log");
    let out = Command::new(repo().join("scripts/fidelity")).arg(run_dir).arg(&audit).output().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("scripts/fidelity {}:\n{stdout}", run_dir.display());
    assert!(
        out.status.success(),
        "the report disagrees with the audit log (every milestone must map, within its bound)\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
