//! The process exit codes and the one mapping from a drill's outcome to its code, shared by the CLI and the report.

use crate::domain::Outcome;

pub const EXIT_PASSED: u8 = 0;
pub const EXIT_OBJECTIVE_MISSED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_ABORTED: u8 = 3;
pub const EXIT_RESTORE_FAILED: u8 = 4;
/// Refused: another drill (or `recover`) holds the cluster's drill lock; nothing was touched. Worth retrying later.
pub const EXIT_LOCKED: u8 = 5;
/// `history --fail-on-regression`: the latest run of a series regressed against the run before it or its objective.
pub const EXIT_REGRESSION: u8 = 6;

pub fn exit_code(outcome: Outcome) -> i32 {
    i32::from(match outcome {
        Outcome::Passed => EXIT_PASSED,
        Outcome::ObjectiveMissed => EXIT_OBJECTIVE_MISSED,
        Outcome::Aborted => EXIT_ABORTED,
        Outcome::RestoreFailed => EXIT_RESTORE_FAILED,
        // A refused drill touched nothing: like any other set-up problem.
        Outcome::Refused => EXIT_INVALID,
    })
}
