//! The users' impact as `report.json` holds it (its top-level `impact`): each SLI over the drill and per phase, the
//! requests failed, the error budget burned, when users were served again, and what stopped the drill.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// At most this many points per SLI in report.json: a long drill is read at a coarser step.
pub const MAX_POINTS: usize = 240;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Impact {
    /// The Prometheus the SLIs were read from (no credentials).
    pub prometheus: String,
    /// Set when the service is a stand-in (the lab's): its users and requests are simulated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stand_in: Option<String>,
    pub interval_seconds: f64,
    /// The longest scrape interval of the targets the SLIs read (Prometheus's `/api/v1/targets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_interval_seconds: Option<f64>,
    /// How long after users the SLIs and stop conditions show a change, at most: a scrape, half the widest rate
    /// window, and the drill's reading interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection_lag_seconds: Option<f64>,
    /// The step of each SLI's `series`.
    pub resolution_seconds: f64,
    pub error_budget: BudgetBasis,
    /// Each SLI before the fault, as the steady-state check read it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steady_state: Vec<Reading>,
    pub slis: Vec<SliImpact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestImpact>,
    /// Seconds from the fault (t0) until every SLI was within its objective again after the first breach; 0 when
    /// none left its objective; `None` when users were still not served at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users_served_again_seconds: Option<f64>,
    /// The RTO (pods Ready, the restoredWhen criterion), beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto_seconds: Option<f64>,
    /// Replacement pods: seconds from Ready to their first good answer (the real end of their startup).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ready_to_first_good_answer: Vec<PodAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prometheus_errors: Vec<PrometheusError>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetBasis {
    pub objective: f64,
    pub window_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub sli: String,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SliImpact {
    pub name: String,
    pub query: String,
    /// `>= 0.99`, `<= 0.5`.
    pub objective: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Whether the SLI stayed within its objective the whole drill.
    pub met: bool,
    pub whole: Stats,
    pub by_phase: Vec<PhaseStats>,
    /// `[seconds since the run started, value]`, at `resolutionSeconds`.
    pub series: Vec<[f64; 2]>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub samples: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    pub seconds_outside_objective: f64,
    /// Seconds with no value at all (no series, NaN): not inside the objective, not counted as outside it either;
    /// reports show it as `no data`.
    #[serde(default)]
    pub seconds_no_data: f64,
    /// The time outside the objective as a share of the error budget's bad time (`(1 - objective) * window`), in %.
    pub budget_burned_percent: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    pub phase: String,
    #[serde(flatten)]
    pub stats: Stats,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestImpact {
    pub total: f64,
    pub failed: f64,
    /// The failed requests as a share of the budget's (`(1 - objective)` of the requests the window would see at the
    /// drill's rate), in %.
    pub budget_burned_percent: f64,
    pub by_phase: Vec<PhaseRequests>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRequests {
    pub phase: String,
    pub total: f64,
    pub failed: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodAnswer {
    pub pod: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub seconds: f64,
}

/// A stop condition that held: what, its value, since when and when it stopped the drill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    pub condition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    pub since: DateTime<Utc>,
    pub at: DateTime<Utc>,
    /// The condition held because its query returned no number (`onNoData: breach`), not on a value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_data: bool,
}

impl StopRecord {
    pub fn describe(&self) -> String {
        let value = match self.value {
            Some(v) => format!(" (value {})", round(v)),
            None if self.no_data => " (no data)".into(),
            None => String::new(),
        };
        format!(
            "`{}` held{value} since {}, at {}",
            self.condition,
            self.since.format("%H:%M:%S%.3f UTC"),
            self.at.format("%H:%M:%S%.3f UTC")
        )
    }
}

/// Prometheus unreachable or a query failing while the drill ran, and what the drill's policy did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrometheusError {
    pub at: DateTime<Utc>,
    pub message: String,
    /// `abort` or `continue`.
    pub action: String,
}

/// An SLI's value as reports show it: four decimals (a ratio to a hundredth of a percent, seconds to 0.1 ms).
pub fn round(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}
