//! End-to-end: the audit record of a drill. A drill file that requires a change and an approver is refused without
//! them, touching nothing; run through the lab's exec-credential operator (the stand-in for EKS's IAM authenticator)
//! with `--change` and `--approved-by`, every report format records the operator as the API server authenticated
//! them, with the mapped IAM ARN; the run directory verifies against its manifest until one byte of report.json
//! changes; and `evidence` bundles that run with recorded ones, an incident among them, listing each.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::Value;
use sha2::Digest;

use crate::common::lab::{hybrid_drill, kubeconfig, lock_lab, reset_lab};
use crate::common::repo;

/// A drill that checks the fallback design and the steady state, and changes nothing: the audit record is the
/// subject, not the fallback.
const DRILL: &str = "apiVersion: hybrid-drill.io/v1alpha1
kind: Drill
metadata: {name: evidence-check}
spec:
  cluster: {context: hybrid-lab}
  targets:
    onPrem: {nodes: 'eks.amazonaws.com/compute-type=hybrid,gpu.model=h200'}
    workload: {namespace: inference, selector: app=llm-inference, restoredWhen: {readyPods: 4}}
    fallback: {nodePool: gpu-fallback}
  evidence: {requireChange: true, requireApprover: true, owner: gpu-platform}
  steps:
    - {id: preflight, check: preflight, onDeviation: warn}
    - {id: steady, check: steady-state}
";

const IAM_ARN: &str = "arn:aws:sts::111122223333:assumed-role/hybrid-lab-operator/lab-session";

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn run_as_operator(file: &Path, reports: &Path, flags: &[&str]) -> Output {
    hybrid_drill()
        .arg("run")
        .arg(file)
        .args(["--yes", "--output", "json", "--reports-dir"])
        .arg(reports)
        .arg("--kubeconfig")
        .arg(kubeconfig().with_file_name("kubeconfig-exec"))
        .args(flags)
        .output()
        .unwrap()
}

/// The drill lock's Lease as kubectl prints it (empty when there is none): unchanged means untouched.
fn lock_lease() -> String {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig())
        .args(["get", "lease", "hybrid-drill", "-n", "kube-system", "-o", "json", "--ignore-not-found"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn verify(run_dir: &Path) -> (i32, String) {
    let out = hybrid_drill().arg("verify").arg(run_dir).output().unwrap();
    (out.status.code().unwrap_or(-1), text(&out))
}

/// A recorded run copied into `reports` as `<drill>/<stamp>`.
fn recorded(reports: &Path, fixture: &str, stamp: &str) -> PathBuf {
    let dir = reports.join("onprem-gpu-drain").join(stamp);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(repo().join("tests/fixtures").join(fixture)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

#[test]
fn a_run_under_a_change_records_its_operator_verifies_and_is_bundled_with_an_incident() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("evidence-check.yaml");
    std::fs::write(&file, DRILL).unwrap();
    let reports = work.path().join("reports");

    // Without a change record: refused before the cluster is contacted, no run directory, the lock untouched.
    let lease = lock_lease();
    let refused = run_as_operator(&file, &reports, &["--approved-by", "jane.doe"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("requires --change (spec.evidence)"), "{}", text(&refused));
    assert!(!reports.exists() || std::fs::read_dir(&reports).unwrap().next().is_none(), "a run directory was left");
    assert_eq!(lock_lease(), lease, "the refused run touched the drill lock");

    let out = run_as_operator(&file, &reports, &["--change", "CHG-1", "--approved-by", "jane.doe"]);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no report ({e}): {}", text(&out)));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let p = &report["provenance"];
    assert_eq!(p["initiator"]["user"], "hybrid-lab-operator", "{p:#}");
    assert!(p["initiator"]["groups"].as_array().unwrap().iter().any(|g| g == "hybrid-drill-operators"), "{p:#}");
    assert_eq!(p["initiator"]["iam_arn"], IAM_ARN, "{p:#}");
    assert_eq!((p["change"].as_str(), p["approved_by"].as_str()), (Some("CHG-1"), Some("jane.doe")));
    assert_eq!(p["drill_sha256"], format!("{:x}", sha2::Sha256::digest(DRILL.as_bytes())));
    assert!(p["git_commit"].as_str().is_some_and(|c| c.len() == 40), "{p:#}");
    let run_dir = reports.join("evidence-check").read_dir().unwrap().next().unwrap().unwrap().path();
    let file_text = |name: &str| std::fs::read_to_string(run_dir.join(name)).unwrap();
    for (name, needles) in [
        ("report.md", ["| Initiated by | hybrid-lab-operator (IAM arn:aws:sts::", "| Change | CHG-1 |"]),
        ("report.html", ["hybrid-lab-operator (IAM arn:aws:sts::", "<td>CHG-1</td>"]),
        ("junit.xml", ["name=\"initiated_by\" value=\"hybrid-lab-operator", "name=\"change\" value=\"CHG-1\""]),
        ("metrics.prom", ["initiated_by=\"hybrid-lab-operator\"", "change=\"CHG-1\""]),
    ] {
        let body = file_text(name);
        for needle in needles {
            assert!(body.contains(needle), "{name} lacks {needle:?}");
        }
    }

    // The fresh run directory verifies; one byte of report.json changed, verify names it with its exit code.
    let (code, said) = verify(&run_dir);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("signature: none") && said.contains("intact:"), "{said}");
    let mut bytes = std::fs::read(run_dir.join("report.json")).unwrap();
    let at = bytes.iter().position(|b| *b == b'{').unwrap();
    bytes[at] = b' ';
    std::fs::write(run_dir.join("report.json"), &bytes).unwrap();
    let (code, said) = verify(&run_dir);
    assert_eq!(code, 6, "{said}");
    assert!(said.lines().any(|l| l == "tampered: report.json"), "{said}");
    // Put back: the bundle below checks this run intact.
    bytes[at] = b'{';
    std::fs::write(run_dir.join("report.json"), &bytes).unwrap();

    // The bundle: this run, a recorded drill (no manifest: made before manifests) and a recorded incident.
    recorded(&reports, "run", "20260105T093000Z");
    recorded(&reports, "incident", "20260412T031500Z");
    let bundle = work.path().join("evidence-2026");
    let out = hybrid_drill()
        .arg("evidence")
        .arg(&reports)
        .args(["--since", "2026-01-01", "--archive", "--out"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let index_md = std::fs::read_to_string(bundle.join("index.md")).unwrap();
    let index_html = std::fs::read_to_string(bundle.join("index.html")).unwrap();
    let run_id = report["run_id"].as_str().unwrap();
    for id in [run_id, "onprem-gpu-drain-20260105t093000z", "onprem-gpu-drain-20260412t031500z"] {
        assert!(index_md.contains(id) && index_html.contains(id), "the index does not list {id}:\n{index_md}");
    }
    assert!(index_md.contains("2 drills and 1 incident;"), "{index_md}");
    assert!(index_md.contains("| CHG-1 | jane.doe | hybrid-lab-operator"), "{index_md}");
    assert!(index_md.contains("intact; signature none"), "{index_md}");
    assert!(index_md.contains("SOC 2") && index_md.contains("supports:") && index_md.contains("not a certification"));
    // The bundle's copy of the run verifies on its own, and the archive holds the same.
    let copied = bundle.join("runs/evidence-check").join(run_dir.file_name().unwrap());
    assert_eq!(verify(&copied).0, 0, "{}", verify(&copied).1);
    assert!(bundle.with_extension("tar.gz").metadata().unwrap().len() > 1000);
    let elapsed = started.elapsed().as_secs();
    assert!(elapsed <= 60, "took {elapsed}s: the budget is 60 s");
}
