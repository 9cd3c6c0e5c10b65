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
        // The template is for a production cluster (its context is not the lab's); tests/runbooks.rs validates it.
        .filter(|p| !p.ends_with("template.yaml"))
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
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: {name}, namespace: inference, labels: {{hybrid-drill.io/run-id: e2e}}}}\nspec: {{podSelector: {{matchLabels: {{hybrid-drill.io/run-id: e2e}}}}}}\n"
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

/// kubectl as the scheduled drill's ServiceAccount (the lab's admin impersonating it): deploy/'s grants only.
fn as_service_account(args: &[&str]) -> Output {
    let mut full = vec!["--as=system:serviceaccount:hybrid-drill:hybrid-drill"];
    full.extend_from_slice(args);
    kubectl_as(&kubeconfig(), &full)
}

/// A cut policy as a run writes one (labelled with the run, named after it), with `spec` as given.
fn cut_policy(kind: &str, run: &str, spec: &str) -> String {
    let (api, namespace) = match kind {
        "NetworkPolicy" => ("networking.k8s.io/v1", "namespace: inference, "),
        "CiliumClusterwideNetworkPolicy" => ("cilium.io/v2", ""),
        _ => ("crd.projectcalico.org/v1", ""),
    };
    format!(
        "apiVersion: {api}\nkind: {kind}\nmetadata: {{name: hybrid-drill-cut-{run}, {namespace}labels: \
         {{hybrid-drill.io/run-id: {run}}}}}\nspec: {spec}\n"
    )
}

/// The admission fences of deploy/admission-policy.yaml, each denial and each allowed change proven by a server-side
/// dry run as the identities that run drills (the operators' group and the CronJob's ServiceAccount): a node may be
/// cordoned and carry the run's marks, never tainted nor relabelled; a cut policy must select only what its run
/// marked; a pod's annotations, owner and finalizers and a Lease's owner and finalizers stay as they were; and an
/// on-call person who also runs drills takes the drill lock twice in a row.
#[test]
fn the_admission_fences_hold_the_drills_identities_to_their_own_changes() {
    let _lab = lock_lab();
    reset_lab();
    let started = std::time::Instant::now();
    // The CronJob's ServiceAccount gets deploy/'s grants (lab/up binds the operators' only), and the fences as they are.
    for manifest in ["clusterrolebinding.yaml", "roles.yaml", "lock-role.yaml", "admission-policy.yaml"] {
        kubectl(&["apply", "-f", repo().join("deploy").join(manifest).to_str().unwrap()]);
    }
    let operator = operator_kubeconfig();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, yaml: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        path.to_str().unwrap().to_string()
    };
    let pod = kubectl(&["get", "pods", "-n", "inference", "-l", "app=llm-inference", "-o", "name"]);
    let pod = pod.lines().next().unwrap().to_string();
    let good_pod_cut = file(
        "np.yaml",
        &cut_policy("NetworkPolicy", "r1", "{podSelector: {matchLabels: {hybrid-drill.io/run-id: r1}}}"),
    );
    let good_host_cut = file(
        "ccnp.yaml",
        &cut_policy("CiliumClusterwideNetworkPolicy", "r1", "{nodeSelector: {matchLabels: {hybrid-drill.io/cut: r1}}}"),
    );
    let good_calico =
        file("gnp.yaml", &cut_policy("GlobalNetworkPolicy", "r1", "{selector: \"hybrid-drill.io/cut == 'r1'\"}"));
    let empty_selector = file("np-all.yaml", &cut_policy("NetworkPolicy", "x", "{podSelector: {}}"));
    let other_nodes = file(
        "ccnp-all.yaml",
        &cut_policy("CiliumClusterwideNetworkPolicy", "r1", "{nodeSelector: {matchLabels: {kubernetes.io/os: linux}}}"),
    );
    let calico_all = file("gnp-all.yaml", &cut_policy("GlobalNetworkPolicy", "r1", "{selector: all()}"));
    let lease = |extra: &str| {
        file(
            &format!("lease{}.yaml", extra.len()),
            &format!(
                "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: hybrid-drill-fence, namespace: kube-system{extra}}}\nspec: {{holderIdentity: x}}\n"
            ),
        )
    };
    let plain_lease = lease("");
    let owned_lease = lease(
        ", ownerReferences: [{apiVersion: v1, kind: Node, name: hybrid-gpu-1, uid: 00000000-0000-0000-0000-000000000001}]",
    );
    let finalized_lease = lease(", finalizers: [example.com/keep]");
    let unown = r#"[{"op":"add","path":"/metadata/finalizers","value":["example.com/keep"]}]"#;

    let allowed: Vec<Vec<String>> = vec![
        vec!["cordon".into(), "hybrid-gpu-1".into()],
        vec!["annotate".into(), "node/hybrid-gpu-1".into(), "hybrid-drill.io/run-id=r1".into()],
        vec!["label".into(), "node/hybrid-gpu-1".into(), "hybrid-drill.io/cut=r1".into()],
        vec!["create".into(), "-f".into(), good_pod_cut],
        vec!["create".into(), "-f".into(), good_host_cut],
        vec!["create".into(), "-f".into(), good_calico],
        vec!["-n".into(), "inference".into(), "label".into(), pod.clone(), "hybrid-drill.io/run-id=r1".into()],
        vec!["create".into(), "-f".into(), plain_lease],
    ];
    let refused: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["taint".into(), "node".into(), "hybrid-gpu-1".into(), "stolen=1:NoExecute".into()],
            "only a node's schedulability",
        ),
        (
            vec!["label".into(), "node/hybrid-gpu-1".into(), "team=stolen".into()],
            "hybrid-drill.io/ labels and annotations",
        ),
        (
            vec!["annotate".into(), "node/hybrid-gpu-1".into(), "team=stolen".into()],
            "hybrid-drill.io/ labels and annotations",
        ),
        (vec!["create".into(), "-f".into(), empty_selector], "select only what that run marked"),
        (vec!["create".into(), "-f".into(), other_nodes], "select only what that run marked"),
        (vec!["create".into(), "-f".into(), calico_all], "select only what that run marked"),
        (
            vec!["-n".into(), "inference".into(), "annotate".into(), pod.clone(), "team=stolen".into()],
            "hybrid-drill.io/ labels",
        ),
        (
            vec![
                "-n".into(),
                "inference".into(),
                "patch".into(),
                pod.clone(),
                "--type=json".into(),
                "-p".into(),
                unown.into(),
            ],
            "hybrid-drill.io/ labels",
        ),
        (vec!["create".into(), "-f".into(), owned_lease], "ownerReferences or finalizers"),
        (vec!["create".into(), "-f".into(), finalized_lease], "ownerReferences or finalizers"),
    ];
    let dry = |args: &[String]| -> Vec<String> {
        let mut full = args.to_vec();
        full.push("--dry-run=server".into());
        full
    };
    let as_operator = |args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl_as(&operator, &args)
    };
    // A policy reaches admission a moment after it is applied.
    crate::common::lab::eventually("the node fence in force", std::time::Duration::from_secs(20), || {
        text(&as_operator(&dry(&refused[0].0))).contains(refused[0].1)
    });
    for args in &allowed {
        let args = dry(args);
        for (who, out) in [
            ("operator", as_operator(&args)),
            ("service account", as_service_account(&args.iter().map(String::as_str).collect::<Vec<_>>())),
        ] {
            assert!(out.status.success() && !text(&out).contains("error"), "{who} {args:?}: {}", text(&out));
        }
    }
    for (args, why) in &refused {
        let args = dry(args);
        for (who, out) in [
            ("operator", as_operator(&args)),
            ("service account", as_service_account(&args.iter().map(String::as_str).collect::<Vec<_>>())),
        ] {
            // kubectl cordon/taint/label report a refused node on stderr: the message is the proof.
            assert!(text(&out).contains(why) && text(&out).contains("denied"), "{who} {args:?}: {}", text(&out));
        }
    }
    assert!(cordoned_or_marked().is_empty(), "a dry run changed the lab: {:?}", cordoned_or_marked());

    // On call and an operator at once: a drill takes the lock, releases it, and takes it again.
    let mut config: serde_json::Value =
        serde_json::from_str(&kubectl(&["config", "view", "--raw", "-o", "json"])).unwrap();
    for entry in config["users"].as_array_mut().unwrap() {
        entry["user"]["as"] = "oncall-operator".into();
        entry["user"]["as-groups"] = serde_json::json!(["hybrid-drill-oncall", "hybrid-drill-operators"]);
    }
    let both = dir.path().join("oncall-operator.kubeconfig");
    std::fs::write(&both, config.to_string()).unwrap();
    let checks = "apiVersion: hybrid-drill.io/v1alpha1\nkind: Drill\nmetadata: {name: lock-twice}\nspec:\n  \
                  cluster: {context: hybrid-lab}\n  targets:\n    onPrem: {nodes: 'eks.amazonaws.com/compute-type=hybrid'}\n    \
                  workload: {namespace: inference, selector: app=llm-inference, restoredWhen: {readyPods: 4}}\n    \
                  fallback: {nodePool: gpu-fallback}\n  steps:\n    - {id: steady, check: steady-state}\n";
    let drill_file = file("checks.yaml", checks);
    for attempt in 1..=2 {
        let out = crate::common::lab::drill_run(&drill_file, dir.path().join("reports"), &both).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "take {attempt} as on call and operator: {}", text(&out));
    }
    let elapsed = started.elapsed().as_secs();
    assert!(elapsed <= 90, "took {elapsed}s: the budget is 90 s");
}
