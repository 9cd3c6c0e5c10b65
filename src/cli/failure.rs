//! The CLI's one error boundary: each command returns its exit code or a [`Failure`], and [`report`] alone prints a
//! failure (masked, and as one JSON object when the command's output is JSON) and maps it to its exit code, as
//! ripgrep's main does.

use std::fmt::Display;

use crate::exit::EXIT_INVALID;

/// What a command returns: its exit code, or why it stopped.
pub(super) type Outcome = Result<u8, Failure>;

/// Why a command stopped, and with which exit code.
#[derive(Debug)]
pub(super) struct Failure {
    code: u8,
    said: Said,
    /// The command prints JSON: the failure is one object on stdout too, so a CI step reading it gets the reason.
    json: bool,
}

#[derive(Debug)]
enum Said {
    /// Said as `error: MESSAGE`.
    Error(String),
    /// Rendered already (a drill file's located diagnostics); `summary` is the JSON object's line.
    Rendered { text: String, summary: String },
}

impl Failure {
    pub(super) fn new(error: impl Display, code: u8) -> Failure {
        Failure { code, said: Said::Error(error.to_string()), json: false }
    }

    /// A failure of invalid input or set-up (exit 2).
    pub(super) fn invalid(error: impl Display) -> Failure {
        Failure::new(error, EXIT_INVALID)
    }

    /// Diagnostics printed as they are, with the line a JSON reader gets instead.
    pub(super) fn rendered(text: String, summary: String) -> Failure {
        Failure { code: EXIT_INVALID, said: Said::Rendered { text, summary }, json: false }
    }

    /// Said as one JSON object on stdout too.
    pub(super) fn json_too(mut self, json: bool) -> Failure {
        self.json = json;
        self
    }
}

/// Prints a command's failure, once, and returns the exit code: the one place the CLI says `error:`.
pub(super) fn report(outcome: Outcome) -> u8 {
    let failure = match outcome {
        Ok(code) => return code,
        Err(failure) => failure,
    };
    let summary = match &failure.said {
        Said::Error(message) => {
            eprintln!("error: {}", crate::secrets::redact(message));
            message
        }
        Said::Rendered { text, summary } => {
            eprint!("{text}");
            summary
        }
    };
    if failure.json {
        println!("{}", serde_json::json!({ "error": crate::secrets::redact(summary), "exit_code": failure.code }));
    }
    failure.code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_its_code_and_success_passes_through() {
        assert_eq!(report(Ok(3)), 3);
        assert_eq!(
            report(Err(Failure::new("held", crate::exit::EXIT_REFUSED).json_too(true))),
            crate::exit::EXIT_REFUSED
        );
        assert_eq!(report(Err(Failure::rendered(String::new(), "bad".into()))), EXIT_INVALID);
    }
}
