//! The one path every change to a cluster takes, forward or undo: journal the intent, make the call under the one
//! retry policy for transient failures, journal the outcome, record it in the timeline. Crash injection sits on it.

use std::fmt::Display;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::Mutex;

use super::error::MutationError;
use super::journal::{EntryState, Journal, Mutation};
use crate::timeline::{Event, Timeline};

/// Names the environment variable that makes a run die on the spot at one mutation, to prove recovery:
/// `N:before` dies once mutation N's intent is journalled, before it is made; `N:after` once it is made, before its
/// outcome is journalled. Like `kill -9`, nothing is rolled back; `hybrid-drill recover` must finish the job.
const CRASH_AT_ENV: &str = "HYBRID_DRILL_CRASH_AT";

#[derive(PartialEq)]
enum CrashWhen {
    Before,
    After,
}

fn crash_point(seq: u64, when: CrashWhen) {
    let Ok(spec) = std::env::var(CRASH_AT_ENV) else { return };
    let Some((n, at)) = spec.split_once(':') else { return };
    let wanted = match at {
        "before" => CrashWhen::Before,
        "after" => CrashWhen::After,
        _ => return,
    };
    if n.parse() == Ok(seq) && wanted == when {
        eprintln!("{CRASH_AT_ENV}={spec}: dying without restoring");
        std::process::abort();
    }
}

/// Whether a failed call may succeed if made again: the question the one retry policy asks.
pub(crate) trait Transient {
    fn is_transient(&self) -> bool;
}

/// The API server could not be reached (a restart, a dropped connection); an answer from it, errors included, is
/// final.
impl Transient for kube::Error {
    fn is_transient(&self) -> bool {
        !matches!(self, kube::Error::Api(_))
    }
}

/// Alertmanager could not be reached, or answered that it is overloaded or failing.
impl Transient for crate::alertmanager::AlertmanagerError {
    fn is_transient(&self) -> bool {
        crate::alertmanager::AlertmanagerError::is_transient(self)
    }
}

/// Retries a call while it fails transiently, with backoff, for up to a minute; other failures return at once.
pub(crate) async fn transient_retry<T, E, F, Fut>(mut call: F) -> Result<T, E>
where
    E: Transient + Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut delay = Duration::from_millis(500);
    loop {
        match call().await {
            Err(e) if e.is_transient() && tokio::time::Instant::now() + delay < give_up => {
                tracing::warn!("{e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            result => return result,
        }
    }
}

/// Which journal entry a change is written under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Stage {
    /// A mutation of the drill: a new entry, `intent` then `done` or `failed`. Crash injection counts these.
    Forward,
    /// The undo of entry `seq`, or of a mutation no journal holds (recovery from marks: a new entry); `undoing` then
    /// how it ended.
    Undo(Option<u64>),
}

/// How a change ended, as the journal and the timeline record it.
pub(super) struct Settled {
    state: EntryState,
    note: Option<String>,
    events: Vec<Event>,
}

impl Settled {
    pub(super) fn new(state: EntryState) -> Settled {
        Settled { state, note: None, events: Vec::new() }
    }

    /// The usual end of a forward mutation: done (and `event`, when it has one), or failed with the error as the note.
    pub(super) fn forward<T, E: Display>(result: &Result<T, E>, event: Option<Event>) -> Settled {
        match (result, event) {
            (Ok(_), Some(event)) => Settled::new(EntryState::Done).event(event),
            (Ok(_), None) => Settled::new(EntryState::Done),
            (Err(e), _) => Settled::new(EntryState::Failed).note(e.to_string()),
        }
    }

    pub(super) fn note(mut self, note: impl Into<String>) -> Settled {
        self.note = Some(note.into());
        self
    }

    pub(super) fn event(mut self, event: Event) -> Settled {
        self.events.push(event);
        self
    }
}

/// What became of a change.
pub(super) struct Performed<T, E> {
    /// The call's result; none when its intent could not be journalled, so it was not made.
    pub(super) result: Option<Result<T, E>>,
    /// Journal writes that failed, in order.
    pub(super) journal_failures: Vec<MutationError>,
}

impl<T, E> Performed<T, E> {
    /// A forward mutation stops at a journal that cannot be written: the journal would no longer tell the truth.
    pub(super) fn checked(self) -> Result<Result<T, E>, MutationError> {
        match (self.journal_failures.into_iter().next(), self.result) {
            (None, Some(result)) => Ok(result),
            (Some(failure), _) => Err(failure),
            (None, None) => unreachable!("a change is only skipped when its intent could not be journalled"),
        }
    }
}

/// The journal (and, during a run, the timeline) every change is written to.
pub(super) struct Ledger {
    journal: Mutex<Journal>,
    timeline: Option<Timeline>,
}

impl Ledger {
    pub(super) fn new(journal: Journal, timeline: Option<Timeline>) -> Ledger {
        Ledger { journal: Mutex::new(journal), timeline }
    }

    pub(super) async fn journal_path(&self) -> PathBuf {
        self.journal.lock().await.path().to_path_buf()
    }

    /// Whether the user trusts this journal's unauthenticated lines by name (`recover --trust-journal`).
    pub(super) async fn journal_trusted_by_user(&self) -> bool {
        self.journal.lock().await.is_trusted_by_user()
    }

    pub(super) fn record(&self, event: Event) {
        if let Some(timeline) = &self.timeline {
            timeline.record(event);
        }
    }

    /// Journals one entry and waits until it is on disk.
    pub(super) async fn write(
        &self,
        seq: u64,
        state: EntryState,
        m: &Mutation,
        note: Option<String>,
    ) -> Result<(), MutationError> {
        let mut journal = self.journal.lock().await;
        journal.write(seq, state, m, note).map_err(|cause| write_failure(&journal, cause))
    }

    /// Journals the intent of a change under one lock, so entries reach the file in the order of their numbers.
    async fn begin(&self, stage: Stage, m: &Mutation) -> (u64, Result<(), MutationError>) {
        let mut journal = self.journal.lock().await;
        let (seq, state) = match stage {
            Stage::Forward => (journal.next_seq(), EntryState::Intent),
            Stage::Undo(Some(seq)) => (seq, EntryState::Undoing),
            Stage::Undo(None) => (journal.next_seq(), EntryState::Undoing),
        };
        let written = journal.write(seq, state, m, None).map_err(|cause| write_failure(&journal, cause));
        (seq, written)
    }

    /// Makes one change: journals the intent (`intent`, or `undoing` for an undo), records `announce`, makes `call`
    /// under [`transient_retry`], journals how `settle` judges the result and records its events. A forward change
    /// whose intent cannot be journalled is not made; an undo is made anyway (undoing is the safe direction, and its
    /// entry stays outstanding for `recover`), its journal failures returned for the rollback to report.
    pub(super) async fn perform<T, E, F, Fut>(
        &self,
        stage: Stage,
        m: &Mutation,
        announce: Option<Event>,
        call: F,
        settle: impl FnOnce(&Result<T, E>) -> Settled,
    ) -> Performed<T, E>
    where
        E: Transient + Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut journal_failures = Vec::new();
        let (seq, intent) = self.begin(stage, m).await;
        if let Err(failure) = intent {
            if stage == Stage::Forward {
                return Performed { result: None, journal_failures: vec![failure] };
            }
            journal_failures.push(failure);
        }
        if stage == Stage::Forward {
            crash_point(seq, CrashWhen::Before);
        }
        if let Some(event) = announce {
            self.record(event);
        }
        let result = transient_retry(call).await;
        let settled = settle(&result);
        if stage == Stage::Forward {
            crash_point(seq, CrashWhen::After);
        }
        if let Err(failure) = self.write(seq, settled.state, m, settled.note).await {
            journal_failures.push(failure);
        }
        for event in settled.events {
            self.record(event);
        }
        Performed { result: Some(result), journal_failures }
    }
}

fn write_failure(journal: &Journal, cause: std::io::Error) -> MutationError {
    MutationError::Journal { path: journal.path().display().to_string(), cause }
}
