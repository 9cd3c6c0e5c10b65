//! The service's last tier (Tier 3) in a run, as report.json records it: when it served, the windows with no tier
//! serving, its cost per hour against the cloud GPU fallback (report/last_tier.rs measures and words it).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastTierOutcome {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub url: String,
    /// What the lab's stand-in says it is: a measure from the lab, not of the real last tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stand_in: Option<String>,
    /// From t0 to the first answer of the last tier serving after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_serve_seconds: Option<f64>,
    /// From t0 to the moment no pod of the workload was Ready any more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_lost_seconds: Option<f64>,
    /// Seconds after t0 with no tier serving: no Ready pod and the last tier not answering as expected.
    pub error_window_seconds: f64,
    /// Each window with no tier serving, since t0 (the first `MAX_WINDOWS`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_windows: Vec<ErrorWindow>,
    /// How long the last tier served after t0.
    pub served_seconds: f64,
    /// The last tier's last answer that did not serve, when it never served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<TierCost>,
}

/// Seconds since t0; `to` absent when the run ended inside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorWindow {
    pub from_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_seconds: Option<f64>,
}

/// Dollars per hour of the last tier at the drill's traffic, and of the cloud GPU fallback that would carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierCost {
    pub price_per_request: f64,
    pub requests_per_hour: f64,
    pub last_tier_per_hour: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_nodes: Option<u32>,
    /// The cheapest fallback type `pricing` names (among those the run took away, when it took any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_node_per_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_per_hour: Option<f64>,
}
