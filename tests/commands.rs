//! The commands agree with each other: one exit-code table, one output flag, kubectl's `kind/name` forms, examples
//! and exit codes in every command's help and man page. The real binary, no cluster.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hybrid-drill"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A kubeconfig whose server refuses every connection.
fn dead_kubeconfig(dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: hybrid-lab\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         contexts:\n- name: hybrid-lab\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\n",
    )
    .unwrap();
    path
}

fn drain_with(from: &str, to: &str, dir: &Path) -> PathBuf {
    let source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    assert!(source.contains(from), "drills/drain.yaml no longer contains {from:?}");
    let path = dir.join(format!("drill-{}.yaml", to.len()));
    std::fs::write(&path, source.replacen(from, to, 1)).unwrap();
    path
}

/// The commands a failing input reaches, with the arguments that make each read `file` (or only the cluster).
fn every_command_on(file: &Path, dir: &Path) -> Vec<(&'static str, Command)> {
    let kubeconfig = dead_kubeconfig(dir);
    let reports = dir.join("reports");
    let with = |args: &[&str], file: Option<&Path>| {
        let mut command = bin();
        command.args(args);
        // `validate` reads no cluster, so it takes no --kubeconfig.
        if args != ["validate"] {
            command.arg("--kubeconfig").arg(&kubeconfig);
        }
        if let Some(file) = file {
            command.arg(file);
        }
        command
    };
    vec![
        ("validate", with(&["validate"], Some(file))),
        ("plan", with(&["plan"], Some(file))),
        ("run", with(&["run", "--yes", "--reports-dir", reports.to_str().unwrap()], Some(file))),
        ("run --dry-run", with(&["run", "--dry-run"], Some(file))),
        ("preflight", with(&["preflight"], Some(file))),
        ("watch", with(&["watch", "--reports-dir", reports.to_str().unwrap()], Some(file))),
    ]
}

#[test]
fn a_bad_file_and_an_unreachable_cluster_exit_the_same_from_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let bad = drain_with("drain: {nodes: onPrem", "drian: {nodes: onPrem", dir.path());
    for (what, mut command) in every_command_on(&bad, dir.path()) {
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{what} on a bad file: {}", stderr(&out));
    }
    let good = repo().join("drills/drain.yaml");
    for (what, mut command) in every_command_on(&good, dir.path()).into_iter().skip(1) {
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{what} on an unreachable cluster: {}", stderr(&out));
        assert!(stderr(&out).contains("cannot reach the API server"), "{what}: {}", stderr(&out));
    }
    let kubeconfig = dead_kubeconfig(dir.path());
    for args in [&["status"][..], &["identify"], &["recover"]] {
        let out = bin().args(args).arg("--kubeconfig").arg(&kubeconfig).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    assert!(!dir.path().join("reports").exists(), "nothing was written");
}

#[test]
fn only_the_commands_that_read_a_cluster_take_its_flags() {
    for command in ["run", "plan", "preflight", "status", "recover", "watch", "identify"] {
        let help = String::from_utf8(bin().args([command, "--help"]).output().unwrap().stdout).unwrap();
        assert!(help.contains("--kubeconfig <FILE>") && help.contains("--context <NAME>"), "{command}:\n{help}");
    }
    for command in ["report", "history", "verify", "evidence", "schema", "completions", "man", "validate"] {
        let help = String::from_utf8(bin().args([command, "--help"]).output().unwrap().stdout).unwrap();
        assert!(!help.contains("--kubeconfig"), "{command} reads no cluster:\n{help}");
    }
    let out = bin().args(["report", "--kubeconfig", "x", "reports/x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unexpected argument '--kubeconfig'"), "{}", stderr(&out));
}

#[test]
fn usage_errors_exit_2_from_every_command() {
    for command in ["run", "plan", "preflight", "status", "validate", "report", "history", "recover", "watch"] {
        let out = bin().args([command, "--no-such-flag"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
    }
}

#[test]
fn every_command_with_output_formats_takes_dash_o() {
    for command in ["report", "history", "validate", "plan", "run", "preflight", "status", "identify", "recover"] {
        let out = bin().args([command, "--help"]).output().unwrap();
        let help = stdout(&out);
        assert!(help.contains("-o, --output <OUTPUT>"), "{command} --help:\n{help}");
        assert!(!help.contains("--format"), "{command} shows the deprecated flag:\n{help}");
    }
}

#[test]
fn the_old_format_flag_still_works_with_a_warning() {
    let run = repo().join("tests/fixtures/run");
    let new = bin().arg("history").arg(&run).args(["-o", "json"]).output().unwrap();
    assert_eq!(new.status.code(), Some(0), "{}", stderr(&new));
    assert!(!stderr(&new).contains("deprecated"), "{}", stderr(&new));
    for old in [&["-f", "json"][..], &["--format", "json"], &["--format=json"]] {
        let out = bin().arg("history").arg(&run).args(old).output().unwrap();
        assert_eq!((out.status.code(), stdout(&out)), (Some(0), stdout(&new)), "{old:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("is deprecated on `history`: use `-o`/`--output`"), "{}", stderr(&out));
    }
}

#[test]
fn validate_prints_json_with_every_problem_located() {
    let dir = tempfile::tempdir().unwrap();
    let bad = drain_with("drain: {nodes: onPrem", "drian: {nodes: onPrem", dir.path());
    let good = repo().join("drills/drain.yaml");
    let out = bin().args(["validate", "-o", "json"]).arg(&good).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "JSON mode prints only the JSON");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (answer["schema"].as_str(), answer["valid"].as_bool()),
        (Some("hybrid-drill.io/validate/v1"), Some(false))
    );
    let files = answer["files"].as_array().unwrap();
    assert_eq!((files[0]["valid"].as_bool(), files[0]["drill"].as_str()), (Some(true), Some("onprem-gpu-drain")));
    assert_eq!(files[0]["steps"], 8);
    let error = &files[1]["errors"][0];
    let line = std::fs::read_to_string(&bad).unwrap().lines().position(|l| l.contains("drian:")).unwrap() + 1;
    assert_eq!((error["line"].as_u64(), error["column"].as_u64()), (Some(line as u64), Some(7)), "{error}");
    assert!(error["message"].as_str().unwrap().contains("unknown key `drian`"), "{error}");
    assert_eq!(error["label"], "did you mean `drain`?");

    // A warning is located like an error and keeps the file valid (exit 0).
    let unwaited = drain_with("      waitFor: fallback-empty\n", "      pause: 1s\n", dir.path());
    let out = bin().args(["validate", "-o", "json"]).arg(&unwaited).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warning = &answer["files"][0]["warnings"][0];
    assert_eq!(answer["files"][0]["valid"], true, "{answer:#}");
    assert!(warning["message"].as_str().unwrap().contains("reclaim"), "{answer:#}");
    assert!(warning["line"].as_u64().is_some_and(|l| l > 0), "a located warning: {answer:#}");
}

#[test]
fn a_restart_target_takes_kubectls_kind_and_name_forms() {
    let dir = tempfile::tempdir().unwrap();
    for form in ["deploy/llm-inference", "deployment.apps/llm-inference", "deployments/llm-inference", "sts/db"] {
        let file = drain_with("restart: deployment/llm-inference", &format!("restart: {form}"), dir.path());
        let out = bin().arg("validate").arg(&file).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{form}: {}", stderr(&out));
    }
    let file = drain_with("restart: deployment/llm-inference", "restart: daemonset/llm-inference", dir.path());
    let out = bin().arg("validate").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let out = bin().args(["preflight", "-n", "inference", "--help"]).output().unwrap();
    assert!(stdout(&out).contains("-n, --namespace <NS>"), "{}", stdout(&out));
}

#[test]
fn every_commands_help_has_examples_and_its_exit_codes() {
    let commands = [
        "run",
        "watch",
        "report",
        "history",
        "validate",
        "plan",
        "preflight",
        "recover",
        "status",
        "identify",
        "schema",
        "completions",
        "man",
    ];
    for command in commands {
        let out = bin().args([command, "--help"]).output().unwrap();
        let help = stdout(&out);
        assert!(help.contains("Examples:\n  hybrid-drill "), "{command} --help has no examples:\n{help}");
        assert!(help.contains("Exit codes:\n  0  "), "{command} --help has no exit codes:\n{help}");
    }
    let refused = "5  refused, nothing touched: a preflight check failed";
    for command in ["run", "plan", "preflight"] {
        let help = stdout(&bin().args([command, "--help"]).output().unwrap());
        assert!(help.contains(refused), "{command}:\n{help}");
    }
    let status = stdout(&bin().args(["status", "--help"]).output().unwrap());
    assert!(status.contains("6  not clean") && !status.contains("1  the drill completed"), "{status}");
    let run = stdout(&bin().args(["run", "--help"]).output().unwrap());
    for documented in ["--dry-run", "HYBRID_DRILL_PUSHGATEWAY", "guards.maxServiceDown"] {
        assert!(run.contains(documented), "run --help lacks {documented}:\n{run}");
    }
}

#[test]
fn every_man_page_has_an_exit_status_section() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin().arg("man").arg("--dir").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut pages = 0;
    for page in std::fs::read_dir(dir.path()).unwrap().flatten() {
        let roff = std::fs::read_to_string(page.path()).unwrap();
        assert!(roff.contains(".SH \"EXIT STATUS\""), "{}:\n{roff}", page.path().display());
        pages += 1;
    }
    assert!(pages >= 14, "{pages} pages");
    let status = std::fs::read_to_string(dir.path().join("hybrid-drill-status.1")).unwrap();
    assert!(status.contains("not clean"), "{status}");
}

/// With `-o json`, `plan` and `recover` that fail before they start still print one object on stdout, as `run` does:
/// a CI step reading stdout gets the reason and the exit code, never an empty file.
#[test]
fn plan_and_recover_with_json_output_print_their_failure_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dead_kubeconfig(dir.path());
    let drill = repo().join("drills/drain.yaml");
    let plan = bin().arg("plan").arg(&drill).args(["-o", "json", "--kubeconfig"]).arg(&kubeconfig).output().unwrap();
    let recover = bin().args(["recover", "-o", "json", "--kubeconfig"]).arg(&kubeconfig).output().unwrap();
    for (what, out) in [("plan", plan), ("recover", recover)] {
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        let json: serde_json::Value = serde_json::from_str(&stdout(&out))
            .unwrap_or_else(|e| panic!("{what}: no JSON on stdout ({e}): {}", stdout(&out)));
        assert_eq!(json["exit_code"], 2, "{what}: {json:#}");
        assert!(json["error"].as_str().unwrap().contains("cannot reach the API server"), "{what}: {json:#}");
    }
}
