//! The report of a run as `report.json` holds it (schema `hybrid-drill.io/report/v1`): what every renderer reads.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::{Outcome, RequestsByVerb, StepOutcome};
use crate::phases::{Boundary, FallbackUsage, Phase, PhaseId, Startup};

/// Bumped on any change a consumer of `report.json` could notice.
pub const REPORT_SCHEMA: &str = "hybrid-drill.io/report/v1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub id: String,
    pub action: String,
    pub outcome: StepOutcome,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rollback {
    pub undone: Vec<String>,
    pub failed: Vec<String>,
    /// What the restored-state check read back: each on-prem node Ready, schedulable and unmarked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verified: Vec<String>,
}

/// What a notable event is about: the HTML timeline draws one lane of markers per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Marker {
    /// The fault and whatever stops the drill: drain, cut, hooks, guards, aborts.
    Fault,
    Eviction,
    #[serde(rename = "nodeclaim")]
    NodeClaim,
    /// Nodes added, Ready or not, deleted, cordoned, uncordoned.
    Node,
    Taint,
    /// The service and the fallback as a whole: lost, restored, fallback ready or empty, back on-prem.
    Service,
    /// The return to on-prem and the undo of the drill's changes.
    Restore,
    /// Reports written before markers existed have none.
    #[default]
    #[serde(other)]
    Other,
}

impl Marker {
    pub fn label(self) -> &'static str {
        match self {
            Marker::Fault => "fault / abort",
            Marker::Eviction => "evictions",
            Marker::NodeClaim => "NodeClaims",
            Marker::Node => "nodes",
            Marker::Taint => "taints",
            Marker::Service => "service",
            Marker::Restore => "return / restore",
            Marker::Other => "other",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Notable {
    pub t_seconds: f64,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<DateTime<Utc>>,
    pub what: String,
    #[serde(default)]
    pub kind: Marker,
}

/// While the on-prem copies of the workload are not known to be gone, their replacements already serve from the
/// cloud: both may run at once (split brain). Stateful workloads need fencing for this window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverlapWindow {
    /// The first replacement pod Ready on a fallback node.
    pub from: Boundary,
    /// The last on-prem pod of the workload confirmed gone; `None` if that was never observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Boundary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// On-prem pods not confirmed gone by the end of the drill.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconfirmed_pods: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool_version: String,
    /// A drill the tool ran, or a real incident `hybrid-drill watch` measured with the same phases.
    #[serde(default)]
    pub kind: RunKind,
    /// What started the incident and what shows it; only for `kind: incident`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<IncidentFacts>,
    pub run_id: String,
    pub drill: DrillIdentity,
    pub cluster: ClusterRecord,
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    pub outcome: Outcome,
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_reason: Option<String>,
    /// What the drill simulated, and what it does not reproduce.
    pub fidelity: String,
    pub steps: Vec<StepRecord>,
    pub phases: Vec<Phase>,
    pub milestones: Vec<Boundary>,
    pub objectives_missed: Vec<PhaseId>,
    pub fallback: FallbackUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
    pub notable_events: Vec<Notable>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<OverlapWindow>,
    /// What the workload's HPA or KEDA ScaledObject did, when one scales it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<super::autoscaling::AutoscalerReport>,
    pub watch_gaps: usize,
    /// The workload's pods on the fallback, pod by pod: image pull (or cached), init containers, start, model load.
    #[serde(default, skip_serializing_if = "no_pods")]
    pub startup: Startup,
    pub api_requests: u64,
    /// The same requests by verb, then resource: what grows with the watches held, not with time waited.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub api_requests_by_verb: RequestsByVerb,
    pub warnings: Vec<String>,
    /// Why the fallback was not reclaimed, each reason as first seen; empty when nothing held it.
    #[serde(default)]
    pub reclaim_blockers: Vec<super::blockers::ReclaimBlocker>,
    /// The fallback's own failures the drill caused (capacity, a lost node) and a partial on-prem loss.
    #[serde(default, skip_serializing_if = "crate::phases::fallback_faults::FallbackFaults::is_empty")]
    pub fallback_faults: crate::phases::fallback_faults::FallbackFaults,
}

impl Report {
    pub fn phase(&self, id: PhaseId) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == id)
    }

    /// The missed objectives as a list for a sentence: `provisioning, reclaim`.
    pub fn missed_list(&self) -> String {
        self.objectives_missed.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// Whether a report measures a drill or a real incident.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    #[default]
    Drill,
    Incident,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Drill => "drill",
            RunKind::Incident => "incident",
        }
    }

    /// The heading of every human format: `Drill report`, `Incident report`.
    pub fn heading(self) -> &'static str {
        match self {
            RunKind::Drill => "Drill report",
            RunKind::Incident => "Incident report",
        }
    }
}

/// An incident's cause as the on-prem nodes showed it, and what the watch did not see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentFacts {
    pub cause: crate::domain::IncidentCause,
    pub nodes: Vec<String>,
    pub evidence: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// Why the episode closed; `None` while it is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<String>,
    /// The hybrid-drill run the watch recognised behind the episode: the report's kind is then `drill`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drill_run: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrillIdentity {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub file: String,
    /// The drill file exactly as it ran.
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterRecord {
    pub context: String,
    pub server: String,
    pub version: String,
}

/// Whether a report has no startup to show (serde leaves the field out then).
pub(super) fn no_pods(startup: &Startup) -> bool {
    startup.pods.is_empty()
}
