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
    /// Who ran it and why; reports written before provenance was recorded have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<super::provenance::Provenance>,
    pub drill: DrillIdentity,
    pub cluster: ClusterRecord,
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    pub outcome: Outcome,
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_reason: Option<String>,
    /// What qualifies the verdict, the most serious first: every format opens with these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headline: Vec<Qualifier>,
    /// The forecast `run` recorded before the fault against the measured phases (forecast.json), if it made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<crate::whatif::ForecastCheck>,
    /// Set when the run stopped without writing its report: this one is rebuilt from its timeline and journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crashed: Option<Crashed>,
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
    /// Start gates closed when the drill started and let through by `--override-gate`: which, what closed it, who
    /// and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates_overridden: Vec<OverriddenGate>,
    /// The emergency stop, when someone pulled it: who, when and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emergency_stop: Option<EmergencyStop>,
    pub warnings: Vec<String>,
    /// Why the fallback was not reclaimed, each reason as first seen; empty when nothing held it.
    #[serde(default)]
    pub reclaim_blockers: Vec<super::blockers::ReclaimBlocker>,
    /// What users saw, from the drill's SLIs in Prometheus (`spec.slo`); absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<crate::domain::impact::Impact>,
    /// The fallback's own failures the drill caused (capacity, a lost node) and a partial on-prem loss.
    #[serde(default, skip_serializing_if = "crate::phases::fallback_faults::FallbackFaults::is_empty")]
    pub fallback_faults: crate::phases::fallback_faults::FallbackFaults,
    /// The GPU fault's path: quarantined or not, the degraded time; absent for other faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_fault: Option<crate::phases::gpu_fault::GpuFaultOutcome>,
    /// The service's last tier (Tier 3): when it served, the error window, its cost; absent without `lastTier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tier: Option<crate::phases::last_tier::LastTierOutcome>,
    /// The expected alerts timed and the warmers checked; absent when the drill declares neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_nets: Option<crate::nets::SafetyNets>,
    /// The cut nodes that came back only through the drill's `lastResort` hook.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_resort: Vec<LastResortRun>,
    /// The workload's Ready pods against those needed, during the fault and during the return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_level: Option<ServiceLevel>,
    /// Every workload the fault displaced (the drilled one too), by owner, and the NodePools each could land on.
    #[serde(default)]
    pub blast_radius: Vec<crate::cluster::collateral::BlastGroup>,
    /// Every other workload the fault displaced (from the on-prem nodes before it), with its pods and GPUs.
    #[serde(default)]
    pub collateral: Vec<crate::cluster::collateral::Bystander>,
    /// What was still different from the state before the fault at the end: NodeClaims the drill caused, in any
    /// NodePool, and displaced workloads still off the on-prem nodes; `expected` when the drill file leaves them.
    #[serde(default)]
    pub leftovers: Vec<crate::cluster::collateral::Leftover>,
    /// Every departure from the plan: retries, failed or timed-out steps, warnings, overridden gates, manual actions
    /// and what was left in place on purpose.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deviations: Vec<Deviation>,
    /// What to fix: one item per missed objective and per preflight warning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub action_items: Vec<ActionItem>,
}

/// A start gate a person let through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverriddenGate {
    pub gate: crate::domain::GateKind,
    /// What closed it when the drill started.
    pub closed: String,
    pub by: String,
    pub reason: String,
    pub at: DateTime<Utc>,
}

/// The emergency stop as the run saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmergencyStop {
    pub reason: String,
    /// The `hybrid-drill.io/stopped-by` annotation, else the field manager that set the stop (`kubectl-annotate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When the API server recorded the annotation, if its managed fields say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_at: Option<DateTime<Utc>>,
    /// When this run saw it.
    pub seen_at: DateTime<Utc>,
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

/// One thing a reader must know with the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qualifier {
    pub kind: QualifierKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QualifierKind {
    /// The run stopped without finishing: the report is rebuilt from what it left.
    Crashed,
    Stopped,
    /// A cut node came back only through the drill's `lastResort` hook (a power cycle).
    LastResort,
    /// Something the run changed, or started, that is still in the cluster.
    Leftover,
    MissedObjective,
    Service,
    Warning,
}

impl QualifierKind {
    /// The words a text format prints before the qualifier.
    pub fn tag(self) -> &'static str {
        match self {
            QualifierKind::Crashed => "CRASHED",
            QualifierKind::Stopped => "stopped because",
            QualifierKind::LastResort => "LAST RESORT",
            QualifierKind::Leftover => "LEFT IN THE CLUSTER",
            QualifierKind::MissedObjective => "OBJECTIVE MISSED",
            QualifierKind::Service => "service",
            QualifierKind::Warning => "warning",
        }
    }

    /// The serde name, for CSS classes.
    pub fn slug(self) -> &'static str {
        match self {
            QualifierKind::Crashed => "crashed",
            QualifierKind::Stopped => "stopped",
            QualifierKind::LastResort => "last-resort",
            QualifierKind::Leftover => "leftover",
            QualifierKind::MissedObjective => "missed-objective",
            QualifierKind::Service => "service",
            QualifierKind::Warning => "warning",
        }
    }

    /// Whether it changes how the verdict reads (shown in red), rather than adding to it.
    pub fn is_serious(self) -> bool {
        !matches!(self, QualifierKind::Service | QualifierKind::Warning | QualifierKind::Stopped)
    }
}

/// A host cut's `lastResort` hook run for a node that did not come back once its cut was lifted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastResortRun {
    /// The cut step.
    pub step: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub t_seconds: f64,
}

/// A run that stopped without writing its report (killed, out of memory, the host lost): its report is rebuilt from
/// the timeline and the journal it left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Crashed {
    /// The last thing the timeline recorded, and when.
    pub last_seen: String,
    /// What the journal still has to undo, newest first.
    #[serde(default)]
    pub outstanding: Vec<String>,
    /// The `recover` that restored the cluster after the crash and sealed the run directory; `None` until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered: Option<Recovery>,
}

/// A crashed run's verdict, the same words in every command: whether `recover` restored the cluster, and when.
pub fn crashed_verdict(recovered: Option<&Recovery>) -> String {
    match recovered {
        Some(r) => format!("crashed; restored by recover at {}", r.at.format("%Y-%m-%d %H:%M:%S UTC")),
        None => NOT_RECOVERED.into(),
    }
}

pub const NOT_RECOVERED: &str = "crashed; not yet recovered";

/// What `recover` did for a crashed run, as it recorded it in the run directory (`recovered.json`) before sealing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// When the restore was verified.
    pub at: DateTime<Utc>,
    /// Who ran `recover`, as the API server authenticated it (or why that is unknown).
    pub by: String,
    pub host: String,
    pub tool_version: String,
    /// Each change undone, as `recover` printed it.
    pub undone: Vec<String>,
    /// Each check of the restored state that held.
    pub verified: Vec<String>,
}

/// The Ready pods of the workload against the pods the drill needs Ready, in the two windows that matter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceLevel {
    /// Ready pods when the drill began, before the fault.
    pub ready_before: usize,
    /// From the fault to the start of the return (or the end of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Dip>,
    /// From the start of the return to the end of the run: the workload moving home can dip again.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "return")]
    pub back: Option<Dip>,
}

/// One window of the run, on the tool's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dip {
    /// The fewest workload pods Ready at any moment of the window.
    pub lowest_ready: usize,
    /// The Ready pods the service needed at that moment (`restoredWhen.readyPods`, resolved at the fault).
    pub needed: usize,
    /// How long fewer pods than needed were Ready, summed over the window.
    pub seconds_below: f64,
    /// How many times the count fell below the target in the window.
    pub dips: usize,
}

impl Dip {
    pub fn dipped(&self) -> bool {
        self.dips > 0 || self.lowest_ready < self.needed
    }
}

/// Whether a report has no startup to show (serde leaves the field out then).
pub(super) fn no_pods(startup: &Startup) -> bool {
    startup.pods.is_empty()
}

/// What kind of departure from the plan a deviation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviationKind {
    /// A request the tool repeated: an eviction a budget refused, a watch that lost its stream.
    Retry,
    StepFailed,
    StepTimedOut,
    /// A step that started and never finished: a signal, a guard or the deadline stopped the drill.
    StepAborted,
    Warning,
    /// A start gate (`--override-gate`) let through while it was closed.
    OverriddenGate,
    /// A safety check the drill file turned off or down: a forced drain, emptyDir data deleted, a preflight failure
    /// let through. Not a start gate: its own word, so an auditor does not read it as a bypassed gate.
    SafetyRelaxed,
    /// Something a person did or must do: an emergency stop, a restore that needs `recover`.
    ManualAction,
    /// A change the drill keeps on purpose (`keepChanges`), for a later `recover`.
    ExpectedLeftover,
}

impl DeviationKind {
    pub fn label(self) -> &'static str {
        match self {
            DeviationKind::Retry => "retry",
            DeviationKind::StepFailed => "step failed",
            DeviationKind::StepTimedOut => "step timed out",
            DeviationKind::StepAborted => "step aborted",
            DeviationKind::Warning => "warning",
            DeviationKind::OverriddenGate => "overridden gate",
            DeviationKind::SafetyRelaxed => "safety relaxed by the drill file",
            DeviationKind::ManualAction => "manual action",
            DeviationKind::ExpectedLeftover => "expected leftover",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deviation {
    pub kind: DeviationKind,
    /// Seconds into the run, when the timeline dates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_seconds: Option<f64>,
    pub what: String,
}

/// Where an action item comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActionSource {
    MissedObjective,
    PreflightWarning,
    /// An SLI outside its objective during the drill (`impact`).
    MissedSlo,
    /// A warmer the RTO relies on was not in effect on the fallback (`safety_nets`).
    Warmer,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionItem {
    pub source: ActionSource,
    /// `provisioning <= 5.0s`, or the preflight check's finding.
    pub objective: String,
    /// What the run measured (`6.0s`, `not measured`), or `warning` for a preflight finding.
    pub measured: String,
    /// The likely cause, from the phase breakdown, and what would address it.
    pub cause: String,
    /// `spec.evidence.owner`, or `unassigned`.
    pub owner: String,
}

/// Said where the drill file names no owner.
pub const UNASSIGNED: &str = "unassigned";
