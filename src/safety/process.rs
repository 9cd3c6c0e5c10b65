//! Running a user's commands, the drill's hooks and their undo commands: no shell, a deadline, output to stderr.

use std::time::Duration;

use super::error::MutationError;
use super::journal::{EntryState, Mutation};
use super::ledger::{Ledger, Settled, Stage, Transient};
use crate::timeline::Event;

/// A hook is never run twice on its own: whether running it again is safe is the drill author's to say.
impl Transient for MutationError {
    fn is_transient(&self) -> bool {
        false
    }
}

/// Runs a program (no shell) with a deadline, its output passed through to the terminal's stderr.
pub(super) async fn run_command(command: &[String], timeout: Duration) -> Result<i32, MutationError> {
    let shown = command.join(" ");
    let Some((program, args)) = command.split_first() else {
        return Err(MutationError::Spawn { command: shown, message: "empty command".into() });
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| MutationError::Spawn { command: shown.clone(), message: e.to_string() })?;
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => Ok(status.code().unwrap_or(-1)),
        Ok(Err(e)) => Err(MutationError::Spawn { command: shown, message: e.to_string() }),
        Err(_) => {
            let _ = child.kill().await;
            Err(MutationError::CommandTimeout { command: shown, seconds: timeout.as_secs() })
        }
    }
}

/// Journals the hook `m`, runs `command` with a deadline, journals how it ended and records it in the timeline.
pub(super) async fn run_hook(
    ledger: &Ledger,
    m: &Mutation,
    step: &str,
    command: &[String],
    timeout: Duration,
) -> Result<i32, MutationError> {
    let settle = |outcome: &Result<i32, MutationError>| {
        let exit_code = outcome.as_ref().ok().copied();
        let state = if exit_code == Some(0) { EntryState::Done } else { EntryState::Failed };
        let settled =
            Settled::new(state).event(Event::HookRan { step: step.into(), command: command.join(" "), exit_code });
        match outcome {
            Err(e) => settled.note(e.to_string()),
            Ok(_) => settled,
        }
    };
    ledger.perform(Stage::Forward, m, None, || run_command(command, timeout), settle).await.checked()?
}
