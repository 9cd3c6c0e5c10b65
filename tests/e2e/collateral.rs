//! End-to-end: the drain drill's collateral. The drain also displaces `batch/embeddings` (Spot only), which Karpenter
//! puts on a NodeClaim of `gpu-spot`, a pool outside the drill's fallback. The drill names it before the fault,
//! follows that NodeClaim, returns the workload and waits for the Spot NodeClaim; a drill that leaves it there names
//! the NodeClaim as an expected leftover and exits 4; a pod with `karpenter.sh/do-not-disrupt` on the Spot node is
//! named as the reclaim's blocker within seconds, and the NodeClaim it holds as a leftover.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::lab::{
    Repair, drill_run, eventually, hybrid_drill, kubeconfig, kubectl_apply, kubectl_json, kubectl_quiet, lock_lab,
    reset_lab,
};
use crate::common::repo;

/// The lab's drain drill with some text replaced, in `dir`.
fn drain_variant(dir: &Path, edits: &[(&str, &str)]) -> PathBuf {
    let mut source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    for (from, to) in edits {
        assert!(source.contains(from), "drills/drain.yaml lacks {from:?}");
        source = source.replacen(from, to, 1);
    }
    let path = dir.join("drill.yaml");
    std::fs::write(&path, source).unwrap();
    path
}

/// Runs the drill; its output, report.json (stdout) and run directory.
fn run(file: &Path, reports: &Path) -> (Output, Value, PathBuf) {
    let out = drill_run(file, reports, kubeconfig()).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
    let drill = std::fs::read_dir(reports).unwrap().flatten().next().unwrap().path();
    let dir = std::fs::read_dir(drill).unwrap().flatten().next().unwrap().path();
    (out, report, dir)
}

fn timeline(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("timeline.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn nodeclaims() -> Vec<Value> {
    kubectl_json(&["get", "nodeclaims"])["items"].as_array().cloned().unwrap_or_default()
}

/// The lab at rest again after a test that leaves the batch job on Spot: `reset_lab` restarts it and waits for the
/// Spot NodeClaim to go, even when an assertion failed first.
fn back_to_rest() -> Repair<impl FnMut()> {
    Repair(|| {
        kubectl_quiet(&["delete", "job", "keeper", "-n", "batch", "--ignore-not-found"]);
        reset_lab();
    })
}

#[test]
fn the_drain_drill_names_its_collateral_brings_it_home_and_ends_with_no_nodeclaim_in_any_pool() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let plan = hybrid_drill()
        .arg("plan")
        .arg(repo().join("drills/drain.yaml"))
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&plan.stdout).into_owned() + &String::from_utf8_lossy(&plan.stderr);
    assert!(
        plan.contains(
            "batch/embeddings: 2 pods, 4 GPUs -> gpu-spot (spot, no GPU limit); cannot use gpu-fallback (requires \
             karpenter.sh/capacity-type NotIn on-demand)"
        ),
        "{plan}"
    );
    assert!(
        plan.contains("inference/llm-inference: 4 pods, 16 GPUs -> gpu-fallback (on-demand, GPU limit 16)"),
        "{plan}"
    );

    let reports = tempfile::tempdir().unwrap();
    let (out, report, dir) = run(&repo().join("drills/drain.yaml"), reports.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "report: {report:#}\nstderr:\n{stderr}");
    assert_eq!(report["leftovers"], serde_json::json!([]), "{report:#}");
    let collateral: Vec<&str> =
        report["collateral"].as_array().unwrap().iter().filter_map(|b| b["workload"].as_str()).collect();
    assert!(collateral.contains(&"batch/embeddings"), "{collateral:?}");
    assert!(!collateral.contains(&"inference/llm-inference"), "the drilled workload is not collateral: {collateral:?}");

    let events = timeline(&dir);
    let spot: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "collateral-node-claim" && e["nodeclaim"]["node_pool"] == "gpu-spot")
        .collect();
    let milestones: Vec<&str> = spot.iter().filter_map(|e| e["milestone"].as_str()).collect();
    assert_eq!(milestones, ["created", "initialized", "deleted"], "{spot:#?}");
    assert_eq!(spot[1]["nodeclaim"]["capacity_type"], "spot", "{spot:#?}");
    let returned = events.iter().find(|e| e["type"] == "collateral-returned").expect("a collateral-returned event");
    assert_eq!((&returned["workload"], &returned["restarted"]), (&"batch/embeddings".into(), &true.into()));
    // The reclaim waited for the Spot NodeClaim: it was gone before the run ended.
    assert!(nodeclaims().is_empty(), "NodeClaims left: {:#?}", nodeclaims());
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## Collateral and leftovers") && md.contains("left behind: nothing"), "{md}");
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn a_drill_that_leaves_the_batch_job_on_spot_names_its_nodeclaim_as_expected_and_exits_4() {
    let _lab = lock_lab();
    reset_lab();
    let _rest = back_to_rest();
    let started = Instant::now();
    let scratch = tempfile::tempdir().unwrap();
    let file =
        drain_variant(scratch.path(), &[("  steps:\n", "  collateral:\n    leave: [batch/embeddings]\n  steps:\n")]);
    let (out, report, dir) = run(&file, &scratch.path().join("reports"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "report: {report:#}\nstderr:\n{stderr}");
    assert_eq!(report["outcome"], "left-behind", "{report:#}");
    let leftovers = report["leftovers"].as_array().unwrap();
    let claim = leftovers.iter().find(|l| l["kind"] == "node-claim").unwrap_or_else(|| panic!("{leftovers:#?}"));
    assert_eq!((&claim["nodeclaim"]["node_pool"], &claim["expected"]), (&"gpu-spot".into(), &true.into()), "{claim:#}");
    let name = claim["nodeclaim"]["name"].as_str().unwrap();
    assert!(claim["pods"].as_array().unwrap().iter().all(|p| p.as_str().unwrap().starts_with("batch/embeddings-")));
    assert!(nodeclaims().iter().any(|c| c["metadata"]["name"] == name), "the leftover is the running NodeClaim");
    assert!(stderr.contains(&format!("expected: NodeClaim {name}: {name} (gpu-spot")), "{stderr}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("**expected: NodeClaim {name}")) && md.contains("LEFT CLOUD CAPACITY RUNNING"),
        "{md}"
    );
    let returned = timeline(&dir).into_iter().find(|e| e["type"] == "collateral-returned").unwrap();
    assert_eq!(returned["restarted"], false, "{returned:#}");
    eprintln!("held the lab {:.0} s (the clean-up follows)", started.elapsed().as_secs_f64());
}

/// A Job on the hybrid nodes, Spot only like the batch job, whose pod carries `karpenter.sh/do-not-disrupt`: a Job
/// has no rollout restart, so the return cannot bring it home, and its Spot node cannot be consolidated.
const KEEPER: &str = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: keeper, namespace: batch}
spec:
  template:
    metadata:
      labels: {app: keeper}
      annotations: {karpenter.sh/do-not-disrupt: "true"}
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: karpenter.sh/capacity-type, operator: NotIn, values: [on-demand]}]
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              preference: {matchExpressions: [{key: eks.amazonaws.com/compute-type, operator: In, values: [hybrid]}]}
      containers:
        - name: keeper
          image: stand-in/keeper:lab
          resources: {requests: {cpu: 100m, memory: 64Mi}}
"#;

#[test]
fn a_do_not_disrupt_pod_on_the_spot_node_is_named_as_the_reclaim_blocker_and_its_nodeclaim_as_a_leftover() {
    let _lab = lock_lab();
    reset_lab();
    let _rest = back_to_rest();
    kubectl_apply(KEEPER);
    let hybrid = crate::common::lab::hybrid_nodes();
    eventually("the keeper Job's pod Running on a hybrid node", Duration::from_secs(60), || {
        let pods = kubectl_json(&["get", "pods", "-n", "batch", "-l", "app=keeper"]);
        pods["items"].as_array().unwrap().iter().any(|p| {
            p["status"]["phase"] == "Running" && hybrid.iter().any(|h| p["spec"]["nodeName"].as_str() == Some(h))
        })
    });
    let started = Instant::now();
    let scratch = tempfile::tempdir().unwrap();
    // The reclaim waits 30 s for the Spot node the keeper holds, then times out: the blocker must be named by then.
    let file = drain_variant(
        scratch.path(),
        &[("      waitFor: fallback-empty\n      timeout: 30m", "      waitFor: fallback-empty\n      timeout: 30s")],
    );
    let (out, report, dir) = run(&file, &scratch.path().join("reports"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "the reclaim timed out: report: {report:#}\nstderr:\n{stderr}");
    let blockers = report["reclaim_blockers"].as_array().unwrap();
    let keeper = blockers
        .iter()
        .find(|b| b["cause"] == "do-not-disrupt" && b["object"].as_str().unwrap().starts_with("pod batch/keeper-"))
        .unwrap_or_else(|| panic!("no do-not-disrupt blocker: {blockers:#?}"));
    let events = timeline(&dir);
    let reclaim_started = events
        .iter()
        .find(|e| e["type"] == "step-started" && e["step"] == "reclaim")
        .and_then(|e| e["t_ms"].as_f64())
        .unwrap();
    let named_after = keeper["t_seconds"].as_f64().unwrap() - reclaim_started / 1000.0;
    assert!(named_after < 10.0, "the blocker was named {named_after:.1} s into the reclaim");
    assert!(stderr.contains("do-not-disrupt"), "the live line names the blocker: {stderr}");
    let leftovers = report["leftovers"].as_array().unwrap();
    let claim = leftovers
        .iter()
        .find(|l| l["kind"] == "node-claim" && l["nodeclaim"]["node_pool"] == "gpu-spot")
        .unwrap_or_else(|| panic!("no Spot leftover: {leftovers:#?}"));
    assert_eq!(claim["expected"], false, "{claim:#}");
    assert!(claim["pods"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().starts_with("batch/keeper-")));
    let name = claim["nodeclaim"]["name"].as_str().unwrap();
    assert!(stderr.contains(&format!("LEFTOVER: NodeClaim {name}")), "{stderr}");
    eprintln!("held the lab {:.0} s (the clean-up follows)", started.elapsed().as_secs_f64());
}
