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

/// `hybrid-drill recover RUN_DIR` with the signing key given as a secret reference, through `kubeconfig`.
fn recover_signed(run_dir: &Path, kubeconfig: &Path) -> (Option<i32>, String) {
    let out = hybrid_drill()
        .arg("recover")
        .arg(run_dir)
        .args(["--signing-key", &format!("${{env:{SEED_VAR}}}"), "--kubeconfig"])
        .arg(kubeconfig)
        .env(SEED_VAR, hex(&[7; 32]))
        .output()
        .unwrap();
    (out.status.code(), text(&out))
}

/// The drain drill run from `file` through `kubeconfig` (its context the one the file names), killed like `kill -9`
/// once its first cordon is made (the drill lock is change 0, the first cordon 1); its run directory.
fn killed_after_first_cordon(file: &Path, reports: &Path, kubeconfig: &Path, flags: &[&str]) -> PathBuf {
    let before: Vec<PathBuf> = runs_of_drain(reports);
    let out =
        drill_run(file, reports, kubeconfig).env("HYBRID_DRILL_CRASH_AT", "1:after").args(flags).output().unwrap();
    assert_eq!(out.status.code(), None, "the run should have died: {}", text(&out));
    let after = runs_of_drain(reports);
    after.into_iter().find(|d| !before.contains(d)).expect("no run directory")
}

fn runs_of_drain(reports: &Path) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(reports.join("onprem-gpu-drain")) else { return Vec::new() };
    dirs.flatten().map(|e| e.path()).collect()
}

/// A drill killed after its first cordon keeps its audit record: before `recover`, its rebuilt report names the
/// operator, the change and the approver, and every command calls it `crashed; not yet recovered` (`verify` saying
/// why it has no manifest); `recover` restores the cluster, records what it undid and seals the run directory, which
/// then verifies, and `report`, `history` and `evidence` say `crashed; restored by recover at T` alike. A second run
/// of the same drill from another path, through a renamed context, joins the same `history` series.
#[test]
fn a_crashed_run_keeps_its_audit_record_is_sealed_by_recover_and_stays_in_its_series() {
    let _lab = lock_lab();
    reset_lab();
    let work = tempfile::tempdir().unwrap();
    let reports = work.path().join("reports");
    let operator = kubeconfig().with_file_name("kubeconfig-exec");
    let approval = ["--change", "CHG-47", "--approved-by", "jane.doe"];
    let run_dir = killed_after_first_cordon(Path::new("drills/drain.yaml"), &reports, &operator, &approval);
    let cordoned = crate::common::lab::cordoned_or_marked();
    assert_eq!(cordoned.len(), 1, "{cordoned:?}");

    let report_md = |dir: &Path| {
        let out = hybrid_drill().arg("report").arg(dir).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let md = report_md(&run_dir);
    for needle in [
        "**Verdict: crashed; not yet recovered**",
        "| Initiated by | hybrid-lab-operator (IAM arn:aws:sts::",
        "| Change | CHG-47 |",
        "| Approved by | jane.doe |",
    ] {
        assert!(md.contains(needle), "{needle}:\n{md}");
    }
    let out = hybrid_drill().arg("verify").arg(&run_dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("crashed; not yet recovered: the run was killed before writing its report and manifest")
    );
    let status = hybrid_drill()
        .args(["status", "--reports-dir"])
        .arg(&reports)
        .arg("--kubeconfig")
        .arg(kubeconfig())
        .output()
        .unwrap();
    assert!(text(&status).contains("crashed; not yet recovered; left to undo: cordon node/"), "{}", text(&status));

    let (code, said) = recover_signed(&run_dir, &kubeconfig());
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains(&format!("sealed: {} (crashed; restored by recover at ", run_dir.display())), "{said}");
    assert!(crate::common::lab::cordoned_or_marked().is_empty(), "recover left {cordoned:?}");
    let md = report_md(&run_dir);
    assert!(md.contains("**Verdict: crashed; restored by recover at "), "{md}");
    assert!(md.contains(&format!("undid: cordon node/{}", cordoned[0])), "{md}");
    assert!(md.contains("| Change | CHG-47 |") && md.contains("| Approved by | jane.doe |"), "{md}");
    let (code, said) = verify(&run_dir, &public_key(work.path(), 7));
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("run: crashed; restored by recover at ") && said.contains("signature: valid, by the trusted")
    );

    // The same drill from another path, its context renamed (in the kubeconfig and the drill file alike).
    let renamed = work.path().join("q2/drain.yaml");
    std::fs::create_dir_all(renamed.parent().unwrap()).unwrap();
    let source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    std::fs::write(&renamed, source.replace("context: hybrid-lab", "context: hybrid-lab-q2")).unwrap();
    let config = work.path().join("kubeconfig-q2");
    std::fs::copy(kubeconfig(), &config).unwrap();
    let rename = Command::new("kubectl")
        .args(["config", "rename-context", "hybrid-lab", "hybrid-lab-q2", "--kubeconfig"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(rename.status.success(), "{}", text(&rename));
    let second = killed_after_first_cordon(&renamed, &reports, &config, &approval);
    let (code, said) = recover_signed(&second, &config);
    assert_eq!(code, Some(0), "{said}");

    let out = hybrid_drill().args(["history", "-o", "json"]).arg(&reports).output().unwrap();
    let history: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let series = history["drills"].as_array().unwrap();
    assert_eq!(series.len(), 1, "two series for one drill on one cluster: {history:#}");
    assert_eq!(series[0]["series"]["context"], "hybrid-lab-q2", "{history:#}");
    let rows = series[0]["runs"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{history:#}");
    let bundle = work.path().join("evidence");
    let out = hybrid_drill()
        .arg("evidence")
        .arg(&reports)
        .args(["--since", "2026-01-01", "--out"])
        .arg(&bundle)
        .arg("--public-key")
        .arg(public_key(work.path(), 7))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let index = std::fs::read_to_string(bundle.join("index.md")).unwrap();
    for row in rows {
        let verdict = row["verdict"].as_str().unwrap();
        assert!(verdict.starts_with("crashed; restored by recover at "), "{row:#}");
        let line = index.lines().find(|l| l.contains(row["run_id"].as_str().unwrap())).unwrap();
        assert!(line.contains(&format!("| {verdict} |")) && line.contains("| intact; signature valid"), "{line}");
    }
    assert!(!index.contains("os error"), "{index}");
    for link in index.split("](").skip(1).map(|rest| &rest[..rest.find(')').unwrap()]) {
        assert!(bundle.join(link).is_file(), "the index links {link}, which the bundle lacks");
    }
    reset_lab();
}
