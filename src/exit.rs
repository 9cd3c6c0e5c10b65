//! The process exit codes and the one mapping from a drill's outcome to its code, shared by the CLI and the report.

use crate::domain::Outcome;

pub const EXIT_PASSED: u8 = 0;
pub const EXIT_OBJECTIVE_MISSED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_ABORTED: u8 = 3;
/// The cluster is not as the drill found it and a human must act: a restore that failed, or a completed drill that
/// left cloud capacity it caused running (a NodeClaim in any NodePool; report.json's `leftovers` names it).
pub const EXIT_RESTORE_FAILED: u8 = 4;
/// Refused: another drill (or `recover`) holds the cluster's drill lock; nothing was touched. Worth retrying later.
pub const EXIT_LOCKED: u8 = 5;

pub fn exit_code(outcome: Outcome) -> i32 {
    i32::from(match outcome {
        Outcome::Passed => EXIT_PASSED,
        Outcome::ObjectiveMissed => EXIT_OBJECTIVE_MISSED,
        Outcome::Aborted => EXIT_ABORTED,
        Outcome::RestoreFailed | Outcome::LeftBehind => EXIT_RESTORE_FAILED,
        // A refused drill touched nothing: like any other set-up problem.
        Outcome::Refused => EXIT_INVALID,
    })
}
