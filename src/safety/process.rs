//! Running a user's commands, the drill's hooks and their undo commands: no shell, a deadline, output to stderr, and
//! only the environment each hook declares.

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

/// What every hook gets of the tool's environment besides what it declares: finding programs and a home.
const ALWAYS_PASSED: [&str; 2] = ["PATH", "HOME"];

/// Runs a program (no shell) with a deadline, its output passed to the terminal's stderr line by line with every
/// secret masked. Its secret references (`${env:NAME}`, `${file:PATH}`) are read now, so only the command as written
/// is ever recorded; its environment is `PATH`, `HOME` and the variables `env` names, as the tool has them, never the
/// tool's own secrets: a webhook's or a kubeconfig's credentials in the tool's environment are not a hook's to read
/// unless the drill says so, and the signing and journal keys are never a hook's.
pub(super) async fn run_command(command: &[String], timeout: Duration, env: &[String]) -> Result<i32, MutationError> {
    let shown = command.join(" ");
    let resolved: Result<Vec<String>, _> = command.iter().map(|a| crate::secrets::resolve(a)).collect();
    let resolved = resolved.map_err(|e| MutationError::Spawn { command: shown.clone(), message: e.to_string() })?;
    let Some((program, args)) = resolved.split_first() else {
        return Err(MutationError::Spawn { command: shown, message: "empty command".into() });
    };
    let passed = ALWAYS_PASSED.iter().copied().chain(env.iter().map(String::as_str));
    let passed = passed.filter(|k| !crate::secrets::TOOL_SECRETS.contains(k));
    let vars: Vec<(&str, String)> = passed.filter_map(|k| std::env::var(k).ok().map(|v| (k, v))).collect();
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(vars)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| MutationError::Spawn { command: shown.clone(), message: e.to_string() })?;
    // Both streams join the tool's stderr: the tool's stdout holds the report alone (`--output json`).
    let out = child.stdout.take().map(|s| tokio::spawn(pass_masked(s)));
    let err = child.stderr.take().map(|s| tokio::spawn(pass_masked(s)));
    let waited = tokio::time::timeout(timeout, child.wait()).await;
    if waited.is_err() {
        let _ = child.kill().await;
    }
    // What the hook wrote before it ended is passed on; a child it left behind holding the pipes is not waited for.
    for reader in [out, err].into_iter().flatten() {
        let abort = reader.abort_handle();
        if tokio::time::timeout(Duration::from_secs(2), reader).await.is_err() {
            abort.abort();
        }
    }
    match waited {
        Ok(Ok(status)) => Ok(status.code().unwrap_or(-1)),
        Ok(Err(e)) => Err(MutationError::Spawn { command: shown, message: e.to_string() }),
        Err(_) => Err(MutationError::CommandTimeout { command: shown, seconds: timeout.as_secs() }),
    }
}

/// Copies a hook's output to stderr one line at a time, each line masked (`secrets::redact`) before it is written.
async fn pass_masked(stream: impl tokio::io::AsyncRead + Unpin) {
    use std::io::Write as _;
    use tokio::io::AsyncBufReadExt as _;
    let mut reader = tokio::io::BufReader::new(stream);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).await.is_ok_and(|n| n > 0) {
        let text = String::from_utf8_lossy(&line);
        let _ = std::io::stderr().lock().write_all(crate::secrets::redact(&text).as_bytes());
        line.clear();
    }
}

/// Journals the hook `m`, runs `command` with a deadline, journals how it ended and records it in the timeline.
pub(super) async fn run_hook(
    ledger: &Ledger,
    m: &Mutation,
    step: &str,
    command: &[String],
    timeout: Duration,
    env: &[String],
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
    ledger.perform(Stage::Forward, m, None, || run_command(command, timeout, env), settle).await.checked()?
}
