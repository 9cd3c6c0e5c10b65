//! The real binary on bad input: located errors, suggestions, exit codes, and no cluster contact.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hybrid-drill"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A kubeconfig whose server refuses every connection: any attempt to reach it would show.
fn dead_kubeconfig(dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: hybrid-lab\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         contexts:\n- name: hybrid-lab\n  context: {cluster: c, user: u}\n- name: other\n  context: {cluster: c, user: u}\n\
         users:\n- name: u\n  user: {token: not-a-secret}\n",
    )
    .unwrap();
    path
}

fn drain_with(from: &str, to: &str, dir: &Path) -> PathBuf {
    drain_edited(&[(from, to)], dir)
}

fn line_of(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path).unwrap().lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn shipped_drills_validate() {
    let out = bin().arg("validate").arg(repo().join("drills/drain.yaml")).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("is a valid drill (onprem-gpu-drain, 8 steps)"), "{stdout}");
}

#[test]
fn a_misspelt_step_key_points_at_line_and_column_and_suggests() {
    let dir = tempfile::tempdir().unwrap();
    let file = drain_with("drain: {nodes: onPrem", "drian: {nodes: onPrem", dir.path());
    let line = line_of(&file, "drian: {nodes: onPrem");
    let out = bin().arg("validate").arg(&file).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("error: unknown key `drian` in `spec.steps[2]`"), "{stderr}");
    assert!(stderr.contains(&format!("--> {}:{line}:7", file.display())), "{stderr}");
    assert!(stderr.contains(&format!("{line} |       drian: {{nodes: onPrem")), "{stderr}");
    assert!(stderr.contains("|       ^^^^^ did you mean `drain`?"), "{stderr}");
}

#[test]
fn a_misspelt_value_suggests_the_valid_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = drain_with("waitFor: fallback-empty", "waitFor: fallback-emtpy", dir.path());
    let line = line_of(&file, "fallback-emtpy");
    let out = bin().arg("validate").arg(&file).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains(&format!(":{line}:16")), "{stderr}");
    assert!(stderr.contains("did you mean `fallback-empty`?"), "{stderr}");
}

#[test]
fn every_semantic_problem_is_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.yaml");
    std::fs::write(
        &file,
        "apiVersion: hybrid-drill.io/v1alpha1\nkind: Drill\nmetadata: {name: x}\nspec:\n  cluster: {context: a}\n  targets:\n    onPrem: {nodes: \"a=b c\"}\n    workload: {namespace: n, selector: \"a=b\", restoredWhen: {readyPods: 0}}\n    fallback: {nodePool: p}\n  steps:\n    - {id: a, drain: onPrem, cordon: onPrem}\n    - {id: a, return: {restart: deploymnet/x}}\n",
    )
    .unwrap();
    let out = bin().arg("validate").arg(&file).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    for expected in [
        "invalid label selector `a=b c`",
        "readyPods must be at least 1",
        "step `a` has 2 actions (`drain`, `cordon`)",
        "duplicate step id `a`",
        "did you mean `deployment`?",
        "error: 5 errors in",
    ] {
        assert!(stderr.contains(expected), "missing {expected:?} in:\n{stderr}");
    }
}

#[test]
fn broken_yaml_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.yaml");
    std::fs::write(&file, "apiVersion: hybrid-drill.io/v1alpha1\nkind: Drill\nmetadata: {name: x\n").unwrap();
    let out = bin().arg("validate").arg(&file).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("error: invalid YAML"), "{stderr}");
    assert!(stderr.contains(&format!("--> {}:", file.display())), "{stderr}");
}

#[test]
fn run_on_a_bad_file_never_contacts_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let file = drain_with("drain: {nodes: onPrem", "drian: {nodes: onPrem", dir.path());
    let kubeconfig = dead_kubeconfig(dir.path());
    let out = bin()
        .args(["run", "--yes", "--reports-dir"])
        .arg(dir.path().join("reports"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg(&file)
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("did you mean `drain`?"), "{stderr}");
    assert!(!stderr.contains("reach"), "{stderr}");
    assert!(!dir.path().join("reports").exists());
}

#[test]
fn an_unreachable_cluster_is_one_line_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dead_kubeconfig(dir.path());
    let out = bin()
        .args(["run", "--yes", "--reports-dir"])
        .arg(dir.path().join("reports"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg(repo().join("drills/drain.yaml"))
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot reach the API server of context `hybrid-lab` at https://127.0.0.1:1/"),
        "{stderr}"
    );
    assert!(stderr.contains("check the cluster is up"), "{stderr}");
    assert!(!stderr.contains("not-a-secret"), "{stderr}");
    assert!(!dir.path().join("reports").exists());
}

#[test]
fn with_json_output_a_run_or_identify_that_never_started_still_prints_its_error_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dead_kubeconfig(dir.path());
    let run = |args: &[&str], file: Option<&Path>| {
        let mut command = bin();
        command.args(args).arg("--kubeconfig").arg(&kubeconfig);
        if let Some(f) = file {
            command.arg(f);
        }
        command.output().unwrap()
    };
    let reports = dir.path().join("reports");
    let unreachable = run(
        &["run", "--yes", "-o", "json", "--reports-dir", reports.to_str().unwrap()],
        Some(&repo().join("drills/drain.yaml")),
    );
    let bad = drain_with("drain: {nodes: onPrem", "drian: {nodes: onPrem", dir.path());
    let invalid = run(&["run", "--yes", "-o", "json", "--reports-dir", reports.to_str().unwrap()], Some(&bad));
    let identify = run(&["identify", "-o", "json"], None);
    for (what, out) in [("unreachable", unreachable), ("invalid", invalid), ("identify", identify)] {
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{what}: {e}: {stdout}"));
        assert_eq!(json["exit_code"], 2, "{what}: {json}");
        let error = json["error"].as_str().unwrap_or_else(|| panic!("{what}: {json}"));
        assert!(
            error.contains("cannot reach the API server")
                || error.contains("is not a valid drill: `hybrid-drill validate -o json"),
            "{what}: {error}"
        );
        assert!(!stdout.contains("not-a-secret"), "{what}: {stdout}");
    }
}

#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_command_cleanly() {
    let mut child = bin()
        .args(["report", "-o", "html"])
        .arg(repo().join("tests/fixtures/run"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -c 0`: the reader is gone before the report is printed.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn each_commands_help_lists_its_own_exit_codes() {
    let help = |command: &str| String::from_utf8(bin().args([command, "--help"]).output().unwrap().stdout).unwrap();
    let validate = help("validate");
    assert!(validate.contains("  0  every file is a valid drill"), "{validate}");
    assert!(!validate.contains("the drill passed"), "{validate}");
    assert!(help("run").contains("  0  the drill passed\n"));
    assert!(help("verify").contains("  8  "));
    assert!(!help("report").contains("  8  "));
}

#[test]
fn another_context_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dead_kubeconfig(dir.path());
    let out = bin()
        .args(["plan", "--context", "other", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg(repo().join("drills/drain.yaml"))
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("this drill is for context `hybrid-lab` but the kubeconfig selects `other`; run `kubectl config use-context hybrid-lab`"),
        "{stderr}"
    );
}

#[test]
fn schema_is_json_that_names_every_step_action() {
    let out = bin().arg("schema").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = schema.to_string();
    for action in ["check", "drain", "cordon", "uncordon", "waitFor", "return", "exec", "pause", "fallback-ready"] {
        assert!(text.contains(&format!("\"{action}\"")), "schema lacks {action}");
    }
}

#[test]
fn help_teaches_with_examples_and_exit_codes() {
    let out = bin().arg("--help").output().unwrap();
    let (stdout, _) = text(&out);
    assert!(stdout.contains("hybrid-drill run drills/drain.yaml"), "{stdout}");
    assert!(stdout.contains("4  restore incomplete"), "{stdout}");
}

#[test]
fn preflight_without_a_drill_needs_every_target_and_valid_selectors() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dead_kubeconfig(dir.path());
    let out = bin().args(["preflight", "--namespace", "inference", "--kubeconfig"]).arg(&kubeconfig).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(
        stderr.trim(),
        "error: without a drill file, preflight needs --nodes, --namespace, --selector and --node-pool (missing: \
         --nodes, --selector, --node-pool)"
    );
    let out = bin()
        .args(["preflight", "--nodes", "a b", "--namespace", "n", "--selector", "app=x", "--node-pool", "p"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("invalid label selector `a b` given to --nodes"), "{stderr}");
    assert!(!stderr.contains("reach"), "a bad flag must not contact the cluster: {stderr}");
}

#[test]
fn preflight_of_a_drill_refuses_another_context_and_an_unreachable_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dead_kubeconfig(dir.path());
    let drill = repo().join("drills/drain.yaml");
    let out =
        bin().args(["preflight", "--context", "other", "--kubeconfig"]).arg(&kubeconfig).arg(&drill).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("this drill is for context `hybrid-lab` but the kubeconfig selects `other`"), "{stderr}");
    let out = bin().args(["preflight", "--kubeconfig"]).arg(&kubeconfig).arg(&drill).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout.is_empty() && stderr.starts_with("error: cannot reach the API server"), "{stderr}");
}

#[test]
fn bash_completion_completes_commands_and_flags_when_sourced() {
    let out = bin().args(["completions", "bash"]).output().unwrap();
    let (script, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hybrid-drill.bash");
    std::fs::write(&file, &script).unwrap();
    // What bash does on TAB: the function `complete -F` registered, called with the words typed so far.
    let complete = |words: &str, cword: usize| {
        let probe = format!(
            "source {}; f=$(complete -p hybrid-drill | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p'); \
             COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; \
             $f hybrid-drill \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display()
        );
        let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect::<Vec<_>>()
    };
    let commands = complete("hybrid-drill re", 1);
    assert!(commands.contains(&"recover".into()) && commands.contains(&"report".into()), "{commands:?}");
    let flags = complete("hybrid-drill run --no", 2);
    assert!(flags.contains(&"--notify".into()), "{flags:?}");
}

#[test]
fn zsh_and_fish_completions_name_every_command() {
    for (shell, header) in [("zsh", "#compdef hybrid-drill"), ("fish", "complete -c hybrid-drill")] {
        let out = bin().args(["completions", shell]).output().unwrap();
        let (script, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(script.contains(header), "{shell}: {script}");
        for command in ["run", "recover", "validate", "completions", "man"] {
            assert!(script.contains(command), "{shell} completion lacks {command}");
        }
    }
    let out = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_man_page_renders_with_man_and_one_page_per_command_can_be_written() {
    let out = bin().arg("man").output().unwrap();
    let (roff, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(roff.starts_with(".ie \\n(.g .ds Aq") || roff.contains(".TH hybrid-drill 1"), "{roff}");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("hybrid-drill.1");
    std::fs::write(&page, &roff).unwrap();
    // The page as a reader sees it: man's own formatter, plain text.
    let shown =
        Command::new("man").arg("-l").arg(&page).env("MANPAGER", "cat").env("MANWIDTH", "100").output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    for needle in ["hybrid-drill", "Failure drills for hybrid GPU clusters", "--verbose", "recover", "Exit codes"] {
        assert!(shown.contains(needle), "the rendered page lacks {needle}:\n{shown}");
    }
    let pages = dir.path().join("man1");
    let out = bin().arg("man").arg("--dir").arg(&pages).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    for name in ["hybrid-drill.1", "hybrid-drill-run.1", "hybrid-drill-recover.1", "hybrid-drill-completions.1"] {
        assert!(
            pages.join(name).is_file(),
            "no {name} in {:?}",
            std::fs::read_dir(&pages).unwrap().collect::<Vec<_>>()
        );
    }
    let run = std::fs::read_to_string(pages.join("hybrid-drill-run.1")).unwrap();
    assert!(run.contains("pushgateway") && run.contains("notify"), "{run}");
}

#[test]
fn a_misspelt_notify_format_is_located_and_suggested() {
    let dir = tempfile::tempdir().unwrap();
    let hook = "  notify:\n    - {url: 'http://events.example.internal:8080/', format: slak}\n  steps:\n";
    let file = drain_with("  steps:\n", hook, dir.path());
    let out = bin().arg("validate").arg(&file).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did you mean `slack`"), "{stderr}");
    assert!(stderr.contains(&format!("drill.yaml:{}:", line_of(&file, "slak"))), "{stderr}");
}

#[test]
fn a_bad_notify_flag_is_refused_before_anything_runs() {
    let out = bin()
        .args(["run", "drills/drain.yaml", "--notify", "hooks.example.com/x"])
        .current_dir(repo())
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("invalid value 'hooks.example.com/x' for '--notify"), "{stderr}");
}

#[test]
fn watch_refuses_a_share_of_replicas_it_cannot_judge_before_contacting_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let file = drain_with("readyPods: 4", "readyPods: \"75%\"", dir.path());
    let kubeconfig = dead_kubeconfig(dir.path());
    let out = bin()
        .args(["watch", "--reports-dir"])
        .arg(dir.path().join("reports"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg(&file)
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("readyPods `75%` is a share"), "{stderr}");
    assert!(stderr.contains("readyPods: 4"), "{stderr}");
    assert!(!stderr.contains("reach"), "{stderr}");
}

/// drills/drain.yaml with several edits, each of which must still apply.
fn drain_edited(edits: &[(&str, &str)], dir: &Path) -> PathBuf {
    let mut source = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    for (from, to) in edits {
        assert!(source.contains(from), "drills/drain.yaml no longer contains {from:?}");
        source = source.replacen(from, to, 1);
    }
    let path = dir.join("drill.yaml");
    std::fs::write(&path, source).unwrap();
    path
}

fn validate(file: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = bin().arg("validate").args(extra).arg(file).output().unwrap();
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout, stderr)
}

#[test]
fn durations_outside_the_one_grammar_are_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    for wrong in ["15M", "1.5h", "100y", "15 minutes", "900"] {
        let file = drain_with("rto: 15m", &format!("rto: {wrong}"), dir.path());
        let line = line_of(&file, "rto: ");
        let (code, _, stderr) = validate(&file, &[]);
        assert_eq!(code, Some(2), "{wrong}: {stderr}");
        assert!(stderr.contains(&format!("error: `{wrong}` is not a duration")), "{wrong}: {stderr}");
        assert!(stderr.contains(&format!("--> {}:{line}:10", file.display())), "{wrong}: {stderr}");
        assert!(stderr.contains("help: write a duration such as 10m, 90s or 1h30m"), "{wrong}: {stderr}");
    }
    for right in ["15m", "1h30m", "1h 30m", "900s"] {
        let file = drain_with("rto: 15m", &format!("rto: {right}"), dir.path());
        assert_eq!(validate(&file, &[]).0, Some(0), "{right}");
    }
    // A flag's duration is the same grammar, refused before anything runs.
    let out = bin().args(["watch", "--episode-limit", "15M"]).arg(repo().join("drills/drain.yaml")).output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`15M` is not a duration") && stderr.contains("write a duration such as 10m"), "{stderr}");
}

#[test]
fn mistakes_of_every_kind_are_reported_at_once_in_line_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = drain_edited(
        &[
            ("drain: {nodes: onPrem", "drian: {nodes: onPrem"),
            ("maxNodes: 4 ", "maxNodes: four "),
            ("rto: 15m", "rto: 15M"),
            ("name: onprem-gpu-drain", "name: Onprem_GPU"),
        ],
        dir.path(),
    );
    let (code, stdout, stderr) = validate(&file, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let expected = [
        (line_of(&file, "name: Onprem_GPU"), 9, "invalid drill name `Onprem_GPU`"),
        (line_of(&file, "rto: 15M"), 10, "`15M` is not a duration"),
        (line_of(&file, "maxNodes: four"), 15, "`maxNodes` must be a whole number (0 or more), not `four`"),
        (line_of(&file, "drian:"), 7, "unknown key `drian` in `spec.steps[2]`"),
    ];
    let mut last = None;
    for (line, column, message) in expected {
        let at = stderr.find(&format!("error: {message}")).unwrap_or_else(|| panic!("no {message:?} in:\n{stderr}"));
        let located = stderr[at..].find(&format!("--> {}:{line}:{column}", file.display()));
        assert!(
            located.is_some_and(|l| !stderr[at..at + l].contains("\nerror")),
            "{message} not at {line}:{column}:\n{stderr}"
        );
        assert!(last.is_none_or(|l| at > l), "{message} out of line order:\n{stderr}");
        last = Some(at);
    }
    assert!(stderr.contains("error: 4 errors in"), "{stderr}");
}

#[test]
fn a_tab_and_an_unclosed_bracket_are_located_on_their_own_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = drain_with("    rto: 15m", "\trto: 15m", dir.path());
    let line = line_of(&file, "\trto: 15m");
    let (code, _, stderr) = validate(&file, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("--> {}:{line}:1", file.display())), "{stderr}");
    assert!(stderr.contains("help: replace the tab with spaces"), "{stderr}");

    let file = drain_with("rto: 15m", "rto: [15m", dir.path());
    let line = line_of(&file, "rto: [15m");
    let (code, _, stderr) = validate(&file, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("error: invalid YAML: `[` is never closed"), "{stderr}");
    assert!(stderr.contains(&format!("--> {}:{line}:10", file.display())), "{stderr}");
}

#[test]
fn an_objective_no_step_measures_is_warned_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Without the step that waits for the fallback to empty, the run may end before reclaim does.
    let file = drain_with("    - id: reclaim\n      waitFor: fallback-empty\n      timeout: 30m\n", "", dir.path());
    let (code, stdout, stderr) = validate(&file, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("is a valid drill"), "{stdout}");
    assert!(stderr.contains("warning: the `reclaim` objective may not be measured"), "{stderr}");
    let line = line_of(&file, "reclaim: 20m");
    assert!(stderr.contains(&format!("--> {}:{line}:16", file.display())), "{stderr}");
    assert!(stderr.contains("waitFor: fallback-empty"), "{stderr}");

    // A drain never makes a node NotReady: detection can never be measured.
    let file = drain_with("      provisioning: 8m\n", "      provisioning: 8m\n      detection: 1m\n", dir.path());
    let (code, _, stderr) = validate(&file, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("error: the `detection` objective can never be measured"), "{stderr}");
    assert!(stderr.contains(&format!("--> {}:{}:18", file.display(), line_of(&file, "detection: 1m"))), "{stderr}");
}

#[test]
fn a_deadline_shorter_than_a_step_timeout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = drain_with("deadline: 45m", "deadline: 1m", dir.path());
    let (code, _, stderr) = validate(&file, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("error: the drill's deadline (1m) is shorter than step `reclaim`'s timeout (30m)"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("--> {}:{}:15", file.display(), line_of(&file, "deadline: 1m"))), "{stderr}");
}

#[test]
fn validate_with_a_context_checks_the_drills_cluster() {
    let drill = repo().join("drills/drain.yaml");
    let (code, _, stderr) = validate(&drill, &["--context", "prod-eks"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("error: this drill is for context `hybrid-lab`, not `prod-eks` (--context)"), "{stderr}");
    assert!(
        stderr.contains(&format!("--> {}:{}:14", drill.display(), line_of(&drill, "context: hybrid-lab"))),
        "{stderr}"
    );
    let (code, stdout, stderr) = validate(&drill, &["--context", "hybrid-lab"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("is a valid drill"), "{stdout}");
}

/// Secrets the tool is given never come back out of it: `--help` names the variables that hold them, not their
/// values; clap's refusal of a bad value masks them; a key or credentials given inline instead of a path or a
/// reference are refused without being printed.
#[test]
fn secrets_in_variables_and_inline_keys_are_never_printed() {
    let webhook = "https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX";
    let seed = "07".repeat(32);
    let help = bin()
        .args(["run", "--help"])
        .env("HYBRID_DRILL_NOTIFY", format!("slack={webhook}"))
        .env("HYBRID_DRILL_SIGNING_KEY", &seed)
        .env("HYBRID_DRILL_S3_CREDENTIALS", "/secret/path/creds")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&help);
    assert_eq!(help.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("HYBRID_DRILL_NOTIFY") && stdout.contains("HYBRID_DRILL_SIGNING_KEY"), "{stdout}");
    for secret in ["XXXXsecretXXXX", seed.as_str(), "/secret/path/creds"] {
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "--help prints {secret}:\n{stdout}");
    }
    // A webhook clap refuses (not http or https) is quoted in its error: masked.
    let dir = tempfile::tempdir().unwrap();
    let refused = bin()
        .args(["run", "drills/drain.yaml"])
        .current_dir(repo())
        .env("HYBRID_DRILL_NOTIFY", "ftp://hooks.example.com/XXXXsecretXXXX")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(!stdout.contains("XXXXsecretXXXX") && !stderr.contains("XXXXsecretXXXX"), "{stderr}");
    // The signing key itself given where its file or reference belongs: refused, not printed.
    let kubeconfig = dead_kubeconfig(dir.path());
    let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----";
    // `--signing-key -----BEGIN...` is an argument clap refuses and quotes: masked too.
    let pem_flag = format!("--signing-key={pem}");
    for (flags, ours) in
        [([pem_flag.as_str(), ""], true), (["--signing-key", &seed], true), (["--signing-key", pem], false)]
    {
        let out = bin()
            .args(["run", "--yes", "--reports-dir"])
            .arg(dir.path().join("reports"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg(repo().join("drills/drain.yaml"))
            .args(flags.iter().filter(|f| !f.is_empty()))
            .env_remove("HYBRID_DRILL_SIGNING_KEY")
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(!ours || stderr.contains("given inline (not shown)"), "{stderr}");
        assert!(!stderr.contains("MC4CAQAwBQYDK2Vw") && !stderr.contains(&seed), "the key is printed: {stderr}");
        assert!(!stdout.contains("MC4CAQAwBQYDK2Vw") && !stdout.contains(&seed));
    }
    // Credentials inline where their file belongs: the same.
    let out = bin()
        .args(["history", "s3://bucket/prefix", "--s3-credentials", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENG"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("given inline (not shown)") && !stderr.contains("wJalrXUtnFEMIK7MDENG"), "{stderr}");
}

/// A retention object lock cannot keep (or a calendar cannot hold) is refused on the command line, not at the end of
/// a run.
#[test]
fn an_absurd_retention_is_refused_up_front() {
    let out = bin().args(["run", "drills/drain.yaml", "--ship-retention", "110000000d"]).current_dir(repo()).output();
    let out = out.unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not between 1 second and 36500d"), "{stderr}");
}

/// A drill that runs commands on this machine is refused without `--allow-commands`, each command line named, before
/// the cluster is contacted or a run directory is made.
#[test]
fn a_drill_with_commands_needs_allow_commands() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dead_kubeconfig(dir.path());
    let out = bin()
        .args(["run", "--yes", "--reports-dir"])
        .arg(dir.path().join("reports"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg(repo().join("drills/node-failure.yaml"))
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("refusing the drill: it runs commands on this machine"), "{stderr}");
    assert!(stderr.contains("fail hook: ") && stderr.contains("recover hook: "), "{stderr}");
    assert!(stderr.contains("pass --allow-commands"), "{stderr}");
    assert!(!stderr.contains("reach"), "the cluster was contacted: {stderr}");
    assert!(!dir.path().join("reports").exists());
}
