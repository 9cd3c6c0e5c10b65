//! `hybrid-drill report` and `history` on recorded runs, no cluster: each format checked by a real consumer
//! (headless Chromium, xmllint against a JUnit schema, the Prometheus client's parser, a stand-in Pushgateway).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{open_in_chromium, parse_prometheus, repo, sample, validate_junit};
use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hybrid-drill"))
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The recorded run in tests/fixtures/report.json: a drain drill that met its RTO and missed two objectives.
fn fixture() -> Value {
    serde_json::from_str(&std::fs::read_to_string(repo().join("tests/fixtures/report.json")).unwrap()).unwrap()
}

fn write_run(reports: &Path, stamp: &str, report: &Value) -> PathBuf {
    let dir = reports.join(report["drill"]["name"].as_str().unwrap()).join(stamp);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(report).unwrap()).unwrap();
    dir
}

/// The fixture run rendered in `format` into its run directory as `file`.
fn rendered(format: &str, file: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path(), "1", &fixture());
    let path = run.join(file);
    std::fs::write(&path, report(&run, format)).unwrap();
    (dir, path)
}

fn report(run: &Path, format: &str) -> String {
    let out = bin().arg("report").arg(run).args(["--output", format]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "report --output {format}: {stderr}");
    stdout
}

#[test]
fn report_re_renders_a_past_run_in_each_format() {
    let reports = tempfile::tempdir().unwrap();
    let run = write_run(reports.path(), "20260105T093000Z", &fixture());
    let md = report(&run, "md");
    assert!(md.contains("**Verdict: objective missed**") && md.contains("| provisioning |"), "{md}");
    let json: Value = serde_json::from_str(&report(&run, "json")).unwrap();
    assert_eq!(json["schema"], "hybrid-drill.io/report/v1");
    assert_eq!(json["phases"], fixture()["phases"]);
    assert!(report(&run, "html").starts_with("<!DOCTYPE html>"));
    assert!(report(&run, "junit").starts_with("<?xml"));
    assert!(report(&run, "prometheus").contains("# TYPE hybrid_drill_rto_seconds gauge"));
    // the default is markdown, and report.json itself may be named
    let out = bin().arg("report").arg(run.join("report.json")).output().unwrap();
    assert_eq!(text(&out).0, md);
}

/// A run directory as a run leaves it (drill.yaml, timeline.jsonl, report.json), copied to `reports`.
fn recorded_run(reports: &Path) -> PathBuf {
    let run = reports.join("onprem-gpu-drain").join("20260105T093000Z");
    std::fs::create_dir_all(&run).unwrap();
    for name in ["drill.yaml", "timeline.jsonl", "report.json"] {
        std::fs::copy(repo().join("tests/fixtures/run").join(name), run.join(name)).unwrap();
    }
    run
}

#[test]
fn report_recomputes_a_run_from_its_timeline_byte_for_byte() {
    let reports = tempfile::tempdir().unwrap();
    let run = recorded_run(reports.path());
    let recorded = std::fs::read_to_string(run.join("report.json")).unwrap();
    assert_eq!(report(&run, "json"), recorded);
    // figures an older logic recorded give way to today's, computed from the timeline
    let mut stale: Value = serde_json::from_str(&recorded).unwrap();
    stale["phases"] = Value::Array(Vec::new());
    stale["warnings"] = Value::Array(Vec::new());
    std::fs::write(run.join("report.json"), serde_json::to_string_pretty(&stale).unwrap()).unwrap();
    assert_eq!(report(&run, "json"), recorded);
}

#[test]
fn junit_validates_against_the_junit_schema() {
    let (dir, xml) = rendered("junit", "junit.xml");
    validate_junit(&xml).unwrap_or_else(|e| panic!("junit.xml does not validate:\n{e}"));
    let content = std::fs::read_to_string(&xml).unwrap();
    assert!(content.contains(r#"<testcase name="RTO within 1m 00.0s""#), "{content}");
    assert_eq!(content.matches("<testcase ").count(), 4, "3 objectives and the outcome");
    // the schema is no rubber stamp: a case without a name fails it
    let broken = dir.path().join("broken.xml");
    std::fs::write(&broken, content.replacen(r#"<testcase name="RTO within 1m 00.0s""#, "<testcase", 1)).unwrap();
    assert!(validate_junit(&broken).unwrap_err().contains("'name' is required"));
}

#[test]
fn metrics_parse_with_a_real_exposition_parser() {
    let (_dir, metrics) = rendered("prometheus", "metrics.prom");
    let families = parse_prometheus(&std::fs::read_to_string(metrics).unwrap());
    let drill = ("drill", "onprem-gpu-drain");
    for family in families.as_object().unwrap().values() {
        assert_eq!(family["type"], "gauge");
    }
    assert_eq!(
        sample(&families, "hybrid_drill_phase_duration_seconds", &[drill, ("phase", "provisioning")]),
        Some(6.0)
    );
    assert_eq!(sample(&families, "hybrid_drill_rto_seconds", &[drill]), Some(11.6));
    assert_eq!(sample(&families, "hybrid_drill_outcome", &[drill, ("outcome", "objective-missed")]), Some(1.0));
    assert_eq!(
        sample(&families, "hybrid_drill_fallback_gpu_hours", &[drill]).map(|v| (v * 1000.0).round()),
        Some(37.0)
    );
    assert_eq!(sample(&families, "hybrid_drill_run_start_timestamp_seconds", &[drill]), Some(1_767_605_400.0));
    let phases = families["hybrid_drill_phase_duration_seconds"]["samples"].as_array().unwrap().len();
    assert_eq!(phases, fixture()["phases"].as_array().unwrap().len());
}

#[test]
fn the_html_report_renders_in_chromium_with_every_phase_drawn() {
    let (_dir, page) = rendered("html", "report.html");
    let rendered = open_in_chromium(&page, "fixture-report", 2400);
    assert!(rendered.console.is_empty(), "console output: {:?}", rendered.console);
    for phase in fixture()["phases"].as_array().unwrap() {
        let name = phase["name"].as_str().unwrap();
        assert!(rendered.dom.contains(&format!(r#"data-phase="{name}""#)), "no lane for {name}");
    }
    assert!(rendered.dom.contains(r#"<svg id="gantt""#));
    assert!(rendered.dom.contains("objective missed"));
    println!("screenshot: {}", rendered.screenshot.display());
}

/// Three quarterly runs of the fixture drill; provisioning slows down by half in the second.
fn three_runs(reports: &Path) {
    for (i, (month, provisioning)) in [("01", 6.0), ("04", 9.0), ("07", 9.2)].into_iter().enumerate() {
        let mut r = fixture();
        r["run_id"] = format!("onprem-gpu-drain-2026{month}05t093000z").into();
        r["started"] = format!("2026-{month}-05T09:30:00Z").into();
        for p in r["phases"].as_array_mut().unwrap() {
            if p["name"] == "provisioning" {
                p["seconds"] = provisioning.into();
            }
        }
        write_run(reports, &format!("2026{month}05T093000Z{i}"), &r);
    }
}

#[test]
fn history_shows_a_row_per_run_with_changes_and_regressions() {
    let reports = tempfile::tempdir().unwrap();
    three_runs(reports.path());
    let out = bin().arg("history").arg(reports.path()).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("onprem-gpu-drain · context hybrid-lab: 3 runs"), "{stdout}");
    for day in ["2026-01-05 09:30", "2026-04-05 09:30", "2026-07-05 09:30"] {
        assert_eq!(stdout.lines().filter(|l| l.starts_with(&format!("│ {day}"))).count(), 1, "{day}:\n{stdout}");
    }
    // The text view wraps at 80 columns: the sentence is read with its line breaks undone.
    let unwrapped = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        unwrapped.contains(
            "provisioning: over its objective of 5.0s by 4.0s; 50% slower than the previous run (6.0s → 9.0s)"
        ),
        "{stdout}"
    );

    let out = bin().arg("history").arg(reports.path()).args(["--output", "json"]).output().unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = json["drills"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let column =
        json["drills"][0]["phases"].as_array().unwrap().iter().position(|c| c["name"] == "provisioning").unwrap();
    assert_eq!(runs[1]["phases"][column]["change_seconds"], 3.0);
    assert_eq!(runs[1]["phases"][column]["objective_margin_seconds"], -4.0);

    let md = Command::new(env!("CARGO_BIN_EXE_hybrid-drill"))
        .arg("history")
        .arg(reports.path())
        .args(["--output", "md"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&md.stdout).lines().filter(|l| l.starts_with("| 2026-")).count(), 3);
}

#[test]
fn history_html_draws_each_phase_trend_in_chromium() {
    let reports = tempfile::tempdir().unwrap();
    three_runs(reports.path());
    let out = bin().arg("history").arg(reports.path()).args(["--output", "html"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = reports.path().join("history.html");
    std::fs::write(&page, &out.stdout).unwrap();
    let rendered = open_in_chromium(&page, "fixture-history", 1800);
    assert!(rendered.console.is_empty(), "console output: {:?}", rendered.console);
    assert_eq!(rendered.dom.matches(r#"<tr class="run">"#).count(), 3);
    for phase in fixture()["phases"].as_array().unwrap() {
        let name = phase["name"].as_str().unwrap();
        assert!(rendered.dom.contains(&format!(r#"<figure class="trend" data-phase="{name}">"#)), "no trend of {name}");
    }
    println!("screenshot: {}", rendered.screenshot.display());
}

#[test]
fn unreadable_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin().arg("report").arg(dir.path().join("missing")).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.starts_with("error: cannot read ") && stderr.trim().lines().count() == 1, "{stderr}");
    let out = bin().arg("history").arg(dir.path()).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("no run reports (report.json) under"), "{stderr}");
    // one broken run does not hide the others
    write_run(dir.path(), "good", &fixture());
    let bad = dir.path().join("onprem-gpu-drain/bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("report.json"), "{").unwrap();
    let out = bin().arg("history").arg(dir.path()).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("onprem-gpu-drain · context hybrid-lab: 1 run\n"), "{stdout}");
    assert!(stderr.contains("warning: skipped: "), "{stderr}");
}

/// A stand-in Pushgateway: accepts one request, answers `status`, and hands back what it received.
fn pushgateway(status: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).unwrap();
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        stream
            .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes())
            .unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    (url, handle)
}

#[test]
fn report_pushes_the_metrics_to_a_pushgateway() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path(), "1", &fixture());
    let (url, received) = pushgateway("200 OK");
    let out = bin().arg("report").arg(&run).args(["--output", "json", "--pushgateway", &url]).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let request = received.join().unwrap();
    assert!(request.starts_with("PUT /metrics/job/hybrid-drill/drill/onprem-gpu-drain HTTP/1.1\r\n"), "{request}");
    assert!(request.to_lowercase().contains("content-type: text/plain; version=0.0.4"), "{request}");
    assert!(request.contains("\r\n\r\n# HELP hybrid_drill_phase_duration_seconds "), "{request}");

    let (url, _) = pushgateway("400 Bad Request");
    let out = bin().arg("report").arg(&run).args(["--pushgateway", &url]).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("answered 400 Bad Request"), "{stderr}");
}

/// A drain run recorded in the lab with the audit log's writes of its window (tests/fixtures/fidelity).
fn fidelity(run: &Path, audit: &Path) -> (Option<i32>, String) {
    let out = Command::new(repo().join("scripts/fidelity")).arg(run).arg(audit).output().unwrap();
    (out.status.code(), format!("{}{}", text(&out).0, text(&out).1))
}

#[test]
fn fidelity_maps_every_milestone_to_its_audit_event_and_fails_on_a_gap_or_a_drift() {
    let fixture = repo().join("tests/fixtures/fidelity");
    let audit = fixture.join("audit.log");
    let (code, out) = fidelity(&fixture.join("run"), &audit);
    assert_eq!(code, Some(0), "{out}");
    for kind in
        ["milestone: fault injected (t0)", "cordon", "eviction", "NodeClaim Launched", "pod bound", "node deleted"]
    {
        assert!(out.lines().any(|l| l.starts_with(kind)), "no {kind} in:\n{out}");
    }

    // The scheduler's bindings missing from the log: a milestone with no audit event fails, it is not skipped.
    let dir = tempfile::tempdir().unwrap();
    let log = std::fs::read_to_string(&audit).unwrap();
    let gap: Vec<&str> = log.lines().filter(|l| !l.contains(r#""subresource":"binding""#)).collect();
    std::fs::write(dir.path().join("audit.log"), gap.join("\n") + "\n").unwrap();
    let (code, out) = fidelity(&fixture.join("run"), &dir.path().join("audit.log"));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("no audit event made it true") && out.contains("pod bound"), "{out}");

    // A milestone the report places 300 ms after the change that made it true is out of bounds.
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(fixture.join("run/timeline.jsonl"), run.join("timeline.jsonl")).unwrap();
    let mut report: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("run/report.json")).unwrap()).unwrap();
    let first = &mut report["milestones"][0];
    let moved = chrono::DateTime::parse_from_rfc3339(first["received"].as_str().unwrap()).unwrap()
        + chrono::Duration::milliseconds(300);
    first["received"] = Value::String(moved.to_rfc3339());
    std::fs::write(run.join("report.json"), report.to_string()).unwrap();
    let (code, out) = fidelity(&run, &audit);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("OUT OF BOUNDS"), "{out}");
}

/// A node failure's t0 as its hook makes it: the tool stamps the moment it starts the hook, which writes to the API
/// server a little later. The write maps to t0 while it lands within the hook's run, and the row says when the hook
/// ran and when its write landed; a write outside the run is out of bounds, and a hook that wrote nothing fails.
#[test]
fn fidelity_maps_a_hooks_fault_to_its_write_within_the_hooks_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let at = |ms: u64| format!("2026-12-03T18:00:00.{ms:03}Z");
    let timeline = |returned: u64| {
        [
            serde_json::json!({"seq": 1, "t_ms": 0, "received": at(0), "type": "step-started", "step": "fail",
                               "action": "nodeFailure"}),
            serde_json::json!({"seq": 2, "t_ms": 10, "received": at(10), "type": "fault-injected", "step": "fail",
                               "kind": "node-failure"}),
            serde_json::json!({"seq": 3, "t_ms": returned, "received": at(returned), "type": "hook-ran",
                               "step": "fail", "command": "lab/node-fail h1", "exit_code": 0}),
            serde_json::json!({"seq": 4, "t_ms": returned + 1, "received": at(returned + 1), "type": "step-finished",
                               "step": "fail", "outcome": "passed"}),
        ]
        .map(|o| o.to_string())
        .join("\n")
    };
    let report = serde_json::json!({"milestones": [
        {"label": "fault injected (t0)", "seq": 2, "t_ms": 10, "received": at(10)}
    ]});
    std::fs::write(run.join("report.json"), report.to_string()).unwrap();
    // The hook's label on the node, by kubectl, received 250 ms after t0.
    let write = serde_json::json!({"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Request",
        "stage": "ResponseComplete", "requestURI": "/api/v1/nodes/h1", "verb": "patch",
        "user": {"username": "lab-admin"}, "userAgent": "kubectl/v1.34.4 (linux/amd64)",
        "objectRef": {"resource": "nodes", "name": "h1", "apiVersion": "v1"}, "responseStatus": {"code": 200},
        "requestObject": {"metadata": {"labels": {"kwok.x-k8s.io/node": "failed"}}},
        "requestReceivedTimestamp": at(260), "stageTimestamp": at(272)});
    let audit = dir.path().join("audit.log");
    std::fs::write(&audit, format!("{write}\n")).unwrap();

    std::fs::write(run.join("timeline.jsonl"), timeline(400)).unwrap();
    let (code, out) = fidelity(&run, &audit);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("+0ms") && out.contains("patch nodes h1 by lab-admin"), "{out}");
    assert!(
        out.contains(
            "hooks ran from 18:00:00.010 (`lab/node-fail h1` returned 18:00:00.400, 0.390 s); the cluster \
showed their first write at 18:00:00.272, +0.262 s"
        ),
        "{out}"
    );
    assert!(out.contains("100 ms outside the hooks' run / 1 s"), "{out}");

    // The tool said the hook returned before its write was even received: 160 ms outside the run.
    std::fs::write(run.join("timeline.jsonl"), timeline(100)).unwrap();
    let (code, out) = fidelity(&run, &audit);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("fault injected (t0): -160 ms on the tool's clock"), "{out}");

    // A hook that wrote nothing to the API server (a real BMC) leaves t0 unmapped: a failure, not a skip.
    std::fs::write(&audit, "").unwrap();
    let (code, out) = fidelity(&run, &audit);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("fault injected (t0): no audit event made it true"), "{out}");
}

/// `evidence` over recorded runs, no cluster: each drill and incident of the period listed, those outside it not,
/// a run without a manifest a failure (exit 8, named in the index), and the controls worded as support.
#[test]
fn evidence_bundles_the_runs_of_a_period_and_fails_on_what_it_could_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    let mut incident: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("tests/fixtures/incident/report.json")).unwrap())
            .unwrap();
    write_run(&reports, "20260105T093000Z", &fixture());
    write_run(&reports, "20260412T031500Z", &incident);
    incident["run_id"] = "onprem-gpu-drain-20250412t031500z".into();
    incident["started"] = "2025-04-12T03:15:00Z".into();
    write_run(&reports, "20250412T031500Z", &incident);
    let out_dir = dir.path().join("bundle");
    let out = bin()
        .arg("evidence")
        .arg(&reports)
        .args(["--since", "2026-01-01", "--until", "2026-12-31", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(8), "runs without a manifest are not intact: {stdout}{stderr}");
    assert!(stderr.contains("error: 2 of 2 runs are not intact"), "{stderr}");
    let index = std::fs::read_to_string(out_dir.join("index.md")).unwrap();
    assert!(index.contains("1 drill and 1 incident; 0 of 2"), "{index}");
    assert!(index.contains("onprem-gpu-drain-20260412t031500z") && !index.contains("20250412"), "{index}");
    assert!(index.contains("FAILED: missing manifest.json"), "{index}");
    assert!(index.contains("| provisioning <= 5.0s | 6.0s |") || index.contains("provisioning <= 5.0s"), "{index}");
    assert!(index.contains("not a certification"), "{index}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(out_dir.join("evidence.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 2);
    assert!(out_dir.join("runs/onprem-gpu-drain/20260105T093000Z/report.json").is_file());
    // A second bundle into the same directory is refused rather than mixed with the first.
    let again =
        bin().arg("evidence").arg(&reports).args(["--since", "2026-01-01", "--out"]).arg(&out_dir).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", text(&again).1);
}

/// The signing key of the tests' trusted signer, and its public key in hex as `--public-key` reads it.
fn signer() -> (hybrid_drill::evidence::SigningKey, String) {
    let key = hybrid_drill::evidence::SigningKey::from_seed([7; 32]);
    let public = key.public().as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    (key, public)
}

/// A recorded run sealed as `run` seals it, signed by `key` when given.
fn sealed_run(reports: &Path, stamp: &str, key: Option<&hybrid_drill::evidence::SigningKey>) -> PathBuf {
    let run = write_run(reports, stamp, &fixture());
    hybrid_drill::evidence::seal(&run, &format!("onprem-gpu-drain-{}", stamp.to_lowercase()), key).unwrap();
    run
}

fn verify(run: &Path, flags: &[&str]) -> (Option<i32>, String) {
    let mut child = bin()
        .arg("verify")
        .arg(run)
        .args(flags)
        .env_remove("HYBRID_DRILL_PUBLIC_KEY")
        .env_remove("HYBRID_DRILL_TRUSTED_KEYS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A hang guard, not a timing assertion: a FIFO in the run directory must not block verify forever.
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
        panic!("verify {} hangs", run.display());
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout + &stderr)
}

/// `verify` proves who wrote a run only with a key the verifier trusts: an unsigned run, one re-sealed after an edit,
/// one re-signed with the forger's key, a signed run copied over another run's directory and one whose manifest was
/// deleted all exit 8; `--allow-unsigned` accepts matching files and says authenticity is not proven; a link and a
/// FIFO in the run directory are named, never followed or read.
#[test]
fn verify_needs_a_trusted_signature_bound_to_the_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    let (key, public) = signer();
    let trusted = ["--public-key", public.as_str()];
    let run = sealed_run(&reports, "20260105T093000Z", Some(&key));
    let (code, out) = verify(&run, &trusted);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("signature: valid, by the trusted key") && out.contains("intact: "), "{out}");
    // The same key from a trusted-keys file.
    let keys_file = dir.path().join("trusted-keys");
    std::fs::write(&keys_file, format!("# the drill signer\n{public} drill-signer-2026\n")).unwrap();
    let (code, out) = verify(&run, &["--trusted-keys", keys_file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");

    // No key trusted: not intact, with how to trust one; --allow-unsigned checks the files and says what it proves.
    let (code, out) = verify(&run, &[]);
    assert_eq!(code, Some(8), "{out}");
    assert!(out.contains("authenticity not proven: no key is trusted: pass the signer's public key"), "{out}");
    let (code, out) = verify(&run, &["--allow-unsigned"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("intact, but authenticity NOT proven"), "{out}");

    // A signed run copied over another run's directory: the signature is good, the place is not.
    let other = write_run(&reports, "20260106T093000Z", &fixture());
    for f in ["report.json", "manifest.json", "manifest.sig"] {
        std::fs::copy(run.join(f), other.join(f)).unwrap();
    }
    let (code, out) = verify(&other, &trusted);
    assert_eq!(code, Some(8), "{out}");
    assert!(out.contains("moved: manifest.json is the manifest of the run onprem-gpu-drain-20260105t093000z"), "{out}");

    // Edited, the sums recomputed, the signature dropped: the files match, nobody trusted wrote them.
    let report = std::fs::read_to_string(run.join("report.json")).unwrap();
    std::fs::write(run.join("report.json"), report.replace("objective-missed", "passed")).unwrap();
    std::fs::remove_file(run.join("manifest.sig")).unwrap();
    hybrid_drill::evidence::seal(&run, "onprem-gpu-drain-20260105t093000z", None).unwrap();
    let (code, out) = verify(&run, &trusted);
    assert_eq!(code, Some(8), "{out}");
    assert!(out.contains("signature: none"), "{out}");
    // Re-signed with the forger's own key.
    let forger = hybrid_drill::evidence::SigningKey::from_seed([9; 32]);
    hybrid_drill::evidence::seal(&run, "onprem-gpu-drain-20260105t093000z", Some(&forger)).unwrap();
    let (code, out) = verify(&run, &trusted);
    assert_eq!(code, Some(8), "{out}");
    assert!(out.contains("signature: UNTRUSTED"), "{out}");

    // A link to credentials and a FIFO: named, not followed, not read.
    let run = sealed_run(&reports, "20260107T093000Z", Some(&key));
    std::fs::write(dir.path().join("credentials"), "aws_secret_access_key=abc").unwrap();
    std::os::unix::fs::symlink(dir.path().join("credentials"), run.join("creds")).unwrap();
    assert!(Command::new("mkfifo").arg(run.join("pipe")).status().unwrap().success());
    let (code, out) = verify(&run, &trusted);
    assert_eq!(code, Some(8), "{out}");
    assert!(out.contains("not a regular file (not read): creds") && out.contains("(not read): pipe"), "{out}");

    // The manifest deleted: a failure, never "nothing to check".
    let run = sealed_run(&reports, "20260108T093000Z", Some(&key));
    std::fs::remove_file(run.join("manifest.json")).unwrap();
    let (code, out) = verify(&run, &["--allow-unsigned"]);
    assert_eq!(code, Some(8), "{out}");
    assert!(out.contains("missing: manifest.json"), "{out}");
}

/// `evidence` names each run's place in the bundle from the directories it was found in, never from its report: a
/// report whose drill name climbs out (`../../../escaped`) lands at `runs/<drill dir>/<stamp>` like any other; a link
/// in a run directory is not copied; a trusted signature makes it exit 0, an unsigned run exit 8 unless
/// `--allow-unsigned`, which the output then qualifies.
#[test]
fn evidence_builds_its_paths_from_the_directories_and_copies_no_link() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    let (key, public) = signer();
    let mut climbing = fixture();
    climbing["drill"]["name"] = "../../../escaped".into();
    let run = reports.join("onprem-gpu-drain/20260105T093000Z");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("report.json"), serde_json::to_string_pretty(&climbing).unwrap()).unwrap();
    hybrid_drill::evidence::seal(&run, "onprem-gpu-drain-20260105t093000z", Some(&key)).unwrap();
    let out_dir = dir.path().join("a/b/bundle");
    let evidence = |out_dir: &Path, flags: &[&str]| {
        let out = bin()
            .arg("evidence")
            .arg(&reports)
            .args(["--since", "2026-01-01", "--out"])
            .arg(out_dir)
            .args(flags)
            .env_remove("HYBRID_DRILL_PUBLIC_KEY")
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        (out.status.code(), stdout + &stderr)
    };
    let (code, out) = evidence(&out_dir, &["--public-key", &public]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!dir.path().join("a/escaped").exists(), "evidence wrote outside --out");
    assert!(out_dir.join("runs/onprem-gpu-drain/20260105T093000Z/report.json").is_file());

    // A second run, unsigned, with a link to credentials beside its report.
    let linked = sealed_run(&reports, "20260106T093000Z", None);
    std::fs::write(dir.path().join("credentials"), "aws_secret_access_key=abc").unwrap();
    std::os::unix::fs::symlink(dir.path().join("credentials"), linked.join("creds")).unwrap();
    let out_dir = dir.path().join("bundle-2");
    let (code, out) = evidence(&out_dir, &["--public-key", &public, "--allow-unsigned"]);
    assert_eq!(code, Some(8), "{out}");
    assert!(!out_dir.join("runs/onprem-gpu-drain/20260106T093000Z/creds").exists(), "the link was copied");
    let index = std::fs::read_to_string(out_dir.join("index.md")).unwrap();
    assert!(index.contains("not a regular file creds"), "{index}");

    // Without the link, the unsigned run passes only under --allow-unsigned, qualified.
    std::fs::remove_file(linked.join("creds")).unwrap();
    let (code, out) = evidence(&dir.path().join("bundle-3"), &["--public-key", &public]);
    assert_eq!(code, Some(8), "{out}");
    let (code, out) = evidence(&dir.path().join("bundle-4"), &["--public-key", &public, "--allow-unsigned"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("1 runs are intact under --allow-unsigned only: their authenticity is NOT proven"), "{out}");
}

/// The recorded run (tests/fixtures/run) with `edit` applied to its timeline's lines, as a run directory.
fn recorded_run_with(reports: &Path, stamp: &str, edit: impl FnOnce(Vec<String>) -> Vec<String>) -> PathBuf {
    let run = reports.join("onprem-gpu-drain").join(stamp);
    std::fs::create_dir_all(&run).unwrap();
    for name in ["drill.yaml", "report.json"] {
        std::fs::copy(repo().join("tests/fixtures/run").join(name), run.join(name)).unwrap();
    }
    let lines: Vec<String> = std::fs::read_to_string(repo().join("tests/fixtures/run/timeline.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    std::fs::write(run.join("timeline.jsonl"), edit(lines).join("\n") + "\n").unwrap();
    run
}

#[test]
fn the_report_opens_with_the_verdict_and_what_qualifies_it() {
    let reports = tempfile::tempdir().unwrap();
    let run = recorded_run(reports.path());
    let md = report(&run, "md");
    // What comes before the run's facts (the first table) is the head.
    let head = &md[..md.find("\n| | |").unwrap()];
    // The verdict, then each missed objective by name with its figures, the service level and the warning.
    assert!(head.contains("**Verdict: objective missed**"), "{md}");
    assert!(head.contains("- **OBJECTIVE MISSED**: provisioning: 6.0s against its objective of 5.0s"), "{head}");
    assert!(head.contains("- **OBJECTIVE MISSED**: reclaim: 18.5s against its objective of 10.0s"), "{head}");
    assert!(head.contains("- service: during the fault: no pod Ready (down; 1 needed), below target for"), "{head}");
    assert!(head.contains("- warning: this ran against the lab"), "{head}");
    // A short legend in plain words comes before the tables; the clocks and bounds close the report.
    let legend = md.find("## Legend").unwrap();
    assert!(legend < md.find("## Phases").unwrap());
    assert!(md.find("## How each figure is measured").unwrap() > md.find("## Notable events").unwrap());
    assert_eq!(md.matches("Clocks and bounds").count(), 0, "{md}");
    // The phases inside the RTO add up to more than it: the report says why.
    assert!(md.contains("add up to 12.2s against the RTO's 11.6s: eviction and pending ran at the same time"), "{md}");
    let json: Value = serde_json::from_str(&report(&run, "json")).unwrap();
    assert_eq!(json["headline"][0]["kind"], "missed-objective");
    assert_eq!(json["service_level"]["fault"]["lowest_ready"], 0);
    // The HTML page puts them right under the verdict, before the chart.
    let html = report(&run, "html");
    let qualifiers = html.find(r#"id="qualifiers""#).unwrap();
    assert!(qualifiers < html.find(r#"<svg id="gantt""#).unwrap());
    assert!(html[qualifiers..].contains("this ran against the lab"));
    assert!((qualifiers as f64) < html.len() as f64 * 0.2, "qualifiers at {qualifiers} of {}", html.len());
}

#[test]
fn repeated_events_are_folded_with_their_count_and_span() {
    let reports = tempfile::tempdir().unwrap();
    let run = recorded_run_with(reports.path(), "1", |mut lines| {
        // 81 refusals by the budget, every 2 s from +0.6 s, as a drain retries a blocked eviction.
        let blocked = (0..81).map(|i| {
            let t = 600 + 2000 * i;
            serde_json::json!({"seq": 1000 + i, "t_ms": t,
                "received": format!("2026-01-05T09:{:02}:{:02}.{:03}Z", 30 + (t / 1000) / 60, (t / 1000) % 60, t % 1000),
                "type": "eviction-blocked", "pod": "inference/llm-old", "pdb": "llm",
                "message": "Cannot evict pod as it would violate the pod's disruption budget."})
            .to_string()
        });
        lines.splice(4..4, blocked);
        lines
    });
    let md = report(&run, "md");
    let rows: Vec<&str> = md.lines().filter(|l| l.contains("blocked by PodDisruptionBudget llm")).collect();
    assert_eq!(rows.len(), 1, "{md}");
    assert!(rows[0].contains("×81, 09:30:00–09:32:40 (+0.6s to +2m 40.6s)"), "{}", rows[0]);
    let html = report(&run, "html");
    assert_eq!(html.matches("blocked by PodDisruptionBudget llm ×81").count(), 1);
}

/// A run killed before its end: the timeline stops at the provisioning, the journal holds a cordon never undone.
fn crashed_run(reports: &Path) -> PathBuf {
    let run = recorded_run_with(reports, "20260106T093000Z", |mut lines| {
        lines.truncate(16);
        lines.iter().map(|l| l.replace("2026-01-05T", "2026-01-06T")).collect()
    });
    std::fs::remove_file(run.join("report.json")).unwrap();
    let cordon = |state: &str| {
        serde_json::json!({"seq": 1, "at": "2026-01-06T09:30:00.600Z", "state": state, "action": "cordon",
                           "node": "h1", "was_unschedulable": false})
        .to_string()
    };
    std::fs::write(run.join("journal.jsonl"), format!("{}\n{}\n", cordon("intent"), cordon("done"))).unwrap();
    run
}

#[test]
fn a_crashed_run_gets_a_report_marked_as_such_and_is_listed_by_history() {
    let reports = tempfile::tempdir().unwrap();
    recorded_run(reports.path());
    let crashed = crashed_run(reports.path());
    let md = report(&crashed, "md");
    assert!(md.contains("**Verdict: crashed; not yet recovered**"), "{md}");
    assert!(md.contains("- **CRASHED**: the run stopped without finishing"), "{md}");
    assert!(md.contains("- **CRASHED**: crashed; not yet recovered: nothing says the cluster was restored"), "{md}");
    assert!(md.contains("- **LEFT IN THE CLUSTER**: journalled and never undone: cordon node/h1"), "{md}");
    let json: Value = serde_json::from_str(&report(&crashed, "json")).unwrap();
    assert_eq!(json["outcome"], "restore-failed");
    assert_eq!(json["crashed"]["outstanding"][0], "cordon node/h1");
    let out = bin().arg("history").arg(reports.path()).env("COLUMNS", "80").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains(": 2 runs"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("│ 2026-01-06 09:30") && l.contains("crashed; not yet")), "{stdout}");
}

/// The provenance a run writes before its first change, as `provenance.json`.
const PROVENANCE: &str = r#"{"run_id": "onprem-gpu-drain-20260106t093000z", "drill": "onprem-gpu-drain",
  "initiator": {"user": "jane.doe", "groups": ["ops"]}, "host": "bastion", "tool_version": "0.9.0",
  "git_commit": "abc", "drill_sha256": "00", "change": "CHG-7", "approved_by": "sam.lee",
  "cluster": {"context": "prod", "server": "https://prod", "kube_system_uid": "uid-1"}}"#;

/// What `recover` records in a crashed run it restored, as `recovered.json`.
const RECOVERED: &str = r#"{"at": "2026-01-06T10:00:05Z", "by": "ops-bot", "host": "bastion", "tool_version": "0.9.0",
  "undone": ["cordon node/h1"], "verified": ["node/h1 Ready and schedulable"]}"#;

/// A crashed run keeps who ran it and why; before `recover`, `report`, `history`, `evidence` and `verify` all call it
/// `crashed; not yet recovered` (verify saying why it has no manifest), and after it, restored by recover and when.
/// The evidence index links only to files that exist, and shows no OS error.
#[test]
fn a_crashed_run_keeps_its_provenance_and_every_command_names_it_alike() {
    let reports = tempfile::tempdir().unwrap();
    let crashed = crashed_run(reports.path());
    std::fs::write(crashed.join("provenance.json"), PROVENANCE).unwrap();
    let md = report(&crashed, "md");
    for needle in ["| Initiated by | jane.doe (groups ops) |", "| Change | CHG-7 |", "| Approved by | sam.lee |"] {
        assert!(md.contains(needle), "{needle}:\n{md}");
    }
    let out = bin().arg("verify").arg(&crashed).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("crashed; not yet recovered: the run was killed before writing its report and manifest"));
    assert!(!stderr.contains("os error"), "{stderr}");
    let bundles = tempfile::tempdir().unwrap();
    let said = |words: &str| {
        let history = bin().args(["history", "-o", "json"]).arg(reports.path()).output().unwrap();
        let history: Value = serde_json::from_slice(&history.stdout).unwrap();
        assert_eq!(history["drills"][0]["runs"][0]["verdict"], words, "{history:#}");
        let out_dir = bundles.path().join(words.len().to_string());
        let out = bin()
            .arg("evidence")
            .arg(reports.path())
            .args(["--since", "2026-01-01", "--out"])
            .arg(&out_dir)
            .output()
            .unwrap();
        // Unsealed (or sealed without a trusted key), the run is not proven intact.
        assert_eq!(out.status.code(), Some(8), "{}", text(&out).1);
        let index = std::fs::read_to_string(out_dir.join("index.md")).unwrap();
        assert!(index.contains(&format!("| {words} |")), "{index}");
        assert!(!index.contains("os error"), "{index}");
        for link in index.split("](").skip(1).map(|rest| &rest[..rest.find(')').unwrap()]) {
            assert!(out_dir.join(link).is_file(), "the index links {link}, which the bundle lacks:\n{index}");
        }
        let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
        let links = html.split("href=\"").skip(1).map(|rest| &rest[..rest.find('"').unwrap()]);
        for link in links.filter(|l| !l.starts_with('#')) {
            assert!(out_dir.join(link).is_file(), "index.html links {link}, which the bundle lacks");
        }
        assert!(report(&crashed, "md").contains(&format!("**Verdict: {words}**")));
        index
    };
    let index = said("crashed; not yet recovered");
    assert!(index.contains("| CHG-7 | sam.lee | jane.doe (groups ops) |"), "{index}");
    std::fs::write(crashed.join("recovered.json"), RECOVERED).unwrap();
    said("crashed; restored by recover at 2026-01-06 10:00:05 UTC");
    let md = report(&crashed, "md");
    assert!(md.contains("run by ops-bot on bastion, undid: cordon node/h1; the restore was verified"), "{md}");
}

#[test]
fn history_fits_80_columns_and_says_small_changes_in_seconds() {
    let reports = tempfile::tempdir().unwrap();
    three_runs(reports.path());
    // A phase of 0.0s then 1.0s: one second more, not +101700%.
    for (stamp, seconds) in [("20261001T093000Z", 0.0), ("20261002T093000Z", 1.0)] {
        let mut r = fixture();
        r["started"] = format!("2026-10-{}T09:30:00Z", &stamp[6..8]).into();
        for p in r["phases"].as_array_mut().unwrap() {
            if p["name"] == "scheduling" {
                p["seconds"] = seconds.into();
            }
        }
        write_run(reports.path(), stamp, &r);
    }
    let out = bin().arg("history").arg(reports.path()).env("COLUMNS", "80").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for line in stdout.lines() {
        assert!(line.chars().count() <= 80, "{} columns: {line}\n{stdout}", line.chars().count());
    }
    let scheduling = stdout.lines().find(|l| l.starts_with("│ scheduling")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(scheduling.contains("+1.0s") && !scheduling.contains('%'), "{scheduling}");
    assert!(!stdout.contains("101700"), "{stdout}");
}

/// A run directory's `cluster.json`: the cluster by its kube-system UID, the context, and the profile if any.
fn record_cluster(run: &Path, uid: &str, context: &str, profile: Option<&str>) {
    let mut cluster =
        serde_json::json!({"context": context, "server": "https://127.0.0.1:26443/", "kube_system_uid": uid});
    if let Some(profile) = profile {
        cluster["profile"] = profile.into();
    }
    std::fs::write(run.join("cluster.json"), cluster.to_string()).unwrap();
}

#[test]
fn history_series_are_one_drill_on_one_cluster_whatever_path_and_context_and_mark_a_changed_file() {
    let reports = tempfile::tempdir().unwrap();
    three_runs(reports.path());
    for run in std::fs::read_dir(reports.path().join("onprem-gpu-drain")).unwrap() {
        record_cluster(&run.unwrap().path(), "3f2a9c1e-77", "hybrid-lab", None);
    }
    // The same drill from another path, through a renamed context, on the same cluster: the same series.
    let mut renamed = fixture();
    renamed["drill"]["file"] = "./drills/drain.yaml".into();
    renamed["cluster"]["context"] = "hybrid-lab-2027".into();
    renamed["started"] = "2026-10-05T09:30:00Z".into();
    record_cluster(&write_run(reports.path(), "renamed", &renamed), "3f2a9c1e-77", "hybrid-lab-2027", None);
    // The same cluster on the realistic profile, and another cluster under the same context name: two more series.
    let realistic = write_run(reports.path(), "realistic", &fixture());
    record_cluster(&realistic, "3f2a9c1e-77", "hybrid-lab", Some("realistic"));
    record_cluster(&write_run(reports.path(), "other", &fixture()), "9b0c11d2-00", "hybrid-lab", None);
    // The drill under its former name: its own series until joined.
    let mut former = fixture();
    former["drill"]["name"] = "gpu-drain".into();
    former["started"] = "2025-10-05T09:30:00Z".into();
    record_cluster(&write_run(reports.path(), "former", &former), "3f2a9c1e-77", "hybrid-lab", None);
    // The third quarterly run's drill file was edited.
    let third = reports.path().join("onprem-gpu-drain/20260705T093000Z2/report.json");
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&third).unwrap()).unwrap();
    r["drill"]["source"] = format!("{}# tuned\n", r["drill"]["source"].as_str().unwrap()).into();
    std::fs::write(&third, r.to_string()).unwrap();
    let history = |args: &[&str]| {
        let out = bin().arg("history").arg(reports.path()).args(args).env("COLUMNS", "100").output().unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        stdout
    };
    let stdout = history(&[]);
    assert!(stdout.contains("onprem-gpu-drain · cluster 3f2a9c1e (context hybrid-lab-2027): 4 runs"), "{stdout}");
    let realistic = "onprem-gpu-drain · cluster 3f2a9c1e (context hybrid-lab) · profile realistic: 1 run\n";
    assert!(stdout.contains(realistic), "{stdout}");
    assert!(stdout.contains("onprem-gpu-drain · cluster 9b0c11d2 (context hybrid-lab): 1 run\n"), "{stdout}");
    assert!(stdout.contains("gpu-drain · cluster 3f2a9c1e (context hybrid-lab): 1 run\n"), "{stdout}");
    assert!(stdout.contains("◆ 2026-07-05 09:30: the drill file changed (sha256 "), "{stdout}");
    let json: Value = serde_json::from_str(&history(&["--format", "json"])).unwrap();
    let series = json["drills"].as_array().unwrap();
    assert_eq!(series.len(), 4);
    let quarterly = series.iter().find(|d| d["runs"].as_array().unwrap().len() == 4).unwrap();
    assert_eq!(quarterly["series"]["cluster"], "3f2a9c1e-77");
    assert_eq!(quarterly["runs"][2]["drill_changed"], true);
    assert_eq!(quarterly["runs"][2]["drill_sha256"].as_str().unwrap().len(), 64);
    // Joined explicitly, the former name's run opens the series.
    let joined = history(&["--join", "gpu-drain=onprem-gpu-drain"]);
    let title = "onprem-gpu-drain · cluster 3f2a9c1e (context hybrid-lab-2027) · formerly gpu-drain: 5 runs";
    assert!(joined.contains(title), "{joined}");
    let out = bin().arg("history").arg(reports.path()).args(["--join", "gpu-drain"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out).1);
}

#[test]
fn fail_on_regression_exits_7_on_a_regression_of_the_latest_run_and_0_otherwise() {
    let reports = tempfile::tempdir().unwrap();
    // Two runs without objectives: provisioning 10.0s, then 11.5s (15% slower, and more than the 1 s floor).
    for (stamp, provisioning) in [("20260105T093000Z", 10.0), ("20260405T093000Z", 11.5)] {
        let mut r = fixture();
        r["started"] = format!("2026-{}-05T09:30:00Z", &stamp[4..6]).into();
        for p in r["phases"].as_array_mut().unwrap() {
            p.as_object_mut().unwrap().remove("objective_seconds");
            if p["name"] == "provisioning" {
                p["seconds"] = provisioning.into();
            }
        }
        write_run(reports.path(), stamp, &r);
    }
    // The flag before the directory, as CI writes it: the directory is never taken for PCT.
    let history = |args: &[&str]| {
        let out = bin().arg("history").args(args).arg(reports.path()).output().unwrap();
        (out.status.code(), text(&out).1)
    };
    assert_eq!(history(&["--fail-on-regression"]).0, Some(0), "15% is within the default 20%");
    let (code, stderr) = history(&["--fail-on-regression=5"]);
    assert_eq!(code, Some(7), "{stderr}");
    assert!(stderr.contains("regression: onprem-gpu-drain") && stderr.contains("15% slower"), "{stderr}");
    assert_eq!(history(&[]).0, Some(0), "without the flag history only lists");
}

#[test]
fn the_service_level_is_the_ready_count_against_the_target_for_the_fault_and_the_return() {
    // A lab drain of four pods (readyPods: 4) off two nodes: two pods at a time moved during the fault (one from each
    // node, both terminating before either replacement was Ready), twice; one at a time, four times, back.
    let run = repo().join("tests/fixtures/fidelity/run");
    let md = report(&run, "md");
    assert!(!md.contains("service unavailable"), "3 of 4 pods serving is no outage:\n{md}");
    // The service watch's own events, folded: each time it went below target, 3 of 4 were still Ready.
    assert!(md.contains("| service below target: 3 of the 4 pods needed Ready (degraded, still serving) ×6, "), "{md}");
    let fault = md.lines().find(|l| l.starts_with("- service: during the fault: ")).unwrap_or_else(|| panic!("{md}"));
    assert!(fault.contains("as few as 2 of the 4 pods needed Ready (degraded, still serving)"), "{fault}");
    assert!(fault.ends_with("in 2 dips"), "{fault}");
    let back = md.lines().find(|l| l.starts_with("- service: during the return (a second dip): ")).unwrap();
    assert!(back.ends_with("in 4 dips"), "{back}");
    let json: Value = serde_json::from_str(&report(&run, "json")).unwrap();
    assert_eq!(json["service_level"]["return"]["lowest_ready"], 3);
    assert_eq!(json["service_level"]["return"]["needed"], 4);
    assert!(report(&run, "html").contains("fewest pods Ready during the return"));
}

#[test]
fn history_sets_a_drill_that_failed_the_fallback_against_the_plain_drain_of_the_same_cluster() {
    let reports = tempfile::tempdir().unwrap();
    write_run(reports.path(), "20260105T093000Z", &fixture());
    let mut shortage = fixture();
    shortage["drill"]["name"] = "capacity-shortage".into();
    shortage["drill"]["file"] = "drills/capacity-shortage.yaml".into();
    shortage["started"] = "2026-01-05T10:30:00Z".into();
    shortage["fallback_faults"] = serde_json::json!({"capacity": {
        "instance_types": ["g6.12xlarge"], "removed_at_seconds": 1.0, "failed_launches": [], "launches": []
    }});
    write_run(reports.path(), "20260105T103000Z", &shortage);
    let out = bin().arg("history").arg(reports.path()).args(["--format", "json"]).output().unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let drills = json["drills"].as_array().unwrap();
    let names: Vec<&str> = drills.iter().map(|d| d["drill"].as_str().unwrap()).collect();
    assert_eq!(names, ["capacity-shortage", "onprem-gpu-drain"], "one series per drill: {json:#}");
    assert_eq!(drills[0]["against"]["drill"], "onprem-gpu-drain", "{json:#}");
    assert!(drills[1].get("against").is_none(), "the plain drain is set against nothing: {json:#}");
    let out = bin().arg("history").arg(reports.path()).env("COLUMNS", "200").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("against onprem-gpu-drain (the plain drain of the same cluster, latest runs): RTO"),
        "{stdout}"
    );
}

/// `lines` with `events` (JSON objects with their `t_ms`) put in at their time, each given a `seq` and `received`.
fn with_events(mut lines: Vec<String>, events: Vec<Value>) -> Vec<String> {
    for (i, mut event) in events.into_iter().enumerate() {
        let t = event["t_ms"].as_u64().unwrap();
        event["seq"] = (3000 + i).into();
        event["received"] = format!("2026-01-05T09:30:{:02}.{:03}Z", t / 1000, t % 1000).into();
        let at = lines
            .iter()
            .position(|l| serde_json::from_str::<Value>(l).unwrap()["t_ms"].as_u64().unwrap() > t)
            .unwrap_or(lines.len());
        lines.insert(at, event.to_string());
    }
    lines
}

/// The reclaim's blockers are Karpenter's refusals from the reclaim's start on (+20.0s in the fixture run): the
/// same refusal before it is the fallback at work and is not listed. An event recorded without its object's name
/// (an older run, before the uid was kept) reads as such, never as `NodeClaim/:`.
#[test]
fn reclaim_blockers_start_with_the_reclaim_and_an_unnamed_object_is_said_so() {
    let reports = tempfile::tempdir().unwrap();
    let blocked = |t: u64, message: &str| {
        serde_json::json!({"t_ms": t, "type": "kube-event", "object": "NodeClaim/gpu-fallback-a",
                           "reason": "DisruptionBlocked", "message": message})
    };
    let run = recorded_run_with(reports.path(), "1", |lines| {
        with_events(
            lines,
            vec![
                blocked(15_000, "Cannot disrupt NodeClaim: state node is nominated for a pending pod"),
                blocked(25_000, "Cannot disrupt NodeClaim: pdb inference/llm prevents pod evictions"),
                serde_json::json!({"t_ms": 30_000, "type": "kube-event", "object": "NodeClaim/",
                                   "reason": "Finalized", "message": "Finalized karpenter.sh/termination"}),
            ],
        )
    });
    let json: Value = serde_json::from_str(&report(&run, "json")).unwrap();
    let blockers = json["reclaim_blockers"].as_array().unwrap();
    assert_eq!(blockers.len(), 1, "{blockers:#?}");
    assert_eq!(blockers[0]["object"], "NodeClaim/gpu-fallback-a");
    assert_eq!(blockers[0]["message"], "Cannot disrupt NodeClaim: pdb inference/llm prevents pod evictions");
    assert_eq!(blockers[0]["t_seconds"].as_f64(), Some(25.0));
    let md = report(&run, "md");
    let section = md.split("## Reclaim blockers").nth(1).expect("a reclaim blockers section");
    let section = section.split("\n## ").next().unwrap();
    assert!(section.contains("pdb inference/llm prevents pod evictions"), "{section}");
    assert!(!section.contains("nominated"), "a refusal before the reclaim is listed:\n{section}");
    for format in ["md", "html"] {
        let text = report(&run, format);
        assert!(!text.contains("NodeClaim/:"), "{format} prints an empty name");
    }
}

/// The users' SLIs are drawn twice on the HTML page: over the whole drill and again under the zoomed recovery, on
/// its scale; each plot carries the phases as bands and the fault (t0) and service-restored lines.
#[test]
fn the_html_draws_the_slis_under_the_zoomed_recovery_with_phase_bands_and_t0_and_restored() {
    let reports = tempfile::tempdir().unwrap();
    // One point a second, the success ratio down to 0.5 from +2s to +10s (the recovery), 1 otherwise.
    let series: Vec<[f64; 2]> =
        (0..39).map(|t| [f64::from(t), if (2..=10).contains(&t) { 0.5 } else { 1.0 }]).collect();
    let stats = serde_json::json!({"samples": 39, "min": 0.5, "mean": 0.88, "p99": 1.0, "max": 1.0,
                                   "seconds_outside_objective": 9.0, "budget_burned_percent": 0.01});
    let impact = serde_json::json!({
        "prometheus": "http://prometheus.monitoring:9090", "interval_seconds": 2.0, "resolution_seconds": 1.0,
        "error_budget": {"objective": 0.999, "window_seconds": 2_592_000.0},
        "slis": [{"name": "success-ratio", "query": "sum(rate(ok[2m])) / sum(rate(all[2m]))",
                  "objective": ">= 0.99", "unit": "ratio", "met": false, "whole": stats, "by_phase": [],
                  "series": series}]});
    let run = recorded_run_with(reports.path(), "1", |lines| {
        with_events(lines, vec![serde_json::json!({"t_ms": 38_650, "type": "slo-impact", "impact": impact})])
    });
    let html = report(&run, "html");
    let (whole, zoomed) = html.split_once(r#"<svg id="gantt-recovery""#).expect("a zoomed recovery chart");
    assert!(whole.contains("What users saw: the SLIs on the same time axis"));
    let zoomed = zoomed.split("</section>").next().unwrap();
    assert!(zoomed.contains("What users saw during the recovery, on the zoomed scale"), "no SLI under the zoom");
    let plot = zoomed.split(r#"aria-label="SLI success-ratio over the drill""#).nth(1).expect("the zoomed SLI plot");
    let plot = plot.split("</svg>").next().unwrap();
    assert!(plot.contains(r#"class="phase-band""#), "no phase band on the zoomed plot:\n{plot}");
    assert!(plot.contains("<title>eviction: +"), "the bands name their phase:\n{plot}");
    assert!(!plot.contains("<title>reclaim: +"), "the reclaim lies outside the zoomed recovery:\n{plot}");
    assert!(plot.contains(">t0</text>") && plot.contains(">restored</text>"), "no t0 or restored line:\n{plot}");
    assert!(plot.contains("<polyline"), "the series is not drawn:\n{plot}");
    let full = whole.split(r#"aria-label="SLI success-ratio over the drill""#).nth(1).expect("the full-scale plot");
    let full = full.split("</svg>").next().unwrap();
    assert!(full.contains("<title>reclaim: +") && full.contains(">t0</text>"), "{full}");
}

/// evidence's index.html opens with the intact line index.md has, and a run that fails its check stands out: the
/// line says how many are NOT intact, and the run's integrity cell is bold and marked failed.
#[test]
fn the_evidence_index_html_says_how_many_runs_are_intact_and_marks_a_tampered_one() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    let (key, public) = signer();
    sealed_run(&reports, "20260105T093000Z", Some(&key));
    let tampered = sealed_run(&reports, "20260106T093000Z", Some(&key));
    let report = std::fs::read_to_string(tampered.join("report.json")).unwrap();
    std::fs::write(tampered.join("report.json"), report.replace("objective-missed", "passed")).unwrap();
    let out_dir = dir.path().join("bundle");
    let out = bin()
        .arg("evidence")
        .arg(&reports)
        .args(["--since", "2026-01-01", "--public-key", &public, "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(8), "{stdout}{stderr}");
    let md = std::fs::read_to_string(out_dir.join("index.md")).unwrap();
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    let line = "2 drills and 0 incidents; 1 of 2 run directories verified intact against their manifests.";
    assert!(md.contains(line), "{md}");
    assert!(
        html.contains(&format!(
            r#"<p id="intact" class="callout"><strong>1 run directory NOT intact. </strong>{line}</p>"#
        )),
        "{html}"
    );
    let rows: Vec<&str> = html.split("<tr data-run=").skip(1).map(|r| r.split("</tr>").next().unwrap()).collect();
    assert_eq!(rows.len(), 2, "{html}");
    let failed: Vec<&&str> = rows.iter().filter(|r| r.contains(r#"<td class="failed"><strong>FAILED"#)).collect();
    assert_eq!(failed.len(), 1, "the tampered run is not marked: {rows:#?}");
    let intact: Vec<&&str> = rows.iter().filter(|r| r.contains(r#"<td class="passed">"#)).collect();
    assert!(intact.len() == 1 && !intact[0].contains("<strong>"), "{rows:#?}");
}
