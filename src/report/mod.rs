//! Reports of a run: the versioned `report.json` model, and one renderer per format, each a pure function of it.

pub mod markdown;
pub mod terminal;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::phases::{Boundary, FallbackUsage, Phase, Verdict};
use crate::timeline::{Event, Observation};

/// Bumped on any change a consumer of `report.json` could notice.
pub const REPORT_SCHEMA: &str = "hybrid-drill.io/report/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every step ran and every objective was met.
    Passed,
    /// Every step ran; at least one objective was missed.
    ObjectiveMissed,
    /// A step failed, a guard tripped, or the drill was interrupted; the cluster was restored.
    Aborted,
    /// The drill stopped and restoring the cluster failed: a human must finish it.
    RestoreFailed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::ObjectiveMissed => "objective missed",
            Outcome::Aborted => "aborted, cluster restored",
            Outcome::RestoreFailed => "aborted, RESTORE FAILED",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub id: String,
    pub action: String,
    /// `passed`, `warned`, `failed`, `aborted` or `skipped`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rollback {
    pub undone: Vec<String>,
    pub failed: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Notable {
    pub t_seconds: f64,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<DateTime<Utc>>,
    pub what: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool_version: String,
    pub run_id: String,
    pub drill: DrillIdentity,
    pub cluster: ClusterIdentity,
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
    pub objectives_missed: Vec<String>,
    pub fallback: FallbackUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
    pub notable_events: Vec<Notable>,
    pub watch_gaps: usize,
    pub api_requests: u64,
    pub warnings: Vec<String>,
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
pub struct ClusterIdentity {
    pub context: String,
    pub server: String,
    pub version: String,
}

/// The drain drill's fidelity statement.
pub const DRAIN_FIDELITY: &str = "drain: the on-prem nodes were cordoned and their pods evicted through the Eviction API \
(PodDisruptionBudgets honoured). The nodes stayed Ready: this measures the fallback path of a planned evacuation, not \
the node-failure detection delay or the not-ready/unreachable toleration wait of a real outage.";

/// Observations worth a line in a report; the full timeline stays in `timeline.jsonl`.
pub fn notable(observations: &[Observation]) -> Vec<Notable> {
    observations
        .iter()
        .filter(|o| {
            matches!(
                o.event,
                Event::FaultInjected { .. }
                    | Event::Cordoned { .. }
                    | Event::Uncordoned { .. }
                    | Event::EvictionBlocked { .. }
                    | Event::NodeClaimCreated { .. }
                    | Event::NodeClaimCondition { .. }
                    | Event::NodeClaimDeleted { .. }
                    | Event::NodeAdded { .. }
                    | Event::NodeDeleted { .. }
                    | Event::ServiceLost { .. }
                    | Event::ServiceRestored { .. }
                    | Event::FallbackReady { .. }
                    | Event::ReturnStarted { .. }
                    | Event::RestartTriggered { .. }
                    | Event::BackOnPrem { .. }
                    | Event::FallbackEmpty
                    | Event::GuardTripped { .. }
                    | Event::Aborted { .. }
                    | Event::UndoDone { .. }
                    | Event::UndoFailed { .. }
                    | Event::WatchGap { .. }
                    | Event::WatchResumed { .. }
                    | Event::HookRan { .. }
            ) || matches!(&o.event, Event::StepFinished { outcome, .. } if outcome != "passed")
        })
        .map(|o| Notable {
            t_seconds: o.t_ms as f64 / 1000.0,
            at: o.received,
            server_time: o.server_time,
            what: o.event.describe(),
        })
        .collect()
}

/// Formats seconds the way ops read them: `4m 05.2s`, `38.1s`.
pub fn human_seconds(s: f64) -> String {
    if s >= 3600.0 {
        format!("{}h {:02}m", (s / 3600.0) as u64, ((s % 3600.0) / 60.0) as u64)
    } else if s >= 60.0 {
        format!("{}m {:04.1}s", (s / 60.0) as u64, s % 60.0)
    } else {
        format!("{s:.1}s")
    }
}

pub fn verdict_word(p: &Phase) -> &'static str {
    match p.verdict {
        Verdict::Met => "met",
        Verdict::Missed => "MISSED",
        Verdict::NoObjective => "-",
        Verdict::Incomplete if p.objective_seconds.is_some() => "NOT MEASURED",
        Verdict::Incomplete => "incomplete",
    }
}

pub fn phase_label(p: &Phase) -> String {
    match &p.parent {
        Some(_) => format!("  └ {}", p.name),
        None if p.name == "rto" => "RTO".into(),
        None => p.name.clone(),
    }
}

pub fn seconds_cell(v: Option<f64>) -> String {
    v.map(human_seconds).unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::human_seconds;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_seconds(38.14), "38.1s");
        assert_eq!(human_seconds(245.2), "4m 05.2s");
        assert_eq!(human_seconds(3720.0), "1h 02m");
    }
}
