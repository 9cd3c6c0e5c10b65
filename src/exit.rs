//! The process exit codes: one table for every command (what each code means and which commands return it), the
//! one mapping from a drill's outcome to its code, and the table rendered for `--help`, the man pages and README.

use crate::domain::Outcome;

pub const EXIT_PASSED: u8 = 0;
pub const EXIT_OBJECTIVE_MISSED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_ABORTED: u8 = 3;
/// The cluster is not as the drill found it and a human must act: a restore that failed, or a completed drill that
/// left cloud capacity it caused running (a NodeClaim in any NodePool; report.json's `leftovers` names it).
pub const EXIT_RESTORE_FAILED: u8 = 4;
/// Refused before anything was touched: a preflight check failed, a start gate is closed, an SLI was outside its
/// objective before the fault (the users' steady state), or another drill (or `recover`) holds the cluster's drill
/// lock. The same code from `preflight`, `plan`, `run` and `recover`.
pub const EXIT_REFUSED: u8 = 5;
/// `status` found something a drill left or is still doing: the lock held, an unfinished run, marks in the cluster.
pub const EXIT_LEFT_OVER: u8 = 6;
/// `history --fail-on-regression`: the latest run of a series regressed against the run before it or its objective.
pub const EXIT_REGRESSION: u8 = 7;
/// `verify` or `evidence` found a file of a run directory changed, removed or added after its manifest, the manifest
/// missing or belonging to another run directory, or not signed by a trusted key (unless `--allow-unsigned`). A code
/// of its own, so that a script tells an altered record from what `status` finds left over.
pub const EXIT_TAMPERED: u8 = 8;

/// One row of the exit-code table.
#[derive(Debug, Clone, Copy)]
pub struct ExitRow {
    pub code: u8,
    pub meaning: &'static str,
    /// The commands that may exit with this code.
    pub commands: &'static [&'static str],
}

/// The commands that may exit 0 or 2: all of them.
const EVERY_COMMAND: &[&str] = &[
    "run",
    "canary",
    "validate",
    "plan",
    "preflight",
    "status",
    "recover",
    "report",
    "history",
    "whatif",
    "predict",
    "verify",
    "evidence",
    "watch",
    "identify",
    "schema",
    "completions",
    "man",
];

/// Every exit code of every command; `--help`, the man pages and README's Exit codes section show this table.
pub const TABLE: &[ExitRow] = &[
    ExitRow {
        code: EXIT_PASSED,
        meaning: "success: the drill passed, the files are valid, no check failed, the cluster is clean",
        commands: EVERY_COMMAND,
    },
    ExitRow {
        code: EXIT_OBJECTIVE_MISSED,
        meaning: "the drill completed but missed an objective",
        commands: &["run", "canary"],
    },
    ExitRow {
        code: EXIT_INVALID,
        // Clap's own usage errors exit 2 too, from every command.
        meaning: "invalid input or set-up: bad drill file or flag, wrong context or cluster, unreachable cluster, \
                  missing permission or CRD, selector matching nothing; nothing was touched",
        commands: EVERY_COMMAND,
    },
    ExitRow {
        code: EXIT_ABORTED,
        meaning: "aborted (a step failed or timed out, a guard tripped, the emergency stop was pulled, SIGINT or \
                  SIGTERM); the cluster was restored",
        commands: &["run", "canary"],
    },
    ExitRow {
        code: EXIT_RESTORE_FAILED,
        meaning: "restore incomplete: the cluster needs a human (`hybrid-drill recover RUN_DIR` redoes and checks it), or \
                  the drill left cloud capacity it caused running (outcome left-behind, each NodeClaim named)",
        commands: &["run", "recover", "canary"],
    },
    ExitRow {
        code: EXIT_REFUSED,
        meaning: "refused, nothing touched: a preflight check failed (with --strict, warned), a start gate is closed, \
                  an SLI was outside its objective before the fault, or another drill or recover holds the cluster's \
                  drill lock",
        commands: &["run", "plan", "preflight", "recover", "canary"],
    },
    ExitRow {
        code: EXIT_LEFT_OVER,
        meaning: "not clean: the drill lock is held, a run is unfinished, or objects in the cluster carry a run's marks \
                  (`status` names each; `hybrid-drill recover` restores)",
        commands: &["status"],
    },
    ExitRow {
        code: EXIT_REGRESSION,
        meaning: "history found a regression against the previous comparable run",
        commands: &["history"],
    },
    ExitRow {
        code: EXIT_TAMPERED,
        meaning: "a run's record is altered, incomplete, moved from another run's directory, or not signed by a \
                  trusted key (without --allow-unsigned)",
        commands: &["verify", "evidence"],
    },
];

pub fn exit_code(outcome: Outcome) -> i32 {
    i32::from(match outcome {
        Outcome::Passed => EXIT_PASSED,
        Outcome::ObjectiveMissed => EXIT_OBJECTIVE_MISSED,
        Outcome::Aborted => EXIT_ABORTED,
        Outcome::RestoreFailed | Outcome::LeftBehind => EXIT_RESTORE_FAILED,
        // A failed preflight refuses the drill before it touches anything: the code `preflight` itself exits with.
        Outcome::Refused => EXIT_REFUSED,
    })
}

/// The code of a preflight verdict, for `preflight`, `plan` and `run --dry-run` alike.
pub fn preflight_code(passed: bool) -> u8 {
    if passed { EXIT_PASSED } else { EXIT_REFUSED }
}

/// The rows `command` may exit with (all of them for the top-level page).
pub fn rows_of(command: Option<&str>) -> impl Iterator<Item = &'static ExitRow> {
    let command = command.map(str::to_owned);
    TABLE.iter().filter(move |row| command.as_ref().is_none_or(|c| row.commands.contains(&c.as_str())))
}

/// What a code means from one command, where the table's words cover every command at once ("the drill passed, the
/// files are valid, ..."): a command's `--help` says only what its own success or refusal is.
fn meaning_for(command: &str, code: u8) -> Option<&'static str> {
    Some(match (command, code) {
        ("run", EXIT_PASSED) => "the drill passed",
        ("canary", EXIT_PASSED) => "a fallback node launched, served and was reclaimed; nothing is left",
        ("canary", EXIT_OBJECTIVE_MISSED) => {
            "the fallback failed its canary: launch refused, node never initialised, pod never served, or reclaim missed"
        }
        ("canary", EXIT_ABORTED) => "interrupted or the drill lock lost; the canary's pod and node were removed",
        ("canary", EXIT_RESTORE_FAILED) => "something the canary caused is still in the cluster (each named)",
        ("validate", EXIT_PASSED) => "every file is a valid drill (warnings do not change the code)",
        ("validate", EXIT_INVALID) => {
            "a file is not a valid drill (each problem is printed, located) or cannot be read"
        }
        ("plan", EXIT_PASSED) => "the plan was made and no preflight check failed",
        ("preflight", EXIT_PASSED) => "no check failed",
        ("status", EXIT_PASSED) => "the cluster is clean: no lock held, no unfinished run, no marks",
        ("recover", EXIT_PASSED) => "the cluster is back as the drill found it (or there was nothing to recover)",
        ("report", EXIT_PASSED) => "the report was printed",
        ("history", EXIT_PASSED) => "the history was printed and no regression found",
        ("verify", EXIT_PASSED) => "the run's record is intact (and signed, where a key was given)",
        ("evidence", EXIT_PASSED) => "the evidence was written (its index says which runs are intact)",
        ("watch", EXIT_PASSED) => "the watch stopped cleanly",
        ("identify", EXIT_PASSED) => "the cluster's identity was printed",
        ("whatif", EXIT_PASSED) => "the knobs were printed",
        ("predict", EXIT_PASSED) => "the forecast was printed (or why there is none)",
        ("schema" | "completions" | "man", EXIT_PASSED) => "printed or written",
        _ => return None,
    })
}

/// The table as `--help` shows it: `Exit codes:` and one indented line per code.
pub fn help_text(command: Option<&str>) -> String {
    let rows: Vec<String> = rows_of(command)
        .map(|r| {
            let meaning = command.and_then(|c| meaning_for(c, r.code)).unwrap_or(r.meaning);
            format!("  {}  {meaning}", r.code)
        })
        .collect();
    format!("Exit codes:\n{}", rows.join("\n"))
}

/// The table as README's Exit codes section holds it (a test keeps the two equal).
pub fn markdown() -> String {
    let mut out = String::from("| code | meaning | commands |\n|---|---|---|\n");
    for row in TABLE {
        let commands = if row.code == EXIT_PASSED || row.code == EXIT_INVALID {
            "all".to_string()
        } else {
            row.commands.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        };
        out.push_str(&format!("| {} | {} | {commands} |\n", row.code, row.meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_every_outcome_has_its_row() {
        let mut codes: Vec<u8> = TABLE.iter().map(|r| r.code).collect();
        codes.dedup();
        assert_eq!(codes.len(), TABLE.len());
        for outcome in Outcome::ALL {
            let code = exit_code(outcome) as u8;
            assert!(rows_of(Some("run")).any(|r| r.code == code), "{outcome:?} exits {code}, not in run's rows");
        }
    }

    #[test]
    fn a_failed_preflight_is_a_refusal_wherever_it_happens() {
        assert_eq!(preflight_code(false), exit_code(Outcome::Refused) as u8);
        assert_eq!(preflight_code(false), EXIT_REFUSED);
        for command in ["run", "plan", "preflight"] {
            assert!(rows_of(Some(command)).any(|r| r.code == EXIT_REFUSED), "{command}");
        }
    }

    #[test]
    fn a_commands_help_gives_its_own_success() {
        assert!(help_text(Some("validate")).contains("  0  every file is a valid drill"));
        assert!(!help_text(Some("validate")).contains("the drill passed"));
        assert!(help_text(Some("run")).contains("  0  the drill passed\n"));
        assert!(help_text(None).contains("the drill passed, the files are valid"));
    }

    #[test]
    fn readme_holds_the_table() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        assert!(readme.contains(&markdown()), "README's Exit codes section differs from the table:\n{}", markdown());
    }
}
