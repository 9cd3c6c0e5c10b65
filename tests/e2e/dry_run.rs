//! `plan -o json` and `run --dry-run -o json` against the lab: one plan in one JSON shape with one exit code, and
//! nothing written (the API server's audit log, no run directory); the production template refused, then run, there.

use std::process::Output;

use serde_json::Value;

use crate::common::lab::{
    admin_writes, audit_lines, cordoned_or_marked, eventually, hybrid_drill, kubeconfig, kubectl_json, kubectl_quiet,
    lock_lab, reset_lab,
};
use crate::common::repo;

fn json_of(what: &str, out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn plan_and_run_dry_run_print_one_plan_as_json_and_write_nothing() {
    let lab = lock_lab();
    reset_lab();
    let reports = tempfile::tempdir().unwrap();
    let drill = repo().join("drills/drain.yaml");
    let from = audit_lines(lab.instance());
    let plan = hybrid_drill().arg("plan").arg(&drill).args(["-o", "json", "--kubeconfig"]).arg(kubeconfig()).output();
    let dry_run = hybrid_drill()
        .arg("run")
        .arg(&drill)
        .args(["--dry-run", "-o", "json", "--reports-dir"])
        .arg(reports.path())
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .output();
    let (plan, dry_run) = (plan.unwrap(), dry_run.unwrap());
    assert_eq!(plan.status.code(), Some(0), "{}", String::from_utf8_lossy(&plan.stderr));
    assert_eq!(dry_run.status.code(), plan.status.code(), "{}", String::from_utf8_lossy(&dry_run.stderr));
    let (planned, dry) = (json_of("plan", &plan), json_of("run --dry-run", &dry_run));

    assert_eq!(planned["schema"], "hybrid-drill.io/plan/v1", "{planned:#}");
    assert_eq!((planned["drill"].as_str(), planned["refused"].as_bool()), (Some("onprem-gpu-drain"), Some(false)));
    assert_eq!(planned["nodes"].as_array().map(Vec::len), Some(4), "the lab's four hybrid nodes: {planned:#}");
    let evicted = planned["pods_to_evict"].as_array().unwrap();
    assert!(
        evicted.iter().filter(|p| p["namespace"] == "inference").count() == 4,
        "the workload's four pods are to be evicted: {planned:#}"
    );
    assert_eq!(planned["preflight"]["verdict"], "pass", "{planned:#}");
    assert!(planned["text"].as_str().unwrap().ends_with("nothing was changed\n"), "{planned:#}");
    for field in ["schema", "drill", "nodes", "pods_to_evict", "node_pool", "steps", "refused"] {
        assert_eq!(dry[field], planned[field], "run --dry-run's {field} differs from plan's");
    }

    // A SelfSubjectAccessReview is a create that stores nothing: the permission check both make before reading.
    let writes: Vec<String> =
        admin_writes(lab.instance(), from).into_iter().filter(|w| !w.contains("/selfsubjectaccessreviews")).collect();
    assert_eq!(writes, Vec::<String>::new(), "plan or run --dry-run wrote to the cluster");
    assert_eq!(std::fs::read_dir(reports.path()).unwrap().count(), 0, "run --dry-run made a run directory");
}

/// drills/template.yaml, the file the Quick start copies, pointed at the lab (its context alone changed): it validates;
/// production-safe, it refuses what kubectl drain refuses without flags: `plan` and `run` name the lab's bare pod and
/// its pod with emptyDir data, exit 5, and touch nothing; once those pods are moved it runs and passes as written. The
/// lab's own drills/drain.yaml is the same drill with `force` and `deleteEmptyDirData` set.
#[test]
fn the_production_template_refuses_what_kubectl_drain_refuses_and_passes_once_those_pods_are_moved() {
    let lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(repo().join("drills/template.yaml")).unwrap();
    let settings: Vec<&str> = source.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
    assert!(
        !settings.iter().any(|l| l.contains("force: true") || l.contains("deleteEmptyDirData: true")),
        "the template sets a flag that loses pods"
    );
    let file = dir.path().join("my-drain.yaml");
    std::fs::write(&file, source.replace("context: prod-eks", "context: hybrid-lab")).unwrap();
    let validate = hybrid_drill().arg("validate").arg(&file).output().unwrap();
    assert_eq!(validate.status.code(), Some(0), "{}", String::from_utf8_lossy(&validate.stderr));
    let from = audit_lines(lab.instance());
    let refusal = "the drain of step `drain` would evict pods kubectl drain refuses without a flag: batch/gpu-burn-in \
                   on hybrid-gpu-3 (no controller: it will be lost; allow with `force: true`); batch/feature-cache-";
    let plan = hybrid_drill().arg("plan").arg(&file).args(["-o", "json", "--kubeconfig"]).arg(kubeconfig()).output();
    let plan = plan.unwrap();
    assert_eq!(plan.status.code(), Some(5), "{}", String::from_utf8_lossy(&plan.stderr));
    let planned = json_of("plan", &plan);
    assert!(planned["error"].as_str().unwrap().starts_with(refusal), "{planned:#}");
    let reports = tempfile::tempdir().unwrap();
    let run = hybrid_drill()
        .arg("run")
        .arg(&file)
        .args(["--yes", "-o", "json", "--reports-dir"])
        .arg(reports.path())
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(5), "{}", String::from_utf8_lossy(&run.stderr));
    let refused = json_of("run", &run);
    let error = refused["error"].as_str().unwrap();
    assert!(error.starts_with(refusal), "{refused:#}");
    assert!(
        error.contains("(its emptyDir data (scratch) will be deleted; allow with `deleteEmptyDirData: true`)"),
        "{error}"
    );
    assert_eq!(refused["exit_code"], 5, "{refused:#}");
    assert!(cordoned_or_marked().is_empty(), "a refused drill touched nodes: {:?}", cordoned_or_marked());
    let writes: Vec<String> =
        admin_writes(lab.instance(), from).into_iter().filter(|w| !w.contains("/selfsubjectaccessreviews")).collect();
    assert_eq!(writes, Vec::<String>::new(), "the refused template wrote to the cluster");

    // Those two pods moved first, as the template's comment asks of an operator, it runs as written and passes, with
    // no safety relaxed by the drill file.
    assert!(kubectl_quiet(&["delete", "pod", "gpu-burn-in", "-n", "batch", "--wait=true"]));
    assert!(kubectl_quiet(&["scale", "deployment/feature-cache", "-n", "batch", "--replicas=0"]));
    eventually("feature-cache's pod gone", std::time::Duration::from_secs(60), || {
        kubectl_json(&["get", "pods", "-n", "batch", "-l", "app=feature-cache"])["items"]
            .as_array()
            .is_some_and(Vec::is_empty)
    });
    let run = hybrid_drill()
        .arg("run")
        .arg(&file)
        .args(["--yes", "-o", "json", "--reports-dir"])
        .arg(reports.path())
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .output()
        .unwrap();
    let report = json_of("run", &run);
    assert_eq!(run.status.code(), Some(0), "{report:#}\n{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(report["outcome"], "passed", "{report:#}");
    let relaxed =
        report["deviations"].as_array().unwrap().iter().filter(|d| d["kind"].as_str().unwrap().contains("safety"));
    assert_eq!(relaxed.count(), 0, "{:#}", report["deviations"]);
    // reset_lab puts the bare pod and the feature cache back (lab/manifests/45-batch.yaml).
    reset_lab();
}
