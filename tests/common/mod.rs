//! Real consumers of the report files, shared by the report and lab tests: headless Chromium for the HTML pages,
//! xmllint with a JUnit schema for junit.xml, and the Python Prometheus client's parser for metrics.prom.
//! `./test` (and CI) installs them: tests/install-tools. `lab` holds what the end-to-end tests share of the lab.

// Each test crate uses its own subset of these helpers.
#![allow(dead_code)]

pub mod api;
pub mod image;
pub mod lab;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn require(tool: &str) {
    let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().unwrap();
    assert!(found.status.success(), "{tool} is not installed: run tests/install-tools (./test does)");
}

/// What headless Chromium made of a page.
pub struct Rendered {
    pub dom: String,
    pub screenshot: PathBuf,
    /// Lines Chromium logged from the page's console: there should be none, the pages have no script.
    pub console: Vec<String>,
}

fn chromium(profile: &Path, args: &[&str], page: &Path) -> (String, String) {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed on {}:\n{stderr}", page.display());
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// Opens `page` in headless Chromium: its DOM as the browser built it, and a screenshot kept for a person to look
/// at in tmp/screenshots/NAME.png under cargo's target directory.
pub fn open_in_chromium(page: &Path, name: &str, height: u32) -> Rendered {
    require("chromium");
    let profile = tempfile::tempdir().unwrap();
    let (dom, log_dom) = chromium(profile.path(), &["--dump-dom"], page);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let screenshot = shots.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    let shot = format!("--screenshot={}", screenshot.display());
    let size = format!("--window-size=1280,{height}");
    let (_, log_shot) = chromium(profile.path(), &[&shot, &size], page);
    assert!(screenshot.metadata().is_ok_and(|m| m.len() > 10_000), "no screenshot of {}", page.display());
    let console = format!("{log_dom}\n{log_shot}")
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect();
    Rendered { dom, screenshot, console }
}

/// Validates an XML file against the JUnit schema committed in tests/fixtures; returns xmllint's verdict.
pub fn validate_junit(xml: &Path) -> Result<(), String> {
    require("xmllint");
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(repo().join("tests/fixtures/junit.xsd"))
        .arg(xml)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() { Ok(()) } else { Err(stderr) }
}

const PARSE_PROMETHEUS: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    families[f.name] = {"type": f.type, "samples": [{"labels": s.labels, "value": s.value} for s in f.samples]}
print(json.dumps(families))
"#;

/// The first of `python3` on PATH and Debian's `/usr/bin/python3` that imports the client (tests/install-tools puts
/// it in one of them, by pip or by apt).
fn python_with_prometheus_client() -> &'static str {
    let imports = |python: &str| {
        Command::new(python).args(["-c", "import prometheus_client"]).output().is_ok_and(|out| out.status.success())
    };
    let found = ["python3", "/usr/bin/python3"].into_iter().find(|python| imports(python));
    found.unwrap_or_else(|| panic!("the Python Prometheus client is missing: run tests/install-tools (./test does)"))
}

/// Parses Prometheus text exposition with the Python client's parser: family name -> {type, samples}.
pub fn parse_prometheus(text: &str) -> Value {
    let mut child = Command::new(python_with_prometheus_client())
        .args(["-c", PARSE_PROMETHEUS])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the exposition parser rejected the metrics:\n{stderr}\n{text}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The value of the sample of `family` whose labels include every pair in `labels`.
pub fn sample(families: &Value, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    families[family]["samples"]
        .as_array()?
        .iter()
        .find(|s| labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .and_then(|s| s["value"].as_f64())
}
