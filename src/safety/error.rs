//! What a change to the cluster can fail with, for every path that makes or undoes one (the mutator, the ledger,
//! hooks, rollback and recovery).

use super::journal::ReadError;
use crate::alertmanager::AlertmanagerError;
use crate::cluster::first_line;

#[derive(Debug, thiserror::Error)]
pub enum MutationError {
    #[error("cannot write the journal {path}: {cause}")]
    Journal { path: String, cause: std::io::Error },
    #[error(transparent)]
    JournalRead(#[from] ReadError),
    /// The API server's answer, or the request that got none, kept whole: a caller can tell a refusal (403, 404,
    /// 409) from a timeout. The message shows its first line only.
    #[error("{action} {target} failed: {}", first_line(&.error.to_string()))]
    Api { action: String, target: String, error: kube::Error },
    #[error("create {target} failed: a policy kind this tool does not know")]
    UnknownPolicy { target: String },
    #[error("create {target} failed: {cause}")]
    PolicyObject { target: String, cause: serde_json::Error },
    #[error("command `{command}` could not run: {message}")]
    Spawn { command: String, message: String },
    #[error("command `{command}` did not finish within {seconds}s")]
    CommandTimeout { command: String, seconds: u64 },
    #[error("silence {target} failed: {cause}")]
    Silence { target: String, cause: AlertmanagerError },
}

pub(super) fn api_error(action: &str, target: &str, e: kube::Error) -> MutationError {
    MutationError::Api { action: action.into(), target: target.into(), error: e }
}
