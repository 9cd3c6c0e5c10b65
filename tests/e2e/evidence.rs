//! End-to-end: the audit record of a drill. A drill file that requires a change and an approver is refused without
//! them, touching nothing; run through the lab's exec-credential operator (the stand-in for EKS's IAM authenticator)
//! with `--change` and `--approved-by`, every report format records the operator as the API server authenticated
//! them, with the mapped IAM ARN; the run directory's manifest, signed with a key given as a secret reference,
//! verifies against the signer's public key (not another's) until one byte of report.json changes; and `evidence`
//! bundles that run with recorded ones, an incident among them, listing each, exiting 8 when no key is trusted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::Value;
use sha2::Digest;

use crate::common::lab::{drill_run, hybrid_drill, kubeconfig, lock_lab, reset_lab};
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

/// The signing key's seed, handed to the run as a secret reference to this variable.
const SEED_VAR: &str = "LAB_DRILL_SIGNING_SEED";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn run_as_operator(file: &Path, reports: &Path, flags: &[&str]) -> Output {
    let mut run = drill_run(file, reports, kubeconfig().with_file_name("kubeconfig-exec"));
    run.env(SEED_VAR, hex(&[7; 32])).args(flags).output().unwrap()
}

/// The public key of the seed `byte` repeated, as a file `verify --public-key` reads.
fn public_key(dir: &Path, byte: u8) -> PathBuf {
    let path = dir.join(format!("key-{byte}.pub"));
    std::fs::write(&path, hex(&ed25519_dalek::SigningKey::from_bytes(&[byte; 32]).verifying_key().to_bytes())).unwrap();
    path
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

fn verify(run_dir: &Path, key: &Path) -> (i32, String) {
    let out = hybrid_drill().arg("verify").arg(run_dir).arg("--public-key").arg(key).output().unwrap();
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
fn a_signed_run_under_a_change_records_its_operator_verifies_and_is_bundled_with_an_incident() {
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

    let signing_key = format!("${{env:{SEED_VAR}}}");
    let flags = ["--change", "CHG-1", "--approved-by", "jane.doe", "--signing-key", &signing_key];
    let out = run_as_operator(&file, &reports, &flags);
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
    for entry in std::fs::read_dir(&run_dir).unwrap() {
        let path = entry.unwrap().path();
        let body = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(!body.contains(&hex(&[7; 32])), "{} holds the signing key", path.display());
    }
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

    // The fresh run directory verifies against the signer's public key, not against another's; one byte of
    // report.json changed, verify names it with its exit code.
    let (ours, theirs) = (public_key(work.path(), 7), public_key(work.path(), 9));
    let (code, said) = verify(&run_dir, &ours);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("signature: valid, by the trusted key") && said.contains("intact:"), "{said}");
    let (code, said) = verify(&run_dir, &theirs);
    assert_eq!(code, 8, "{said}");
    assert!(said.contains("signature: UNTRUSTED"), "{said}");
    let mut bytes = std::fs::read(run_dir.join("report.json")).unwrap();
    let at = bytes.iter().position(|b| *b == b'{').unwrap();
    bytes[at] = b' ';
    std::fs::write(run_dir.join("report.json"), &bytes).unwrap();
    let (code, said) = verify(&run_dir, &ours);
    assert_eq!(code, 8, "{said}");
    assert!(said.lines().any(|l| l == "tampered: report.json"), "{said}");
    // Put back: the bundle below checks this run intact.
    bytes[at] = b'{';
    std::fs::write(run_dir.join("report.json"), &bytes).unwrap();

    // The bundle: this run, a recorded drill and a recorded incident, sealed and signed by the same signer.
    let signer = hybrid_drill::evidence::SigningKey::from_seed([7; 32]);
    for (fixture, stamp) in [("run", "20260105T093000Z"), ("incident", "20260412T031500Z")] {
        let dir = recorded(&reports, fixture, stamp);
        let run_id = format!("onprem-gpu-drain-{}", stamp.to_lowercase());
        hybrid_drill::evidence::seal(&dir, &run_id, Some(&signer)).unwrap();
    }
    let evidence = |out: &Path, key: Option<&Path>| {
        let mut command = hybrid_drill();
        command.arg("evidence").arg(&reports).args(["--since", "2026-01-01", "--archive", "-o", "json", "--out"]);
        command.arg(out).env_remove("HYBRID_DRILL_PUBLIC_KEY");
        if let Some(key) = key {
            command.arg("--public-key").arg(key);
        }
        command.output().unwrap()
    };
    // Without a trusted key nothing is proven: exit 8.
    let out = evidence(&work.path().join("untrusted"), None);
    assert_eq!(out.status.code(), Some(8), "{}", text(&out));
    let bundle = work.path().join("evidence-2026");
    let out = evidence(&bundle, Some(&ours));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!((summary["runs"].as_u64(), summary["not_intact"].as_u64()), (Some(3), Some(0)), "{summary:#}");
    let index_md = std::fs::read_to_string(bundle.join("index.md")).unwrap();
    let index_html = std::fs::read_to_string(bundle.join("index.html")).unwrap();
    let run_id = report["run_id"].as_str().unwrap();
    for id in [run_id, "onprem-gpu-drain-20260105t093000z", "onprem-gpu-drain-20260412t031500z"] {
        assert!(index_md.contains(id) && index_html.contains(id), "the index does not list {id}:\n{index_md}");
    }
    assert!(index_md.contains("2 drills and 1 incident;"), "{index_md}");
    assert!(index_md.contains("| CHG-1 | jane.doe | hybrid-lab-operator"), "{index_md}");
    assert!(index_md.contains("intact; signature valid"), "{index_md}");
    assert!(index_md.contains("SOC 2") && index_md.contains("supports:") && index_md.contains("not a certification"));
    // The bundle's copy of the run verifies on its own, and the archive holds the same.
    let copied = bundle.join("runs/evidence-check").join(run_dir.file_name().unwrap());
    let (code, said) = verify(&copied, &ours);
    assert_eq!(code, 0, "{said}");
    assert!(bundle.with_extension("tar.gz").metadata().unwrap().len() > 1000);
    let elapsed = started.elapsed().as_secs();
    assert!(elapsed <= 60, "took {elapsed}s: the budget is 60 s");
}
