//! `spec.expectedAlerts` and `spec.warmers` as written: the alerts the design relies on to page someone, and the
//! warmers its RTO relies on. Private to `drill`, like the rest of the raw drill file.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::HumanDuration;

/// The alerts the design relies on (fallback activated, NodePool limit near or overrun, error budget burning): each
/// must fire in Alertmanager, silenced or not, within its deadline after the fault; one that does not misses its
/// objective (exit 1).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "ExpectedAlerts")]
pub struct ExpectedAlertsSection {
    /// Alertmanager's base URL, e.g. `http://alertmanager.monitoring:9093`: read through the drill (API v2, silenced
    /// and inhibited alerts included).
    pub alertmanager: String,
    /// Prometheus's base URL, where `preflight` checks each alert has a rule (`/api/v1/rules`). Default: the one of
    /// `spec.slo`, when the drill has SLIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<String>,
    /// How often Alertmanager is read. Default 2s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<HumanDuration>,
    pub alerts: Vec<ExpectedAlertSection>,
}

/// One alert the design relies on.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "ExpectedAlert")]
pub struct ExpectedAlertSection {
    /// The alert's name (its `alertname` label), e.g. `FallbackActivated`.
    pub name: String,
    /// The deadline after the fault (t0) by which it must have fired, e.g. `2m`.
    pub within: HumanDuration,
    /// Further matchers in Alertmanager's syntax, all of which must match too: `nodepool="gpu-fallback"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matchers: Vec<String>,
}

/// What the RTO objective relies on, checked on the fallback's nodes during the drill and credited with the time it
/// saved against `withoutIt`; one not in effect is a finding and an action item.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Warmer")]
pub struct WarmerSection {
    /// Names the warmer in the report, e.g. `llm-image-prepull`.
    pub name: String,
    pub kind: WarmerKind,
    /// `imageCache`: the image pull on a fallback node must take at most this (an image already present takes
    /// none), e.g. `30s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_under: Option<HumanDuration>,
    /// `weightsCache`: the model's download (the init container, from its start to the server's `Created`) must
    /// take at most this, e.g. `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_under: Option<HumanDuration>,
    /// `warmCapacity`: the PriorityClass of the placeholder pods the workload preempts (named in the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// What the warmer's step takes without it (a cold pull, a download from the origin, a new node's
    /// provisioning): measured once without it, or the vendor's figure. The credit is this minus what the drill
    /// measured.
    pub without_it: HumanDuration,
}

/// What a warmer keeps warm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WarmerKind {
    /// The workload's image on the fallback node before its pod is bound: a pre-pull DaemonSet, a pull-through
    /// cache, a snapshot-backed data volume.
    ImageCache,
    /// The model's weights near the fallback node: a local disk, a snapshot, an S3 replica.
    WeightsCache,
    /// Fallback capacity already running: placeholder pods with a low PriorityClass that the workload preempts
    /// instead of waiting for a new NodeClaim.
    WarmCapacity,
}
