//! End-to-end: the drain drill's collateral. The drain also displaces `batch/embeddings` (Spot only), which Karpenter
//! puts on a NodeClaim of `gpu-spot`, a pool outside the drill's fallback. The drill names it before the fault,
//! follows that NodeClaim, returns the workload and waits for the Spot NodeClaim to go.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::lab::{
    Repair, drill_run, eventually, hybrid_drill, kubeconfig, kubectl_json, kubectl_quiet, lock_lab, reset_lab,
};
use crate::common::repo;

/// Runs the drill; its output, report.json (stdout) and run directory.
fn run(file: &Path, reports: &Path) -> (Output, Value, PathBuf) {
    let out = drill_run(file, reports, kubeconfig()).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        panic!("no report on stdout ({e}), {}; stdout:\n{stdout}\nstderr:\n{stderr}", out.status)
    });
    let drill = std::fs::read_dir(reports).unwrap().flatten().next().unwrap().path();
    let dir = std::fs::read_dir(drill).unwrap().flatten().next().unwrap().path();
    (out, report, dir)
}

/// Runs the drill as a person would, its progress in plain lines on stderr (the live output); report.json and the
/// run directory from the run directory.
fn run_live(file: &Path, reports: &Path) -> (Output, Value, PathBuf) {
    let out = hybrid_drill()
        .arg("run")
        .arg(file)
        .args(["--yes", "--allow-commands", "--reports-dir"])
        .arg(reports)
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .output()
        .unwrap();
    let drill = std::fs::read_dir(reports).unwrap().flatten().next().unwrap().path();
    let dir = std::fs::read_dir(drill).unwrap().flatten().next().unwrap().path();
    let report = serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    (out, report, dir)
}

fn timeline(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("timeline.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn nodeclaims() -> Vec<Value> {
    kubectl_json(&["get", "nodeclaims"])["items"].as_array().cloned().unwrap_or_default()
}

/// The drain drill with `spec` added to its spec and `steps` before its return. `kubectl` in a step runs against the
/// held lab instance ({kubectl} in `steps` stands for it and its kubeconfig).
fn drain_with(dir: &Path, spec: &str, steps: &str) -> PathBuf {
    let source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    let kubectl = format!("kubectl, --kubeconfig, \"{}\"", kubeconfig().display());
    let steps = steps.replace("{kubectl}", &kubectl);
    let at = source.find("    # Uncordon on-prem, then a rollout restart").unwrap();
    let with_steps = format!("{}{steps}{}", &source[..at], &source[at..]);
    let at = with_steps.find("\n  steps:\n").unwrap() + 1;
    let path = dir.join("drain.yaml");
    std::fs::write(&path, format!("{}{spec}{}", &with_steps[..at], &with_steps[at..])).unwrap();
    path
}

/// A step holding the return until the batch pods run on the Spot pool: the fallback for inference can be Ready
/// before Karpenter has launched the Spot NodeClaim, and pods still Pending at the return go home by themselves once
/// on-prem is uncordoned (nothing to return).
const BATCH_ON_SPOT: &str = "    - id: batch-on-spot
      exec:
        command: [{kubectl}, wait, -n, batch, --for=condition=Ready, pod, -l, app=embeddings, --timeout=3m]
      timeout: 4m
";

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

    let (drills, reports) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (out, report, dir) = run(&drain_with(drills.path(), "", BATCH_ON_SPOT), reports.path());
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
        .filter(|e| e["type"] == "collateral-node-claim" && e["claim"]["node_pool"] == "gpu-spot")
        .collect();
    // Karpenter may make more than one Spot NodeClaim for the batch job (one per launch it retries or replaces):
    // each is followed from its creation to its deletion.
    let mut by_claim: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for e in &spot {
        by_claim.entry(e["claim"]["name"].as_str().unwrap()).or_default().push(e["milestone"].as_str().unwrap());
    }
    assert!(!by_claim.is_empty(), "no Spot NodeClaim followed: {spot:#?}");
    for (claim, milestones) in &by_claim {
        assert_eq!(milestones.first(), Some(&"created"), "{claim}: {milestones:?}");
        assert_eq!(milestones.last(), Some(&"deleted"), "{claim}: {milestones:?}");
    }
    let initialized = spot.iter().find(|e| e["milestone"] == "initialized").expect("a Spot NodeClaim initialized");
    assert_eq!(initialized["claim"]["capacity_type"], "spot", "{initialized:#}");
    let returned = events.iter().find(|e| e["type"] == "collateral-returned").expect("a collateral-returned event");
    assert_eq!((&returned["workload"], &returned["restarted"]), (&"batch/embeddings".into(), &true.into()));
    // The reclaim waited for the Spot NodeClaim: it was gone before the run ended.
    assert!(nodeclaims().is_empty(), "NodeClaims left: {:#?}", nodeclaims());
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## Collateral and leftovers") && md.contains("left behind: nothing"), "{md}");
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn embeddings_the_drill_leaves_on_the_spot_pool_are_named_as_expected_and_the_drill_exits_4() {
    let _lab = lock_lab();
    reset_lab();
    let (drills, reports) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A batch job its owner will not have interrupted: Karpenter would otherwise consolidate its Spot node away once
    // on-prem is back, leaving nothing to account for.
    let uninterrupted = format!(
        "{BATCH_ON_SPOT}    - id: batch-uninterrupted\n      exec:\n        command: [{{kubectl}}, annotate, pods, -n, batch, \
         -l, app=embeddings, karpenter.sh/do-not-disrupt=true]\n"
    );
    let file = drain_with(drills.path(), "  collateral:\n    leave: [batch/embeddings]\n", &uninterrupted);
    let (out, report, dir) = run_live(&file, reports.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "report: {report:#}\nstderr:\n{stderr}");
    assert_eq!(report["outcome"], "left-behind", "{report:#}");
    let leftovers = report["leftovers"].as_array().unwrap();
    let spot = leftovers
        .iter()
        .find(|l| l["object"].as_str().is_some_and(|o| o.starts_with("NodeClaim gpu-spot-")))
        .unwrap_or_else(|| panic!("no Spot NodeClaim among the leftovers: {leftovers:#?}"));
    assert_eq!(spot["expected"], true, "{spot:#}");
    let claim = spot["object"].as_str().unwrap();
    assert!(nodeclaims().iter().any(|c| format!("NodeClaim {}", c["metadata"]["name"].as_str().unwrap()) == claim));
    let returned = timeline(&dir).into_iter().find(|e| e["type"] == "collateral-returned").unwrap();
    assert_eq!(returned["restarted"], false, "{returned:#}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(&format!("expected: {claim}")), "{md}");
    assert!(stderr.contains(&format!("expected: {claim}")), "the live output does not name {claim}:\n{stderr}");
    assert_no_nameless_event(&stderr, &dir);
    // The Spot NodeClaim is the test's to clean up: the drill left it on purpose.
    reset_lab();
}

/// A pod with karpenter.sh/do-not-disrupt on a fallback node holds its reclaim: the wait names it, and the report.
#[test]
fn a_do_not_disrupt_pod_on_a_fallback_node_is_named_as_what_holds_the_reclaim() {
    let _lab = lock_lab();
    reset_lab();
    let (drills, reports) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let pod = drills.path().join("pinned.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pinned-job\n  namespace: default\n  annotations:\n    \
         karpenter.sh/do-not-disrupt: \"true\"\nspec:\n  nodeSelector:\n    karpenter.sh/nodepool: gpu-fallback\n  \
         tolerations: [{operator: Exists}]\n  containers: [{name: job, image: pinned-job}]\n",
    )
    .unwrap();
    // Gone at once, before the reset deletes its node: a pod left Terminating on a deleted node lingers until the
    // pod garbage collector's next pass, and shows up in whatever the next test on this instance reads.
    let remove_pinned = || {
        kubectl_quiet(&[
            "delete",
            "pod",
            "pinned-job",
            "-n",
            "default",
            "--ignore-not-found",
            "--force",
            "--grace-period=0",
        ]);
    };
    let _cleanup = Repair(remove_pinned);
    let steps = format!(
        "    - id: pin\n      exec:\n        command: [{{kubectl}}, apply, -f, \"{}\"]\n    - id: pinned\n      exec:\n        \
         command: [{{kubectl}}, wait, -n, default, --for=condition=Ready, pod/pinned-job, --timeout=2m]\n      \
         timeout: 3m\n",
        pod.display()
    );
    let file = drain_with(drills.path(), "", &steps);
    let source = std::fs::read_to_string(&file).unwrap();
    let reclaim = "      waitFor: fallback-empty\n      timeout: 30m\n";
    assert!(source.contains(reclaim));
    std::fs::write(&file, source.replace(reclaim, "      waitFor: fallback-empty\n      timeout: 45s\n")).unwrap();
    let (out, report, dir) = run_live(&file, reports.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "report: {report:#}\nstderr:\n{stderr}");
    let blockers = report["reclaim_blockers"].as_array().unwrap();
    assert!(
        blockers.iter().any(|b| b["object"] == "pod default/pinned-job" && b["cause"] == "do-not-disrupt"),
        "{blockers:#?}"
    );
    assert!(stderr.contains("pod default/pinned-job"), "the live output does not name the blocker:\n{stderr}");
    assert_reclaim_line_agrees(&stderr);
    assert_no_nameless_event(&stderr, &dir);
    // Only what held the reclaim: nothing Karpenter said before the reclaim began (the fallback at work then).
    let reclaim_from =
        report["phases"].as_array().unwrap().iter().find(|p| p["name"] == "reclaim").unwrap()["from"]["t_ms"]
            .as_f64()
            .unwrap()
            / 1000.0;
    for b in blockers {
        assert!(b["t_seconds"].as_f64().unwrap() >= reclaim_from, "before the reclaim (+{reclaim_from}s): {b:#}");
    }
    // Named within seconds of Karpenter's own event on the node (when Karpenter gave one), or of the reclaim's start
    // when Karpenter, which weighs the emptied node as soon as the workload leaves it, spoke before.
    let events = timeline(&dir);
    let at = |e: &Value| chrono::DateTime::parse_from_rfc3339(e["received"].as_str().unwrap()).unwrap();
    let blocked = events
        .iter()
        .find(|e| e["type"] == "reclaim-blocked" && e["object"] == "pod default/pinned-job")
        .expect("a reclaim-blocked event");
    let named = at(blocked);
    let reclaim = at(events.iter().find(|e| e["type"] == "step-started" && e["step"] == "reclaim").unwrap());
    let node = blocked["node"].as_str().unwrap().to_string();
    let events = kubectl_json(&["get", "events", "-A", "--field-selector", "reason=DisruptionBlocked"]);
    for event in events["items"].as_array().unwrap().iter().filter(|e| e["involvedObject"]["name"] == node.as_str()) {
        let karpenter = event["firstTimestamp"].as_str().or(event["eventTime"].as_str()).unwrap();
        let karpenter = chrono::DateTime::parse_from_rfc3339(karpenter).unwrap();
        let since = karpenter.max(reclaim);
        assert!(
            (named - since).num_seconds() <= 10,
            "named at {named}, Karpenter's event at {karpenter}, the reclaim started at {reclaim}"
        );
    }
    remove_pinned();
    eventually("the pinned pod gone", Duration::from_secs(30), || {
        let pods = kubectl_json(&["get", "pods", "-n", "default"]);
        !pods["items"].as_array().unwrap().iter().any(|p| p["metadata"]["name"] == "pinned-job")
    });
    reset_lab();
}

/// The reclaim's live lines agree with themselves: a line that lists the drill's NodeClaims in the fallback lists as
/// many as the fallback's count before it (once the count has settled: the last line), and none says the fallback
/// holds 0 NodeClaims while naming some of its NodeClaims as running.
fn assert_reclaim_line_agrees(stderr: &str) {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("waiting for fallback-empty: the fallback still holds "))
        .collect();
    assert!(!lines.is_empty(), "no live line of the reclaim:\n{stderr}");
    let listed = |line: &str| -> Option<usize> {
        let names = line.split("; the drill's NodeClaims in the fallback, not yet gone: ").nth(1)?;
        let names = names.split("; ").next().unwrap();
        Some(names.matches(" (gpu-fallback").count())
    };
    for line in &lines {
        assert!(!line.contains("still running:"), "the old, self-contradicting wording: {line}");
        let held: usize = line["waiting for fallback-empty: the fallback still holds ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if held == 0 {
            assert_eq!(listed(line).unwrap_or(0), 0, "holds 0 yet names the fallback's NodeClaims: {line}");
        }
    }
    let last = lines.last().unwrap();
    let held = last["waiting for fallback-empty: the fallback still holds ".len()..].split(' ').next().unwrap();
    assert_eq!(listed(last).map(|n| n.to_string()).as_deref(), Some(held), "the last reclaim line: {last}");
}

/// No event reads `on NodeClaim/:` (an object without its name). Karpenter's `Finalized` events name no object at all
/// (their involvedObject has only apiVersion and kind, not even a uid): the live output says so in words; an event
/// that names its object by uid alone keeps the uid.
fn assert_no_nameless_event(stderr: &str, dir: &Path) {
    for line in stderr.lines().filter(|l| l.contains("] event ")) {
        assert!(!line.contains("/: "), "an event without its object's name: {line}");
    }
    for event in timeline(dir).iter().filter(|e| e["type"] == "kube-event") {
        let object = event["object"].as_str().unwrap();
        if let Some(kind) = object.strip_suffix('/') {
            let said = format!("event {} on a {kind} it does not name: ", event["reason"].as_str().unwrap());
            assert!(stderr.contains(&said), "{event:#} not said as `{said}`:\n{stderr}");
        }
    }
}
