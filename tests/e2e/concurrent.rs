//! Two lab instances side by side: a drill on one changes nothing on the other, which is what lets the end-to-end
//! tests run on several instances at once, and a run's recover acts on its own cluster alone.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use crate::common::lab::{
    admin_writes, audit_lines, cordoned_or_marked, drill_run, eventually, hybrid_drill, kubeconfig, lock_two_labs,
    on_instance, recover, reset_lab, run_dir_of, with_instance, workload_on_prem_and_fallback_empty,
};
use crate::common::repo;

fn kubectl_on(instance: u32, args: &[&str]) -> Value {
    let out = on_instance(&mut Command::new("kubectl"), instance).args(args).args(["-o", "json"]).output().unwrap();
    assert!(out.status.success(), "kubectl {args:?} on instance {instance}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What a drill would change on a lab, object by object: the nodes' schedulability, taints and marks, every pod of the
/// workloads by uid and node, the NodeClaims and the host policies. Heartbeats (status, resourceVersion) are left out:
/// kwok renews them all the time.
fn state_of(instance: u32) -> BTreeMap<String, String> {
    let mut state = BTreeMap::new();
    for node in kubectl_on(instance, &["get", "nodes"])["items"].as_array().unwrap() {
        let name = node["metadata"]["name"].as_str().unwrap();
        let marks: BTreeMap<&String, &Value> = node["metadata"]["annotations"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with("hybrid-drill.io/"))
            .collect();
        let view = format!(
            "unschedulable={} taints={} marks={marks:?}",
            node["spec"]["unschedulable"], node["spec"]["taints"]
        );
        state.insert(format!("node/{name}"), view);
    }
    for pod in kubectl_on(instance, &["get", "pods", "-A"])["items"].as_array().unwrap() {
        let meta = &pod["metadata"];
        let key = format!("pod/{}/{}", meta["namespace"].as_str().unwrap(), meta["name"].as_str().unwrap());
        state.insert(
            key,
            format!("uid={} node={} deleting={}", meta["uid"], pod["spec"]["nodeName"], meta["deletionTimestamp"]),
        );
    }
    let kinds = "nodeclaims,ciliumclusterwidenetworkpolicies.cilium.io,globalnetworkpolicies.crd.projectcalico.org";
    for object in kubectl_on(instance, &["get", kinds])["items"].as_array().unwrap() {
        state.insert(
            format!("{}/{}", object["kind"].as_str().unwrap(), object["metadata"]["name"].as_str().unwrap()),
            String::new(),
        );
    }
    state
}

/// [`state_of`] once two reads 15 s apart agree (at most about two minutes; the last read otherwise).
fn settled_state_of(instance: u32) -> BTreeMap<String, String> {
    let mut state = state_of(instance);
    for _ in 0..8 {
        std::thread::sleep(std::time::Duration::from_secs(15));
        let again = state_of(instance);
        if again == state {
            break;
        }
        state = again;
    }
    state
}

/// The lab's drain drill on the held instance, its report on stdout.
fn drain_drill(reports: &std::path::Path) -> Command {
    drill_run(repo().join("drills/drain.yaml"), reports, kubeconfig())
}

#[test]
fn a_drill_on_one_lab_instance_changes_nothing_on_another() {
    let (lab, other) = lock_two_labs();
    reset_lab();
    let (mine, theirs) = (lab.instance(), other.instance());
    // The other instance may have just finished its own smoke run or test, with its controllers still moving the
    // batch pods (Karpenter's consolidation, a rollout settling): take its state once it has stopped moving, so a
    // change seen after the drill is the drill's.
    with_instance(theirs, reset_lab);
    let before = settled_state_of(theirs);
    let (mine_from, theirs_from) = (audit_lines(mine), audit_lines(theirs));

    let reports = tempfile::tempdir().unwrap();
    let out = drain_drill(reports.path()).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let port = 26443 + 100 * mine;
    assert_eq!(
        report["cluster"]["server"],
        format!("https://127.0.0.1:{port}/"),
        "the drill ran against instance {mine}"
    );

    // The drill really acted on its own instance (the control), and not once on the other.
    let mine_writes = admin_writes(mine, mine_from);
    assert!(mine_writes.iter().any(|w| w.contains("/eviction")), "no eviction on instance {mine}: {mine_writes:?}");
    assert_eq!(admin_writes(theirs, theirs_from), Vec::<String>::new(), "writes on instance {theirs}");
    assert_eq!(state_of(theirs), before, "instance {theirs} changed during a drill on instance {mine}");
    eventually(
        "steady state after the drill",
        std::time::Duration::from_secs(120),
        workload_on_prem_and_fallback_empty,
    );
}

/// A run killed after its first cordon, recovered with the kubeconfig of another cluster that has the same context
/// name (as two clusters' kubeconfigs often do): refused, naming both, with nothing touched there; then recovered on
/// its own cluster.
#[test]
fn recover_refuses_a_run_of_another_cluster_with_the_same_context_and_touches_nothing_there() {
    let (lab, other) = lock_two_labs();
    reset_lab();
    let (mine, theirs) = (lab.instance(), other.instance());
    let reports = tempfile::tempdir().unwrap();
    // The drill lock is mutation 0, the first cordon 1.
    let out = drain_drill(reports.path()).env("HYBRID_DRILL_CRASH_AT", "1:after").output().unwrap();
    assert_eq!(out.status.code(), None, "the run should have died: {}", String::from_utf8_lossy(&out.stderr));
    let drill_dir = std::fs::read_dir(reports.path()).unwrap().flatten().next().unwrap().path();
    let run_dir = std::fs::read_dir(drill_dir).unwrap().flatten().next().unwrap().path();
    let recorded: Value = serde_json::from_slice(&std::fs::read(run_dir.join("cluster.json")).unwrap()).unwrap();
    let port = |instance: u32| format!("127.0.0.1:{}", 26443 + 100 * instance);
    assert!(recorded["server"].as_str().unwrap().contains(&port(mine)), "{recorded}");
    assert_eq!(recorded["kube_system_uid"], kubectl_on(mine, &["get", "namespace", "kube-system"])["metadata"]["uid"]);
    assert!(!cordoned_or_marked().is_empty(), "the dead run's cordon is gone before any recover");

    let (theirs_from, before) = (audit_lines(theirs), state_of(theirs));
    let out = hybrid_drill()
        .arg("recover")
        .arg(&run_dir)
        .arg("--kubeconfig")
        .arg(run_dir_of(theirs).join("kubeconfig"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let refusal = stderr.lines().find(|l| l.starts_with("error: run ")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        refusal.contains(&format!("was against context `hybrid-lab` at https://{}", port(mine)))
            && refusal.contains(&format!("but this is context `hybrid-lab` at https://{}", port(theirs)))
            && refusal.contains("nothing was touched"),
        "{refusal}"
    );
    assert_eq!(admin_writes(theirs, theirs_from), Vec::<String>::new(), "writes on instance {theirs}");
    assert_eq!(state_of(theirs), before, "instance {theirs} changed under a refused recover");
    assert!(!cordoned_or_marked().is_empty(), "the refused recover changed the run's own cluster");

    let (code, text) = recover(&run_dir);
    assert_eq!(code, 0, "{text}");
    assert!(cordoned_or_marked().is_empty(), "recover on the run's own cluster left {:?}", cordoned_or_marked());
    reset_lab();
}
