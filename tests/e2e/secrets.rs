//! End-to-end: a drill's secrets stay out of everything it writes and prints, its hooks see only the environment they
//! declare, and its silence outlives the restore check.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::lab::{
    alertmanager_url, drill_run, eventually, kubeconfig, lock_lab, pushgateway_url, reset_lab,
    workload_on_prem_and_fallback_empty,
};
use crate::common::repo;

/// Every value the run is given as a secret: through its environment (read by references in the drill file) and in
/// the userinfo of URLs given on the command line.
const SECRETS: [(&str, &str); 4] = [
    ("E2E_NOTIFY_PASSWORD", "notify-pass-0xe2e"),
    ("E2E_AM_PASSWORD", "am-pass-0xe2e"),
    ("E2E_HOOK_PASSWORD", "hook-pass-0xe2e"),
    ("E2E_UNDECLARED", "undeclared-0xe2e"),
];
const CLI_PASSWORDS: [&str; 2] = ["pushgateway-pass-0xe2e", "cli-notify-pass-0xe2e"];

/// drills/node-failure.yaml with a webhook and a silence whose URLs carry credentials read from the environment, a
/// failure hook that records its environment and its secret argument under `dir`, and a fallback wait too short to
/// hold, so the run aborts right after the fault and rolls back.
fn drill(dir: &Path, comment: &str) -> PathBuf {
    let mut source = std::fs::read_to_string(repo().join("drills/node-failure.yaml")).unwrap();
    let hook = dir.join("hook");
    let edits = [
        (
            "  steps:\n".to_string(),
            format!(
                "  notify:\n    - url: 'http://hook-user:${{env:E2E_NOTIFY_PASSWORD}}@127.0.0.1:9/hook'\n      timeout: 2s\n  \
                 silences:\n    - alertmanager: 'http://am-user:${{env:E2E_AM_PASSWORD}}@{}'\n      matchers: \
                 ['alertname=\"KubeNodeNotReady\"', 'node=~\"hybrid-gpu-.*\"']\n      comment: {comment}\n  steps:\n",
                alertmanager_url().trim_start_matches("http://")
            ),
        ),
        (
            r#"fail: [lab/node-fail, "{node}"]"#.to_string(),
            format!(
                r#"fail: [sh, -c, 'env | sort > "$0-$1.env"; printf %s "$2" > "$0-$1.arg"; exec lab/node-fail "$1"', {}, "{{node}}", "--password=${{env:E2E_HOOK_PASSWORD}}"]"#,
                hook.display()
            ),
        ),
        ("env: [LAB_INSTANCE,".to_string(), "env: [E2E_DECLARED, LAB_INSTANCE,".to_string()),
        (
            "    - id: fallback\n      waitFor: fallback-ready\n      timeout: 20m\n".to_string(),
            "    - id: fallback\n      waitFor: fallback-ready\n      timeout: 1s\n".to_string(),
        ),
    ];
    for (from, to) in edits {
        assert!(source.contains(&from), "drills/node-failure.yaml lacks {from:?}");
        source = source.replacen(&from, &to, 1);
    }
    let path = dir.join("node-failure.yaml");
    std::fs::write(&path, source).unwrap();
    path
}

/// Every file under `dir`, with its text.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            out.push((path, text));
        }
    }
    out
}

/// The lab's Alertmanager's silences whose comment starts with `comment`: their states.
fn silence_states(comment: &str) -> Vec<String> {
    let out = Command::new("curl").args(["-sf", &format!("{}/api/v2/silences", alertmanager_url())]).output().unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .filter(|s| s["comment"].as_str().is_some_and(|c| c.starts_with(comment)))
        .map(|s| s["status"]["state"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_drills_secrets_stay_out_of_its_run_and_output_its_hooks_get_only_their_env_and_its_silence_outlives_the_restore_check()
 {
    let _lab = lock_lab();
    reset_lab();
    let dir = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let comment = format!("e2e-secrets-{}", std::process::id());
    let file = drill(dir.path(), &comment);
    let pushgateway = pushgateway_url().replace("http://", "http://pg-user:pushgateway-pass-0xe2e@");
    let mut command = drill_run(&file, reports.path(), kubeconfig());
    command
        .args(["--pushgateway", &pushgateway, "--notify", "http://cli-user:cli-notify-pass-0xe2e@127.0.0.1:9/x"])
        .envs(SECRETS)
        .env("E2E_DECLARED", "declared-0xe2e");
    let out = command.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "the 1s fallback wait aborts the drill:\n{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["outcome"], "aborted");

    // No secret in any file of the run, nor in what it printed.
    let written = files(reports.path());
    let journal_path = written.iter().map(|(p, _)| p).find(|p| p.ends_with("journal.jsonl")).expect("a journal");
    let run_dir = journal_path.parent().unwrap().to_path_buf();
    assert!(written.len() >= 8, "{written:?}");
    let secrets = SECRETS.iter().map(|(_, v)| *v).chain(CLI_PASSWORDS);
    for secret in secrets {
        for (path, text) in &written {
            assert!(!text.contains(secret), "{} holds the secret {secret}", path.display());
        }
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "the output holds the secret {secret}");
    }
    // The journal records the hook as written: its reference, never the value.
    let journal = std::fs::read_to_string(run_dir.join("journal.jsonl")).unwrap();
    assert!(journal.contains("--password=${env:E2E_HOOK_PASSWORD}"), "{journal}");
    assert!(journal.contains("http://am-user:${env:E2E_AM_PASSWORD}@"), "{journal}");

    // The hook got its secret argument, and of the environment only PATH, HOME and what it declared.
    let envs: Vec<(PathBuf, String)> =
        files(dir.path()).into_iter().filter(|(p, _)| p.extension().is_some_and(|e| e == "env")).collect();
    assert!(!envs.is_empty(), "the failure hook never ran");
    for (path, env) in &envs {
        let names: Vec<&str> = env.lines().filter_map(|l| l.split_once('=').map(|(k, _)| k)).collect();
        for name in &names {
            let allowed = ["PATH", "HOME", "E2E_DECLARED", "LAB_INSTANCE", "KUBECONFIG", "PWD", "SHLVL", "_"];
            assert!(allowed.contains(name), "{}: the hook saw {name}: {env}", path.display());
        }
        assert!(names.contains(&"E2E_DECLARED") && names.contains(&"LAB_INSTANCE"), "{env}");
        let arg = std::fs::read_to_string(path.with_extension("arg")).unwrap();
        assert_eq!(arg, "--password=hook-pass-0xe2e");
    }

    // The silence ended after the rollback's restore check, not before it.
    let timeline = std::fs::read_to_string(run_dir.join("timeline.jsonl")).unwrap();
    let at = |needle: &str| timeline.lines().position(|l| l.contains(needle));
    let checked = at(r#""type":"restore-checked""#).unwrap_or_else(|| panic!("no restore check:\n{timeline}"));
    let expired = at(r#""action":"silence""#).unwrap_or_else(|| panic!("the silence was not expired:\n{timeline}"));
    assert!(checked < expired, "the silence expired before the restore was checked:\n{timeline}");
    assert_eq!(silence_states(&comment), ["expired"]);

    eventually("steady state after the drill", Duration::from_secs(180), workload_on_prem_and_fallback_empty);
    reset_lab();
}
