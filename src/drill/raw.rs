//! The drill file as written: what serde reads and JSON Schema describes, before validation. Private to `drill`:
//! the rest of the crate sees only the validated model.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use super::duration::HumanDuration;
use super::model::{Check, NodeTargetRef, NotifyFormat, OnDeviation, WaitCondition};
use crate::domain::PhaseId;
use crate::domain::{Cni, CutFidelity, RestoreTarget};

pub const API_VERSION: &str = "hybrid-drill.io/v1alpha1";
pub const KIND: &str = "Drill";

/// A failure drill: what to break, what to watch, what counts as restored, and how fast it must be.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "hybrid-drill Drill")]
pub struct Drill {
    /// Always `hybrid-drill.io/v1alpha1`.
    pub api_version: String,
    /// Always `Drill`.
    pub kind: String,
    pub metadata: Metadata,
    pub spec: DrillSpec,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    /// Names the drill; reports are filed under `reports/<name>/`. Lowercase letters, digits and `-`.
    pub name: String,
    /// Free text shown at the top of every report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DrillSpec {
    pub cluster: ClusterSection,
    pub targets: Targets,
    #[serde(default)]
    pub objectives: Objectives,
    #[serde(default)]
    pub guards: Guards,
    /// Fallback cost estimate: on-demand price per hour of each fallback instance type, in dollars.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pricing: std::collections::BTreeMap<String, f64>,
    /// The service's last tier (Tier 3): where the gateway sends traffic when no GPU serves, e.g. a managed model API
    /// paid per request. Probed through the whole run; the report measures when it served after the fault, the
    /// window with no tier serving, and its cost per hour against the cloud GPU fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tier: Option<LastTierSection>,
    /// Run in order. A failing step aborts the drill and restores the cluster.
    pub steps: Vec<Step>,
    /// Keep the changes the steps leave in place at the end (a cordon with no later uncordon, a cut with no later
    /// restore) instead of undoing them; the report lists them and `hybrid-drill recover RUN_DIR` undoes them later.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_changes: bool,
    /// One drill at a time: the Lease a run (and `recover`) holds and renews while it may touch the cluster. A second
    /// run is refused while it is held; one whose holder stopped renewing is taken over after `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<LockSection>,
    /// Webhooks told when the drill starts, for each objective it misses, when it aborts, and at its end (verdict,
    /// RTO, report). One that fails is a warning in the report, never a failed drill.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<WebhookSection>,
    /// Alertmanager silences for the alerts the drill causes: created when the fault is injected, expired at the end
    /// or on rollback; journalled, so `hybrid-drill recover` expires them after a crash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silences: Vec<SilenceSection>,
    /// Start gates, checked before anything is touched and shown by `plan`: a closed gate refuses the drill (exit 5)
    /// unless `--override-gate NAME --reason TEXT` lets it through, which the report records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates: Option<GatesSection>,
    /// The service's SLIs in Prometheus: steady state before the fault, stop conditions, the users' impact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<super::raw_slo::SloSection>,
    /// What each run's audit record must hold, and who owns the action items its report raises.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<EvidenceSection>,
    /// The other workloads the fault displaces (the collateral): the return restarts each one still on capacity the
    /// drill created, as it restarts the drilled workload, unless `leave` lists it.
    #[serde(default, skip_serializing_if = "CollateralSection::is_empty")]
    pub collateral: CollateralSection,
    /// The alerts the design relies on, each checked in Alertmanager to fire within its deadline after the fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_alerts: Option<super::raw_nets::ExpectedAlertsSection>,
    /// What the RTO relies on (image and weights caches, warm capacity), checked on the fallback's nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmers: Vec<super::raw_nets::WarmerSection>,
}

/// When a drill must not start.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Gates")]
pub struct GatesSection {
    /// Refuse while any of these alerts fires (active, neither silenced nor inhibited). Gate `alert`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertGateSection>,
    /// Refuse while `hybrid-drill watch` has an incident open in the reports directory (an `.open-episode.json`
    /// beside any drill's runs). Gate `incident`; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incidents: Option<bool>,
    /// Change-freeze windows, each in its own time zone: refuse inside any of them. Gate `freeze-window`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub freeze_windows: Vec<FreezeWindowSection>,
    /// Refuse while the cluster's freeze marker exists: the ConfigMap `hybrid-drill-freeze` in the drill lock's
    /// namespace, which a release process creates (its `reason` key says why). Gate `cluster-freeze`; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_freeze: Option<bool>,
}

/// An alert that must not be firing when the drill starts.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "AlertGate")]
pub struct AlertGateSection {
    /// Alertmanager's base URL, e.g. `http://alertmanager.monitoring:9093`.
    pub alertmanager: String,
    /// The alert's name (its `alertname` label), e.g. `InferenceErrorBudgetBurn`.
    pub alert: String,
    /// Further matchers in Alertmanager's syntax, all of which must match too: `cluster="prod-hybrid"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matchers: Vec<String>,
}

/// A change freeze: one span (`start` and `end`) or a weekly one (`days`, `from` and `until`), in `timezone`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "FreezeWindow")]
pub struct FreezeWindowSection {
    /// Names the window in a refusal, e.g. `year-end`.
    pub name: String,
    /// An IANA time zone the times are read in, e.g. `Europe/Berlin`, `America/New_York`, `UTC`.
    pub timezone: String,
    /// The first moment of a one-off window, local: `2026-12-19T18:00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// The moment a one-off window ends, local: `2027-01-04T08:00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// The days of a weekly window: `mon` to `sun`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<String>,
    /// When a weekly window opens on each of its days, local: `16:00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// When it closes on the same day, local: `23:59` (before `from`: the next day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Shown in the refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The audit record: a drill that requires a change reference or an approver is refused (exit 2, nothing touched)
/// when `run` is not given `--change` or `--approved-by`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Evidence")]
pub struct EvidenceSection {
    /// Refuse a run without `--change CHG-...`: the change record the drill was approved under.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_change: bool,
    /// Refuse a run without `--approved-by NAME`: who approved it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_approver: bool,
    /// The owner of the action items the report raises (a team or a person), e.g. `gpu-platform`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Ship each run directory, manifest and signature included, to S3-compatible object storage once it is written
    /// (`run --ship` and the `--s3-*` flags override each field). A failed upload is a warning and a deviation; the
    /// local run directory stays either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ship: Option<ShipSection>,
}

/// Where run directories are kept: `to` is the location, the other fields how to reach it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Ship")]
pub struct ShipSection {
    /// `s3://bucket/prefix`: each run lands under `prefix/<drill>/<run>/`, as in a local reports directory.
    pub to: String,
    /// The server's URL for S3-compatible storage other than AWS S3, e.g. `https://s3.example.internal:9000`
    /// (default: `AWS_ENDPOINT_URL`, else AWS S3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The region requests are signed for (default: `AWS_REGION`, else `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Address the bucket in the path (`endpoint/bucket/key`) rather than the host name: most S3-compatible
    /// servers need it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_style: bool,
    /// A credentials file holding `aws_access_key_id` and `aws_secret_access_key` (AWS's format, or `KEY=value`
    /// lines), by path or secret reference (`${file:/path}`); default: `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY`, then EKS's pod identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// Keep each object from deletion and overwriting this long, e.g. `400d` (object lock in compliance mode; a
    /// bucket without object lock ships without it, with a warning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<HumanDuration>,
}

/// What the drill does with the other workloads its fault displaces.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Collateral")]
pub struct CollateralSection {
    /// Workloads (`namespace/name` of their Deployment or StatefulSet) the return does not restart: they stay where
    /// the fault moved them, and the report lists what they keep running as expected leftovers. A drill that leaves
    /// cloud capacity running still exits 4.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leave: Vec<String>,
}

impl CollateralSection {
    fn is_empty(&self) -> bool {
        self.leave.is_empty()
    }
}

/// The drill lock, a coordination.k8s.io/v1 Lease. Drills that share on-prem nodes or a fallback must share it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// The schema keeps the name editors and users already know.
#[schemars(rename = "Lock")]
pub struct LockSection {
    /// Default `kube-system`, which every cluster has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Default `hybrid-drill`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How long a holder that stopped renewing (a killed run) keeps the lock; renewed every third of it. Default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<HumanDuration>,
}

/// A webhook the drill's messages are POSTed to as JSON.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// The schema keeps the name editors and users already know.
#[schemars(rename = "Webhook")]
pub struct WebhookSection {
    /// `http://` or `https://`, or a secret reference to one (`${env:SLACK_WEBHOOK_URL}`). A URL that is its own
    /// secret (Slack's, Discord's, Teams', a `/hooks/KEY` URL) written here is refused: the drill file is copied into
    /// every run directory; give it as a reference, or with `--notify` or `$HYBRID_DRILL_NOTIFY`.
    pub url: String,
    /// `slack`: Slack's incoming-webhook message (`{"text": ...}`); `json` (default): the plain event.
    #[serde(default)]
    pub format: NotifyFormat,
    /// Bound on each message; past it the message is a warning. Default 10s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<HumanDuration>,
}

/// A silence of the alerts the drill is expected to cause, in an Alertmanager reachable from where the tool runs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// The schema keeps the name editors and users already know.
#[schemars(rename = "Silence")]
pub struct SilenceSection {
    /// Alertmanager's base URL, e.g. `http://alertmanager.monitoring:9093`.
    pub alertmanager: String,
    /// The alerts to silence, in Alertmanager's matcher syntax, all of which must match: `alertname="KubeNodeNotReady"`,
    /// `node=~"mi-.*"`, `severity!="info"`.
    pub matchers: Vec<String>,
    /// Shown with the silence in Alertmanager; the run's id is appended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// The cluster this drill is meant for: the tool refuses to run against any other.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// The schema keeps the name editors and users already know.
#[schemars(rename = "ClusterIdentity")]
pub struct ClusterSection {
    /// The kubeconfig context the drill must run in. Not checked in a pod (in-cluster mode), which has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The UID of the cluster's `kube-system` namespace (`hybrid-drill identify` prints it): names the cluster
    /// whatever a kubeconfig calls it, and is how a drill run in a pod names its cluster. Give it, `context`, or both.
    #[serde(default, rename = "kubeSystemUID", skip_serializing_if = "Option::is_none")]
    pub kube_system_uid: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Targets {
    pub on_prem: OnPremTarget,
    pub workload: WorkloadTarget,
    pub fallback: FallbackTarget,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OnPremTarget {
    /// Label selector of the on-prem GPU nodes, e.g. `eks.amazonaws.com/compute-type=hybrid`.
    pub nodes: String,
    /// An address per node name for the hooks' `{address}` placeholder, e.g. a BMC's: `mi-0abc...: 10.0.1.21`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub addresses: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadTarget {
    pub namespace: String,
    /// Label selector of the workload's pods, e.g. `app=llm-inference`.
    pub selector: String,
    pub restored_when: RestoredWhen,
}

/// What "service restored" means for this workload; every criterion given must hold.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RestoredWhen {
    /// At least this many of the workload's pods Ready (`4`), or this share of its desired replicas when the fault
    /// began (`"75%"`). Under an HPA or a KEDA ScaledObject a number is read as 100% of the desired replicas then.
    pub ready_pods: ReadyPodsText,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpProbe>,
}

/// `readyPods` as written: a number, or text that validation reads as a share (`"75%"`) or locates as wrong.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ReadyPodsText {
    Count(u32),
    Text(String),
}

// By hand rather than untagged, so a wrong number is told as such instead of as "no variant matched".
impl<'de> Deserialize<'de> for ReadyPodsText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Shape;
        impl serde::de::Visitor<'_> for Shape {
            type Value = ReadyPodsText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number of pods (4) or a share of the desired replicas (\"75%\")")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ReadyPodsText, E> {
                u32::try_from(v).map(ReadyPodsText::Count).map_err(|_| E::custom(format!("readyPods {v} is too large")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ReadyPodsText, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom("readyPods must be at least 1")),
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ReadyPodsText, E> {
                Ok(ReadyPodsText::Text(v.to_string()))
            }
        }
        d.deserialize_any(Shape)
    }
}

impl JsonSchema for ReadyPodsText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ReadyPods".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A number of pods (at least 1), or a share of the desired replicas at t0 such as `75%`.",
            "oneOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*%\\s*$"}
            ]
        })
    }
}

/// An HTTP(S) probe of the service's endpoint, which must answer as expected several times in a row.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HttpProbe {
    pub url: String,
    /// The status code that counts as a success.
    #[serde(default = "default_expect_status")]
    pub expect_status: u16,
    /// How many successes in a row restore the service.
    #[serde(default = "default_consecutive")]
    pub consecutive: u32,
    #[serde(default = "default_probe_interval")]
    pub interval: HumanDuration,
    /// Per-request timeout.
    #[serde(default = "default_probe_timeout")]
    pub timeout: HumanDuration,
}

fn default_expect_status() -> u16 {
    200
}
fn default_consecutive() -> u32 {
    3
}
fn default_probe_interval() -> HumanDuration {
    HumanDuration(Duration::from_secs(2))
}
fn default_probe_timeout() -> HumanDuration {
    HumanDuration(Duration::from_secs(2))
}

/// The service's last tier and what it costs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "LastTier")]
pub struct LastTierSection {
    /// Shown in reports, e.g. `Bedrock through the gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `http://` or `https://`: the gateway's route to the last tier, one that answers as expected only while the
    /// gateway sends traffic there (the last tier's own URL when it always serves). A success is the last tier serving.
    pub url: String,
    /// The status code that counts as serving.
    #[serde(default = "default_expect_status")]
    pub expect_status: u16,
    /// How often it is probed. Default 1s.
    #[serde(default = "default_last_tier_interval")]
    pub interval: HumanDuration,
    /// Per-request timeout. Default 2s.
    #[serde(default = "default_probe_timeout")]
    pub timeout: HumanDuration,
    /// Dollars per request the last tier bills (tokens in and out of an average request, at its price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_request: Option<f64>,
    /// The service's traffic while the last tier carries it, in requests per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_hour: Option<f64>,
    /// The cloud GPU nodes the fallback runs to carry the same traffic: priced at the cheapest fallback instance
    /// type `pricing` names, for the comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_nodes: Option<u32>,
}

fn default_last_tier_interval() -> HumanDuration {
    HumanDuration(Duration::from_secs(1))
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FallbackTarget {
    /// The Karpenter NodePool (`karpenter.sh/v1`) that provides cloud GPU capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    /// Several NodePools that provide it (an on-demand pool and a Spot pool, say), the first one Karpenter tries
    /// first; instead of `nodePool`. Pods landing on any of them count as fallen back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pools: Option<Vec<String>>,
}

/// Budgets the drill is judged against. A missed objective does not abort the drill.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Objectives {
    /// Fault injected to service restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto: Option<HumanDuration>,
    /// A budget per phase.
    #[serde(default)]
    pub phases: PhaseObjectives,
}

/// A budget per phase, keyed by the phase's name; validation turns each key into a `PhaseId` or a located error.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PhaseObjectives(pub BTreeMap<String, Option<HumanDuration>>);

/// The phases an objective may name: every phase but the RTO, which has its own key.
pub fn phases_with_objectives() -> impl Iterator<Item = PhaseId> {
    PhaseId::ALL.iter().copied().filter(|p| *p != PhaseId::Rto)
}

impl JsonSchema for PhaseObjectives {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PhaseObjectives".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let budget = generator.subschema_for::<Option<HumanDuration>>().to_value();
        let properties: serde_json::Map<String, serde_json::Value> =
            phases_with_objectives().map(|p| (p.as_str().to_string(), budget.clone())).collect();
        schemars::json_schema!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false
        })
    }
}

/// Limits that abort the drill and restore the cluster when crossed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Guards {
    /// Refuse to start when the on-prem selector matches more nodes than this.
    #[serde(default = "default_max_nodes")]
    pub max_nodes: u32,
    /// Abort when the fallback NodePool holds more GPUs than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fallback_gpus: Option<u64>,
    /// Abort when the whole drill takes longer than this.
    #[serde(default = "default_deadline")]
    pub deadline: HumanDuration,
    /// Abort when the service stays unavailable (its `restoredWhen` criterion failing) longer than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_service_down: Option<HumanDuration>,
    /// Namespaces the drill never touches: their pods are not evicted. Default `[kube-system, hybrid-drill]`; the
    /// tool's own namespace is protected whatever the list says.
    #[serde(default = "default_protected")]
    pub protected_namespaces: Vec<String>,
}

fn default_protected() -> Vec<String> {
    vec!["kube-system".to_string(), crate::drill::TOOL_NAMESPACE.to_string()]
}

fn default_max_nodes() -> u32 {
    4
}
fn default_deadline() -> HumanDuration {
    HumanDuration(Duration::from_secs(3600))
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            max_nodes: default_max_nodes(),
            max_fallback_gpus: None,
            deadline: default_deadline(),
            max_service_down: None,
            protected_namespaces: default_protected(),
        }
    }
}

/// One step: an `id`, an optional `timeout`, and exactly one action key.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    /// Unique within the drill; names the step in progress and reports.
    pub id: String,
    /// Bound on the step; it fails (and the drill is restored) when crossed. Default 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<HumanDuration>,
    /// Check the cluster against the drill's expected state (`steady-state`) or design (`preflight`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// What a `check` does when the cluster deviates: `fail` (default) or `warn`. For `preflight`, `warn` turns its
    /// failed checks into warnings and lets the drill go on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_deviation: Option<OnDeviation>,
    /// Cordon, then evict through the Eviction API honouring PodDisruptionBudgets, as `kubectl drain` does. This is
    /// the fault (t0). `onPrem`, or `{nodes: onPrem, force: true, deleteEmptyDirData: true}` with kubectl's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainTarget>,
    /// Cut the on-prem side off the cloud side, as a DX/VPN link cut would (the fault, t0); `restore: cut` ends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<CutAction>,
    /// Fail the on-prem nodes with the drill's own hooks (a BMC power-off...): the fault, t0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_failure: Option<NodeFailureAction>,
    /// Fail GPUs of the on-prem nodes while the nodes stay Ready (the fault, t0); `restore: gpu-fault` ends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_fault: Option<super::raw_gpu_fault::GpuFaultAction>,
    /// End a fault: remove the cut's policies, or run the node failure's recovery hooks; then wait for the
    /// on-prem nodes to be Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreTarget>,
    /// Mark the nodes unschedulable without evicting anything (does not trigger a fallback by itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordon: Option<NodeTargetRef>,
    /// Make the nodes schedulable again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncordon: Option<NodeTargetRef>,
    /// Wait, watch-driven, until a condition holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<WaitCondition>,
    /// Move the workload back on-prem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#return: Option<ReturnAction>,
    /// Run a command (paging, a BMC power-off...); it fails the step when it exits non-zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    /// Wait this long, observing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<HumanDuration>,
    /// Make fallback instance types run out of capacity, as EC2's InsufficientInstanceCapacity: the drill's hooks
    /// take each type away (in the lab `lab/capacity`, on AWS an FIS experiment) and give it back on restore, abort
    /// or `hybrid-drill recover`. Not the fault (t0): put it before the drain, cut or node failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityFault>,
    /// Lose one fallback node while the workload runs there: `delete` deletes one fallback NodeClaim holding a
    /// workload pod, as Karpenter does on a Spot interruption or an instance failure. Karpenter drains it and
    /// launches a replacement; the report measures this second recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lose_fallback_node: Option<LoseFallbackNode>,
}

pub const STEP_ACTIONS: &[&str] = &[
    "check",
    "drain",
    "cut",
    "nodeFailure",
    "gpuFault",
    "restore",
    "cordon",
    "uncordon",
    "waitFor",
    "return",
    "exec",
    "pause",
    "capacity",
    "loseFallbackNode",
];

impl Step {
    /// The action keys present, in declaration order of [`STEP_ACTIONS`].
    pub fn action_keys(&self) -> Vec<&'static str> {
        let present = [
            self.check.is_some(),
            self.drain.is_some(),
            self.cut.is_some(),
            self.node_failure.is_some(),
            self.gpu_fault.is_some(),
            self.restore.is_some(),
            self.cordon.is_some(),
            self.uncordon.is_some(),
            self.wait_for.is_some(),
            self.r#return.is_some(),
            self.exec.is_some(),
            self.pause.is_some(),
            self.capacity.is_some(),
            self.lose_fallback_node.is_some(),
        ];
        STEP_ACTIONS.iter().zip(present).filter(|(_, p)| *p).map(|(k, _)| *k).collect()
    }
}

/// The nodes a drain empties, alone (`drain: onPrem`) or with kubectl drain's flags.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum DrainTarget {
    Nodes(NodeTargetRef),
    WithFlags(DrainSpec),
}

/// A drain with kubectl drain's flags, both off unless set: a pod they would cover refuses the drill at plan time.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DrainSpec {
    pub nodes: NodeTargetRef,
    /// Also evict pods no controller manages (`kubectl drain --force`): they are lost.
    #[serde(default)]
    pub force: bool,
    /// Also evict pods with emptyDir volumes (`kubectl drain --delete-emptydir-data`): their data is deleted.
    #[serde(default)]
    pub delete_empty_dir_data: bool,
    /// Drain only this many of the on-prem nodes (the first by name): a partial loss. Not with `fraction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Drain only this share of the on-prem nodes, as a percentage (`50%`), rounded up to whole nodes, at least one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<String>,
}

// By hand rather than untagged, so a mistyped flag is reported at its key instead of as "no variant matched".
impl<'de> Deserialize<'de> for DrainTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Shape;
        impl<'de> serde::de::Visitor<'de> for Shape {
            type Value = DrainTarget;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("`onPrem`, or a map `{nodes: onPrem, force: BOOL, deleteEmptyDirData: BOOL}`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DrainTarget, E> {
                use serde::de::IntoDeserializer;
                NodeTargetRef::deserialize(v.into_deserializer()).map(DrainTarget::Nodes)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<DrainTarget, A::Error> {
                DrainSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(DrainTarget::WithFlags)
            }
        }
        d.deserialize_any(Shape)
    }
}

/// A link cut: deny policies between the on-prem side and the cloud side, at the fidelity the drill chooses.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CutAction {
    pub fidelity: CutFidelity,
    /// For `host`: whose host firewall enforces the cut, `cilium` (CiliumClusterwideNetworkPolicy) or `calico`
    /// (GlobalNetworkPolicy on host endpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni: Option<Cni>,
    /// Networks that stay reachable through the cut, as CIDRs: the on-prem side, an out-of-band management network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_cidrs: Vec<String>,
    /// For `host`: how long the cut may take to show, the first on-prem node NotReady or Unknown; past it the step
    /// fails with "cut had no effect" and the drill restores. Leave room for the node-monitor grace period (50 s by
    /// default). Default 2m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_within: Option<HumanDuration>,
    /// For `host`: a node's way back when it is not Ready `after` its cut is lifted (its CNI agent, cut off the API
    /// server, never hears the policy go): a BMC power cycle, a console script. `{node}` is the node's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resort: Option<LastResortHook>,
}

/// A command the restore, the abort or `hybrid-drill recover` of a host cut runs for a node that did not come back.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LastResortHook {
    /// The command, program first, no shell; `{node}` is the node's name.
    pub command: Vec<String>,
    /// How long the node may stay not Ready after the cut is lifted before the hook runs. Default 2m.
    #[serde(default = "default_hook_timeout")]
    pub after: HumanDuration,
    /// Bound on the hook's run. Default 2m.
    #[serde(default = "default_hook_timeout")]
    pub timeout: HumanDuration,
    /// The environment variables the hook is given from the tool's own, by name (a name not set is left out); the
    /// hook gets these, `PATH` and `HOME`, nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// A node failure caused by the drill's own hooks; no shell unless you name one (`[sh, -c, "..."]`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeFailureAction {
    /// Fails the nodes (a BMC/IPMI power-off, an ssh shutdown). With `{node}` in an argument it runs once per on-prem
    /// node, all at once, with that node's name; otherwise once. A non-zero exit fails the step.
    pub fail: Vec<String>,
    /// Brings them back, the same way. Run by `restore: node-failure`, or by the abort (or `hybrid-drill recover`) of
    /// a drill stopped before it. Must be safe to run twice.
    pub recover: Vec<String>,
    /// Fail only this many of the on-prem nodes (the first by name): a partial loss. Needs a node placeholder in the
    /// hooks. Not with `fraction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Fail only this share of the on-prem nodes, as a percentage (`50%`), rounded up, at least one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<String>,
    /// Bound on each run of a hook. Default 2m.
    #[serde(default = "default_hook_timeout")]
    pub hook_timeout: HumanDuration,
    /// The environment variables the hook is given from the tool's own, by name (a name not set is left out); the
    /// hook gets these, `PATH` and `HOME`, nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// Instance types that run out of capacity for the drill, through its hooks; no shell unless you name one.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityFault {
    /// The types that run out: a list (`[g6.12xlarge]`), or `all` for every type the fallback NodePool allows
    /// (its `node.kubernetes.io/instance-type` requirement).
    pub instance_types: InstanceTypes,
    /// Takes the capacity away. With `{instanceType}` in an argument it runs once per type, all at once; otherwise
    /// once for all (an FIS experiment, which covers zones rather than types). A non-zero exit fails the step.
    pub remove: Vec<String>,
    /// Gives it back, the same way. Run by `restore: capacity`, at the end of the run, or by the abort (or
    /// `hybrid-drill recover`) of a drill stopped before it. Must be safe to run twice.
    pub give_back: Vec<String>,
    /// Bound on each run of a hook. Default 2m.
    #[serde(default = "default_hook_timeout")]
    pub hook_timeout: HumanDuration,
    /// The environment variables the hooks are given from the tool's own, by name (a name not set is left out); the
    /// hooks get these, `PATH` and `HOME`, nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// The instance types a capacity fault takes away.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum InstanceTypes {
    All(AllTypes),
    Listed(Vec<String>),
}

/// Every instance type the fallback NodePool allows.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AllTypes {
    All,
}

/// How a fallback node is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LoseFallbackNode {
    /// Delete its NodeClaim: Karpenter drains the node and terminates the instance, as after a Spot interruption
    /// notice or a failed instance.
    Delete,
}

pub(super) fn default_hook_timeout() -> HumanDuration {
    HumanDuration(Duration::from_secs(120))
}

/// Move the workload back: uncordon the on-prem nodes, then restart the workload so it re-places on-prem.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReturnAction {
    /// Uncordon the on-prem nodes first (default true).
    #[serde(default = "default_true")]
    pub uncordon: bool,
    /// A rollout restart of `deployment/NAME` or `statefulset/NAME` in the workload's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecAction {
    /// The program and its arguments; no shell unless you name one (`[sh, -c, "..."]`).
    pub command: Vec<String>,
    /// Command to run when the drill is aborted after this step ran (e.g. power the server back on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<Vec<String>>,
    /// The environment variables the hook is given from the tool's own, by name (a name not set is left out); the
    /// hook gets these, `PATH` and `HOME`, nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}
