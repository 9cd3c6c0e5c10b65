//! Safety: the one place that mutates a cluster, every change and every undo journalled first; rollback, and
//! recovery from a journal or from the marks a run left in the cluster.

pub mod emergency;
mod error;
pub mod journal;
mod ledger;
pub mod lock;
mod mutator;
mod process;
mod recover;
mod requests;
pub mod signals;
mod undo;
mod verify;

#[cfg(test)]
pub(crate) mod tests;

pub use error::MutationError;
pub(crate) use ledger::transient_retry;
pub use mutator::{Eviction, Mutator, eviction_refusal};
pub use recover::{marked_changes, recover, recover_marks};
pub use undo::RollbackOutcome;
pub use verify::{Leftover, RestoreScope, restore_wait};
