//! End-to-end: the drain drill's collateral. The drain also displaces `batch/embeddings` (Spot only), which Karpenter
//! puts on a NodeClaim of `gpu-spot`, a pool outside the drill's fallback. The drill names it before the fault,
//! follows that NodeClaim, returns the workload and waits for the Spot NodeClaim to go.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use serde_json::Value;

use crate::common::lab::{drill_run, hybrid_drill, kubeconfig, kubectl_json, lock_lab, reset_lab};
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

fn timeline(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("timeline.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn nodeclaims() -> Vec<Value> {
    kubectl_json(&["get", "nodeclaims"])["items"].as_array().cloned().unwrap_or_default()
}

/// The drain drill, holding its return until the batch pods run on the Spot pool: the fallback for inference can be
/// Ready before Karpenter has launched the Spot NodeClaim, and pods still Pending at the return go home by themselves
/// once on-prem is uncordoned (nothing to return, no `collateral-returned`).
fn batch_on_spot_before_the_return(dir: &Path) -> PathBuf {
    let source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    let at = source.find("    # Uncordon on-prem, then a rollout restart").unwrap();
    let kubeconfig = kubeconfig();
    let wait = format!(
        "    - id: batch-on-spot\n      exec:\n        command: [kubectl, --kubeconfig, \"{}\", wait, -n, batch, \
         --for=condition=Ready, pod, -l, app=embeddings, --timeout=3m]\n      timeout: 4m\n",
        kubeconfig.display()
    );
    let path = dir.join("drain.yaml");
    std::fs::write(&path, format!("{}{wait}{}", &source[..at], &source[at..])).unwrap();
    path
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

    let (drills, reports) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (out, report, dir) = run(&batch_on_spot_before_the_return(drills.path()), reports.path());
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
