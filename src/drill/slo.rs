//! The validated `spec.slo`: SLIs with their objectives, stop conditions, the error budget and how Prometheus is
//! reached (credentials kept as references, read only when a query is sent).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a drill does when Prometheus cannot be read while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OnPrometheusError {
    /// Stop the drill and restore the cluster: without its SLIs the drill cannot tell whether it hurts users.
    #[default]
    Abort,
    /// Warn and go on; the report shows the gap.
    Continue,
}

impl OnPrometheusError {
    pub fn as_str(self) -> &'static str {
        match self {
            OnPrometheusError::Abort => "abort",
            OnPrometheusError::Continue => "continue",
        }
    }
}

/// What a stop condition makes of a query that returns no number (no series, or NaN): model servers export their
/// SLIs from the serving pods, so a full outage empties the query exactly while users get errors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OnNoData {
    /// No data holds the condition, as a breached value would.
    #[default]
    Breach,
    /// No data neither holds the condition nor resets how long it has held: for a query that is empty when all
    /// is well (a sum of errors with no error series).
    Ignore,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SloSpec {
    pub prometheus: PrometheusEndpoint,
    pub interval: Duration,
    pub on_error: OnPrometheusError,
    pub error_budget: ErrorBudget,
    pub slis: Vec<Sli>,
    pub requests: Option<RequestCounters>,
    pub first_good_answer: Option<String>,
    pub stop_when: Vec<StopCondition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrometheusEndpoint {
    pub url: reqwest::Url,
    pub bearer_token: Option<Credential>,
    pub basic_auth: Option<(String, Credential)>,
    pub ca_file: Option<String>,
    pub client_cert: Option<(String, String)>,
    pub timeout: Duration,
}

/// A secret as the drill file names it; its value is read when a query is sent and never written anywhere.
#[derive(Debug, Clone, PartialEq)]
pub enum Credential {
    /// `${env:NAME}` or `${file:/path}`, resolved by `secrets`.
    Reference(String),
    /// A key of a Kubernetes Secret, read through the cluster.
    Secret { namespace: String, name: String, key: String },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorBudget {
    pub objective: f64,
    pub window: Duration,
}

impl Default for ErrorBudget {
    fn default() -> ErrorBudget {
        ErrorBudget { objective: 0.999, window: Duration::from_secs(30 * 24 * 3600) }
    }
}

/// Which side of its threshold a value must stay on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    AtLeast(f64),
    AtMost(f64),
}

impl Bound {
    pub fn holds(self, value: f64) -> bool {
        match self {
            Bound::AtLeast(t) => value >= t,
            Bound::AtMost(t) => value <= t,
        }
    }

    pub fn threshold(self) -> f64 {
        match self {
            Bound::AtLeast(t) | Bound::AtMost(t) => t,
        }
    }

    pub fn describe(self) -> String {
        match self {
            Bound::AtLeast(t) => format!(">= {t}"),
            Bound::AtMost(t) => format!("<= {t}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sli {
    pub name: String,
    pub query: String,
    pub objective: Bound,
    pub unit: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RequestCounters {
    /// The queries as written.
    pub total: String,
    pub failed: String,
    /// Their counter selectors (`drill::counter`), counted by `sum(increase(...))` per window.
    pub total_counter: String,
    pub failed_counter: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StopCondition {
    /// `query` is past its threshold (`breached` holds) for `hold` in a row.
    Query { name: String, query: String, breached: Bound, hold: Duration, on_no_data: OnNoData },
    /// An alert of this name is firing in this Alertmanager.
    Alert { name: String, alertmanager: reqwest::Url },
}

impl StopCondition {
    pub fn describe(&self) -> String {
        match self {
            StopCondition::Query { name, breached, hold, on_no_data, .. } => {
                let empty = if *on_no_data == OnNoData::Breach { " or no data" } else { "" };
                format!("{name} {}{empty} for {}", breached.describe(), humantime::format_duration(*hold))
            }
            StopCondition::Alert { name, .. } => format!("alert {name} firing"),
        }
    }
}
