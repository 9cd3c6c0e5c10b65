//! End-to-end: a drill whose identity lacks a permission the run would use is refused before anything is touched,
//! naming each missing rule and the rule to add. The lab meets Calico with policy tiers (lab/calico-tiers.yaml: its
//! authorization stand-in answers 403 to a GlobalNetworkPolicy request without the tier's permissions) through the
//! exec-plugin operator, who holds deploy/'s roles, first without their tier rules, then with them.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::common::lab::{
    Repair, cordoned_or_marked, eventually, hybrid_drill, instance, kubectl, kubectl_json, kubectl_quiet, lock_lab,
    run_dir_of,
};
use crate::common::repo;

/// deploy/'s cluster roles without their Calico tier rules, as a site's roles written before its Calico had tiers: the
/// rest of each role is kept, so the refusal names the tier rules alone.
fn strip_tier_rules() {
    for role in ["hybrid-drill-read", "hybrid-drill"] {
        let mut object = kubectl_json(&["get", "clusterrole", role]);
        let rules = object["rules"].as_array_mut().unwrap();
        let before = rules.len();
        rules.retain(|rule| {
            !rule["resources"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().starts_with("tier"))
        });
        assert!(rules.len() < before, "deploy/'s {role} has no tier rule to take away");
        let mut child = std::process::Command::new("kubectl")
            .env("KUBECONFIG", crate::common::lab::kubeconfig())
            .args(["replace", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(object.to_string().as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "cannot replace {role}");
    }
}

fn deploy_roles() -> String {
    repo().join("deploy/clusterrole.yaml").display().to_string()
}

fn lab_file(name: &str) -> String {
    repo().join("lab").join(name).display().to_string()
}

/// Takes the tier model away and puts deploy/'s roles back: the rest of the lab knows Calico by its backing CRD only.
fn remove_tiers() {
    kubectl_quiet(&["apply", "-f", &deploy_roles()]);
    kubectl_quiet(&["delete", "-f", &lab_file("calico-tiers.yaml"), "--ignore-not-found"]);
}

fn apply_file(path: &Path) {
    kubectl(&["apply", "-f", path.to_str().unwrap()]);
}

fn operator() -> PathBuf {
    run_dir_of(instance()).join("kubeconfig-exec")
}

fn as_operator(args: &[&str]) -> Output {
    std::process::Command::new("kubectl").arg("--kubeconfig").arg(operator()).args(args).output().unwrap()
}

fn variant(name: &str, dir: &Path, from: &str, to: &str) -> PathBuf {
    let source = std::fs::read_to_string(repo().join("drills").join(name)).unwrap();
    assert!(source.contains(from), "drills/{name} lacks {from:?}");
    let path = dir.join(name);
    std::fs::write(&path, source.replacen(from, to, 1)).unwrap();
    path
}

fn tool(args: &[&str], file: &Path) -> Output {
    hybrid_drill().args(args).arg(file).arg("--kubeconfig").arg(operator()).output().unwrap()
}

#[test]
fn a_calico_cut_by_an_identity_without_the_tier_permission_is_refused_at_preflight_naming_the_rule() {
    let _lab = lock_lab();
    let _repair = Repair(remove_tiers);
    apply_file(&repo().join("lab/calico-tiers.yaml"));
    kubectl(&["wait", "--for", "condition=Established", "--timeout", "30s", "crd/tiers.projectcalico.org"]);
    kubectl(&[
        "wait",
        "--for",
        "condition=Established",
        "--timeout",
        "30s",
        "crd/globalnetworkpolicies.projectcalico.org",
    ]);
    apply_file(&repo().join("lab/calico-default-tier.yaml"));
    strip_tier_rules();
    // The model: the operator's role grants globalnetworkpolicies, not the tier, and the LIST answers 403.
    eventually("a tiered Calico refusing the operator's LIST", Duration::from_secs(20), || {
        let out = as_operator(&["get", "globalnetworkpolicies.projectcalico.org"]);
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("may not get tier \"default\"")
    });

    let dir = tempfile::tempdir().unwrap();
    let calico = variant("dx-cut.yaml", dir.path(), "cni: cilium", "cni: calico");
    let reports = tempfile::tempdir().unwrap();
    let plan = tool(&["plan"], &calico);
    let reports_dir = reports.path().to_str().unwrap();
    let run = tool(&["run", "--yes", "--allow-commands", "--reports-dir", reports_dir], &calico);
    // Not only a cut: a drain's restore check lists the policies of every kind served, the tiered ones too.
    let drain = tool(&["plan"], &repo().join("drills/drain.yaml"));
    for (what, out) in [("plan", &plan), ("run", &run), ("drain", &drain)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{what}: {stderr}");
        for expected in [
            "error: context `hybrid-lab` lacks ",
            "list projectcalico.org/tier.globalnetworkpolicies `default.*` cluster-wide (",
            "get projectcalico.org/tiers `default` cluster-wide",
            "ClusterRole: {apiGroups: [\"projectcalico.org\"], resources: [tiers], resourceNames: [\"default\"], verbs: [get]}",
        ] {
            assert!(stderr.contains(expected), "{what}: no `{expected}` in {stderr}");
        }
    }
    let restore_check =
        "list projectcalico.org/tier.globalnetworkpolicies `default.*` cluster-wide (the restore's check";
    assert!(
        String::from_utf8_lossy(&drain.stderr).contains(restore_check),
        "{}",
        String::from_utf8_lossy(&drain.stderr)
    );
    {
        let stderr = String::from_utf8_lossy(&plan.stderr);
        let rule = "resources: [tier.globalnetworkpolicies], resourceNames: [\"default.*\"], verbs: [list]}";
        assert!(stderr.contains(rule), "a plan needs the run's reads only: {stderr}");
    }
    {
        let out = &run;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let rule =
            "resources: [tier.globalnetworkpolicies], resourceNames: [\"default.*\"], verbs: [list, create, delete]";
        assert!(stderr.contains(rule), "{stderr}");
        assert!(stderr.contains("create projectcalico.org/tier.globalnetworkpolicies `default.*`"), "{stderr}");
    }
    // Nothing touched: no run directory, no policy, no label, no cordon.
    assert_eq!(std::fs::read_dir(reports.path()).unwrap().count(), 0, "a refused run left a run directory");
    let policies = kubectl_json(&["get", "globalnetworkpolicies.projectcalico.org"]);
    assert_eq!(policies["items"].as_array().unwrap().len(), 0, "{policies:#}");
    let cut = kubectl_json(&["get", "nodes", "-l", "hybrid-drill.io/cut"]);
    assert_eq!(cut["items"].as_array().unwrap().len(), 0, "{cut:#}");
    assert!(cordoned_or_marked().is_empty());

    // With the rules it named granted (deploy/'s roles carry them), the same identity passes.
    kubectl(&["apply", "-f", &deploy_roles()]);
    eventually("the operator's plan of the Calico cut going through", Duration::from_secs(20), || {
        tool(&["plan"], &calico).status.success()
    });
    let drain = tool(&["plan"], &repo().join("drills/drain.yaml"));
    assert_eq!(drain.status.code(), Some(0), "{}", String::from_utf8_lossy(&drain.stderr));
    assert!(as_operator(&["get", "globalnetworkpolicies.projectcalico.org"]).status.success());
}
