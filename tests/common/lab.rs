//! The labs as the end-to-end tests share them: a pool of lab instances, each held by one test at a time, kubectl
//! and the lab's tools against the held one, and the reset to its steady state.

use std::cell::Cell;
use std::fs::TryLockError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::repo;

thread_local! {
    /// The lab instance the running test holds: every helper here acts on it, and the commands they start are
    /// pointed at it (KUBECONFIG, LAB_INSTANCE for the lab's own tools and the drills' hooks).
    static HELD: Cell<Option<u32>> = const { Cell::new(None) };
}

/// The lab instances the tests may use: LAB_INSTANCES ("0,1,2" or "0 1 2"; ./test sets it to the pool it started),
/// else instance 0 alone, the lab `lab/up` starts by default.
pub fn instances() -> Vec<u32> {
    let listed = std::env::var("LAB_INSTANCES").unwrap_or_default();
    let parsed: Vec<u32> = listed
        .split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or_else(|_| panic!("LAB_INSTANCES={listed}: expected instance numbers")))
        .collect();
    if parsed.is_empty() { vec![0] } else { parsed }
}

/// An instance's run directory, as lab/lib.sh names it: lab/.run for 0, lab/.run-N for N.
pub fn run_dir_of(instance: u32) -> PathBuf {
    match instance {
        0 => repo().join("lab/.run"),
        n => repo().join(format!("lab/.run-{n}")),
    }
}

/// The instance this test holds (instance 0 before it takes one: only tests without a lab call helpers then).
pub fn instance() -> u32 {
    HELD.with(Cell::get).unwrap_or(0)
}

/// Holds one lab instance for one test: tests, in this process or another, take the pool's instances in turn. How
/// long each held it is appended to the instance's e2e-times.tsv (seconds, test), which ./test prints at its end:
/// where the suite's time goes.
pub struct LabLock {
    _held: std::fs::File,
    instance: u32,
    since: Instant,
    times: PathBuf,
    current: bool,
}

impl LabLock {
    pub fn instance(&self) -> u32 {
        self.instance
    }
}

/// Takes the first free instance of the pool, waiting for one if all are held; the helpers of this module then act
/// on it for the rest of the test.
pub fn lock_lab() -> LabLock {
    let mut lock = {
        let _turn = Turnstile::enter();
        take_instance(&[])
    };
    HELD.with(|held| held.set(Some(lock.instance)));
    lock.current = true;
    lock
}

/// Two instances at once, for a test about two labs; the helpers act on the first, and [`on_instance`] and
/// [`with_instance`] reach the second. Both are taken inside the turnstile: a test holding one while it waits for the
/// other would starve (the tests beside it release and retake their instance within microseconds) or, beside a
/// second such test, deadlock.
pub fn lock_two_labs() -> (LabLock, LabLock) {
    let pool = instances();
    assert!(
        pool.iter().filter(|i| run_dir_of(**i).join("kubeconfig").exists()).count() >= 2,
        "this test needs two lab instances up: ./test starts a pool (or LAB_INSTANCES=0,1 after lab/up and lab/up --instance 1)"
    );
    let (mut first, mut second) = {
        let _turn = Turnstile::enter();
        let first = take_instance(&[]);
        let second = take_instance(&[first.instance]);
        (first, second)
    };
    // Waiting for the second instance is not the test's own time.
    first.since = Instant::now();
    second.since = first.since;
    HELD.with(|held| held.set(Some(first.instance)));
    first.current = true;
    (first, second)
}

/// One test at a time takes instances: whoever waits for one is served first when it frees. Without it a test
/// waiting for a second instance lost every race to the tests that release one and take the next at once.
struct Turnstile(std::fs::File);

impl Turnstile {
    fn enter() -> Turnstile {
        let path = crate::common::repo().join("lab/.e2e-turnstile.lock");
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).unwrap();
        file.lock().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Turnstile(file)
    }
}

impl Drop for Turnstile {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Runs `f` with the helpers of this module acting on `instance` instead of the held one.
pub fn with_instance<T>(instance: u32, f: impl FnOnce() -> T) -> T {
    let held = HELD.with(|h| h.replace(Some(instance)));
    // Put back on unwind too, so a failing check still leaves the test on its own instance.
    let _back = Repair(move || HELD.with(|h| h.set(held)));
    f()
}

fn take_instance(except: &[u32]) -> LabLock {
    let pool: Vec<u32> = instances().into_iter().filter(|i| !except.contains(i)).collect();
    let up: Vec<u32> = pool.iter().copied().filter(|i| run_dir_of(*i).join("kubeconfig").exists()).collect();
    assert!(
        !up.is_empty(),
        "no lab instance is up (looked for {}): run lab/up first, or ./test which starts a pool of them",
        pool.iter().map(|i| run_dir_of(*i).join("kubeconfig").display().to_string()).collect::<Vec<_>>().join(", ")
    );
    loop {
        for &instance in &up {
            let path = run_dir_of(instance).join("e2e.lock");
            let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).unwrap();
            match file.try_lock() {
                Ok(()) => {
                    let times = path.with_file_name("e2e-times.tsv");
                    return LabLock { _held: file, instance, since: Instant::now(), times, current: false };
                }
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(e)) => panic!("{}: {e}", path.display()),
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

// Runs while a failed test unwinds too: nothing in it may panic.
impl Drop for LabLock {
    fn drop(&mut self) {
        if self.current {
            HELD.with(|held| held.set(None));
        }
        let test = std::thread::current().name().unwrap_or("unnamed").to_string();
        let line = format!("{:.0}\t{test}\n", self.since.elapsed().as_secs_f64());
        if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(&self.times) {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// The held instance's admin kubeconfig.
pub fn kubeconfig() -> PathBuf {
    let path = run_dir_of(instance()).join("kubeconfig");
    assert!(
        path.exists(),
        "lab instance {} is not up ({} missing): run lab/up first, or ./test which starts it",
        instance(),
        path.display()
    );
    path
}

/// A port of the held instance's: lab/lib.sh's base port plus 100 per instance.
pub fn lab_port(base: u16) -> u16 {
    base + 100 * u16::try_from(instance()).unwrap()
}

/// The held instance's Alertmanager and Pushgateway.
pub fn alertmanager_url() -> String {
    format!("http://127.0.0.1:{}", lab_port(29093))
}

pub fn pushgateway_url() -> String {
    format!("http://127.0.0.1:{}", lab_port(29091))
}

/// Points a command at the held instance: kubectl through KUBECONFIG, the lab's tools and the drills' hooks (which
/// source lab/lib.sh) through LAB_INSTANCE.
pub fn on_held_lab(command: &mut Command) -> &mut Command {
    on_instance(command, instance())
}

pub fn on_instance(command: &mut Command, instance: u32) -> &mut Command {
    command.env("LAB_INSTANCE", instance.to_string()).env("KUBECONFIG", run_dir_of(instance).join("kubeconfig"))
}

/// The journal key every run and `recover` of the tests share, as a deployment's do (deploy/schedule.yaml): without
/// it each process authenticates its journal lines under a key of its own, and `recover` would refuse to run the
/// hooks of the run it recovers.
pub const JOURNAL_KEY: &str = "e2e-journal-key-0123456789abcdef0123456789abcdef";

/// The tool under test, run from the repository root (where the lab drills' hooks are), against the held instance.
pub fn hybrid_drill() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hybrid-drill"));
    on_held_lab(&mut command).current_dir(repo()).env("HYBRID_DRILL_JOURNAL_KEY", JOURNAL_KEY);
    command
}

/// `hybrid-drill run FILE --yes --output json --reports-dir REPORTS --kubeconfig KUBECONFIG`: a drill as the tests run
/// it, its report on stdout.
pub fn drill_run(
    file: impl AsRef<std::ffi::OsStr>,
    reports: impl AsRef<Path>,
    kubeconfig: impl AsRef<Path>,
) -> Command {
    let mut command = hybrid_drill();
    command
        .arg("run")
        .arg(file)
        // The tests' drills are the tests' own: their commands are read here.
        .args(["--yes", "--allow-commands", "--output", "json", "--reports-dir"])
        .arg(reports.as_ref())
        .arg("--kubeconfig")
        .arg(kubeconfig.as_ref());
    command
}

/// One of the lab's tools (lab/NAME) for the held instance.
pub fn lab_tool(name: &str) -> Command {
    let mut command = Command::new(repo().join("lab").join(name));
    on_held_lab(&mut command);
    command
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

/// `kubectl ARGS -o json`; plain reads are made in-process (see [`super::api`]), as they are most of the polling.
pub fn kubectl_json(args: &[&str]) -> Value {
    if let Some(answer) = super::api::get_json(&kubeconfig(), args) {
        return answer;
    }
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
        assert!(Instant::now() < deadline, "lab did not reach: {what} within {within:?}\n{}", lab_snapshot());
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// What a wait that timed out was looking at: the nodes with their readiness and taints, every pod with its node,
/// the NodeClaims, and the latest events. Best effort: a lab too broken to answer says so.
pub fn lab_snapshot() -> String {
    let get = |args: &[&str]| {
        Command::new("kubectl")
            .env("KUBECONFIG", kubeconfig())
            .args(args)
            .output()
            .map(|o| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
            .unwrap_or_else(|e| format!("kubectl did not run: {e}\n"))
    };
    let nodes = r#"custom-columns=NODE:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,SINCE:.status.conditions[?(@.type=="Ready")].lastTransitionTime,UNSCHEDULABLE:.spec.unschedulable,ZONE:.metadata.labels.topology\.kubernetes\.io/zone,TAINTS:.spec.taints[*].key"#;
    let mut out = format!("lab instance {} when the wait gave up:\n", instance());
    out += &get(&["get", "nodes", "-o", nodes]);
    out += &get(&["get", "pods", "-A", "-o", "wide", "--no-headers"]);
    out += &get(&["get", "nodeclaims", "-o", "wide", "--no-headers"]);
    out += &get(&["get", "events", "-A", "--sort-by", ".lastTimestamp"])
        .lines()
        .rev()
        .take(25)
        .collect::<Vec<_>>()
        .join("\n");
    out
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
    let claims = kubectl_json(&["get", "nodeclaims", "-l", "karpenter.sh/nodepool=gpu-fallback"])["items"]
        .as_array()
        .unwrap()
        .len();
    inference_on_prem() && claims == 0
}

/// The inference workload's 4 pods, each Ready on a hybrid node, and no other.
fn inference_on_prem() -> bool {
    let hybrid = hybrid_nodes();
    let pods = kubectl_json(&["get", "pods", "-n", "inference", "-l", "app=llm-inference"]);
    let pods = pods["items"].as_array().unwrap();
    pods.len() == 4 && pods.iter().filter(|p| ready_on(p, &hybrid)).count() == 4
}

/// The lab's steady state: the workload on-prem, the batch, bare, emptyDir and StatefulSet pods on-prem, no NodeClaim
/// at all.
fn lab_steady() -> bool {
    rolled_out("inference", "llm-inference")
        && rolled_out("batch", "embeddings")
        && workload_on_prem_and_fallback_empty()
        && batch_on_prem()
        && kubectl_json(&["get", "nodeclaims"])["items"].as_array().unwrap().is_empty()
}

/// A Deployment whose controller has acted on its latest spec and whose pods are all of it and available: right after
/// `kubectl rollout restart` the old pods are still the only ones, Ready where they were, until the controller
/// starts replacing them.
fn rolled_out(namespace: &str, name: &str) -> bool {
    let deployment = kubectl_json(&["get", "deployment", name, "-n", namespace]);
    let (spec, status) = (&deployment["spec"], &deployment["status"]);
    let replicas = spec["replicas"].as_u64().unwrap_or(1);
    status["observedGeneration"] == deployment["metadata"]["generation"]
        && status["updatedReplicas"].as_u64() == Some(replicas)
        && status["availableReplicas"].as_u64() == Some(replicas)
        && status["replicas"].as_u64() == Some(replicas)
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

/// The rest of what lab/up puts on the hybrid nodes (manifests/45-batch.yaml, 47-statefulset.yaml): the 2 batch
/// pods, the bare pod, the emptyDir pod and the StatefulSet's pod, each Ready there.
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
        && ready("vector-index") == 1
        && count("vector-index") == 1
}

/// Sets the workload's PodDisruptionBudget (2 in steady state: one hybrid node's worth); quiet, for repairs too.
pub fn set_max_unavailable(n: u32) -> bool {
    let patch = format!(r#"{{"spec":{{"maxUnavailable":{n}}}}}"#);
    kubectl_quiet(&["patch", "pdb", "llm-inference", "-n", "inference", "--type", "merge", "-p", &patch])
}

/// Brings the lab back to its steady state whatever a test left: schedulable nodes, workload on-prem, fallback at 0,
/// every instance type with capacity.
pub fn reset_lab() {
    give_back_capacity();
    for node in cordoned_or_marked() {
        kubectl(&["uncordon", &node]);
        kubectl(&["annotate", "node", &node, "hybrid-drill.io/run-id-"]);
    }
    assert!(set_max_unavailable(2), "cannot restore the workload's PodDisruptionBudget");
    if !lab_steady() {
        if !inference_on_prem() {
            kubectl(&["rollout", "restart", "deployment/llm-inference", "-n", "inference"]);
        }
        // The batch pods fall back to the Spot pool and stay there; a forced drain deleted the bare pod for good.
        if !batch_on_prem() {
            kubectl(&["rollout", "restart", "deployment/embeddings", "-n", "batch"]);
            kubectl(&["apply", "-f", repo().join("lab/manifests/45-batch.yaml").to_str().unwrap()]);
            kubectl(&["apply", "-f", repo().join("lab/manifests/47-statefulset.yaml").to_str().unwrap()]);
        }
        let home = || {
            rolled_out("inference", "llm-inference")
                && rolled_out("batch", "embeddings")
                && inference_on_prem()
                && batch_on_prem()
        };
        eventually("the lab's workloads back on-prem", Duration::from_secs(300), home);
        // The cloud capacity left behind goes at once: Karpenter would reclaim it by consolidation, consolidateAfter
        // and a validation pass later (20 to 40 s of a reset), which no test that follows asserts anything about.
        if !kubectl_json(&["get", "nodeclaims"])["items"].as_array().unwrap().is_empty() {
            kubectl(&["delete", "nodeclaims", "--all", "--wait=false"]);
        }
        eventually("the lab's steady state (workloads on-prem, no NodeClaim)", Duration::from_secs(300), lab_steady);
    }
}

/// Gives back every instance type lab/capacity lists as out: one a test took away and never gave back (a drill
/// killed before its rollback) would leave every later test on this instance without it. Given back, it is usable at
/// once: the lab's Karpenter forgets its 3-minute cache of a type that ran out when the type is no longer listed.
fn give_back_capacity() {
    let listed = lab_tool("capacity").output().unwrap();
    for instance_type in String::from_utf8_lossy(&listed.stdout).split_whitespace() {
        let out = lab_tool("capacity").args(["available", instance_type]).output().unwrap();
        assert!(
            out.status.success(),
            "lab/capacity available {instance_type}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A child process killed (and reaped) when dropped unless taken: a test that fails first never leaves it running.
pub struct KillOnDrop(Option<std::process::Child>);

impl KillOnDrop {
    pub fn new(child: std::process::Child) -> KillOnDrop {
        KillOnDrop(Some(child))
    }

    pub fn take(&mut self) -> std::process::Child {
        self.0.take().expect("the child was taken already")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
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
    let pid_file = run_dir_of(instance()).join("pids").join("karpenter.pid");
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
        let out = lab_tool("capacity").args([state, instance_type]).output().unwrap();
        assert!(out.status.success(), "lab/capacity {state} {instance_type}: {}", String::from_utf8_lossy(&out.stderr));
    };
    capacity("none", instance_type);
    let instance_type = instance_type.to_string();
    Repair(move || capacity("available", &instance_type))
}

/// Runs `hybrid-drill recover RUN_DIR` from the repository root (where the lab drills' hooks are): its exit code and
/// everything it printed.
pub fn recover(run_dir: &Path) -> (i32, String) {
    let out = hybrid_drill().arg("recover").arg(run_dir).arg("--kubeconfig").arg(kubeconfig()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// Checks every milestone of a run against the lab API server's audit log with scripts/fidelity, printing its table:
/// each must map to the audit event that made it true, its tool clock within a second of that event and its server
/// clock within the script's bound (a write may land up to 3 s after the stamp it carries: under the suite's load a
/// controller's status patch can be retried after a conflict). No exception: a milestone unmapped or out of bounds fails the test. How close the
/// tool's clock comes (100 ms on a quiet lab) is a benchmark figure (`scripts/bench versus`), not an assertion: with
/// the suite's labs side by side on 2 cores a watch event arrives up to a quarter of a second after its answer.
pub fn assert_fidelity(run_dir: &std::path::Path) {
    let audit = run_dir_of(instance()).join("logs").join("audit.log");
    let out = Command::new(repo().join("scripts/fidelity"))
        .args(["--tool-bound-ms", "1000", "--write-lag-s", "3"])
        .arg(run_dir)
        .arg(&audit)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("scripts/fidelity {}:\n{stdout}", run_dir.display());
    assert!(
        out.status.success(),
        "the report disagrees with the audit log (every milestone must map, within its bound)\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes (not reads) the lab's admin made, from the audit log's line `from` on: the tool and the tests act as it.
pub fn admin_writes(instance: u32, from: usize) -> Vec<String> {
    let log = std::fs::read_to_string(run_dir_of(instance).join("logs/audit.log")).unwrap_or_default();
    log.lines()
        .skip(from)
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && e["user"]["username"] == "hybrid-lab-admin")
        .filter(|e| {
            ["create", "update", "patch", "delete", "deletecollection"].contains(&e["verb"].as_str().unwrap_or(""))
        })
        .map(|e| format!("{} {}", e["verb"].as_str().unwrap(), e["requestURI"].as_str().unwrap()))
        .collect()
}

pub fn audit_lines(instance: u32) -> usize {
    std::fs::read_to_string(run_dir_of(instance).join("logs/audit.log")).map_or(0, |log| log.lines().count())
}
