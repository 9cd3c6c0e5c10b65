//! From a timeline to phases: boundaries on both clocks, durations, RTO, verdicts against objectives, fallback
//! GPU-hours and cost. A pure function of the drill and its observations.
//!
//! The phase table (`definitions`) says where each phase starts and ends; the moments of a drill are found once on
//! its timeline (`moments`, with the searches of each phase family beside it: `eviction`, `provisioning`,
//! `startup`, `restore`, `reclaim`), and `analyse` reads the phases and milestones from them; `cost` counts what the
//! fallback used.

mod analyse;
mod cost;
mod definitions;
mod eviction;
pub mod fallback_faults;
pub mod gpu_fault;
pub mod last_tier;
mod model;
mod moments;
mod provisioning;
mod reclaim;
mod restore;
mod startup;

pub use crate::domain::{PhaseId, UnknownPhase};
#[cfg(test)]
pub(crate) use analyse::ANALYSED;
pub use analyse::{Analysis, analyse};
pub use cost::{BillingBasis, FailedLaunch, FallbackUsage, PoolShare, apply_limit};
pub use definitions::{
    EndDefinition, PhaseDefinition, Receipt, SERVER_BOUND_S, TOOL_BOUND_MS, definition, definitions,
};
pub use model::{Boundary, MilestoneKey, Phase, Verdict};
pub use startup::{PodStartup, Startup, StartupPart, per_pod};

#[cfg(test)]
pub(crate) mod tests;
