//! What the phases of a drill come to: each phase's two ends on both clocks, its duration and verdict, and the
//! milestones, as reports show them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::PhaseId;
use crate::timeline::Observation;

/// One end of a phase: when the tool saw it, and the object's own time where it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Boundary {
    pub label: String,
    /// Which milestone this is, for code that looks one up; the label is for people and varies with the run.
    /// `None` for a phase's boundary. Not written to report.json, whose shape the report schema fixes: a report read
    /// back without its timeline has no keys, and the renderers do without what they would find by one.
    #[serde(skip)]
    pub key: Option<MilestoneKey>,
    pub seq: u64,
    pub t_ms: u64,
    pub received: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<DateTime<Utc>>,
}

impl Boundary {
    pub fn of(label: &str, o: &Observation) -> Boundary {
        Boundary {
            label: label.into(),
            key: None,
            seq: o.seq,
            t_ms: o.t_ms,
            received: o.received,
            server_time: o.server_time,
        }
    }
}

/// The milestones a report lists, by what they are rather than how they read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MilestoneKey {
    FaultInjected,
    NodeLost,
    LostNodeTainted,
    GpusUnhealthy,
    NodeQuarantined,
    FirstPodEvicted,
    ReplacementPending,
    FirstClaimCreated,
    FirstClaimLaunched,
    FirstClaimRegistered,
    FirstClaimInitialized,
    FallbackNodeUsable,
    WorkloadEvicted,
    ClaimsInitialized,
    ServiceRestored,
    RestoreStarted,
    FaultRemoved,
    OnPremNodesReady,
    ReturnStarted,
    BackOnPrem,
    FallbackReclaimed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Met,
    Missed,
    NoObjective,
    /// A boundary was never observed (the drill stopped before it, or the step that causes it is absent).
    Incomplete,
    /// The end was observed before the start: no duration is claimed, and an objective counts as missed.
    Inconsistent,
}

impl Verdict {
    /// The serde name, for machine-readable fields.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "missed",
            Verdict::NoObjective => "no-objective",
            Verdict::Incomplete => "incomplete",
            Verdict::Inconsistent => "inconsistent",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub name: PhaseId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<PhaseId>,
    pub from: Option<Boundary>,
    pub to: Option<Boundary>,
    /// On the tool's clock (sub-second), which bounds every headline figure.
    pub seconds: Option<f64>,
    /// On the server's clock (whole seconds), where both boundaries carry one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective_seconds: Option<f64>,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Phase {
    /// Whether the phase has an objective it did not meet: missed, or not measured at all.
    pub fn misses_objective(&self) -> bool {
        self.objective_seconds.is_some() && !matches!(self.verdict, Verdict::Met | Verdict::NoObjective)
    }
}
