//! The vocabulary every stage shares (drill file, steps, timeline, phases, reports): small types with one spelling
//! each, kept below all of them so none has to import another stage for a word.

mod autoscaler;
mod blockers;
mod faults;
mod gates;
mod kinds;
mod phase;

pub use autoscaler::Autoscaler;
pub use blockers::BlockerCause;
pub use faults::{Cni, CutFidelity, FaultKind, IncidentCause, RestoreTarget, UnknownFault};
pub use gates::GateKind;
pub(crate) use kinds::outcome_words;
pub use kinds::{ConditionStatus, Outcome, StepOutcome};
pub use phase::{PhaseId, UnknownPhase};

/// API requests by verb (list, watch, get, create, patch, evict...), then by resource.
pub type RequestsByVerb = std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>;
