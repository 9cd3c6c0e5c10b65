//! End-to-end: deploy/'s manifests against the lab. Everything in deploy/ and deploy/watch/ passes the API server's
//! own checks (`kubectl apply --dry-run=server`: schemas, admission, Pod Security of the `restricted` namespace); the
//! viewer, bound to the read roles alone, plans and preflights every shipped drill and may change nothing; the
//! operators may change only what the run role and the admission policy let them (a drill as an operator is
//! tests/e2e/drills.rs's exec-plugin test).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::lab::{cordoned_or_marked, hybrid_drill, kubeconfig, kubectl, kubectl_apply, lock_lab, reset_lab};
use crate::common::repo;

/// What `kubectl rollout restart` (and a return step) patches into a Deployment; `rollout restart` has no dry run.
const RESTART: &str = r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-12-06T00:00:00Z"}}}}}"#;

/// The lab's viewer (user hybrid-lab-viewer, a client certificate): deploy/'s read roles only.
fn viewer_kubeconfig() -> PathBuf {
    kubeconfig().with_file_name("pki").join("hybrid-lab-viewer.kubeconfig")
}

/// The lab's operators (group hybrid-drill-operators, exec-plugin tokens): the read and run roles, restart and lock.
fn operator_kubeconfig() -> PathBuf {
    kubeconfig().with_file_name("kubeconfig-exec")
}

fn kubectl_as(config: &Path, args: &[&str]) -> Output {
    Command::new("kubectl").env("KUBECONFIG", config).args(args).output().expect("kubectl runs")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn drills() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("drills"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    files
}

/// `kubectl apply --dry-run=server` of every manifest in deploy/ and deploy/watch/, in the namespace deploy/ makes
/// (applied for real: its Pod Security labels judge the pod templates): every object accepted, no warning.
fn dry_run_deploy() {
    let namespace = std::fs::read_to_string(repo().join("deploy/namespace.yaml")).unwrap();
    kubectl_apply(namespace.split("\n---\n").next().unwrap());
    let (deploy, watch) = (repo().join("deploy"), repo().join("deploy/watch"));
    let out = kubectl_as(
        &kubeconfig(),
        &["apply", "--dry-run=server", "-f", deploy.to_str().unwrap(), "-f", watch.to_str().unwrap()],
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.trim().is_empty(), "warnings (Pod Security, deprecations):\n{stderr}");
    for object in [
        "namespace/hybrid-drill",
        "persistentvolumeclaim/hybrid-drill-reports",
        "cronjob.batch/hybrid-drill-quarterly",
        "cronjob.batch/hybrid-drill-recover",
        "deployment.apps/hybrid-drill-watch",
        "prometheusrule.monitoring.coreos.com/hybrid-drill",
        "networkpolicy.networking.k8s.io/hybrid-drill-ingress",
        "validatingadmissionpolicy.admissionregistration.k8s.io/hybrid-drill-cut-policies",
        "clusterrole.rbac.authorization.k8s.io/hybrid-drill-read",
        "role.rbac.authorization.k8s.io/hybrid-drill-restart",
        "role.rbac.authorization.k8s.io/hybrid-drill-watch",
    ] {
        assert!(stdout.contains(&format!("{object} ")), "deploy/ lacks {object}:\n{stdout}");
    }
    let documents: usize = ["deploy", "deploy/watch"]
        .iter()
        .flat_map(|d| std::fs::read_dir(repo().join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| std::fs::read_to_string(p).unwrap().split("\n---\n").count())
        .sum();
    assert_eq!(stdout.lines().filter(|l| l.ends_with("(server dry run)")).count(), documents, "{stdout}");
}

#[test]
fn deploy_applies_and_the_viewer_plans_and_preflights_every_drill_and_the_operators_change_only_their_own() {
    let _lab = lock_lab();
    reset_lab();
    dry_run_deploy();
    let (viewer, operator) = (viewer_kubeconfig(), operator_kubeconfig());

    for file in drills() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let plan = hybrid_drill().arg("plan").arg(&file).arg("--kubeconfig").arg(&viewer).output().unwrap();
        // The viewer's verdict is the admin's: nothing it reads is refused.
        let preflight =
            |config: &Path| hybrid_drill().arg("preflight").arg(&file).arg("--kubeconfig").arg(config).output();
        let (as_viewer, as_admin) = (preflight(&viewer).unwrap(), preflight(&kubeconfig()).unwrap());
        assert_eq!(as_viewer.status.code(), as_admin.status.code(), "preflight {name}: {}", text(&as_viewer));
        assert!(matches!(as_viewer.status.code(), Some(0 | 5)), "preflight {name}: {}", text(&as_viewer));
        // Every shipped drill starts with `check: preflight`: plan exits as preflight does (5 on a failed check).
        assert_eq!(plan.status.code(), as_admin.status.code(), "plan {name} as the viewer: {}", text(&plan));
        for out in [&plan, &as_viewer] {
            assert!(!text(out).contains("forbidden"), "{name} as the viewer: {}", text(out));
        }
    }

    // The viewer may start no drill: its permissions are reviewed before anything is written, and the refusal names
    // what a run needs that the read roles do not grant, the drill lock first.
    let run = hybrid_drill()
        .args(["run", "drills/drain.yaml", "--yes", "--reports-dir"])
        .arg(tempfile::tempdir().unwrap().path())
        .arg("--kubeconfig")
        .arg(&viewer)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    for needed in ["lacks", "(the drill lock)", "create pods/eviction cluster-wide"] {
        assert!(text(&run).contains(needed), "no `{needed}` in {}", text(&run));
    }
    assert!(cordoned_or_marked().is_empty(), "{:?}", cordoned_or_marked());
    for args in [
        &["cordon", "hybrid-gpu-1", "--dry-run=server"][..],
        &["-n", "inference", "patch", "deployment/llm-inference", "-p", RESTART, "--dry-run=server"],
    ] {
        // kubectl cordon reports a refused node on stderr and still exits 0: the answer is the proof.
        let out = kubectl_as(&viewer, args);
        assert!(text(&out).contains("is forbidden"), "viewer {args:?}: {}", text(&out));
    }

    // The operators: the return step's restart of its one Deployment and of the collateral deploy/roles.yaml names
    // (batch/embeddings), not of another; cut policies by their prefix only; a pod's hybrid-drill.io/ labels only
    // (the admission policy, where RBAC cannot name).
    let pod = kubectl(&["get", "pods", "-n", "inference", "-l", "app=llm-inference", "-o", "name"]);
    let pod = pod.lines().next().unwrap();
    let cut = |name: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: {name}, namespace: inference}}\nspec: {{podSelector: {{}}}}\n"
        )
    };
    let allowed: [&[&str]; 4] = [
        &["-n", "inference", "patch", "deployment/llm-inference", "-p", RESTART, "--dry-run=server"],
        &["-n", "batch", "patch", "deployment/embeddings", "-p", RESTART, "--dry-run=server"],
        &["-n", "inference", "label", pod, "hybrid-drill.io/run-id=x", "--dry-run=server"],
        &["cordon", "hybrid-gpu-1", "--dry-run=server"],
    ];
    for args in allowed {
        let out = kubectl_as(&operator, args);
        assert!(out.status.success() && !text(&out).contains("error"), "operator {args:?}: {}", text(&out));
    }
    let refused: [(&[&str], &str); 2] = [
        (&["-n", "batch", "patch", "deployment/feature-cache", "-p", RESTART, "--dry-run=server"], "forbidden"),
        (&["-n", "inference", "label", pod, "tier=stolen", "--dry-run=server"], "hybrid-drill.io/ labels"),
    ];
    for (args, why) in refused {
        let out = kubectl_as(&operator, args);
        assert!(!out.status.success() && text(&out).contains(why), "operator {args:?}: {}", text(&out));
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, ok) in [("hybrid-drill-cut-e2e", true), ("allow-all", false)] {
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, cut(name)).unwrap();
        let out = kubectl_as(&operator, &["create", "--dry-run=server", "-f", file.to_str().unwrap()]);
        assert_eq!(out.status.success(), ok, "operator creates NetworkPolicy {name}: {}", text(&out));
        if !ok {
            assert!(text(&out).contains("only its cut policies"), "{}", text(&out));
        }
    }
}
