//! `spec.slo` as written: the service's SLIs in Prometheus, their objectives, the stop conditions and how Prometheus
//! is reached. Private to `drill`, like the rest of the raw drill file.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::HumanDuration;
use crate::drill::slo::{OnNoData, OnPrometheusError};

/// What users see: SLIs read from Prometheus, checked before the fault (steady state), watched while the drill runs
/// (stop conditions) and reported as the users' impact.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Slo")]
pub struct SloSection {
    pub prometheus: PrometheusSection,
    /// How often each SLI is read while the drill runs (one instant query per SLI each time). Default 15s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<HumanDuration>,
    /// Prometheus unreachable or a query failing while the drill runs: `abort` (default) stops the drill and
    /// restores the cluster, `continue` warns and goes on. Either way the report records it.
    #[serde(default)]
    pub on_error: OnPrometheusError,
    /// The error budget the drill's impact is counted against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_budget: Option<ErrorBudgetSection>,
    /// The SLIs: each a PromQL query returning one number, with its objective.
    pub slis: Vec<SliSection>,
    /// Counters of the service's requests, for the requests failed during the drill and each phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestsSection>,
    /// A query with one series per pod (label `pod`): seconds from the pod's Ready to its first good answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_good_answer: Option<String>,
    /// Abort the drill and restore the cluster when any of these holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_when: Vec<StopSection>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "PrometheusEndpoint")]
pub struct PrometheusSection {
    /// Prometheus's base URL (the one `/api/v1/query` is under), e.g. `http://prometheus.monitoring:9090`.
    pub url: String,
    /// A bearer token: `${env:NAME}`, `${file:/path}` or `{secret: {namespace, name, key}}`. The token itself is
    /// refused: the drill file is copied into every run directory and report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token: Option<CredentialSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuthSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSection>,
    /// Bound on each query. Default 5s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<HumanDuration>,
}

/// A secret value: a reference (`${env:NAME}`, `${file:/path}`) or a key of a Kubernetes Secret, read when the
/// drill runs. The value itself is refused: the drill file is copied into every run directory and report.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "Credential")]
pub enum CredentialSection {
    Reference(#[schemars(pattern(r"^\$\{(env|file):[^}]+\}$"))] String),
    Secret { secret: SecretKeySection },
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "SecretKey")]
pub struct SecretKeySection {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "BasicAuth")]
pub struct BasicAuthSection {
    pub username: String,
    /// `${env:NAME}`, `${file:/path}` or `{secret: {namespace, name, key}}`; never the password itself.
    pub password: CredentialSection,
}

/// TLS to Prometheus: its CA, and a client certificate for mutual TLS. Paths to PEM files.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Tls")]
pub struct TlsSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "ErrorBudget")]
pub struct ErrorBudgetSection {
    /// The share of good requests (or good time) the service promises over the window, e.g. `0.999`.
    pub objective: f64,
    /// The window the budget is for. Default 30d.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<HumanDuration>,
}

/// One SLI: give `atLeast` (a success ratio) or `atMost` (a latency).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Sli")]
pub struct SliSection {
    /// Lowercase letters, digits and `-`, e.g. `success-ratio`.
    pub name: String,
    /// PromQL returning one number (`sum(...)`, `histogram_quantile(...)`).
    pub query: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<f64>,
    /// Shown with its values: `ratio`, `s`, `ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "RequestCounters")]
pub struct RequestsSection {
    /// PromQL: the counter of every request, alone or summed (`sum(http_requests_total)`). The tool counts it with
    /// Prometheus's `sum(increase(counter[window]))` for the drill and each phase, so per-pod series that leave
    /// with their pods are not read as counter resets; anything else is refused.
    pub total: String,
    /// PromQL: the counter of failed requests, alone or summed (`sum(http_requests_total{code=~"5.."})`).
    pub failed: String,
}

/// A stop condition: a query (or an SLI by name) past a threshold for a duration, or a named alert firing.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "StopCondition")]
pub struct StopSection {
    /// An SLI of `slis` by name, read with its own query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sli: Option<String>,
    /// Or a PromQL query of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<f64>,
    /// How long the condition must hold; default 0s (the first reading).
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<HumanDuration>,
    /// The query returns no number (no series, NaN): `breach` (default) counts it as past the threshold, as it is
    /// when the serving pods that export the SLI are all gone; `ignore` for a query that is empty when all is well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_no_data: Option<OnNoData>,
    /// Or an alert by name (`alertname`) firing in `alertmanager`, silenced or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<String>,
    /// Alertmanager's base URL, for `alert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alertmanager: Option<String>,
}
