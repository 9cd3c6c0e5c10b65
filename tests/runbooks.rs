//! The runbooks, the README and docs/ cannot rot: every `hybrid-drill` command they show must be a real subcommand
//! with real flags, every repository file they name must exist, every drill file they name must validate, and so must
//! the README's drill-file example.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_hybrid-drill")).args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "hybrid-drill {args:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn runbooks() -> Vec<(PathBuf, String)> {
    markdown_in("runbooks")
}

/// What a user reads: the runbooks, the README and docs/.
fn documents() -> Vec<(PathBuf, String)> {
    let readme = repo().join("README.md");
    let mut all = vec![(readme.clone(), std::fs::read_to_string(&readme).unwrap())];
    all.extend(markdown_in("docs"));
    all.extend(runbooks());
    all
}

fn markdown_in(dir: &str) -> Vec<(PathBuf, String)> {
    let mut found: Vec<(PathBuf, String)> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("{dir}/: {e}"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    found.sort();
    found
}

/// The code in a markdown file: fenced blocks line by line, and inline `code` spans.
fn code_lines(markdown: &str) -> Vec<String> {
    let mut code = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            code.push(line.to_string());
        } else {
            code.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    code
}

/// Each `hybrid-drill ...` invocation in the code: its words up to a comment, a pipe or a redirection.
fn commands(markdown: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for line in code_lines(markdown) {
        let mut rest = line.as_str();
        while let Some(i) = rest.find("hybrid-drill ") {
            // `kubectl -n hybrid-drill ...` names the namespace, not the tool; `lease/hybrid-drill ...` an object.
            let before: Vec<&str> = rest[..i].split_whitespace().collect();
            if matches!(before.last(), Some(&"-n" | &"--namespace")) || rest[..i].ends_with('/') {
                rest = &rest[i + 1..];
                continue;
            }
            // A command quoted inside a fenced block's comment ends at its closing backtick.
            let line = rest[i + "hybrid-drill ".len()..].split('`').next().unwrap_or_default();
            let words: Vec<String> = line
                .split_whitespace()
                .take_while(|w| !matches!(*w, "#" | "|" | ">" | ">>" | "&&" | "2>&1"))
                .map(str::to_string)
                .collect();
            // An inline span broken over two lines leaves a bare `hybrid-drill` at a line's end: nothing to check.
            if !words.is_empty() {
                found.push(words);
            }
            rest = &rest[i + 1..];
        }
    }
    found
}

/// The files a runbook names: the targets of its links, and words that start with a top-level directory of the
/// repository, in prose and code alike (`reports/...` are run directories, not repository files).
fn repo_paths(markdown: &str, runbook: &Path) -> Vec<PathBuf> {
    const ROOTS: [&str; 8] = ["drills/", "runbooks/", "lab/", "deploy/", "tests/", "src/", "scripts/", "docs/"];
    let here = runbook.parent().unwrap();
    let mut paths = Vec::new();
    for word in markdown.split(|c: char| c.is_whitespace() || "()[]`'\"<>,;".contains(c)) {
        // `drills/drain.yaml:60:7` is a location in the file; `docs/x.md#tests` a section of it.
        let word = word.split(['#', ':']).next().unwrap_or_default().trim_end_matches('.');
        if ROOTS.iter().any(|r| word.starts_with(r)) {
            paths.push(repo().join(word));
        }
    }
    for link in markdown.split("](").skip(1) {
        let target = link.split(')').next().unwrap_or_default().split('#').next().unwrap_or_default();
        if !target.is_empty() && !target.contains("://") {
            paths.push(here.join(target));
        }
    }
    paths
}

#[test]
fn the_runbooks_ops_need_exist() {
    let names: BTreeSet<String> =
        runbooks().iter().map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for needed in ["README.md", "quarterly-drill.md", "abort-and-recover.md", "reading-an-rto-report.md"] {
        assert!(names.contains(needed), "runbooks/{needed} is missing");
    }
}

#[test]
fn every_command_a_document_shows_exists_with_its_flags() {
    let top = help(&[]);
    let subcommands: BTreeSet<String> = top
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let mut checked = 0;
    for (path, text) in documents() {
        for words in commands(&text) {
            let sub = words.first().unwrap_or_else(|| panic!("{}: a bare `hybrid-drill`", path.display()));
            assert!(
                subcommands.contains(sub),
                "{}: `hybrid-drill {}`: no subcommand `{sub}` (have {subcommands:?})",
                path.display(),
                words.join(" ")
            );
            let sub_help = help(&[sub]);
            for flag in words.iter().filter(|w| w.starts_with('-')) {
                let flag = flag.split('=').next().unwrap();
                assert!(
                    sub_help.contains(&format!("{flag} ")) || sub_help.contains(&format!("{flag}\n")),
                    "{}: `hybrid-drill {}`: `{sub}` has no flag {flag}",
                    path.display(),
                    words.join(" ")
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} commands found: is the extraction broken?");
}

#[test]
fn every_file_a_document_names_exists_and_every_drill_validates() {
    let mut drills = BTreeSet::new();
    for (path, text) in documents() {
        for file in repo_paths(&text, &path) {
            assert!(file.exists(), "{} names {}, which does not exist", path.display(), file.display());
            if file.extension().is_some_and(|x| x == "yaml") && file.parent().is_some_and(|p| p.ends_with("drills")) {
                drills.insert(file.canonicalize().unwrap());
            }
        }
    }
    assert!(drills.contains(&repo().join("drills/drain.yaml").canonicalize().unwrap()), "{drills:?}");
    for drill in drills {
        let out = Command::new(env!("CARGO_BIN_EXE_hybrid-drill")).arg("validate").arg(&drill).output().unwrap();
        assert!(
            out.status.success(),
            "{} does not validate:\n{}",
            drill.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_extraction_finds_commands_and_paths() {
    let md = "Run `hybrid-drill plan drills/a.yaml` then\n```sh\nhybrid-drill run x --yes   # go\nkubectl get nodes\n```\nsee [b](../lab/up), report.md and [web](https://example.com).";
    assert_eq!(commands(md), [vec!["plan", "drills/a.yaml"], vec!["run", "x", "--yes"]]);
    let paths = repo_paths(md, &repo().join("runbooks/x.md"));
    assert_eq!(paths, [repo().join("drills/a.yaml"), repo().join("runbooks/../lab/up")]);
}

/// The drill-file reference in the README is a drill file: copied as it is, it validates.
#[test]
fn the_readmes_drill_file_example_validates() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme.split("\n## The drill file\n").nth(1).expect("README has `## The drill file`");
    let example = section.split("```yaml\n").nth(1).expect("the section opens with a yaml example");
    let example = &example[..example.find("```").unwrap()];
    assert!(example.contains("kind: Drill"), "the first yaml block of `## The drill file` is not a drill:\n{example}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("example.yaml");
    std::fs::write(&file, example).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hybrid-drill")).arg("validate").arg(&file).output().unwrap();
    assert!(
        out.status.success(),
        "README's drill-file example does not validate:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The README reads as a user's page: a table of contents at the top, Install before the contributors' commands,
/// and table cells short enough to read (what needs more has a section of its own below its table).
#[test]
fn the_readme_has_contents_install_first_and_short_table_cells() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let at = |heading: &str| readme.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("no `{heading}`"));
    assert!(readme[..at("## Quick start against your own cluster")].contains("Contents: "), "no table of contents");
    assert!(at("## Install") < at("## The two commands"), "Install comes after the contributors' commands");
    let mut in_code = false;
    for (n, line) in readme.lines().enumerate() {
        in_code ^= line.starts_with("```");
        if in_code || !line.starts_with('|') {
            continue;
        }
        for cell in line.replace("\\|", "/").split('|') {
            assert!(cell.chars().count() <= 400, "README.md:{}: a cell of {} characters", n + 1, cell.chars().count());
        }
    }
}
