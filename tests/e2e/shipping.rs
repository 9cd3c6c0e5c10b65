//! End-to-end: run directories kept in the lab's object storage (versitygw, S3-compatible). A run whose drill file
//! ships it lands whole in the lab's bucket, each object under object-lock retention, and `history` and `evidence`
//! read it back from `s3://` into a bundle whose copy `verify` passes, as shipped even after someone wrote over it or
//! hid part of it (the later versions and delete markers named); with the server stopped, the run still ends
//! as it would, its report carrying the failed shipment as a warning and a deviation, its local directory intact.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::Value;

use crate::common::lab::{
    Repair, drill_run, hybrid_drill, kubeconfig, lab_port, lab_tool, lock_lab, reset_lab, run_dir_of,
};

/// The lab's bucket (lab/lib.sh S3_BUCKET) and its server's base port (S3_PORT).
const BUCKET: &str = "hybrid-drill-evidence";
const S3_PORT: u16 = 28070;

/// A drill that only checks, so the run is over in seconds: the shipment is the subject. With a prefix, its file
/// ships each run there.
fn drill(prefix: Option<&str>) -> String {
    let ship = prefix.map(|prefix| {
        format!(
            "  evidence:\n    ship: {{to: 's3://{BUCKET}/{prefix}', endpoint: '{}', pathStyle: true, credentials: '{}', \
             retention: 1d}}\n",
            endpoint(),
            credentials().display()
        )
    });
    format!(
        "apiVersion: hybrid-drill.io/v1alpha1
kind: Drill
metadata: {{name: shipped-check}}
spec:
  cluster: {{context: hybrid-lab}}
  targets:
    onPrem: {{nodes: 'eks.amazonaws.com/compute-type=hybrid,gpu.model=h200'}}
    workload: {{namespace: inference, selector: app=llm-inference, restoredWhen: {{readyPods: 4}}}}
    fallback: {{nodePool: gpu-fallback}}
{}  steps:
    - {{id: steady, check: steady-state}}
",
        ship.unwrap_or_default()
    )
}

fn endpoint() -> String {
    format!("http://127.0.0.1:{}", lab_port(S3_PORT))
}

fn credentials() -> PathBuf {
    kubeconfig().with_file_name("s3-credentials")
}

/// The flags that reach the lab's server, as `history` and `evidence` take them.
fn s3_flags() -> Vec<String> {
    let credentials = credentials().display().to_string();
    vec!["--s3-endpoint".into(), endpoint(), "--s3-path-style".into(), "--s3-credentials".into(), credentials]
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A request to the lab's server as its root user, signed by curl: the body it answered.
fn s3_get(path_and_query: &str) -> String {
    s3_request("GET", path_and_query, "")
}

/// A request with a body (empty for none), as someone holding the bucket's write permission sends it.
fn s3_request(method: &str, path_and_query: &str, body: &str) -> String {
    let file = std::fs::read_to_string(credentials()).unwrap();
    let value = |key: &str| file.lines().find_map(|l| l.strip_prefix(key)).unwrap().to_string();
    let user = format!("{}:{}", value("AWS_ACCESS_KEY_ID="), value("AWS_SECRET_ACCESS_KEY="));
    let sha = sha256_hex(body.as_bytes());
    let out = Command::new("curl")
        .args(["-sS", "-X", method, "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", &user])
        .args(["-H", &format!("x-amz-content-sha256: {sha}")])
        .args(if body.is_empty() { vec![] } else { vec!["--data-binary".to_string(), body.to_string()] })
        .arg(format!("{}/{BUCKET}{path_and_query}", endpoint()))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The date a `?retention` answer keeps the object until.
fn retained_until(answer: &str) -> chrono::DateTime<chrono::Utc> {
    let date = answer.split("<RetainUntilDate>").nth(1).and_then(|r| r.split("</RetainUntilDate>").next());
    date.unwrap_or_else(|| panic!("no retention date in {answer}")).parse().unwrap()
}

/// Every key under `prefix` in the lab's bucket.
fn keys_under(prefix: &str) -> BTreeSet<String> {
    // Each query value as curl signs it: `/` encoded, every key followed by `=`.
    let listing = s3_get(&format!("?list-type=2&prefix={}%2F", prefix.replace('/', "%2F")));
    listing.split("<Key>").skip(1).filter_map(|k| k.split("</Key>").next()).map(str::to_string).collect()
}

/// Every file of a run directory, relative to it.
fn files_of(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                out.insert(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out
}

fn run(file: &Path, reports: &Path, flags: &[String]) -> (Output, Value, PathBuf) {
    let out = drill_run(file, reports, kubeconfig()).args(flags).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let run_dir = std::fs::read_dir(reports.join("shipped-check")).unwrap().next().unwrap().unwrap().path();
    (out, report, run_dir)
}

fn unique_prefix(what: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("e2e-{what}-{nanos}")
}

#[test]
fn a_shipped_run_lands_whole_under_retention_and_reads_back_from_s3() {
    let _lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("shipped");
    let file = dir.path().join("drill.yaml");
    std::fs::write(&file, drill(Some(&prefix))).unwrap();
    let reports = dir.path().join("reports");
    let (out, report, run_dir) = run(&file, &reports, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains(&format!("to s3://{BUCKET}/{prefix}/shipped-check/")), "{}", text(&out));
    assert!(report["deviations"].as_array().unwrap().iter().all(|d| !d["what"].as_str().unwrap().contains("ship")));

    // The whole directory, manifest and signature included, and nothing else, each object retained.
    let run_key = format!("{prefix}/shipped-check/{}", run_dir.file_name().unwrap().to_str().unwrap());
    let keys = keys_under(&run_key);
    let expected: BTreeSet<String> = files_of(&run_dir).into_iter().map(|f| format!("{run_key}/{f}")).collect();
    assert!(expected.iter().any(|k| k.ends_with("/manifest.json")), "{expected:?}");
    assert_eq!(keys, expected, "the bucket holds exactly the run directory's files");
    let retention = s3_get(&format!("/{run_key}/report.json?retention="));
    assert!(retention.contains("<Mode>COMPLIANCE</Mode>"), "report.json is not retained: {retention}");
    // The bucket's default retention (2 days, lab/lib.sh) is longer than the drill's 1d, and is kept, not shortened.
    let kept = retained_until(&retention) - chrono::Utc::now();
    assert!(kept > chrono::Duration::hours(47), "retained {kept:?} only: the bucket's default is 2 days");

    // `history` reads the run from the bucket as from a reports directory.
    let location = format!("s3://{BUCKET}/{prefix}");
    let history = hybrid_drill().args(["history", &location, "-o", "json"]).args(s3_flags()).output().unwrap();
    assert_eq!(history.status.code(), Some(0), "{}", text(&history));
    assert!(
        String::from_utf8_lossy(&history.stdout).contains(report["run_id"].as_str().unwrap()),
        "{}",
        text(&history)
    );

    // `evidence` bundles it from there, verified; the bundle's copy verifies on its own.
    let bundle = dir.path().join("bundle");
    let evidence = hybrid_drill()
        .args(["evidence", &location, "--since", "2026-01-01", "--allow-unsigned", "-o", "json", "--out"])
        .arg(&bundle)
        .args(s3_flags())
        .output()
        .unwrap();
    assert_eq!(evidence.status.code(), Some(0), "{}", text(&evidence));
    let summary: Value =
        serde_json::from_slice(&evidence.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&evidence)));
    assert_eq!((summary["runs"].as_u64(), summary["not_intact"].as_u64()), (Some(1), Some(0)), "{summary:#}");
    let index = std::fs::read_to_string(bundle.join("index.md")).unwrap();
    assert!(index.contains(report["run_id"].as_str().unwrap()), "the index does not list the run:\n{index}");
    let copied = bundle.join("runs/shipped-check").join(run_dir.file_name().unwrap());
    // Unsigned: intact files, and the output says that is all it proves.
    let verified = hybrid_drill().arg("verify").arg(&copied).arg("--allow-unsigned").output().unwrap();
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
    assert!(text(&verified).contains("authenticity NOT proven"), "{}", text(&verified));

    // Someone with write access to the bucket writes a new report over the locked run and hides its signature
    // behind a delete marker: the readers say so and read the run as it was shipped.
    s3_request("PUT", &format!("/{run_key}/report.json"), "{\"outcome\": \"passed\", \"forged\": true}");
    s3_request("DELETE", &format!("/{run_key}/manifest.json"), "");
    let history = hybrid_drill().args(["history", &location, "-o", "json"]).args(s3_flags()).output().unwrap();
    assert_eq!(history.status.code(), Some(0), "{}", text(&history));
    let warned = format!(
        "warning: {location}/shipped-check/{} was written to after it was shipped",
        run_dir.file_name().unwrap().to_str().unwrap()
    );
    assert!(text(&history).contains(&warned), "{}", text(&history));
    assert!(text(&history).contains("report.json (1 later version)"), "{}", text(&history));
    assert!(text(&history).contains("manifest.json (hidden by a delete marker)"), "{}", text(&history));
    let second = dir.path().join("bundle-after");
    let evidence = hybrid_drill()
        .args(["evidence", &location, "--since", "2026-01-01", "--allow-unsigned", "--out"])
        .arg(&second)
        .args(s3_flags())
        .output()
        .unwrap();
    assert_eq!(evidence.status.code(), Some(0), "{}", text(&evidence));
    let copied = second.join("runs/shipped-check").join(run_dir.file_name().unwrap());
    let read = std::fs::read(copied.join("report.json")).unwrap();
    assert_eq!(read, std::fs::read(run_dir.join("report.json")).unwrap(), "the bundle holds the report as shipped");
    assert!(copied.join("manifest.json").is_file(), "the manifest under the delete marker is read");
    let elapsed = started.elapsed().as_secs();
    assert!(elapsed <= 60, "took {elapsed}s: the budget is 60 s");
}

#[test]
fn a_stopped_object_store_is_a_warning_and_a_deviation_and_the_run_stays_whole() {
    let lab = lock_lab();
    reset_lab();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("stopped");
    // The drill file ships nowhere: the flags do, without retention, so nothing reaches the server before the upload.
    let file = dir.path().join("drill.yaml");
    std::fs::write(&file, drill(None)).unwrap();
    let pid_file = run_dir_of(lab.instance()).join("pids/versitygw.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    assert!(Command::new("kill").arg(&pid).status().unwrap().success(), "cannot stop versitygw");
    // Started again however the test ends (lab/up starts only what is not running).
    let _restart = Repair(|| match lab_tool("up").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!("lab/up did not start versitygw again: {}", text(&out)),
        Err(e) => eprintln!("lab/up: {e}"),
    });

    let reports = dir.path().join("reports");
    let mut flags = vec!["--ship".to_string(), format!("s3://{BUCKET}/{prefix}")];
    flags.extend(s3_flags());
    let (out, report, run_dir) = run(&file, &reports, &flags);
    assert_eq!(out.status.code(), Some(0), "a failed shipment does not fail the drill: {}", text(&out));
    let said = text(&out);
    assert!(said.contains("warning: the run directory was not shipped to s3://"), "{said}");
    let says = |text: Option<&str>| text.is_some_and(|t| t.contains("was not shipped"));
    let warned = report["warnings"].as_array().unwrap().iter().any(|w| says(w.as_str()));
    assert!(warned, "{:#}", report["warnings"]);
    let deviation = report["deviations"].as_array().unwrap().iter().any(|d| says(d["what"].as_str()));
    assert!(deviation, "{:#}", report["deviations"]);
    // The local run is whole: its reports say so too, and its manifest covers them.
    let markdown = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(markdown.contains("was not shipped"), "{markdown}");
    let verified = hybrid_drill().arg("verify").arg(&run_dir).arg("--allow-unsigned").output().unwrap();
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
    let elapsed = started.elapsed().as_secs();
    assert!(elapsed <= 60, "took {elapsed}s: the budget is 60 s");
}
