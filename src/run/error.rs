//! What stops a run before anything was touched, and what keeps a finished run's record from being written.

use crate::cluster::ClusterError;
use crate::plan::PlanError;
use crate::safety::lock::LockError;

/// Problems found before anything was touched.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The run directory could not be created or started.
    #[error(transparent)]
    Record(#[from] crate::record::RecordError),
    #[error(
        "refusing to run without confirmation: stdin is not a terminal; review with `hybrid-drill plan FILE`, then pass --yes"
    )]
    NeedsYes,
    #[error("drill not started: confirmation declined")]
    Declined,
    #[error("the watches could not list the drilled objects: {error}{}", unreleased_note(.unreleased))]
    Watches {
        error: crate::timeline::watch::SyncError,
        /// The drill lock could not be released either: why.
        unreleased: Option<String>,
    },
    /// A start gate is closed and not overridden.
    #[error(transparent)]
    Gate(#[from] crate::gates::GateError),
    /// Another drill (or `recover`) holds the cluster's drill lock.
    #[error(transparent)]
    Locked(#[from] LockError),
    #[error("refusing the drill: its file requires {missing} (spec.evidence); nothing was touched")]
    Unapproved { missing: String },
    #[error(
        "refusing the drill: it runs commands on this machine, with the tool's identity and Secrets at hand: {}; \
         read them, then pass --allow-commands (`hybrid-drill plan` lists them); nothing was touched",
        .commands.join("; ")
    )]
    Commands { commands: Vec<String> },
    #[error("cannot sign the run's manifest: {0}; nothing was touched")]
    SigningKey(#[from] crate::evidence::keys::KeyError),
    #[error("cannot ship the run directory: {0}; nothing was touched")]
    Ship(#[from] crate::store::StoreError),
}

fn unreleased_note(unreleased: &Option<String>) -> String {
    match unreleased {
        Some(why) => {
            format!("; the drill lock was not released either ({why}): it falls free once unrenewed for its duration")
        }
        None => String::new(),
    }
}

impl SetupError {
    /// Its exit code: refused when the cluster's state forbids the drill now (the lock held, a closed start gate, a
    /// drain kubectl would refuse), as a failed preflight check is; any other problem is invalid set-up.
    pub fn exit_code(&self) -> u8 {
        match self {
            SetupError::Gate(_) => crate::exit::EXIT_REFUSED,
            SetupError::Locked(lock) if lock.is_held() => crate::exit::EXIT_REFUSED,
            SetupError::Plan(PlanError::DrainRefused(_)) => crate::exit::EXIT_REFUSED,
            _ => crate::exit::EXIT_INVALID,
        }
    }
}

/// Why a run did not leave its report: refused or failed before anything was touched, or its record not written at
/// the finish (the cluster was restored, or the report says why not).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Finish(#[from] crate::record::RecordError),
}

impl RunError {
    /// Its exit code: a set-up problem's own; a record not written is invalid set-up, as it always was.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Setup(e) => e.exit_code(),
            RunError::Finish(_) => crate::exit::EXIT_INVALID,
        }
    }
}
