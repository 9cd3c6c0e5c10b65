//! End-to-end: the drill's SLIs read from the lab's real Prometheus, which scrapes the service stand-in. A service
//! outside its objective refuses the drill with nothing touched; a stop condition aborts a drain that leaves no
//! endpoint Ready and restores, and the report carries the users' impact; Prometheus stopped mid-drill follows the
//! drill's policy.

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::common::lab::{
    cordoned_or_marked, drill_run, eventually, kubeconfig, lab_port, lab_tool, lock_lab, reset_lab, set_max_unavailable,
};
use crate::common::repo;

/// drills/drain-slo.yaml for the held instance, with `edits` (from, to) applied.
fn drill_file(dir: &tempfile::TempDir, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(repo().join("drills/drain-slo.yaml")).unwrap();
    text = text.replace("127.0.0.1:29090", &format!("127.0.0.1:{}", lab_port(29090)));
    for (from, to) in edits {
        assert!(text.contains(from), "drills/drain-slo.yaml has no `{from}`");
        text = text.replace(from, to);
    }
    let path = dir.path().join("drill.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(file: &PathBuf, reports: &tempfile::TempDir) -> (Output, Value) {
    let out = drill_run(file, reports.path(), kubeconfig()).output().unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

/// The drill's success-ratio SLI read from the held instance's Prometheus now; `None` while it has no answer.
fn success_ratio() -> Option<f64> {
    let url = format!("http://127.0.0.1:{}/api/v1/query", lab_port(29090));
    let query = r#"query=sum(rate(inference_server_requests_total{code!~"5.."}[8s])) / sum(rate(inference_server_requests_total[8s]))"#;
    let out = std::process::Command::new("curl").args(["-sf", &url, "--data-urlencode", query]).output().ok()?;
    let answer: Value = serde_json::from_slice(&out.stdout).ok()?;
    answer["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// The lab reset, and the users' steady state back: the serving pods' SLI has a value again.
fn reset_with_users_served() {
    reset_lab();
    eventually("the success ratio back to 1", Duration::from_secs(60), || success_ratio().is_some_and(|r| r >= 0.999));
}

fn timeline(run: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(run.join("timeline.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Seconds since the run started of the first timeline event of `kind`.
fn first(events: &[Value], kind: &str) -> Option<f64> {
    events.iter().find(|e| e["type"] == kind).and_then(|e| e["t_ms"].as_f64()).map(|ms| ms / 1000.0)
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

/// `plan` and `preflight` try every query of the drill once against the lab's Prometheus, read-only: a query
/// Prometheus refuses (a regular expression it cannot compile, which `validate` cannot know) and one that returns
/// nothing now are each reported with the query and Prometheus's own words, before any change window.
#[test]
fn slo_plan_and_preflight_report_a_query_that_fails_or_returns_nothing() {
    let _lab = lock_lab();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let refused = r#"label_replace(sum(rate(inference_server_requests_total[8s])), "x", "$1", "job", "(")"#;
    let empty = r#"histogram_quantile(0.99, sum by (le) (rate(inference_server_request_duration_seconds_bucket{model="none"}[8s])))"#;
    let file = drill_file(
        &dir,
        &[
            (
                r#"sum(rate(inference_server_requests_total{code!~"5.."}[8s])) / sum(rate(inference_server_requests_total[8s]))"#,
                refused,
            ),
            (
                "histogram_quantile(0.99, sum by (le) (rate(inference_server_request_duration_seconds_bucket[8s])))",
                empty,
            ),
        ],
    );
    let validate = crate::common::lab::hybrid_drill().arg("validate").arg(&file).output().unwrap();
    assert_eq!(validate.status.code(), Some(0), "{}", String::from_utf8_lossy(&validate.stderr));
    let findings = |command: &str| -> Vec<Value> {
        let out = crate::common::lab::hybrid_drill()
            .arg(command)
            .arg(&file)
            .args(["-o", "json", "--kubeconfig"])
            .arg(kubeconfig())
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{command}: no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
        let preflight = if command == "plan" { json["preflight"].clone() } else { json };
        let all = preflight["findings"].as_array().cloned().unwrap_or_default();
        all.into_iter().filter(|f| f["check"] == "sli-queries").collect()
    };
    for command in ["plan", "preflight"] {
        let found = findings(command);
        let of = |object: &str| {
            found
                .iter()
                .find(|f| f["object"] == object && f["message"].as_str().unwrap().starts_with('`'))
                .unwrap_or_else(|| panic!("{command}: no finding on {object}: {found:#?}"))
                .clone()
        };
        let (failed, nothing) = (of("SLI success-ratio"), of("SLI p99-latency"));
        assert_eq!(failed["status"], "warn", "{command}: {failed:#}");
        assert_eq!(
            failed["message"],
            format!(
                "`{refused}` failed: http://127.0.0.1:{}/api/v1/query answered 422: {{\"status\":\"error\",\
                 \"errorType\":\"execution\",\"error\":\"invalid regular expression in label_replace(): (\"}}",
                lab_port(29090)
            ),
            "{command}"
        );
        assert_eq!(failed["fix"], "run the query in Prometheus and fix it in the drill file", "{command}");
        assert_eq!(nothing["status"], "warn", "{command}: {nothing:#}");
        assert_eq!(
            nothing["message"],
            format!("`{empty}` returns no data now: a run would be refused at its steady-state check"),
            "{command}"
        );
        let total = found.iter().find(|f| f["object"] == "requests.total").expect("the request counter tried");
        assert!(total["message"].as_str().unwrap().starts_with("returns "), "{command}: {total:#}");
    }
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn slo_a_service_outside_its_objective_refuses_the_drill_with_nothing_touched() {
    let _lab = lock_lab();
    reset_with_users_served();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let file = drill_file(&dir, &[("atLeast: 0.99", "atLeast: 1.5")]);
    let (out, report) = run(&file, &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit 5, as every refusal that touches nothing (a failed preflight check, a held drill lock).
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert_eq!(report["outcome"], "refused", "{report:#}");
    let reason = report["abort_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("SLI success-ratio") && reason.contains(">= 1.5"), "{reason}");
    assert!(cordoned_or_marked().is_empty(), "a refused drill touched nodes: {:?}", cordoned_or_marked());
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn slo_a_stop_condition_aborts_the_drain_restores_and_the_report_carries_the_impact() {
    let _lab = lock_lab();
    reset_with_users_served();
    // Every replica evicted at once: no endpoint is Ready until the cloud replacements are, and the SLI, which the
    // serving pods export themselves, has no series at all meanwhile (the gateway answers users 503).
    assert!(set_max_unavailable(4));
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    // No data holds the condition (`onNoData: breach`, the default): the SLI never reads a low value, it goes empty,
    // once the last pod's samples leave its window. The fast lab's outage (last pod evicted to first replacement
    // Ready) is 10 to 15 s, and the 6 s window (three scrapes) leaves the SLI empty for only a few seconds of it: the
    // condition acts on its first reading of no data (no hold), or a 2 s hold can miss it between readings.
    let file = drill_file(
        &dir,
        &[
            ("below: 0.2\n        for: 30s\n        onNoData: breach", "below: 0.995\n        for: 0s"),
            ("[8s]", "[6s]"),
        ],
    );
    let (out, report) = run(&file, &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    set_max_unavailable(2);
    let impact = &report["impact"];
    // The impact and the deviations say what the stop watch read when it did not stop the drill.
    assert_eq!(out.status.code(), Some(3), "{stderr}\nimpact: {impact:#}\ndeviations: {:#}", report["deviations"]);
    let stop = &impact["stop"];
    assert!(stop["condition"].as_str().unwrap().contains("success-ratio <= 0.995 or no data"), "{impact:#}");
    assert_eq!(stop["no_data"], true, "the condition held on no data: {stop:#}");
    let held = (time(&stop["at"]) - time(&stop["since"])).num_milliseconds();
    assert!(held >= 0, "the condition stopped the drill before it held: {stop:#}");
    // From the timeline: the SLI went empty (when the condition began to hold) and the drill aborted and began its
    // restore within two reading intervals (2 s each) and a margin for load.
    let started_at = time(&report["started"]);
    let empty = (time(&stop["since"]) - started_at).num_milliseconds() as f64 / 1000.0;
    let events = timeline(&run_dir(&dir));
    let aborted = first(&events, "aborted").expect("an aborted event");
    // The fast lab may have reached the return before the condition held: the restore then has nothing to undo, and
    // its check of the on-prem nodes is what ends it.
    let checked =
        events.iter().find(|e| e["type"] == "restore-checked" && e["t_ms"].as_f64().unwrap() / 1000.0 >= aborted);
    let checked = checked.unwrap_or_else(|| panic!("no restore check after the abort"));
    assert_eq!(checked["held"], true, "{checked:#}");
    let restored = checked["t_ms"].as_f64().unwrap() / 1000.0;
    eprintln!("SLI empty from +{empty:.1} s, aborted at +{aborted:.1} s, restore checked at +{restored:.1} s");
    assert!(aborted - empty <= 8.0, "aborted {:.1} s after the SLI went empty: {stop:#}", aborted - empty);
    assert!(restored - empty <= 8.0 + 10.0, "restored {:.1} s after the SLI went empty", restored - empty);
    assert!(report["rollback"]["failed"].as_array().unwrap().is_empty(), "{report:#}");
    assert!(cordoned_or_marked().is_empty(), "not restored: {:?}", cordoned_or_marked());
    // The users' impact: both SLIs, the time with no data counted as such (never as time within the objective), the
    // requests failed while no endpoint was Ready, the stand-in named.
    let names: Vec<&str> = impact["slis"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["success-ratio", "p99-latency"], "{impact:#}");
    let success = &impact["slis"][0];
    let no_data = success["whole"]["seconds_no_data"].as_f64().unwrap();
    assert!(no_data >= 2.0 && !success["met"].as_bool().unwrap(), "{success:#}");
    assert!(!success["series"].as_array().unwrap().is_empty() && success["series"].as_array().unwrap().len() <= 240);
    assert!(impact["requests"]["failed"].as_f64().unwrap() > 0.0, "{impact:#}");
    // The stand-in's users send 20 requests/s. The gateway's counters are per backend pod and the evicted pods'
    // series leave the sum: counted client-side on sum() that drop was a reset and the total came out several
    // times too high (11502 for a 80 s drill); Prometheus's increase() per series counts what was sent.
    let span = (time(&report["finished"]) - started_at).num_milliseconds() as f64 / 1000.0;
    let total = impact["requests"]["total"].as_f64().unwrap();
    // Never more than was sent; fewer by what increase() cannot see: a new pod's requests before its first scrape and
    // a leaving pod's after its last, a scrape interval's worth at each boundary, a large share of a drill stopped
    // in seconds (68 of 128 for one of 6.4 s).
    let sent = 20.0 * span;
    assert!(total <= 1.15 * sent && total >= 0.25 * sent, "{total} requests in {span:.1} s: {impact:#}");
    // A 2 s scrape, half the 6 s window and the 2 s reading interval.
    assert_eq!(impact["detection_lag_seconds"].as_f64(), Some(7.0), "{impact:#}");
    assert_eq!(impact["scrape_interval_seconds"].as_f64(), Some(2.0), "{impact:#}");
    // The real end of startup: each cloud replacement's first good answer, after the stand-in's cold start (3 s fast).
    // The condition stops the drill on its first reading of no data, which on the fast lab comes before any
    // replacement is Ready on a fallback node (the restore then brings the workload home): there is no cloud
    // replacement's first answer to measure, and the report has none. When there is one, it is checked below.
    let answers = impact["ready_to_first_good_answer"].as_array().cloned().unwrap_or_default();
    if answers.is_empty() {
        eprintln!("no replacement was Ready on a fallback node before the restore: no first answer to measure");
    }
    assert!(answers.iter().all(|a| a["seconds"].as_f64().unwrap() >= 3.0 && a["location"] == "cloud"), "{answers:?}");
    let latency = &impact["slis"][1];
    assert!(latency["whole"]["samples"].as_u64().unwrap() > 0 && latency["whole"]["max"].is_number(), "{latency:#}");
    // The report's verdict says what users saw, and the fired condition is a deviation, the missed SLO an action item.
    let headline = report["headline"].to_string();
    assert!(headline.contains("users: success-ratio was outside its objective"), "{headline}");
    assert!(headline.contains("had no data for"), "{headline}");
    assert!(report["deviations"].to_string().contains("(no data)"), "{:#}", report["deviations"]);
    assert!(report["action_items"].as_array().unwrap().iter().any(|a| a["source"] == "missed-slo"), "{report:#}");
    assert!(impact["stand_in"].as_str().unwrap().contains("stand-in"), "{impact:#}");
    let markdown = std::fs::read_to_string(run_dir(&dir).join("report.md")).unwrap();
    assert!(markdown.contains("no data ") && markdown.contains("Detection lag"), "{markdown}");
    let junit = std::fs::read_to_string(run_dir(&dir).join("junit.xml")).unwrap();
    assert!(junit.contains("SLO success-ratio"), "{junit}");
    let metrics = std::fs::read_to_string(run_dir(&dir).join("metrics.prom")).unwrap();
    assert!(metrics.contains("hybrid_drill_sli_seconds_no_data{"), "{metrics}");
    reset_lab();
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

fn run_dir(reports: &tempfile::TempDir) -> PathBuf {
    let drill = std::fs::read_dir(reports.path()).unwrap().flatten().find(|e| e.path().is_dir()).unwrap().path();
    std::fs::read_dir(drill).unwrap().flatten().next().unwrap().path()
}

/// Starts the drill, takes Prometheus away for `down` seconds once the drain has begun, and waits for the drill.
fn run_with_prometheus_down(file: &PathBuf, reports: &tempfile::TempDir, down: &str) -> (Output, Value) {
    let child = drill_run(file, reports.path(), kubeconfig())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    eventually("the drain to begin", Duration::from_secs(60), || !cordoned_or_marked().is_empty());
    let restart = lab_tool("restart").args(["prometheus", down]).status().unwrap();
    assert!(restart.success());
    let out = child.wait_with_output().unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no report on stdout ({e}); stderr:\n{}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

#[test]
fn slo_prometheus_stopped_mid_drill_aborts_as_the_policy_says() {
    let _lab = lock_lab();
    reset_with_users_served();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let file = drill_file(&dir, &[]);
    let (out, report) = run_with_prometheus_down(&file, &dir, "8");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let errors = report["impact"]["prometheus_errors"].as_array().unwrap();
    assert!(!errors.is_empty() && errors[0]["action"] == "abort", "{report:#}");
    assert!(report["abort_reason"].as_str().unwrap().contains("onError is abort"), "{report:#}");
    assert!(cordoned_or_marked().is_empty(), "not restored: {:?}", cordoned_or_marked());
    // lab/restart started it again: the next drill finds it.
    eventually("Prometheus answering again", Duration::from_secs(30), || success_ratio().is_some());
    reset_lab();
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}

#[test]
fn slo_prometheus_stopped_mid_drill_goes_on_under_continue_and_says_so() {
    let _lab = lock_lab();
    reset_with_users_served();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let file = drill_file(&dir, &[("onError: abort", "onError: continue")]);
    let (out, report) = run_with_prometheus_down(&file, &dir, "6");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The drill went on to its end: passed, or an objective missed on a loaded machine; never aborted.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    let errors = report["impact"]["prometheus_errors"].as_array().unwrap();
    assert!(!errors.is_empty() && errors.iter().all(|e| e["action"] == "continue"), "{report:#}");
    let deviations = report["deviations"].to_string();
    assert!(deviations.contains("onError is continue"), "not a deviation: {deviations}");
    assert!(cordoned_or_marked().is_empty(), "not restored: {:?}", cordoned_or_marked());
    eventually("Prometheus answering again", Duration::from_secs(30), || success_ratio().is_some());
    reset_lab();
    eprintln!("held the lab {:.0} s", started.elapsed().as_secs_f64());
}
