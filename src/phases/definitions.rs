//! The phase table: where each phase starts and ends (a `Bound` at each end), which phases a drill shows, which
//! moments are milestones, and how each end is stamped, for docs/reports.md's table and every report's legend.

use super::model::MilestoneKey;
use crate::cluster::karpenter::ClaimCondition;
use crate::domain::PhaseId;

/// A moment of the drill a phase can start or end at. Each is found once, by [`Moments::find`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bound {
    /// The fault injected: t0.
    FaultInjected,
    /// The last workload pod gone from on-prem.
    WorkloadEvicted,
    /// An on-prem node NotReady or Unknown.
    NodeLost,
    /// The NoExecute taint on a lost on-prem node.
    LostNodeTainted,
    /// A faulty node reporting fewer GPUs allocatable (phases/gpu_fault.rs finds the GPU fault's bounds).
    GpusUnhealthy,
    /// A faulty node cordoned or tainted NoSchedule/NoExecute by a remediation.
    NodeQuarantined,
    /// The first workload pod not Ready on a faulty node.
    FirstPodDegraded,
    /// The quarantine, else the fault's end.
    DegradedEnded,
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

/// A phase in words, read from the table the phases are cut by: docs/reports.md's phase table and every report's legend
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

    /// docs/reports.md's row: phase, from, to, the tool's clock at each end, the server's.
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
    // Long: one arm per Bound, each a line of docs/reports.md's phase table; split, the table would be read in pieces.
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
            Bound::GpusUnhealthy => (
                "first faulty on-prem node Ready with fewer GPUs allocatable (the device plugin marked them unhealthy), \
                 or the first answer of the step's `detectedBy` query (the GPUs' errors in Prometheus, as polled), \
                 whichever came first"
                    .into(),
                Watch,
                None,
            ),
            Bound::NodeQuarantined => (
                "first faulty on-prem node cordoned or tainted NoSchedule/NoExecute (a remediation's quarantine)"
                    .into(),
                Watch,
                None,
            ),
            Bound::FirstPodDegraded => ("first workload pod not Ready on a faulty node".into(), Watch, None),
            Bound::DegradedEnded => (
                "the quarantine, else the restore started (no remediation: the fault ended the degraded service)"
                    .into(),
                Watch,
                None,
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
pub(super) enum Shown {
    Always,
    /// The fault can lose nodes, or a node was seen lost.
    NodeLost,
    /// The image pull was observed.
    ImagePull,
    /// The drill has a `restore` step.
    Restore,
    /// The fault is a GPU fault.
    GpuFault,
}

/// One row of the phase table: a phase runs from one moment to another. Its parent is [`PhaseId::parent`].
pub(super) struct PhaseDef {
    pub(super) id: PhaseId,
    pub(super) from: Bound,
    pub(super) to: Bound,
    pub(super) shown: Shown,
}

const fn def(id: PhaseId, from: Bound, to: Bound, shown: Shown) -> PhaseDef {
    PhaseDef { id, from, to, shown }
}

/// Every phase in the order reports show them.
pub(super) const PHASES: &[PhaseDef] = {
    use Bound::*;
    use ClaimCondition::{Initialized, Launched, Registered};
    &[
        def(PhaseId::Eviction, FaultInjected, WorkloadEvicted, Shown::Always),
        // The path of a lost node: not Ready (Unknown when unreachable), the NoExecute taint, the pods' toleration.
        def(PhaseId::Detection, FaultInjected, NodeLost, Shown::NodeLost),
        def(PhaseId::Taint, NodeLost, LostNodeTainted, Shown::NodeLost),
        def(PhaseId::Toleration, LostNodeTainted, FirstPodEvicted, Shown::NodeLost),
        // The path of a failed GPU: the node stays Ready; only a remediation's quarantine starts the fallback.
        def(PhaseId::GpuDetection, FaultInjected, GpusUnhealthy, Shown::GpuFault),
        def(PhaseId::Quarantine, FaultInjected, NodeQuarantined, Shown::GpuFault),
        def(PhaseId::Degraded, FirstPodDegraded, DegradedEnded, Shown::GpuFault),
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
pub(super) const MILESTONES: &[(Bound, MilestoneKey)] = {
    use Bound::*;
    use ClaimCondition::{Initialized, Launched, Registered};
    &[
        (FaultInjected, MilestoneKey::FaultInjected),
        (NodeLost, MilestoneKey::NodeLost),
        (LostNodeTainted, MilestoneKey::LostNodeTainted),
        (GpusUnhealthy, MilestoneKey::GpusUnhealthy),
        (NodeQuarantined, MilestoneKey::NodeQuarantined),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/reports.md's phase table is the one the phases are cut by: each phase's ends, their events and clocks.
    #[test]
    fn the_readme_phase_table_is_the_codes() {
        let readme = include_str!("../../docs/reports.md");
        let section =
            readme.split("\n## Phases and clocks\n").nth(1).expect("docs/reports.md has `## Phases and clocks`");
        let mut table = section.lines().skip_while(|l| !l.starts_with("| phase |"));
        assert_eq!(table.next(), Some("| phase | from | to | tool's clock | server's clock |"));
        let rows: Vec<&str> = table.skip(1).take_while(|l| l.starts_with('|')).collect();
        let expected: Vec<String> = definitions().iter().map(PhaseDefinition::table_row).collect();
        assert_eq!(rows, expected, "docs/reports.md's phase table, as the code defines it:\n{}\n", expected.join("\n"));
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
}
