//! From a timeline to phases: boundaries on both clocks, durations, RTO, verdicts against objectives, fallback
//! GPU-hours and cost. A pure function of the drill and its observations.

pub use crate::domain::{PhaseId, UnknownPhase};

mod startup;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::cluster::karpenter::ClaimCondition;
use crate::cluster::tolerations;
use crate::drill::{Drill, RestoreTarget};
use crate::timeline::{ConditionStatus, Event, FaultKind, NodeRole, Observation};
pub use startup::{PodStartup, Startup, StartupPart};

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

/// What one fallback NodePool brought.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolShare {
    pub nodes: usize,
    pub node_hours: f64,
}

/// What a fallback node-hour is counted from, as report.json writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BillingBasis {
    /// From each NodeClaim's creation, when the instance is asked for, to its deletion, once the instance is
    /// terminated.
    #[serde(rename = "nodeclaim")]
    NodeClaim,
    /// From the Node object to its deletion: runs whose timeline holds no NodeClaims.
    #[serde(rename = "node")]
    Node,
}

/// GPU capacity the fallback brought, and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FallbackUsage {
    pub nodes: usize,
    pub node_hours: f64,
    pub gpu_hours: f64,
    pub max_gpus: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_limit: Option<i64>,
    /// The NodePool's limit was exceeded (Karpenter's limits are eventually consistent).
    pub overrun: bool,
    /// The drill's own ceiling (`guards.maxFallbackGpus`), and whether the fallback went above it (which aborts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub over_ceiling: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced_instance_types: Vec<String>,
    pub by_instance_type: BTreeMap<String, f64>,
    /// Per fallback NodePool (an on-demand and a Spot pool, say): its nodes and their node-hours. Empty in runs
    /// recorded before nodes carried their pool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_node_pool: BTreeMap<String, PoolShare>,
    /// How node-hours were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billed_from: Option<BillingBasis>,
    /// Fallback capacity the run ended with, still billing: its NodeClaims (or nodes), counted up to `still_running_at`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub still_running: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub still_running_at: Option<DateTime<Utc>>,
    /// NodeClaims deleted without ever launching (EC2 out of capacity, a NodeClass not ready): no instance, no cost,
    /// but their time is part of the provisioning phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_launches: Vec<FailedLaunch>,
}

/// A NodeClaim Karpenter gave up on before its instance launched, with what the cluster said about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedLaunch {
    pub nodeclaim: String,
    /// When the NodeClaim was seen gone.
    pub at: DateTime<Utc>,
    /// The last Kubernetes Event about the NodeClaim (Karpenter's `InsufficientCapacityError`, ...), or its
    /// `Launched=False` condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub phases: Vec<Phase>,
    /// The key moments of the drill in the order they happened.
    pub milestones: Vec<Boundary>,
    pub fallback: FallbackUsage,
    pub objectives_missed: Vec<PhaseId>,
    /// The workload's pods on the fallback, pod by pod.
    pub startup: Startup,
}

impl Phase {
    /// Whether the phase has an objective it did not meet: missed, or not measured at all.
    pub fn misses_objective(&self) -> bool {
        self.objective_seconds.is_some() && !matches!(self.verdict, Verdict::Met | Verdict::NoObjective)
    }
}

impl Analysis {
    pub fn phase(&self, id: PhaseId) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == id)
    }
}

/// A moment of the drill a phase can start or end at. Each is found once, by [`Moments::find`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// The fault injected: t0.
    FaultInjected,
    /// The last workload pod gone from on-prem.
    WorkloadEvicted,
    /// An on-prem node NotReady or Unknown.
    NodeLost,
    /// The NoExecute taint on a lost on-prem node.
    LostNodeTainted,
    /// The first workload pod evicted from on-prem while the fault lasted.
    FirstPodEvicted,
    /// The same, anywhere before the return: the milestone.
    FirstPodEvictedBeforeReturn,
    ReplacementPending,
    FirstClaimCreated,
    /// The first NodeClaim to reach the condition.
    FirstClaimReached(ClaimCondition),
    /// Every NodeClaim created for the fault at the condition.
    ClaimsReached(ClaimCondition),
    FallbackNodeUsable,
    PodsScheduled,
    /// The path the restore waited on: the last workload pod to become Ready on the fallback created.
    LastPodCreated,
    /// The NodeClaim of that pod's node created, or the pod's creation if the claim is older.
    LastPodClaimCreated,
    /// That NodeClaim at the condition, not before the pod's creation.
    LastPodClaimReached(ClaimCondition),
    /// That pod's node usable, not before the pod's creation.
    LastPodNodeUsable,
    /// That pod bound to its fallback node.
    LastPodScheduled,
    PodsReady,
    ImagePullStarted,
    ImagePulled,
    ServiceRestored,
    ReturnStarted,
    /// The return started or, if the workload was back on-prem before it, that moment: once a restore brings the
    /// on-prem nodes back, Karpenter's consolidation may move the workload onto them on its own.
    ReturnStartedOrBack,
    /// The same for the fallback reclaimed to 0 before the return.
    ReturnStartedOrReclaimed,
    BackOnPrem,
    FallbackReclaimed,
    /// A `restore` step began ending the fault.
    RestoreStarted,
    FaultRemoved,
    /// The fault removed, or the on-prem nodes Ready if they were before the removal returned (a recovery hook that
    /// waits for its node, a last resort that reboots it): revert and rejoin then add up to the restore.
    RevertEnded,
    OnPremNodesReady,
}

/// How the tool's clock stamps a phase's end. What scripts/fidelity checks each against is its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// The tool's own act, stamped as it sends its first request (or starts its hooks).
    Act,
    /// The tool's own act done, stamped once its last request was answered (or its hooks returned).
    Done,
    /// A change, stamped when its watch event arrived.
    Watch,
    /// A state the tool derives from its watches, stamped when the event that completed it arrived.
    View,
    /// The drill's `restoredWhen`: its pods Ready as the watch delivered them, or a probe's first success of the run
    /// that confirmed it.
    Criterion,
}

/// The tool's clock against the API server's audit log (scripts/fidelity's `TOOL_BOUND_MS`).
pub const TOOL_BOUND_MS: u32 = 100;
/// An object's own stamp against the audit log, whole seconds (scripts/fidelity's `SERVER_BOUND_S`).
pub const SERVER_BOUND_S: u32 = 1;

impl Receipt {
    pub fn as_str(self) -> &'static str {
        match self {
            Receipt::Act => "act",
            Receipt::Done => "done",
            Receipt::Watch => "watch",
            Receipt::View => "view",
            Receipt::Criterion => "criterion",
        }
    }

    /// How far such a stamp may lie from the cluster's own record of the moment.
    pub fn bound(self) -> String {
        let ms = TOOL_BOUND_MS;
        match self {
            Receipt::Act => format!("within {ms} ms of the API server receiving the request; a hook's, within its run"),
            Receipt::Done => format!("within {ms} ms after its last write"),
            Receipt::Watch => format!("within {ms} ms of the API server's write"),
            Receipt::View => format!("within {ms} ms of the write that completed it"),
            Receipt::Criterion => {
                format!("within {ms} ms of the last pod's Ready write; a probe's, within one probe interval")
            }
        }
    }
}

/// One end of a phase in words: the event, how the tool's clock stamps it, and the object's own stamp, if any, that
/// gives the server-clock figure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndDefinition {
    pub event: String,
    pub receipt: Receipt,
    pub stamp: Option<&'static str>,
}

/// A phase in words, read from the table the phases are cut by: the README's phase table and every report's legend
/// are rendered from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseDefinition {
    pub id: PhaseId,
    pub from: EndDefinition,
    pub to: EndDefinition,
}

impl PhaseDefinition {
    /// The stamps the server-clock figure runs between; `None` when an end has none (no figure is given).
    pub fn server_clock(&self) -> Option<String> {
        Some(format!("{} → {}", self.from.stamp?, self.to.stamp?))
    }

    /// The README's row: phase, from, to, the tool's clock at each end, the server's.
    pub fn table_row(&self) -> String {
        let name = match (self.id.parent(), self.id) {
            (Some(_), id) => format!("└ {}", id.as_str()),
            (None, PhaseId::Rto) => "**RTO**".into(),
            (None, id) => id.as_str().into(),
        };
        format!(
            "| {name} | {} | {} | {} → {} | {} |",
            self.from.event,
            self.to.event,
            self.from.receipt.as_str(),
            self.to.receipt.as_str(),
            self.server_clock().unwrap_or_else(|| "-".into())
        )
    }

    /// The report's legend line: the figure's clock and bound.
    pub fn legend(&self) -> String {
        let (from, to) = (self.from.receipt, self.to.receipt);
        let ends = if from == to {
            format!("both ends {} stamps ({})", from.as_str(), from.bound())
        } else {
            format!("start: {} stamp ({}), end: {} stamp ({})", from.as_str(), from.bound(), to.as_str(), to.bound())
        };
        let server = match self.server_clock() {
            Some(stamps) => format!("server clock {stamps}, whole seconds, each within {SERVER_BOUND_S} s"),
            None => "no server-clock figure".into(),
        };
        format!("{}: tool's clock, {ends}; {server}", self.id.title())
    }
}

impl Bound {
    /// The moment in words; kept beside [`Moments::find`], which finds it.
    fn definition(self) -> EndDefinition {
        use Receipt::{Act, Criterion, Done, View, Watch};
        const READY: Option<&str> = Some("Ready's lastTransitionTime");
        const DELETION: Option<&str> = Some("deletionTimestamp less the grace period");
        const CONDITION: &str = "the condition's lastTransitionTime";
        let (event, receipt, stamp): (String, Receipt, Option<&'static str>) = match self {
            Bound::FaultInjected => {
                ("fault injected (t0): the fault step's first request, or its hooks started".into(), Act, None)
            }
            Bound::WorkloadEvicted => (
                "last workload pod gone from the on-prem nodes (after a cut or a node failure: deleted by the API \
                 server; it stays Terminating until the node is back)"
                    .into(),
                Watch,
                None,
            ),
            Bound::NodeLost => ("first on-prem node not Ready (Unknown when unreachable)".into(), Watch, READY),
            Bound::LostNodeTainted => (
                "first `unreachable` (or `not-ready`) NoExecute taint on an on-prem node".into(),
                Watch,
                Some("the taint's timeAdded"),
            ),
            Bound::FirstPodEvicted | Bound::FirstPodEvictedBeforeReturn => {
                ("first workload pod evicted from on-prem (Terminating)".into(), Watch, DELETION)
            }
            Bound::ReplacementPending => {
                ("first replacement pod created (Pending)".into(), Watch, Some("creationTimestamp"))
            }
            Bound::FirstClaimCreated => ("first NodeClaim created".into(), Watch, Some("creationTimestamp")),
            Bound::FirstClaimReached(c) => {
                (format!("first NodeClaim {c}"), Watch, Some("the condition's lastTransitionTime"))
            }
            Bound::ClaimsReached(c) => {
                (format!("every NodeClaim {c}"), Watch, Some("the condition's lastTransitionTime"))
            }
            Bound::FallbackNodeUsable => (
                "first fallback node Ready with GPUs allocatable and its NodeClaim Initialized".into(),
                Watch,
                Some("the lastTransitionTime of whichever came last"),
            ),
            Bound::PodsScheduled => {
                ("last workload pod bound to a fallback node".into(), Watch, Some("PodScheduled's lastTransitionTime"))
            }
            Bound::LastPodCreated => (
                "the last fallback pod (the last to become Ready: the one the restore waited for) created (Pending)"
                    .into(),
                Watch,
                Some("creationTimestamp"),
            ),
            Bound::LastPodClaimCreated => (
                "the first NodeClaim created after that pod, at the latest its node's (the pod's creation if its \
                 node's NodeClaim is older)"
                    .into(),
                Watch,
                Some("creationTimestamp"),
            ),
            Bound::LastPodClaimReached(c) => {
                (format!("that NodeClaim {c} (not before the pod's creation)"), Watch, Some(CONDITION))
            }
            Bound::LastPodNodeUsable => {
                ("that pod's node Ready with GPUs allocatable (not before the pod's creation)".into(), Watch, READY)
            }
            Bound::LastPodScheduled => {
                ("that pod bound to its fallback node".into(), Watch, Some("PodScheduled's lastTransitionTime"))
            }
            Bound::PodsReady => ("last workload pod Ready on a fallback node".into(), Watch, READY),
            Bound::ImagePullStarted => (
                "the last fallback pod's image pull started (its `Pulling`, or its cached-image `Pulled`)".into(),
                Watch,
                Some("the event's time"),
            ),
            Bound::ImagePulled => {
                ("the last fallback pod's image pulled (its last `Pulled`)".into(), Watch, Some("the event's time"))
            }
            Bound::ServiceRestored => (
                "service restored: the `restoredWhen` criterion first held (with a probe, the first of the \
                 consecutive successes that confirmed it; the note says when it was confirmed)"
                    .into(),
                Criterion,
                None,
            ),
            Bound::ReturnStarted => ("return started".into(), Act, None),
            Bound::ReturnStartedOrBack => (
                "return started, or the workload back on-prem before it (after a restore, consolidation may move it \
                 onto the on-prem nodes on its own)"
                    .into(),
                Act,
                None,
            ),
            Bound::ReturnStartedOrReclaimed => (
                "return started, or the fallback reclaimed to 0 before it (after a restore, consolidation may empty \
                 it on its own)"
                    .into(),
                Act,
                None,
            ),
            Bound::BackOnPrem => ("workload back on-prem and Ready".into(), View, None),
            Bound::FallbackReclaimed => ("fallback reclaimed to 0 NodeClaims and nodes".into(), View, None),
            Bound::RestoreStarted => ("restore started".into(), Act, None),
            Bound::FaultRemoved => {
                ("link restored (the cut's policies deleted) or recovery hooks returned".into(), Done, None)
            }
            Bound::RevertEnded => (
                "link restored (the cut's policies deleted) or recovery hooks returned, or the last on-prem node \
                 Ready again if that came first (a hook or last resort that waits for its node)"
                    .into(),
                Done,
                None,
            ),
            Bound::OnPremNodesReady => ("last on-prem node Ready again".into(), Watch, READY),
        };
        EndDefinition { event, receipt, stamp }
    }
}

/// Every phase in words, in the order reports show them.
pub fn definitions() -> Vec<PhaseDefinition> {
    PHASES.iter().map(|d| PhaseDefinition { id: d.id, from: d.from.definition(), to: d.to.definition() }).collect()
}

/// One phase in words.
pub fn definition(id: PhaseId) -> Option<PhaseDefinition> {
    definitions().into_iter().find(|d| d.id == id)
}

/// When a phase belongs in the report at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Always,
    /// The fault can lose nodes, or a node was seen lost.
    NodeLost,
    /// The image pull was observed.
    ImagePull,
    /// The drill has a `restore` step.
    Restore,
}

/// One row of the phase table: a phase runs from one moment to another. Its parent is [`PhaseId::parent`].
struct PhaseDef {
    id: PhaseId,
    from: Bound,
    to: Bound,
    shown: Shown,
}

const fn def(id: PhaseId, from: Bound, to: Bound, shown: Shown) -> PhaseDef {
    PhaseDef { id, from, to, shown }
}

/// Every phase in the order reports show them.
const PHASES: &[PhaseDef] = {
    use Bound::*;
    use ClaimCondition::{Initialized, Launched, Registered};
    &[
        def(PhaseId::Eviction, FaultInjected, WorkloadEvicted, Shown::Always),
        // The path of a lost node: not Ready (Unknown when unreachable), the NoExecute taint, the pods' toleration.
        def(PhaseId::Detection, FaultInjected, NodeLost, Shown::NodeLost),
        def(PhaseId::Taint, NodeLost, LostNodeTainted, Shown::NodeLost),
        def(PhaseId::Toleration, LostNodeTainted, FirstPodEvicted, Shown::NodeLost),
        // From here to the service restored, the phases follow the pod the restore waited for, so that they add up
        // to the RTO with the eviction: a budget-paced drain brings the fallback in waves minutes apart, and a span
        // from the first wave's NodeClaim to the last wave's would count the budget's wait as provisioning.
        def(PhaseId::Pending, LastPodCreated, LastPodClaimCreated, Shown::Always),
        def(PhaseId::Provisioning, LastPodClaimCreated, LastPodClaimReached(Initialized), Shown::Always),
        def(PhaseId::Launched, LastPodClaimCreated, LastPodClaimReached(Launched), Shown::Always),
        def(PhaseId::Registered, LastPodClaimReached(Launched), LastPodClaimReached(Registered), Shown::Always),
        def(PhaseId::Initialized, LastPodClaimReached(Registered), LastPodClaimReached(Initialized), Shown::Always),
        def(PhaseId::Scheduling, LastPodNodeUsable, LastPodScheduled, Shown::Always),
        def(PhaseId::Startup, LastPodScheduled, PodsReady, Shown::Always),
        def(PhaseId::ImagePull, ImagePullStarted, ImagePulled, Shown::ImagePull),
        def(PhaseId::Load, ImagePulled, PodsReady, Shown::ImagePull),
        def(PhaseId::Rto, FaultInjected, ServiceRestored, Shown::Always),
        def(PhaseId::Restore, RestoreStarted, OnPremNodesReady, Shown::Restore),
        def(PhaseId::Revert, RestoreStarted, RevertEnded, Shown::Restore),
        def(PhaseId::Rejoin, RevertEnded, OnPremNodesReady, Shown::Restore),
        def(PhaseId::Return, ReturnStartedOrBack, BackOnPrem, Shown::Always),
        def(PhaseId::Reclaim, ReturnStartedOrReclaimed, FallbackReclaimed, Shown::Always),
    ]
};

/// The causal chain of the first wave, then the points where each stage completed for every pod and claim.
const MILESTONES: &[(Bound, MilestoneKey)] = {
    use Bound::*;
    use ClaimCondition::{Initialized, Launched, Registered};
    &[
        (FaultInjected, MilestoneKey::FaultInjected),
        (NodeLost, MilestoneKey::NodeLost),
        (LostNodeTainted, MilestoneKey::LostNodeTainted),
        (FirstPodEvictedBeforeReturn, MilestoneKey::FirstPodEvicted),
        (ReplacementPending, MilestoneKey::ReplacementPending),
        (FirstClaimCreated, MilestoneKey::FirstClaimCreated),
        (FirstClaimReached(Launched), MilestoneKey::FirstClaimLaunched),
        (FirstClaimReached(Registered), MilestoneKey::FirstClaimRegistered),
        (FirstClaimReached(Initialized), MilestoneKey::FirstClaimInitialized),
        (FallbackNodeUsable, MilestoneKey::FallbackNodeUsable),
        (WorkloadEvicted, MilestoneKey::WorkloadEvicted),
        (ClaimsReached(Initialized), MilestoneKey::ClaimsInitialized),
        (ServiceRestored, MilestoneKey::ServiceRestored),
        (RestoreStarted, MilestoneKey::RestoreStarted),
        (FaultRemoved, MilestoneKey::FaultRemoved),
        (OnPremNodesReady, MilestoneKey::OnPremNodesReady),
        (ReturnStarted, MilestoneKey::ReturnStarted),
        (BackOnPrem, MilestoneKey::BackOnPrem),
        (FallbackReclaimed, MilestoneKey::FallbackReclaimed),
    ]
};

/// The objective the drill sets for a phase, in seconds. The one place objectives are looked up.
fn objective(drill: &Drill, id: PhaseId) -> Option<f64> {
    drill.spec.objectives.get(id).map(|d| d.as_secs_f64())
}

/// Searches over the observations by sequence number.
struct Scan<'a> {
    obs: &'a [Observation],
}

impl<'a> Scan<'a> {
    fn first(&self, after: u64, f: impl Fn(&Event) -> bool) -> Option<&'a Observation> {
        self.obs.iter().find(|o| o.seq > after && f(&o.event))
    }

    fn last_between(&self, after: u64, before: u64, f: impl Fn(&Event) -> bool) -> Option<&'a Observation> {
        self.obs.iter().rev().find(|o| o.seq > after && o.seq < before && f(&o.event))
    }

    /// Whether the restored criterion held at `seq`: the last availability change before it says so.
    fn available_at(&self, seq: u64) -> bool {
        !self
            .obs
            .iter()
            .rev()
            .filter(|o| o.seq <= seq)
            .find_map(|o| match o.event {
                Event::ServiceLost { .. } => Some(true),
                Event::ServiceRestored { .. } => Some(false),
                _ => None,
            })
            .unwrap_or(false)
    }

    /// When the first fallback node became usable: Ready with GPUs allocatable and its NodeClaim Initialized
    /// (Karpenter lifts its own taint only then), whichever came last.
    fn first_usable_fallback_node(&self, after: u64, before: u64) -> Option<&'a Observation> {
        let ready_with_gpus = |node: &str| {
            self.first(after, |e| matches!(e, Event::NodeReady { node: n, role: NodeRole::Fallback, status: ConditionStatus::True, gpus } if n == node && *gpus > 0))
        };
        let claimed: Vec<(&str, &str)> = self
            .obs
            .iter()
            .filter(|o| o.seq > after && o.seq < before)
            .filter_map(|o| match &o.event {
                Event::NodeClaimNode { nodeclaim, node } => Some((nodeclaim.as_str(), node.as_str())),
                _ => None,
            })
            .collect();
        let usable = claimed
            .iter()
            .filter_map(|(claim, node)| {
                let initialized = self.first(after, |e| claim_reached(e, claim, ClaimCondition::Initialized))?;
                let ready = ready_with_gpus(node)?;
                Some(if ready.seq > initialized.seq { ready } else { initialized })
            })
            .min_by_key(|o| o.seq);
        usable
            .or_else(|| {
                // Without NodeClaim-to-node links (an older Karpenter), the first Ready fallback node stands in.
                self.first(after, |e| matches!(e, Event::NodeReady { role: NodeRole::Fallback, status: ConditionStatus::True, gpus, .. } if *gpus > 0))
            })
            .filter(|o| o.seq < before)
    }

    /// For each NodeClaim created after `after`, when it first reached `condition`.
    fn claims_reaching(&self, after: u64, before: u64, condition: ClaimCondition) -> Vec<&'a Observation> {
        let created: Vec<&str> = self
            .obs
            .iter()
            .filter(|o| o.seq > after && o.seq < before)
            .filter_map(|o| match &o.event {
                Event::NodeClaimCreated { nodeclaim } => Some(nodeclaim.as_str()),
                _ => None,
            })
            .collect();
        created
            .iter()
            .filter_map(|claim| self.first(after, |e| claim_reached(e, claim, condition)))
            .filter(|o| o.seq < before)
            .collect()
    }
}

/// Whether the event says the NodeClaim `claim` reached `condition`.
fn claim_reached(e: &Event, claim: &str, condition: ClaimCondition) -> bool {
    matches!(e, Event::NodeClaimCondition { nodeclaim, condition: c, status: ConditionStatus::True }
        if nodeclaim == claim && *c == condition)
}

/// The moments of one drill, found once on its timeline; phases and milestones are read from them.
struct Moments<'a> {
    scan: Scan<'a>,
    t0: Option<&'a Observation>,
    t0_seq: u64,
    ret: Option<&'a Observation>,
    ret_seq: u64,
    /// Where the fault ended: the restore, else the return.
    fault_end: u64,
    /// A cut or a node failure: the on-prem nodes may become unreachable, and a `restore` step ends the fault.
    loses_nodes: bool,
    evicted: Option<&'a Observation>,
    restored: Option<&'a Observation>,
    restored_seq: u64,
    restore: Option<&'a Observation>,
}

impl<'a> Moments<'a> {
    fn new(obs: &'a [Observation]) -> Moments<'a> {
        let scan = Scan { obs };
        let end = u64::MAX;
        let first_of = |f: fn(&Event) -> bool| scan.first(0, f).or_else(|| obs.first().filter(|o| f(&o.event)));
        let t0 = first_of(|e| matches!(e, Event::FaultInjected { .. }));
        // An incident whose start no object recorded has no t0: its phases are searched from when it was seen.
        let opened = first_of(|e| matches!(e, Event::IncidentOpened { .. }));
        let t0_seq = t0.or(opened).map_or(end, |o| o.seq);
        let ret = scan.first(t0_seq, |e| matches!(e, Event::ReturnStarted { .. }));
        let ret_seq = ret.map_or(end, |o| o.seq);
        let loses_nodes = t0.or(opened).is_some_and(|o| match &o.event {
            Event::FaultInjected { kind, .. } => kind.loses_nodes(),
            Event::IncidentOpened { cause, .. } => cause.fault_kind().is_some_and(|k| k.loses_nodes()),
            _ => false,
        });
        let restore = scan.first(t0_seq, |e| matches!(e, Event::RestoreStarted { .. })).filter(|o| o.seq < ret_seq);
        let fault_end = restore.map_or(ret_seq, |o| o.seq);
        // The fault has fully taken effect once the last workload pod left on-prem: a budget-paced drain restores
        // the service part-way (old and new pods together) before it takes the rest away again. A pod on an
        // unreachable node has left once the API server deleted it: it stays Terminating until the node is back,
        // nobody confirming it.
        let evicted = if loses_nodes {
            scan.last_between(t0_seq, fault_end, |e| {
                matches!(
                    e,
                    Event::PodTerminating { role: NodeRole::OnPrem, .. }
                        | Event::PodDeleted { role: NodeRole::OnPrem, .. }
                )
            })
        } else {
            scan.last_between(t0_seq, ret_seq, |e| matches!(e, Event::PodDeleted { role: NodeRole::OnPrem, .. }))
        };
        let settled = evicted.or(t0).or(opened);
        let resumed = obs.iter().any(|o| matches!(o.event, Event::IncidentResumed { .. }));
        let settled_seq = settled.map_or(end, |o| o.seq);
        let restored = scan
            .first(settled_seq, |e| matches!(e, Event::ServiceRestored { .. }))
            .filter(|o| o.seq < ret_seq)
            // That it held throughout is known only to a timeline without a gap: never for an incident a restarted
            // watch took up.
            .or_else(|| settled.filter(|s| scan.available_at(s.seq) && !resumed));
        let restored_seq = restored.map_or(ret_seq, |o| o.seq);
        Moments { scan, t0, t0_seq, ret, ret_seq, fault_end, loses_nodes, evicted, restored, restored_seq, restore }
    }

    /// Where the bound was observed, and how a report names it.
    fn find(&self, bound: Bound) -> Option<Boundary> {
        let (scan, t0, ret, fault_end) = (&self.scan, self.t0_seq, self.ret_seq, self.fault_end);
        let before = |limit: u64| move |o: &&Observation| o.seq < limit;
        let (label, o): (&str, Option<&Observation>) = match bound {
            Bound::FaultInjected => ("fault injected (t0)", self.t0),
            Bound::WorkloadEvicted => ("workload evicted from on-prem", self.evicted),
            Bound::NodeLost => {
                let o = self.node_lost();
                let status = match o.map(|o| &o.event) {
                    Some(Event::NodeReady { status, .. }) => *status,
                    _ => ConditionStatus::Unknown,
                };
                return o.map(|o| Boundary::of(&format!("on-prem node {}", status.node_readiness()), o));
            }
            Bound::LostNodeTainted => {
                return self.lost_node_tainted().map(|o| match &o.event {
                    Event::NodeTaint { key, .. } => Boundary::of(&format!("{key}:NoExecute taint"), o),
                    _ => Boundary::of("NoExecute taint", o),
                });
            }
            Bound::FirstPodEvicted => ("first workload pod evicted from on-prem", self.first_pod_evicted(fault_end)),
            Bound::FirstPodEvictedBeforeReturn => {
                ("first workload pod evicted from on-prem", self.first_pod_evicted(ret))
            }
            Bound::ReplacementPending => (
                "replacement pod created (Pending)",
                scan.first(t0, |e| matches!(e, Event::PodCreated { .. })).filter(before(ret)),
            ),
            Bound::FirstClaimCreated => (
                "first NodeClaim created",
                scan.first(t0, |e| matches!(e, Event::NodeClaimCreated { .. })).filter(before(ret)),
            ),
            Bound::FirstClaimReached(c) => {
                let o = scan.claims_reaching(t0, ret, c).into_iter().min_by_key(|o| o.seq);
                return o.map(|o| Boundary::of(&format!("first NodeClaim {c}"), o));
            }
            Bound::ClaimsReached(c) => {
                let o = scan.claims_reaching(t0, ret, c).into_iter().max_by_key(|o| o.seq);
                return o.map(|o| Boundary::of(&format!("NodeClaims {c}"), o));
            }
            Bound::FallbackNodeUsable => ("fallback node Ready with GPUs", scan.first_usable_fallback_node(t0, ret)),
            Bound::PodsScheduled => ("workload pods bound", self.pods_bound()),
            Bound::LastPodCreated => match self.last_pod_created() {
                Some(o) => ("last fallback pod created (Pending)", Some(o)),
                None => return self.find(Bound::ReplacementPending),
            },
            Bound::LastPodClaimCreated => {
                let Some((claim, created)) = self.last_pod_claim() else {
                    return self.find(Bound::FirstClaimCreated);
                };
                let claim_created =
                    scan.first(0, |e| matches!(e, Event::NodeClaimCreated { nodeclaim } if nodeclaim == claim));
                match claim_created {
                    // A launch refused for capacity is a NodeClaim of the pod's that never became its node: its
                    // time is provisioning, so the first claim created after the pod starts it.
                    Some(c) if c.seq > created.seq => {
                        let first = scan
                            .first(created.seq, |e| matches!(e, Event::NodeClaimCreated { .. }))
                            .filter(|f| f.seq <= c.seq);
                        ("first NodeClaim created after it", Some(first.unwrap_or(c)))
                    }
                    Some(_) => ("last fallback pod created (its NodeClaim was already)", Some(created)),
                    None => ("its NodeClaim created", None),
                }
            }
            Bound::LastPodClaimReached(c) => {
                let Some((claim, created)) = self.last_pod_claim() else {
                    return self.find(Bound::ClaimsReached(c));
                };
                let reached = scan.first(0, |e| claim_reached(e, claim, c));
                return reached.map(|r| match r.seq > created.seq {
                    true => Boundary::of(&format!("its NodeClaim {c}"), r),
                    false => {
                        Boundary::of(&format!("last fallback pod created (its NodeClaim was already {c})"), created)
                    }
                });
            }
            Bound::LastPodNodeUsable => match self.last_pod_node_usable() {
                Some(o) => ("its node Ready with GPUs", Some(o)),
                None => return self.find(Bound::FallbackNodeUsable),
            },
            Bound::LastPodScheduled => match self.last_pod_bound() {
                Some(o) => ("last fallback pod bound", Some(o)),
                None => return self.find(Bound::PodsScheduled),
            },
            Bound::PodsReady => ("workload pods Ready", self.pods_ready()),
            Bound::ImagePullStarted => ("image pull started", self.image_pull_started()),
            Bound::ImagePulled => ("image pulled", self.image_pulled()),
            Bound::ServiceRestored => return self.restored.map(restored_when_first_held),
            Bound::RestoreStarted => ("restore started", self.restore),
            Bound::FaultRemoved => {
                let label = match self.restore.map(|o| &o.event) {
                    Some(Event::RestoreStarted { what: RestoreTarget::Cut, .. }) => "link restored",
                    _ => "recovery hooks ran",
                };
                (label, self.restore.and_then(|r| scan.first(r.seq, |e| matches!(e, Event::FaultRemoved { .. }))))
            }
            Bound::RevertEnded => {
                let removed = self.find(Bound::FaultRemoved)?;
                return Some(match self.on_prem_ready() {
                    Some(ready) if ready.seq < removed.seq => {
                        Boundary::of("on-prem nodes Ready (before the revert returned)", ready)
                    }
                    _ => removed,
                });
            }
            Bound::OnPremNodesReady => ("on-prem nodes Ready", self.on_prem_ready()),
            Bound::ReturnStarted => ("return started", self.ret),
            Bound::ReturnStartedOrBack => match self.back_before_return() {
                Some(o) => ("workload back on-prem before the return", Some(o)),
                None => ("return started", self.ret),
            },
            Bound::ReturnStartedOrReclaimed => match self.reclaimed_before_return() {
                Some(o) => ("fallback reclaimed to 0 before the return", Some(o)),
                None => ("return started", self.ret),
            },
            Bound::BackOnPrem => (
                "workload back on-prem",
                self.back_before_return()
                    .or_else(|| self.ret.and_then(|_| scan.first(ret, |e| matches!(e, Event::BackOnPrem { .. })))),
            ),
            Bound::FallbackReclaimed => (
                "fallback reclaimed to 0",
                self.reclaimed_before_return()
                    .or_else(|| self.ret.and_then(|_| scan.first(ret, |e| matches!(e, Event::FallbackEmpty)))),
            ),
        };
        o.map(|o| Boundary::of(label, o))
    }

    /// The workload seen back on-prem after a restore began and before the return started (a drain has no restore:
    /// never): its phase then ends where it starts.
    fn back_before_return(&self) -> Option<&'a Observation> {
        self.ret?;
        self.scan.last_between(self.restore?.seq, self.ret_seq, |e| matches!(e, Event::BackOnPrem { .. }))
    }

    /// The fallback seen reclaimed to 0 after a restore began and before the return started, with no NodeClaim
    /// created between then and the return.
    fn reclaimed_before_return(&self) -> Option<&'a Observation> {
        self.ret?;
        let empty = self.scan.last_between(self.restore?.seq, self.ret_seq, |e| matches!(e, Event::FallbackEmpty))?;
        let refilled = self.scan.last_between(empty.seq, self.ret_seq, |e| matches!(e, Event::NodeClaimCreated { .. }));
        refilled.is_none().then_some(empty)
    }

    /// When the last on-prem node was seen Ready again after the restore started. The step confirms it only once its
    /// undo returns (a recovery hook, a last-resort wait), which can be later; the watch saw it first.
    fn on_prem_ready(&self) -> Option<&'a Observation> {
        let restore = self.restore?;
        let confirmed = self.scan.first(restore.seq, |e| matches!(e, Event::OnPremReady { .. }))?;
        let last_ready = self.scan.last_between(
            restore.seq,
            confirmed.seq,
            |e| matches!(e, Event::NodeReady { role: NodeRole::OnPrem, status, .. } if status.is_true()),
        );
        Some(last_ready.unwrap_or(confirmed))
    }

    fn node_lost(&self) -> Option<&'a Observation> {
        self.scan
            .first(
                self.t0_seq,
                |e| matches!(e, Event::NodeReady { role: NodeRole::OnPrem, status, .. } if !status.is_true()),
            )
            .filter(|o| o.seq < self.fault_end)
    }

    fn lost_node_tainted(&self) -> Option<&'a Observation> {
        self.scan.first(self.t0_seq, lost_node_taint).filter(|o| o.seq < self.fault_end)
    }

    fn first_pod_evicted(&self, before: u64) -> Option<&'a Observation> {
        self.scan
            .first(self.t0_seq, |e| matches!(e, Event::PodTerminating { role: NodeRole::OnPrem, .. }))
            .filter(|o| o.seq < before)
    }

    fn pods_bound(&self) -> Option<&'a Observation> {
        self.scan.last_between(self.t0_seq, self.restored_seq.saturating_add(1), |e| {
            matches!(e, Event::PodScheduled { role: NodeRole::Fallback, .. })
        })
    }

    fn pods_ready(&self) -> Option<&'a Observation> {
        self.scan
            .last_between(self.t0_seq, self.restored_seq.saturating_add(1), |e| {
                matches!(e, Event::PodReady { role: NodeRole::Fallback, .. })
            })
            .or(self.restored)
    }

    /// The pod the phases' image pull and load follow: the last of the workload to become Ready on the fallback.
    fn last_ready_pod(&self) -> Option<&'a str> {
        self.scan
            .last_between(self.t0_seq, self.restored_seq.saturating_add(1), |e| {
                matches!(e, Event::PodReady { role: NodeRole::Fallback, .. })
            })
            .and_then(|o| match &o.event {
                Event::PodReady { pod, .. } => Some(pod.as_str()),
                _ => None,
            })
    }

    fn last_pod_created(&self) -> Option<&'a Observation> {
        let pod = self.last_ready_pod()?;
        self.scan
            .first(self.t0_seq, |e| matches!(e, Event::PodCreated { pod: p } if p == pod))
            .filter(|o| o.seq < self.restored_seq)
    }

    fn last_pod_bound(&self) -> Option<&'a Observation> {
        let pod = self.last_ready_pod()?;
        self.scan.last_between(
            self.t0_seq,
            self.restored_seq.saturating_add(1),
            |e| matches!(e, Event::PodScheduled { pod: p, role: NodeRole::Fallback, .. } if p == pod),
        )
    }

    fn last_pod_node(&self) -> Option<&'a str> {
        match &self.last_pod_bound()?.event {
            Event::PodScheduled { node, .. } => Some(node.as_str()),
            _ => None,
        }
    }

    /// The NodeClaim of the last fallback pod's node, with the pod's creation: the path's phases start no earlier.
    fn last_pod_claim(&self) -> Option<(&'a str, &'a Observation)> {
        let created = self.last_pod_created()?;
        let node = self.last_pod_node()?;
        let claim = self.scan.obs.iter().find_map(|o| match &o.event {
            Event::NodeClaimNode { nodeclaim, node: n } if n == node => Some(nodeclaim.as_str()),
            _ => None,
        })?;
        Some((claim, created))
    }

    /// When the last fallback pod's node could take it: Ready with GPUs, or the pod's creation if the node was
    /// before. Not its NodeClaim Initialized: the scheduler binds as soon as Karpenter lifts its taint at
    /// registration, and Initialized was seen a second after the binding on the lab's realistic profile.
    fn last_pod_node_usable(&self) -> Option<&'a Observation> {
        let created = self.last_pod_created()?;
        let node = self.last_pod_node()?;
        let ready = self.scan.first(self.t0_seq, |e| {
            matches!(e, Event::NodeReady { node: n, role: NodeRole::Fallback, status: ConditionStatus::True, gpus } if n == node && *gpus > 0)
        })?;
        let usable = if ready.seq > created.seq { ready } else { created };
        // The node's and the pod's watches are separate streams: a binding that arrived first proves the node usable.
        Some(match self.last_pod_bound() {
            Some(bound) if bound.seq < usable.seq => bound,
            _ => usable,
        })
    }

    /// That pod's own pull (its `Pulling`, or its `Pulled` "already present" for a cached image), never another's.
    fn image_pull_started(&self) -> Option<&'a Observation> {
        let pod = self.last_ready_pod()?;
        let obs = self.scan.obs;
        startup::pod_event(obs, pod, "Pulling", false)
            .or_else(|| startup::pod_event(obs, pod, "Pulled", false))
            .filter(|o| o.seq > self.t0_seq && o.seq < self.restored_seq)
    }

    fn image_pulled(&self) -> Option<&'a Observation> {
        let pod = self.last_ready_pod()?;
        startup::pod_event(self.scan.obs, pod, "Pulled", true)
            .filter(|o| o.seq > self.t0_seq && o.seq < self.restored_seq)
    }

    /// When t0 is a hook's start (a node failure), how long the hooks ran: the fault reaches the cluster while they
    /// run, so detection includes their runtime.
    fn hooks_ran(&self) -> Option<String> {
        let t0 = self.t0.filter(|o| matches!(o.event, Event::FaultInjected { kind: FaultKind::NodeFailure, .. }))?;
        let ran: Vec<&Observation> = self
            .scan
            .obs
            .iter()
            .filter(|o| o.seq > t0.seq)
            .take_while(|o| !matches!(o.event, Event::StepFinished { .. }))
            .filter(|o| matches!(o.event, Event::HookRan { .. }))
            .collect();
        let last = ran.last()?;
        Some(format!(
            "t0 is when the failure hooks started; {} ran until +{:.2} s",
            if ran.len() == 1 { "it".to_string() } else { format!("the {} of them", ran.len()) },
            last.t_ms.saturating_sub(t0.t_ms) as f64 / 1000.0
        ))
    }

    fn shows(&self, shown: Shown, drill: &Drill) -> bool {
        match shown {
            Shown::Always => true,
            Shown::NodeLost => self.loses_nodes || self.node_lost().is_some(),
            Shown::ImagePull => self.image_pull_started().is_some() || self.image_pulled().is_some(),
            Shown::Restore => drill.spec.steps.iter().any(|s| matches!(s.action, crate::drill::Action::Restore(_))),
        }
    }

    /// What a phase's figure alone does not say.
    fn extra_note(&self, id: PhaseId, drill: &Drill) -> Option<String> {
        match id {
            PhaseId::Rto if let Some(confirmed) = self.restored.and_then(confirmation) => {
                Some(format!("restored when {} first held; {confirmed}", restored_criterion(drill)))
            }
            PhaseId::Toleration => expected_toleration(self.scan.obs, self.lost_node_tainted()),
            PhaseId::Detection => self.hooks_ran(),
            // Not a slow fallback: the node lifecycle controller's zone rule kept the lost nodes untainted.
            PhaseId::Eviction => self.scan.first(0, |e| {
                matches!(e, Event::StepFinished { message, .. } if message.starts_with(crate::cluster::zones::HELD_BY_ZONE_DISRUPTION))
            }).map(|_| format!(
                "{}: a partial disruption of a zone of at most 50 nodes (more than 2 and at least 55% NotReady) sets \
                 the node lifecycle controller's eviction rate to 0; see the step's message",
                crate::cluster::zones::HELD_BY_ZONE_DISRUPTION
            )),
            PhaseId::Rto
                if self.restored.is_some()
                    && self
                        .scan
                        .first(self.t0_seq, |e| matches!(e, Event::ServiceLost { .. }))
                        .is_none_or(|o| o.seq >= self.ret_seq) =>
            {
                Some("the restored criterion held throughout".into())
            }
            _ => None,
        }
    }
}

fn phase(id: PhaseId, from: Option<Boundary>, to: Option<Boundary>, objective: Option<f64>) -> Phase {
    let mut note = None;
    let mut reversed = false;
    let seconds = match (&from, &to) {
        (Some(f), Some(t)) if t.t_ms >= f.t_ms => Some((t.t_ms - f.t_ms) as f64 / 1000.0),
        (Some(f), Some(t)) => {
            // A clamp to zero would pass any objective; the report says what it saw instead.
            reversed = true;
            note = Some(format!(
                "inconsistent: its end ({}, {}) was observed before its start ({}, {}); no duration is claimed",
                t.label,
                t.received.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                f.label,
                f.received.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ));
            None
        }
        _ => None,
    };
    let server_seconds = match (from.as_ref().and_then(|b| b.server_time), to.as_ref().and_then(|b| b.server_time)) {
        (Some(f), Some(t)) => Some((t - f).num_seconds()),
        _ => None,
    };
    let verdict = match (seconds, objective) {
        _ if reversed => Verdict::Inconsistent,
        (None, _) => Verdict::Incomplete,
        (Some(_), None) => Verdict::NoObjective,
        (Some(s), Some(o)) if s <= o => Verdict::Met,
        (Some(_), Some(_)) => Verdict::Missed,
    };
    if seconds.is_none() && !reversed {
        let missing = if from.is_none() { "start" } else { "end" };
        note = Some(format!("{missing} not observed"));
    }
    Phase {
        name: id,
        parent: id.parent(),
        from,
        to,
        seconds,
        server_seconds,
        objective_seconds: objective,
        verdict,
        note,
    }
}

/// Cuts the phases of a drill out of its timeline: every row of the phase table the drill shows, evaluated on the
/// moments found once.
pub fn analyse(drill: &Drill, obs: &[Observation]) -> Analysis {
    let moments = Moments::new(obs);
    let phases: Vec<Phase> = PHASES
        .iter()
        .filter(|d| moments.shows(d.shown, drill))
        .map(|d| {
            let mut p = phase(d.id, moments.find(d.from), moments.find(d.to), objective(drill, d.id));
            if let Some(extra) = moments.extra_note(d.id, drill) {
                p.note = Some(match p.note {
                    Some(n) => format!("{n}; {extra}"),
                    None => extra,
                });
            }
            p
        })
        .collect();
    let mut milestones: Vec<Boundary> = MILESTONES
        .iter()
        .filter_map(|&(bound, key)| moments.find(bound).map(|b| Boundary { key: Some(key), ..b }))
        .collect();
    milestones.sort_by_key(|m| m.seq);
    let objectives_missed = phases.iter().filter(|p| p.misses_objective()).map(|p| p.name).collect();
    let startup = startup::per_pod(obs, moments.t0_seq, moments.restored_seq.saturating_add(1));
    Analysis { phases, milestones, fallback: fallback_usage(drill, obs, moments.t0_seq), objectives_missed, startup }
}

/// The service restored when its criterion first held: with a probe, before the observation that confirmed it.
fn restored_when_first_held(o: &Observation) -> Boundary {
    let mut boundary = Boundary::of("service restored", o);
    if let Event::ServiceRestored { held_since_ms: Some(held), .. } = o.event
        && held < o.t_ms
    {
        boundary.t_ms = held;
        boundary.received = o.received - chrono::Duration::milliseconds((o.t_ms - held) as i64);
    }
    boundary
}

/// When a restoration that first held earlier was confirmed, for the RTO's note.
fn confirmation(o: &Observation) -> Option<String> {
    match o.event {
        Event::ServiceRestored { held_since_ms: Some(held), .. } => Some(format!(
            "first held at +{:.1} s, confirmed at +{:.1} s ({})",
            held as f64 / 1000.0,
            o.t_ms as f64 / 1000.0,
            crate::timeline::rfc3339(&o.received)
        )),
        _ => None,
    }
}

/// The drill's restored criterion, in words.
fn restored_criterion(drill: &Drill) -> String {
    let when = &drill.spec.targets.workload.restored_when;
    let pods = format!("{} pods Ready", when.ready_pods);
    match &when.http {
        Some(probe) => format!(
            "{pods} and {} answering {} ({} in a row, every {})",
            probe.url,
            probe.expect_status,
            probe.consecutive,
            humantime::format_duration(probe.interval)
        ),
        None => pods,
    }
}

/// The NoExecute taint the node lifecycle controller puts on an on-prem node it lost.
fn lost_node_taint(e: &Event) -> bool {
    matches!(e, Event::NodeTaint { role: NodeRole::OnPrem, key, effect, added: true, .. }
        if effect == "NoExecute" && (key == tolerations::UNREACHABLE || key == tolerations::NOT_READY))
}

/// What the workload's tolerations, read before the fault, said the wait after `taint` would be.
fn expected_toleration(obs: &[Observation], taint: Option<&Observation>) -> Option<String> {
    let key = match taint.map(|o| &o.event) {
        Some(Event::NodeTaint { key, .. }) => key.as_str(),
        _ => tolerations::UNREACHABLE,
    };
    obs.iter().find_map(|o| match &o.event {
        Event::TolerationsRead { tolerations } => tolerations
            .iter()
            .find(|t| t.taint == key)
            .map(|t| format!("expected from the pods' tolerations: {}", t.describe())),
        _ => None,
    })
}

/// One fallback instance's life: from when it was asked for to when it was gone (or the run ended).
struct Billed {
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
    node: Option<String>,
    launched: bool,
    /// The last thing the cluster said about a NodeClaim: an Event's reason and message, or a condition.
    said: Option<(String, Option<String>)>,
}

fn fallback_usage(drill: &Drill, obs: &[Observation], t0_seq: u64) -> FallbackUsage {
    let mut usage = FallbackUsage::default();
    let end = obs.last().map(|o| o.received);
    let after_t0 = |o: &Observation| o.seq > t0_seq || t0_seq == u64::MAX;
    // A real instance bills from launch to termination: its NodeClaim's creation to its deletion, which Karpenter
    // completes only once the instance is terminated. Nodes no NodeClaim names (older timelines) bill as Node objects.
    let mut claims: BTreeMap<String, Billed> = BTreeMap::new();
    let mut nodes: BTreeMap<String, Billed> = BTreeMap::new();
    let mut shape: BTreeMap<String, (Option<String>, i64, Option<String>)> = BTreeMap::new();
    for o in obs {
        match &o.event {
            Event::NodeClaimCreated { nodeclaim } if after_t0(o) => {
                claims.insert(
                    nodeclaim.clone(),
                    Billed { start: o.received, end: None, node: None, launched: false, said: None },
                );
            }
            Event::NodeClaimCondition { nodeclaim, condition, status }
                if *condition == crate::cluster::karpenter::ClaimCondition::Launched =>
            {
                if let Some(c) = claims.get_mut(nodeclaim) {
                    if status.is_true() {
                        c.launched = true;
                    } else if *status == ConditionStatus::False {
                        c.said = Some((format!("{condition}=False"), None));
                    }
                }
            }
            Event::KubeEvent { object, reason, message } => {
                if let Some(c) = object.strip_prefix("NodeClaim/").and_then(|name| claims.get_mut(name)) {
                    c.said = Some((reason.clone(), Some(message.clone())));
                }
            }
            Event::NodeClaimNode { nodeclaim, node } => {
                if let Some(c) = claims.get_mut(nodeclaim) {
                    c.node = Some(node.clone());
                    c.launched = true;
                }
            }
            Event::NodeClaimDeleted { nodeclaim } => {
                if let Some(c) = claims.get_mut(nodeclaim) {
                    c.end.get_or_insert(o.received);
                }
            }
            Event::NodeAdded { node, role: NodeRole::Fallback, instance_type, gpus, node_pool } if after_t0(o) => {
                shape.insert(node.clone(), (instance_type.clone(), *gpus, node_pool.clone()));
                nodes.insert(
                    node.clone(),
                    Billed { start: o.received, end: None, node: None, launched: true, said: None },
                );
            }
            Event::NodeReady { node, role: NodeRole::Fallback, gpus, .. } => {
                if let Some(entry) = shape.get_mut(node) {
                    entry.1 = entry.1.max(*gpus);
                }
            }
            Event::NodeDeleted { node, role: NodeRole::Fallback } => {
                if let Some(n) = nodes.get_mut(node) {
                    n.end.get_or_insert(o.received);
                }
            }
            Event::FallbackGpus { gpus } => usage.max_gpus = usage.max_gpus.max(*gpus),
            _ => {}
        }
    }
    usage.failed_launches = claims
        .iter()
        .filter(|(_, c)| !c.launched)
        .filter_map(|(name, c)| {
            let (reason, message) = c.said.clone().map_or((None, None), |(r, m)| (Some(r), m));
            Some(FailedLaunch { nodeclaim: name.clone(), at: c.end?, reason, message })
        })
        .collect();
    usage.failed_launches.sort_by_key(|f| f.at);
    let claimed: Vec<String> = claims.values().filter_map(|c| c.node.clone()).collect();
    nodes.retain(|name, _| !claimed.contains(name));
    // A launched claim that names no node is an instance that never registered (it bills all the same), unless a
    // node no claim names is left too: then the link was not observed, and the node alone is counted.
    if !nodes.is_empty() {
        claims.retain(|_, c| c.node.is_some());
    }
    usage.billed_from = (!claims.is_empty())
        .then_some(BillingBasis::NodeClaim)
        .or_else(|| (!nodes.is_empty()).then_some(BillingBasis::Node));
    let mut spans: Vec<(f64, Option<String>, i64, Option<String>)> = Vec::new();
    let billed = claims.iter().filter(|(_, c)| c.launched).chain(nodes.iter());
    for (name, b) in billed {
        let Some(stop) = b.end.or(end) else { continue };
        if b.end.is_none() {
            usage.still_running.push(name.clone());
            usage.still_running_at = end;
        }
        let (instance_type, gpus, pool) = shape.get(b.node.as_deref().unwrap_or(name)).cloned().unwrap_or_default();
        spans.push(((stop - b.start).num_milliseconds().max(0) as f64 / 3_600_000.0, instance_type, gpus, pool));
    }
    let limit = obs.iter().find_map(|o| match &o.event {
        Event::Baseline { fallback_gpu_limit, .. } => *fallback_gpu_limit,
        _ => None,
    });
    apply_limit(&mut usage, limit);
    usage.ceiling = drill.spec.guards.max_fallback_gpus.map(|c| c as i64);
    usage.over_ceiling = usage.ceiling.is_some_and(|c| usage.max_gpus > c);
    let mut cost = 0.0;
    for (hours, instance_type, gpus, pool) in &spans {
        if let Some(pool) = pool {
            let share = usage.by_node_pool.entry(pool.clone()).or_default();
            share.nodes += 1;
            share.node_hours += hours;
        }
        usage.nodes += 1;
        usage.node_hours += hours;
        usage.gpu_hours += hours * *gpus as f64;
        let it = instance_type.clone().unwrap_or_else(|| "unknown".into());
        *usage.by_instance_type.entry(it.clone()).or_default() += hours;
        match drill.spec.pricing.get(&it) {
            Some(price) => cost += hours * price,
            None if !usage.unpriced_instance_types.contains(&it) => usage.unpriced_instance_types.push(it),
            None => {}
        }
    }
    if usage.nodes > 0 && !drill.spec.pricing.is_empty() {
        usage.estimated_cost = Some((cost * 100.0).round() / 100.0);
    }
    usage
}

/// Sets the fallback's GPU limit and flags an overrun of it.
pub fn apply_limit(usage: &mut FallbackUsage, limit: Option<i64>) {
    usage.gpu_limit = limit;
    usage.overrun = limit.is_some_and(|l| usage.max_gpus > l);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::timeline::Event as E;
    use crate::timeline::FaultKind;

    /// A drill with objectives for RTO, provisioning and reclaim, and a price table.
    pub(crate) fn drill() -> Drill {
        let src = r#"
apiVersion: hybrid-drill.io/v1alpha1
kind: Drill
metadata: {name: t}
spec:
  cluster: {context: c}
  targets:
    onPrem: {nodes: "a=b"}
    workload: {namespace: n, selector: "app=x", restoredWhen: {readyPods: 2}}
    fallback: {nodePool: p}
  objectives: {rto: 60s, phases: {provisioning: 5s, reclaim: 10s}}
  pricing: {g6.12xlarge: 4.6}
  steps: [{id: s, check: steady-state}]
"#;
        crate::drill::from_source(std::path::Path::new("t.yaml"), src.into()).unwrap().drill
    }

    /// Builds a timeline from (seconds, server seconds, event) triples.
    fn timeline(events: Vec<(f64, Option<i64>, E)>) -> Vec<Observation> {
        let base = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        crate::timeline::observations_from(base, events)
    }

    fn full_drain() -> Vec<(f64, Option<i64>, E)> {
        let on = NodeRole::OnPrem;
        let fb = NodeRole::Fallback;
        let cond = |c: &str, claim: &str| E::NodeClaimCondition {
            nodeclaim: claim.into(),
            condition: ClaimCondition::parse(c).unwrap(),
            status: ConditionStatus::True,
        };
        vec![
            (0.0, None, E::StepStarted { step: "drain".into(), action: "drain".into() }),
            (0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain }),
            (1.0, None, E::ServiceLost { ready_pods: 1 }),
            (1.2, Some(1), E::PodCreated { pod: "new-1".into() }),
            (2.0, None, E::PodDeleted { pod: "old-1".into(), node: "h1".into(), role: on }),
            (2.5, Some(2), E::NodeClaimCreated { nodeclaim: "c1".into() }),
            (2.6, Some(2), E::NodeClaimCreated { nodeclaim: "c2".into() }),
            (3.0, None, E::PodDeleted { pod: "old-2".into(), node: "h2".into(), role: on }),
            (4.0, Some(4), cond("Launched", "c1")),
            (4.2, Some(4), cond("Launched", "c2")),
            (
                5.0,
                Some(5),
                // Recorded before nodes carried their NodePool.
                E::NodeAdded {
                    node: "f1".into(),
                    role: fb,
                    gpus: 4,
                    instance_type: Some("g6.12xlarge".into()),
                    node_pool: None,
                },
            ),
            (5.1, Some(5), cond("Registered", "c1")),
            (5.3, Some(5), cond("Registered", "c2")),
            (6.0, Some(6), cond("Initialized", "c1")),
            (6.5, Some(6), cond("Initialized", "c2")),
            (6.6, Some(6), E::NodeReady { node: "f1".into(), role: fb, status: ConditionStatus::True, gpus: 4 }),
            (7.0, Some(7), E::PodScheduled { pod: "new-1".into(), node: "f1".into(), role: fb }),
            (9.0, Some(9), E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb, containers: vec![] }),
            (9.1, None, E::ServiceRestored { ready_pods: 2, held_since_ms: None }),
            (10.0, None, E::ReturnStarted { step: "return".into() }),
            (15.0, None, E::BackOnPrem { ready_pods: 2 }),
            (3605.0, None, E::NodeDeleted { node: "f1".into(), role: fb }),
            (3611.0, None, E::FallbackEmpty),
        ]
    }

    #[test]
    fn a_drain_drill_yields_every_phase_in_order() {
        let a = analyse(&drill(), &timeline(full_drain()));
        let secs = |n: &str| a.phase(n.parse().unwrap()).unwrap().seconds.unwrap();
        assert_eq!(secs("eviction"), 2.5);
        assert_eq!(secs("pending"), 1.3);
        assert_eq!(secs("provisioning"), 4.0);
        assert_eq!(secs("launched"), 1.7);
        assert_eq!(secs("registered"), 1.1);
        assert_eq!(secs("initialized"), 1.2);
        assert_eq!(secs("scheduling"), 0.4);
        assert_eq!(secs("startup"), 2.0);
        assert_eq!(secs("rto"), 8.6);
        assert_eq!(secs("return"), 5.0);
        assert_eq!(a.phase(PhaseId::Provisioning).unwrap().server_seconds, Some(4));
        assert_eq!(a.phase(PhaseId::Rto).unwrap().verdict, Verdict::Met);
        assert_eq!(a.phase(PhaseId::Provisioning).unwrap().verdict, Verdict::Met);
        assert_eq!(a.phase(PhaseId::Reclaim).unwrap().verdict, Verdict::Missed);
        assert_eq!(a.objectives_missed, [PhaseId::Reclaim]);
        let labels: Vec<&str> = a.milestones.iter().map(|m| m.label.as_str()).collect();
        assert_eq!(labels.first(), Some(&"fault injected (t0)"));
        assert_eq!(labels.last(), Some(&"fallback reclaimed to 0"));
        assert!(a.milestones.windows(2).all(|w| w[0].seq < w[1].seq));
        // one node of 4 GPUs for an hour, at 4.6 $/h
        assert!((a.fallback.gpu_hours - 4.0).abs() < 0.01, "{:?}", a.fallback);
        assert_eq!(a.fallback.estimated_cost, Some(4.6));
    }

    /// A budget-paced drain brings the fallback in two waves minutes apart: the phases after the eviction follow the
    /// second wave's pod, the one the restore waited for, and add up to the RTO; a first-wave claim created before the
    /// pod leaves it no pending time.
    #[test]
    fn phases_follow_the_pod_the_restore_waited_for_not_the_first_wave() {
        let (on, fb) = (NodeRole::OnPrem, NodeRole::Fallback);
        let cond = |c: &str, claim: &str| E::NodeClaimCondition {
            nodeclaim: claim.into(),
            condition: ClaimCondition::parse(c).unwrap(),
            status: ConditionStatus::True,
        };
        let ready = |node: &str| E::NodeReady { node: node.into(), role: fb, status: ConditionStatus::True, gpus: 4 };
        let wave = |start: f64, n: &str| -> Vec<(f64, Option<i64>, E)> {
            let (pod, claim, node) = (format!("new-{n}"), format!("c{n}"), format!("f{n}"));
            vec![
                (start, None, E::PodDeleted { pod: format!("old-{n}"), node: format!("h{n}"), role: on }),
                (start + 0.1, None, E::PodCreated { pod: pod.clone() }),
                (start + 1.0, None, E::NodeClaimCreated { nodeclaim: claim.clone() }),
                (start + 1.5, None, cond("Launched", &claim)),
                (start + 90.0, None, E::NodeClaimNode { nodeclaim: claim.clone(), node: node.clone() }),
                (start + 90.0, None, cond("Registered", &claim)),
                (start + 91.0, None, cond("Initialized", &claim)),
                (start + 91.2, None, ready(&node)),
                (start + 91.3, None, E::PodScheduled { pod: pod.clone(), node: node.clone(), role: fb }),
            ]
        };
        let mut events = vec![(0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain })];
        events.extend(wave(1.0, "1"));
        events.push((
            300.0,
            None,
            E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb, containers: vec![] },
        ));
        events.extend(wave(400.0, "2"));
        events.push((
            800.0,
            None,
            E::PodReady { pod: "new-2".into(), node: "f2".into(), role: fb, containers: vec![] },
        ));
        events.push((800.1, None, E::ServiceRestored { ready_pods: 2, held_since_ms: None }));
        let a = analyse(&drill(), &timeline(events.clone()));
        let secs = |a: &Analysis, n: &str| a.phase(n.parse().unwrap()).unwrap().seconds.unwrap();
        let near = |x: f64, y: f64| (x - y).abs() < 1e-6;
        assert!(near(secs(&a, "eviction"), 399.5));
        assert!(near(secs(&a, "pending"), 0.9));
        assert!(near(secs(&a, "provisioning"), 90.0), "budget wait counted as provisioning: {:?}", a.phases);
        assert!(near(secs(&a, "launched"), 0.5));
        assert!(near(secs(&a, "registered"), 88.5));
        assert!(near(secs(&a, "scheduling"), 0.1));
        assert!(near(secs(&a, "startup"), 308.7));
        let path =
            ["eviction", "pending", "provisioning", "scheduling", "startup"].map(|p| secs(&a, p)).iter().sum::<f64>();
        assert!(secs(&a, "rto") - path < 0.5, "the path's phases add up to the RTO but for the gaps between them");
        assert_eq!(
            a.phase(PhaseId::Provisioning).unwrap().from.as_ref().unwrap().label,
            "first NodeClaim created after it"
        );

        // The last pod lands on a node whose NodeClaim was created before it: no pending, provisioning from the pod.
        let mut early_claim = events;
        early_claim.retain(|(_, _, e)| !matches!(e, E::NodeClaimCreated { nodeclaim } if nodeclaim == "c2"));
        early_claim.insert(1, (0.9, None, E::NodeClaimCreated { nodeclaim: "c2".into() }));
        let a = analyse(&drill(), &timeline(early_claim));
        assert!(near(secs(&a, "pending"), 0.0));
        assert!(near(secs(&a, "provisioning"), 90.9));
    }

    /// The drain drill on the lab's realistic profile (tests/fixtures/realistic-drain: minutes of pull and load, a
    /// 90 s launch): the budget let the second pair go only after 6.5 minutes, and Karpenter took 90 s for its
    /// NodeClaims, not the 8 minutes from the first wave's claim to the last wave's.
    #[test]
    fn a_budget_paced_drain_on_realistic_timings_is_measured_on_its_last_wave() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-drain");
        let source = std::fs::read_to_string(dir.join("drill.yaml")).unwrap();
        let drill = crate::drill::from_source(&dir.join("drill.yaml"), source).unwrap().drill;
        let obs = crate::timeline::read(&dir.join("timeline.jsonl")).unwrap();
        let a = analyse(&drill, &obs);
        let secs = |n: &str| a.phase(n.parse().unwrap()).unwrap().seconds.unwrap();
        assert!((90.0..92.0).contains(&secs("provisioning")), "{}", secs("provisioning"));
        assert!((89.0..91.0).contains(&secs("registered")), "{}", secs("registered"));
        assert!(secs("scheduling") < 1.0, "{}", secs("scheduling"));
        assert!((330.0..340.0).contains(&secs("startup")), "{}", secs("startup"));
        assert_eq!(a.phase(PhaseId::Provisioning).unwrap().verdict, Verdict::Met);
        let path: f64 = ["eviction", "pending", "provisioning", "scheduling", "startup"].map(secs).iter().sum();
        assert!((secs("rto") - path).abs() < 2.0, "path {path} vs rto {}", secs("rto"));
    }

    #[test]
    fn a_host_cut_yields_detection_taint_toleration_and_restore() {
        let mut d = drill();
        d.spec.steps.push(crate::drill::Step {
            id: "r".into(),
            timeout: crate::drill::DEFAULT_STEP_TIMEOUT,
            action: crate::drill::Action::Restore(RestoreTarget::Cut),
        });
        let (on, fb) = (NodeRole::OnPrem, NodeRole::Fallback);
        let tolerance = crate::cluster::tolerations::TaintTolerance {
            taint: tolerations::UNREACHABLE.into(),
            pods: 2,
            min_seconds: Some(30),
            max_seconds: Some(30),
            forever: 0,
        };
        let events = vec![
            (0.0, None, E::TolerationsRead { tolerations: vec![tolerance] }),
            (1.0, None, E::FaultInjected { step: "cut".into(), kind: FaultKind::Cut(crate::drill::CutFidelity::Host) }),
            (21.0, Some(21), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 }),
            (21.5, None, E::ServiceLost { ready_pods: 0 }),
            (
                22.0,
                Some(21),
                E::NodeTaint {
                    node: "h1".into(),
                    role: on,
                    key: tolerations::UNREACHABLE.into(),
                    effect: "NoExecute".into(),
                    added: true,
                },
            ),
            (52.0, Some(52), E::PodTerminating { pod: "old-1".into(), node: "h1".into(), role: on }),
            (52.1, Some(52), E::PodTerminating { pod: "old-2".into(), node: "h1".into(), role: on }),
            (52.2, Some(52), E::PodCreated { pod: "new-1".into() }),
            (53.0, Some(53), E::NodeClaimCreated { nodeclaim: "c1".into() }),
            (55.0, Some(55), E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb, containers: vec![] }),
            (55.1, None, E::ServiceRestored { ready_pods: 2, held_since_ms: None }),
            (60.0, None, E::RestoreStarted { step: "r".into(), what: RestoreTarget::Cut }),
            (60.2, None, E::FaultRemoved { step: "r".into(), what: "link restored".into() }),
            (61.0, Some(61), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 8 }),
            (61.1, Some(61), E::PodDeleted { pod: "old-1".into(), node: "h1".into(), role: on }),
            (61.2, None, E::OnPremReady { nodes: 1 }),
            (70.0, None, E::ReturnStarted { step: "return".into() }),
        ];
        let a = analyse(&d, &timeline(events));
        let secs = |n: &str| a.phase(n.parse().unwrap()).unwrap().seconds.unwrap();
        assert_eq!(secs("detection"), 20.0);
        assert_eq!(secs("taint"), 1.0);
        assert_eq!(secs("toleration"), 30.0);
        // evicted once the API server deleted the pods, not when the node came back and they were gone
        assert_eq!(secs("eviction"), 51.1);
        assert_eq!(secs("rto"), 54.1);
        // the watch saw h1 Ready at 61.0; the step confirmed it at 61.2
        assert_eq!(secs("restore"), 1.0);
        assert_eq!(secs("revert"), 0.2);
        assert_eq!(a.phase(PhaseId::Taint).unwrap().parent, Some(PhaseId::Eviction));
        let note = a.phase(PhaseId::Toleration).unwrap().note.clone().unwrap();
        assert!(note.contains("evicted after 30s"), "{note}");
        let labels: Vec<&str> = a.milestones.iter().map(|m| m.label.as_str()).collect();
        let chain = [
            "fault injected (t0)",
            "on-prem node Unknown",
            "node.kubernetes.io/unreachable:NoExecute taint",
            "first workload pod evicted from on-prem",
            "first NodeClaim created",
            "service restored",
            "restore started",
            "link restored",
            "on-prem nodes Ready",
            "return started",
        ];
        let seen: Vec<&str> = labels.iter().filter(|l| chain.contains(l)).copied().collect();
        assert_eq!(seen, chain, "{labels:?}");
        assert_eq!(secs("rejoin"), 0.8);

        // A recovery hook that waits for its node returns after the node is Ready: the revert ends there and the
        // rejoin takes no time, never a reversed, inconsistent span.
        let events = timeline(vec![
            (1.0, None, E::FaultInjected { step: "fail".into(), kind: FaultKind::NodeFailure }),
            (60.0, None, E::RestoreStarted { step: "r".into(), what: RestoreTarget::NodeFailure }),
            (63.0, Some(63), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 8 }),
            (63.4, None, E::FaultRemoved { step: "r".into(), what: "recovery hooks ran".into() }),
            (63.5, None, E::OnPremReady { nodes: 1 }),
        ]);
        let a = analyse(&d, &events);
        let phase = |id: PhaseId| a.phase(id).unwrap().clone();
        assert_eq!(phase(PhaseId::Restore).seconds, Some(3.0));
        assert_eq!(phase(PhaseId::Revert).seconds, Some(3.0));
        let rejoin = phase(PhaseId::Rejoin);
        assert_eq!(rejoin.seconds, Some(0.0));
        assert_ne!(rejoin.verdict, Verdict::Inconsistent);
        assert_eq!(rejoin.from.unwrap().label, "on-prem nodes Ready (before the revert returned)");
    }

    /// A cut whose last resort reboots the nodes one by one: Karpenter's consolidation moves the workload onto the
    /// nodes back first and empties the fallback before the drill's return step starts. Return and reclaim end where
    /// they start, met, never "end not observed".
    #[test]
    fn a_fallback_consolidated_home_before_the_return_ends_return_and_reclaim_at_once() {
        let mut d = drill();
        d.spec.steps.push(crate::drill::Step {
            id: "r".into(),
            timeout: crate::drill::DEFAULT_STEP_TIMEOUT,
            action: crate::drill::Action::Restore(RestoreTarget::Cut),
        });
        let on = NodeRole::OnPrem;
        let cut = E::FaultInjected { step: "cut".into(), kind: FaultKind::Cut(crate::drill::CutFidelity::Host) };
        let early = vec![
            (1.0, None, cut),
            (53.0, Some(53), E::NodeClaimCreated { nodeclaim: "c1".into() }),
            (80.0, None, E::RestoreStarted { step: "r".into(), what: RestoreTarget::Cut }),
            (120.0, Some(120), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 8 }),
            (185.1, None, E::FallbackEmpty),
            (185.3, None, E::BackOnPrem { ready_pods: 2 }),
            (241.7, None, E::FaultRemoved { step: "r".into(), what: "link restored".into() }),
            (241.8, None, E::ReturnStarted { step: "return".into() }),
        ];
        let a = analyse(&d, &timeline(early.clone()));
        for id in [PhaseId::Return, PhaseId::Reclaim] {
            let p = a.phase(id).unwrap();
            assert_eq!(p.seconds, Some(0.0), "{p:?}");
            assert!(p.from.as_ref().unwrap().label.ends_with("before the return"), "{p:?}");
        }
        assert_eq!(a.phase(PhaseId::Reclaim).unwrap().verdict, Verdict::Met);
        // A drain has no restore: the return's phases start with the return, whatever came before.
        let mut late = early;
        late.retain(|(_, _, e)| !matches!(e, E::RestoreStarted { .. } | E::FaultRemoved { .. }));
        late.push((250.0, None, E::BackOnPrem { ready_pods: 2 }));
        late.push((260.0, None, E::FallbackEmpty));
        let a = analyse(&drill(), &timeline(late));
        let secs = |id: PhaseId| a.phase(id).unwrap().seconds;
        assert_eq!((secs(PhaseId::Return), secs(PhaseId::Reclaim)), (Some(8.2), Some(18.2)));
    }

    #[test]
    fn a_node_failure_says_how_long_its_hooks_ran_after_t0() {
        let on = NodeRole::OnPrem;
        let hook = |node: &str| E::HookRan {
            step: "fail".into(),
            command: format!("lab/node-fail {node}"),
            exit_code: Some(0),
        };
        let events = vec![
            (1.0, None, E::FaultInjected { step: "fail".into(), kind: FaultKind::NodeFailure }),
            (1.2, None, hook("h1")),
            (1.31, None, hook("h2")),
            (
                1.32,
                None,
                E::StepFinished {
                    step: "fail".into(),
                    outcome: crate::timeline::StepOutcome::Passed,
                    message: String::new(),
                },
            ),
            (21.0, Some(21), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 }),
        ];
        let a = analyse(&drill(), &timeline(events));
        let detection = a.phase(PhaseId::Detection).unwrap();
        assert_eq!(detection.seconds, Some(20.0));
        assert_eq!(
            detection.note.as_deref(),
            Some("t0 is when the failure hooks started; the 2 of them ran until +0.31 s")
        );
        let drained = analyse(&drill(), &timeline(full_drain()));
        assert!(drained.phase(PhaseId::Eviction).unwrap().note.is_none());
    }

    #[test]
    fn missing_observations_leave_phases_incomplete_not_wrong() {
        let events: Vec<_> = full_drain()
            .into_iter()
            .filter(|(_, _, e)| !matches!(e, E::ServiceRestored { .. } | E::FallbackEmpty))
            .collect();
        let a = analyse(&drill(), &timeline(events));
        let rto = a.phase(PhaseId::Rto).unwrap();
        assert_eq!(rto.verdict, Verdict::Incomplete);
        assert_eq!(rto.note.as_deref(), Some("end not observed"));
        assert!(a.objectives_missed.contains(&PhaseId::Rto));
        assert_eq!(a.phase(PhaseId::Reclaim).unwrap().verdict, Verdict::Incomplete);
    }

    #[test]
    fn no_fault_means_no_fallback_phases() {
        let a = analyse(
            &drill(),
            &timeline(vec![(0.0, None, E::StepStarted { step: "s".into(), action: "check".into() })]),
        );
        assert!(a.phases.iter().all(|p| p.verdict == Verdict::Incomplete));
        assert!(a.milestones.is_empty());
    }

    #[test]
    fn out_of_order_server_times_keep_tool_clock_durations() {
        let mut events = full_drain();
        // the server stamped Initialized a second before Registered: clocks of different writers disagree
        events[14].1 = Some(4);
        let a = analyse(&drill(), &timeline(events));
        let init = a.phase(PhaseId::Initialized).unwrap();
        assert_eq!(init.seconds, Some(1.2));
        assert_eq!(init.server_seconds, Some(-1));
    }

    #[test]
    fn the_fallback_bills_from_each_nodeclaims_creation_to_its_deletion_and_says_what_still_runs() {
        let fb = NodeRole::Fallback;
        let launched = |claim: &str| E::NodeClaimCondition {
            nodeclaim: claim.into(),
            condition: ClaimCondition::parse("Launched").unwrap(),
            status: ConditionStatus::True,
        };
        let node = |name: &str| E::NodeAdded {
            node: name.into(),
            role: fb,
            instance_type: Some("g6.12xlarge".into()),
            gpus: 4,
            node_pool: Some("gpu-fallback".into()),
        };
        let events = vec![
            (0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain }),
            (1.0, Some(1), E::NodeClaimCreated { nodeclaim: "c1".into() }),
            (1.0, Some(1), E::NodeClaimCreated { nodeclaim: "c2".into() }),
            // Refused for capacity: no instance, nothing billed.
            (1.0, Some(1), E::NodeClaimCreated { nodeclaim: "never".into() }),
            (2.0, Some(2), launched("c1")),
            (2.0, Some(2), launched("c2")),
            (91.0, Some(91), node("f1")),
            (91.0, Some(91), node("f2")),
            (91.5, None, E::NodeClaimNode { nodeclaim: "c1".into(), node: "f1".into() }),
            (91.5, None, E::NodeClaimNode { nodeclaim: "c2".into(), node: "f2".into() }),
            (1000.0, None, E::NodeDeleted { node: "f1".into(), role: fb }),
            (1801.0, None, E::NodeClaimDeleted { nodeclaim: "c1".into() }),
            (3601.0, None, E::ReturnStarted { step: "return".into() }),
        ];
        let f = analyse(&drill(), &timeline(events)).fallback;
        assert_eq!(f.billed_from, Some(BillingBasis::NodeClaim));
        assert_eq!(f.nodes, 2);
        // c1: 1 s to 1801 s (the instance outlives its Node object); c2: 1 s to the end, still running.
        assert!((f.node_hours - (1800.0 + 3600.0) / 3600.0).abs() < 1e-9, "{}", f.node_hours);
        assert!((f.gpu_hours - 4.0 * 1.5).abs() < 1e-9, "{}", f.gpu_hours);
        assert_eq!(f.still_running, ["c2"]);
        assert_eq!(f.still_running_at.unwrap().to_rfc3339(), "2026-01-01T01:00:01+00:00");
    }

    #[test]
    fn a_nodeclaim_gone_before_launching_is_a_failed_launch_with_what_karpenter_said_and_bills_nothing() {
        let launched = |claim: &str| E::NodeClaimCondition {
            nodeclaim: claim.into(),
            condition: ClaimCondition::parse("Launched").unwrap(),
            status: ConditionStatus::True,
        };
        let events = vec![
            (0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain }),
            (1.0, Some(1), E::NodeClaimCreated { nodeclaim: "c1".into() }),
            (
                1.1,
                Some(1),
                E::KubeEvent {
                    object: "NodeClaim/c1".into(),
                    reason: "InsufficientCapacityError".into(),
                    message: "NodeClaim c1 event: insufficient capacity, ...g6.12xlarge...".into(),
                },
            ),
            (1.2, None, E::NodeClaimDeleted { nodeclaim: "c1".into() }),
            (4.0, Some(4), E::NodeClaimCreated { nodeclaim: "c2".into() }),
            (4.5, Some(4), launched("c2")),
            // Still launching when the run ends: not a failure.
            (5.0, Some(5), E::NodeClaimCreated { nodeclaim: "c3".into() }),
            (6.0, None, E::ReturnStarted { step: "return".into() }),
        ];
        let a = analyse(&drill(), &timeline(events));
        let f = &a.fallback;
        assert_eq!(f.failed_launches.len(), 1, "{:?}", f.failed_launches);
        let failed = &f.failed_launches[0];
        assert_eq!(failed.nodeclaim, "c1");
        assert_eq!(failed.reason.as_deref(), Some("InsufficientCapacityError"));
        assert!(failed.message.as_deref().unwrap().contains("g6.12xlarge"));
        assert_eq!(failed.at.to_rfc3339(), "2026-01-01T00:00:01.200+00:00");
        assert_eq!(f.nodes, 1, "only the launched claim bills");
        let line = crate::report::billing_in_words(f).join("\n");
        assert!(line.contains("launch failed: NodeClaim c1"), "{line}");
        assert!(line.contains("InsufficientCapacityError"), "{line}");
        // The first claim, failed, still opens the provisioning: its time is part of the fallback's.
        let first = a.milestones.iter().find(|m| m.label == "first NodeClaim created");
        assert_eq!(first.map(|m| m.received.to_rfc3339()).as_deref(), Some("2026-01-01T00:00:01+00:00"));
    }

    #[test]
    fn with_a_probe_the_service_is_restored_when_the_criterion_first_held_not_when_confirmed() {
        let mut events = full_drain();
        let restored = events.iter_mut().find(|e| matches!(e.2, E::ServiceRestored { .. })).unwrap();
        // Confirmed at +9.1 s by the last of several successes in a row; the first of them came at +5.1 s.
        restored.2 = E::ServiceRestored { ready_pods: 2, held_since_ms: Some(5100) };
        let a = analyse(&drill(), &timeline(events));
        let rto = a.phase(PhaseId::Rto).unwrap();
        assert_eq!(rto.seconds, Some(4.6), "{rto:?}");
        let to = rto.to.as_ref().unwrap();
        assert_eq!(to.received.to_rfc3339(), "2026-01-01T00:00:05.100+00:00");
        let note = rto.note.as_deref().unwrap();
        assert!(note.contains("restored when 2 pods Ready first held"), "{note}");
        assert!(note.contains("first held at +5.1 s, confirmed at +9.1 s"), "{note}");
    }

    #[test]
    fn reversed_boundaries_are_inconsistent_claim_no_duration_and_miss_any_objective() {
        let at = |label: &str, seq, t_ms| Boundary {
            label: label.into(),
            key: None,
            seq,
            t_ms,
            received: DateTime::from_timestamp_millis(1_700_000_000_000 + t_ms as i64).unwrap(),
            server_time: None,
        };
        let p = phase(PhaseId::Eviction, Some(at("start", 2, 2000)), Some(at("end", 1, 1000)), Some(600.0));
        assert_eq!((p.seconds, p.verdict), (None, Verdict::Inconsistent));
        assert!(p.misses_objective());
        let note = p.note.unwrap();
        assert!(note.contains("end (end, 2023-11-14T22:13:21.000Z)"), "{note}");
        assert!(note.contains("start (start, 2023-11-14T22:13:22.000Z)"), "{note}");
        let without_objective = phase(PhaseId::Eviction, Some(at("start", 2, 2000)), Some(at("end", 1, 1000)), None);
        assert_eq!(without_objective.verdict, Verdict::Inconsistent);
        assert!(!without_objective.misses_objective());
    }

    /// The README's phase table is the one the phases are cut by: each phase's ends, their events and clocks.
    #[test]
    fn the_readme_phase_table_is_the_codes() {
        let readme = include_str!("../../README.md");
        let section = readme.split("\n## Phases and clocks\n").nth(1).expect("README has `## Phases and clocks`");
        let mut table = section.lines().skip_while(|l| !l.starts_with("| phase |"));
        assert_eq!(table.next(), Some("| phase | from | to | tool's clock | server's clock |"));
        let rows: Vec<&str> = table.skip(1).take_while(|l| l.starts_with('|')).collect();
        let expected: Vec<String> = definitions().iter().map(PhaseDefinition::table_row).collect();
        assert_eq!(rows, expected, "the README's phase table, as the code defines it:\n{}\n", expected.join("\n"));
    }

    /// The bounds the reports state are the ones scripts/fidelity checks.
    #[test]
    fn the_stated_bounds_are_the_fidelity_checks() {
        let script = include_str!("../../scripts/fidelity");
        assert!(script.contains(&format!("\nTOOL_BOUND_MS = {TOOL_BOUND_MS}\n")));
        assert!(script.contains(&format!("\nSERVER_BOUND_S = {SERVER_BOUND_S}\n")));
    }

    #[test]
    fn a_phases_legend_names_both_clocks_and_their_bounds() {
        let taint = definition(PhaseId::Taint).unwrap();
        assert_eq!(
            taint.legend(),
            "taint: tool's clock, both ends watch stamps (within 100 ms of the API server's write); server clock \
Ready's lastTransitionTime → the taint's timeAdded, whole seconds, each within 1 s"
        );
        let eviction = definition(PhaseId::Eviction).unwrap().legend();
        assert!(eviction.ends_with("; no server-clock figure"), "{eviction}");
        assert!(
            eviction.starts_with("eviction: tool's clock, start: act stamp (within 100 ms of the API"),
            "{eviction}"
        );
    }

    #[test]
    fn overrun_is_flagged_above_the_limit() {
        let mut usage = FallbackUsage { max_gpus: 20, ..Default::default() };
        apply_limit(&mut usage, Some(16));
        assert!(usage.overrun);
        apply_limit(&mut usage, Some(24));
        assert!(!usage.overrun);
    }
}
