//! The drill's timeline: observations with two clocks, appended to disk as they arrive.

pub mod gpu;
mod log;
pub mod view;
pub mod watch;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::cluster::karpenter::ClaimCondition;

pub use crate::domain::{BlockerCause, ConditionStatus, FaultKind, IncidentCause, Outcome, StepOutcome, UnknownFault};
#[cfg(test)]
pub(crate) use log::observations_from;
pub use log::{Observation, Timeline, read, rfc3339};

/// Where a node sits in the hybrid design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeRole {
    OnPrem,
    Fallback,
    Other,
}

/// What was seen or done. Tool actions and cluster observations share one log so phases can be cut from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Event {
    DrillStarted {
        drill: String,
        run_id: String,
        context: String,
    },
    Baseline {
        on_prem_nodes: usize,
        workload_pods: usize,
        ready_pods: usize,
        fallback_nodeclaims: usize,
        fallback_nodes: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback_gpu_limit: Option<i64>,
        /// The workload's pods on the on-prem nodes when the drill started: the copies a cut may leave running.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        on_prem_pods: Vec<String>,
    },
    /// The HPA or KEDA ScaledObject scaling the workload, read before the fault.
    AutoscalerFound {
        autoscaler: crate::domain::Autoscaler,
    },
    /// The autoscaler's bounds changed (its HPA's spec).
    AutoscalerChanged {
        name: String,
        min_replicas: u32,
        max_replicas: u32,
    },
    /// The workload's controller was scaled (by its autoscaler, or by hand): its `spec.replicas`.
    ReplicasChanged {
        target: String,
        replicas: u32,
    },
    /// The desired replicas when the fault began, and the Ready pods that restore the service from then on.
    ReplicasAtFault {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        desired_replicas: Option<u32>,
        ready_pods_needed: u32,
    },
    /// The Ready pods that restore the service changed with the desired replicas (an autoscaler's scale-in).
    ReadyPodsNeeded {
        needed: u32,
    },
    /// How long the workload's pods tolerate a lost node's NoExecute taints, read before the fault.
    TolerationsRead {
        tolerations: Vec<crate::cluster::tolerations::TaintTolerance>,
    },
    StepStarted {
        step: String,
        action: String,
    },
    StepFinished {
        step: String,
        outcome: StepOutcome,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    FaultInjected {
        step: String,
        kind: FaultKind,
    },
    Cordoned {
        node: String,
    },
    Uncordoned {
        node: String,
    },
    EvictionRequested {
        pod: String,
        node: String,
    },
    EvictionBlocked {
        pod: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pdb: Option<String>,
        message: String,
    },
    Evicted {
        pod: String,
        node: String,
    },
    ReturnStarted {
        step: String,
    },
    /// A link cut's deny policy exists from here on.
    PolicyApplied {
        policy: String,
    },
    /// A `restore` step began ending the fault (`what`: cut, node-failure).
    RestoreStarted {
        step: String,
        what: crate::drill::RestoreTarget,
    },
    /// The fault is gone: the cut's policies removed, or the nodes' recovery hooks run.
    FaultRemoved {
        step: String,
        what: String,
    },
    /// Read as a restore began, the fault still in place: each workload with pods on the lost on-prem nodes, and
    /// whether its controller replaced them elsewhere.
    WorkloadsDisplaced {
        workloads: Vec<crate::cluster::displacement::WorkloadMove>,
    },
    /// Read before the fault: the NodeClaims that existed in any NodePool, and every other workload on the on-prem
    /// nodes (the fault's collateral), so the end of the drill can be compared with it.
    CollateralBefore {
        nodeclaims: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        workloads: Vec<crate::cluster::collateral::Bystander>,
        /// Every workload the fault displaces (the drilled one too), by owner, and the NodePools each may land on.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blast_radius: Vec<crate::cluster::collateral::BlastGroup>,
    },
    /// A NodeClaim outside the fallback's NodePools that the drill caused, first seen (the collateral's capacity).
    CollateralNodeClaim {
        /// `claim`, not `nodeclaim`: in every other observation `nodeclaim` is a NodeClaim's name, and readers of
        /// timeline.jsonl (scripts/fidelity) take it as one.
        claim: crate::cluster::collateral::ClaimFacts,
        /// `created`, `initialized` or `deleted`.
        milestone: String,
    },
    /// A displaced workload still on capacity the drill created, restarted by the return (or left, as declared).
    CollateralReturned {
        workload: String,
        restarted: bool,
        detail: String,
    },
    /// Something still different from the state before the fault at the drill's end.
    Leftover {
        leftover: crate::cluster::collateral::Leftover,
    },
    /// Every on-prem node Ready again after a restore.
    OnPremReady {
        nodes: usize,
    },
    RestartTriggered {
        target: String,
    },
    HookRan {
        step: String,
        command: String,
        exit_code: Option<i32>,
    },
    PodCreated {
        pod: String,
    },
    PodScheduled {
        pod: String,
        node: String,
        role: NodeRole,
    },
    PodReady {
        pod: String,
        node: String,
        role: NodeRole,
        /// When each container started (and an init container finished), from the pod's status: server clock.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        containers: Vec<ContainerStart>,
    },
    PodNotReady {
        pod: String,
        node: String,
        role: NodeRole,
    },
    PodTerminating {
        pod: String,
        node: String,
        role: NodeRole,
    },
    PodDeleted {
        pod: String,
        node: String,
        role: NodeRole,
    },
    NodeAdded {
        node: String,
        role: NodeRole,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instance_type: Option<String>,
        gpus: i64,
        /// The NodePool of a fallback node (`karpenter.sh/nodepool`); absent in runs recorded before several pools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_pool: Option<String>,
    },
    NodeReady {
        node: String,
        role: NodeRole,
        status: ConditionStatus,
        gpus: i64,
    },
    NodeSchedulable {
        node: String,
        role: NodeRole,
        schedulable: bool,
    },
    NodeTaint {
        node: String,
        role: NodeRole,
        key: String,
        effect: String,
        added: bool,
    },
    NodeDeleted {
        node: String,
        role: NodeRole,
    },
    NodeClaimCreated {
        nodeclaim: String,
    },
    /// A capacity fault took these instance types away (its hooks run right after).
    CapacityRemoved {
        step: String,
        instance_types: Vec<String>,
    },
    /// The fault took only these of the `of` on-prem nodes: a partial loss; `lost` when they go NotReady (a node
    /// failure) rather than stay Ready (a drain).
    PartialLoss {
        nodes: Vec<String>,
        of: usize,
        #[serde(default)]
        lost: bool,
    },
    /// A `gpuFault` failed the GPUs of these on-prem nodes (they stay Ready); a remediation has
    /// `quarantine_within_seconds` to quarantine one (steps/gpu_fault.rs, phases/gpu_fault.rs).
    GpuFaulted {
        nodes: Vec<String>,
        quarantine_within_seconds: f64,
        /// Each faulty node as it was before the fault: what the restore must bring back.
        before: std::collections::BTreeMap<String, gpu::NodeMarks>,
    },
    /// No remediation quarantined a faulty node within the bound: the fallback never triggered.
    GpuFaultUnremediated {
        nodes: Vec<String>,
        waited_seconds: f64,
    },
    /// The `gpuFault`'s `detectedBy` query first answered with a series: the GPUs' errors as Prometheus has them
    /// (DCGM's Xid), `value` the largest answered, `nodes` what its series name by a node label.
    GpuErrorsSeen {
        nodes: Vec<String>,
        value: f64,
    },
    /// The drill deleted a fallback NodeClaim whose node ran `pods` workload pods.
    FallbackNodeLost {
        nodeclaim: String,
        node: String,
        pods: usize,
    },
    NodeClaimCondition {
        nodeclaim: String,
        condition: ClaimCondition,
        status: ConditionStatus,
    },
    NodeClaimNode {
        nodeclaim: String,
        node: String,
    },
    NodeClaimDeleting {
        nodeclaim: String,
    },
    NodeClaimDeleted {
        nodeclaim: String,
    },
    FallbackGpus {
        gpus: i64,
    },
    KubeEvent {
        object: String,
        reason: String,
        message: String,
    },
    ProbeResult {
        ok: bool,
        detail: String,
    },
    /// An alert the drill expects (`spec.expectedAlerts`) seen in Alertmanager, silenced or not, the first time with
    /// this start; the observation's server time is the alert's `startsAt`.
    ExpectedAlertSeen {
        alert: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        starts_at: Option<DateTime<Utc>>,
        silenced: bool,
        detail: String,
    },
    /// The last tier's probe changed: serving (answered as expected) or not.
    LastTierProbe {
        serving: bool,
        detail: String,
        /// What a lab stand-in says it is (its `Hybrid-Lab-Stand-In` header): a report from the lab names it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stand_in: Option<String>,
    },
    ServiceRestored {
        ready_pods: usize,
        /// With a probe, when the criterion first held (ms since the run started, the tool's clock): the first
        /// success of the run of consecutive successes that confirmed it, or the moment enough pods were Ready if
        /// that came later. The observation itself is when it was confirmed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        held_since_ms: Option<u64>,
    },
    ServiceLost {
        ready_pods: usize,
    },
    BackOnPrem {
        ready_pods: usize,
    },
    FallbackEmpty,
    /// A reason the fallback is not reclaimed, first seen while the drill waits for it; `node` is absent for a
    /// NodePool's budget, which holds every node of its pool.
    ReclaimBlocked {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        cause: BlockerCause,
        object: String,
        message: String,
    },
    FallbackReady {
        nodeclaims: usize,
    },
    WatchGap {
        resource: String,
        error: String,
    },
    WatchResumed {
        resource: String,
    },
    GuardTripped {
        guard: String,
        message: String,
    },
    Aborted {
        reason: String,
    },
    UndoDone {
        action: String,
        target: String,
    },
    UndoFailed {
        action: String,
        target: String,
        error: String,
    },
    DrillFinished {
        #[serde(with = "crate::domain::outcome_words")]
        outcome: Outcome,
    },
    /// Something the report's reader must know that is not a failure: a step's deviation, a displaced workload.
    Warning {
        message: String,
    },
    /// A start gate that was closed when the drill started, let through by `--override-gate`: who did, and why.
    GateOverridden {
        gate: crate::domain::GateKind,
        /// What closed it, as the check said.
        closed: String,
        by: String,
        reason: String,
    },
    /// Someone pulled the emergency stop (the stop annotation on the drill's Lease): the drill aborts and restores.
    EmergencyStop {
        reason: String,
        /// The `hybrid-drill.io/stopped-by` annotation, else the field manager that wrote the stop annotation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// When the API server recorded the annotation (its managed fields), if it says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        set_at: Option<DateTime<Utc>>,
    },
    /// What the rollback after a stop (or the undo of what a completed drill left in place) undid, what it could
    /// not, and what the restored-state check read back once it held.
    RollbackFinished {
        undone: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        verified: Vec<String>,
    },
    /// What users saw, read back from the drill's SLIs in Prometheus once it ended: kept in the timeline so that
    /// `hybrid-drill report RUN_DIR` rebuilds it without asking Prometheus again.
    SloImpact {
        impact: Box<crate::domain::impact::Impact>,
    },
    /// The restored-state check of a rollback, a restore or a recovery ended: it held, or its bounded wait ran out
    /// with what is `left`. The run's silences are expired only after it.
    RestoreChecked {
        held: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left: Vec<String>,
    },
    /// `hybrid-drill watch` saw the on-prem side degrade: an incident's episode opens. Its t0, when the evidence
    /// gives one, is the `FaultInjected` placed at the evidence's server time.
    IncidentOpened {
        cause: IncidentCause,
        /// The on-prem nodes involved.
        nodes: Vec<String>,
        /// The conditions, taints and cordons that show the cause, and what t0 rests on.
        evidence: Vec<String>,
        /// What the watch could not see (it was not running, or no object kept the time): reported as unknown.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unknown: Vec<String>,
        /// The hybrid-drill run behind it, recognised by its marks on the nodes or its drill lock: a drill, not an
        /// incident.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drill_run: Option<String>,
    },
    /// More on-prem nodes were lost or cordoned after the episode opened: a failure spreading node by node, or a
    /// drain moving on. They join the incident with their own evidence.
    IncidentSpread {
        nodes: Vec<String>,
        evidence: Vec<String>,
    },
    /// A restarted watch took up an open episode: what happened while it was down was not observed.
    IncidentResumed {
        /// When the previous watch last recorded something.
        last_seen: DateTime<Utc>,
    },
    /// The episode closed: the workload back on-prem and the fallback reclaimed, or the episode limit reached.
    IncidentClosed {
        reason: String,
    },
    /// Requests the tool sent to the API server during the run, recorded once at its end.
    RequestsSent {
        total: u64,
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        by_verb: crate::domain::RequestsByVerb,
    },
}

/// A container's start as the kubelet reported it in the pod's status (whole seconds, the node's clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerStart {
    pub name: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub init: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<DateTime<Utc>>,
}

impl Event {
    /// A short human line for progress output and reports.
    // Long: one arm per Event variant, a line of wording each.
    pub fn describe(&self) -> String {
        match self {
            Event::DrillStarted { drill, context, .. } => {
                format!("drill {drill} started on {context}")
            }
            Event::Baseline { ready_pods, fallback_nodeclaims, .. } => {
                format!("baseline: {ready_pods} workload pods ready, {fallback_nodeclaims} fallback nodeclaims")
            }
            Event::AutoscalerFound { autoscaler } => format!("autoscaled by {}", autoscaler.describe()),
            Event::AutoscalerChanged { name, min_replicas, max_replicas } => {
                format!("autoscaler {name} bounds: {min_replicas}-{max_replicas} replicas")
            }
            Event::ReplicasChanged { target, replicas } => format!("{target} scaled to {replicas} replicas"),
            Event::ReplicasAtFault { desired_replicas: Some(d), ready_pods_needed } => {
                format!("desired replicas at the fault: {d}; restored with {ready_pods_needed} pods Ready")
            }
            Event::ReplicasAtFault { desired_replicas: None, ready_pods_needed } => {
                format!("restored with {ready_pods_needed} pods Ready")
            }
            Event::ReadyPodsNeeded { needed } => format!("restored now with {needed} pods Ready"),
            Event::StepStarted { step, action } => format!("step {step} ({action}) started"),
            Event::StepFinished { step, outcome, message } if message.is_empty() => format!("step {step} {outcome}"),
            Event::StepFinished { step, outcome, message } => format!("step {step} {outcome}: {message}"),
            Event::FaultInjected { kind, .. } => format!("fault injected ({kind}): t0"),
            Event::Cordoned { node } => format!("cordoned {node}"),
            Event::Uncordoned { node } => format!("uncordoned {node}"),
            Event::EvictionRequested { pod, node } => format!("evicting {pod} from {node}"),
            Event::EvictionBlocked { pod, pdb: Some(pdb), .. } => {
                format!("eviction of {pod} blocked by PodDisruptionBudget {pdb}")
            }
            Event::EvictionBlocked { pod, message, .. } => {
                format!("eviction of {pod} blocked: {message}")
            }
            Event::Evicted { pod, node } => format!("evicted {pod} from {node}"),
            Event::ReturnStarted { .. } => "return to on-prem started".into(),
            Event::TolerationsRead { tolerations } => format!(
                "workload tolerations read: {}",
                tolerations.iter().map(|t| t.describe()).collect::<Vec<_>>().join("; ")
            ),
            Event::PolicyApplied { policy } => format!("cut policy {policy} applied"),
            Event::WorkloadsDisplaced { workloads } => {
                let each: Vec<String> = workloads
                    .iter()
                    .map(|w| format!("{} {}", w.workload, if w.moved() { "moved" } else { "did not move" }))
                    .collect();
                format!("workloads on the lost nodes: {}", each.join(", "))
            }
            Event::CollateralBefore { nodeclaims, workloads, .. } => format!(
                "before the fault: {} NodeClaims; collateral: {}",
                nodeclaims.len(),
                if workloads.is_empty() {
                    "none".into()
                } else {
                    workloads.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
                }
            ),
            Event::CollateralNodeClaim { claim, milestone } => {
                format!("NodeClaim {} {milestone} (collateral)", claim.describe())
            }
            Event::CollateralReturned { workload, detail, .. } => format!("collateral {workload}: {detail}"),
            Event::Leftover { leftover } => leftover.line(),
            Event::RestoreStarted { what, .. } => format!("restore of the {what} started"),
            Event::FaultRemoved { what, .. } => what.clone(),
            Event::OnPremReady { nodes } => format!("on-prem nodes Ready ({nodes})"),
            Event::RestartTriggered { target } => format!("restarted {target}"),
            Event::HookRan { command, exit_code, .. } => {
                format!("ran `{command}` (exit {})", exit_code.map_or("none".into(), |c| c.to_string()))
            }
            Event::PodCreated { pod } => format!("pod {pod} created"),
            Event::PodScheduled { pod, node, role } => {
                format!("pod {pod} bound to {node} ({})", role_name(*role))
            }
            Event::PodReady { pod, node, .. } => format!("pod {pod} Ready on {node}"),
            Event::PodNotReady { pod, node, .. } => format!("pod {pod} not Ready on {node}"),
            Event::PodTerminating { pod, node, .. } => format!("pod {pod} terminating on {node}"),
            Event::PodDeleted { pod, node, .. } => format!("pod {pod} gone from {node}"),
            Event::NodeAdded { node, role, gpus, .. } => {
                format!("node {node} added ({}, {gpus} GPUs)", role_name(*role))
            }
            Event::NodeReady { node, status, gpus, .. } => {
                format!("node {node} Ready={status} ({gpus} GPUs allocatable)")
            }
            Event::NodeSchedulable { node, schedulable, .. } => {
                format!("node {node} {}", if *schedulable { "schedulable" } else { "unschedulable" })
            }
            Event::NodeTaint { node, key, effect, added, .. } => {
                format!("node {node} taint {key}:{effect} {}", if *added { "added" } else { "removed" })
            }
            Event::NodeDeleted { node, .. } => format!("node {node} deleted"),
            Event::NodeClaimCreated { nodeclaim } => format!("NodeClaim {nodeclaim} created"),
            Event::CapacityRemoved { instance_types, .. } => {
                format!("capacity taken away: {}", instance_types.join(", "))
            }
            Event::PartialLoss { nodes, of, .. } => format!("partial loss: {} of {of} on-prem nodes", nodes.len()),
            Event::GpuFaulted { nodes, .. } => format!("GPUs failed on {} (nodes stay Ready)", nodes.join(", ")),
            Event::GpuFaultUnremediated { nodes, waited_seconds } => format!(
                "fallback never triggered: no remediation quarantined {} within {waited_seconds:.0} s",
                nodes.join(", ")
            ),
            Event::GpuErrorsSeen { nodes, value } => match nodes.is_empty() {
                true => format!("GPU errors reported by Prometheus (value {value})"),
                false => format!("GPU errors reported by Prometheus on {} (value {value})", nodes.join(", ")),
            },
            Event::FallbackNodeLost { nodeclaim, node, pods } => {
                format!("fallback NodeClaim {nodeclaim} deleted (node {node}, {pods} workload pods)")
            }
            Event::NodeClaimCondition { nodeclaim, condition, status } => {
                format!("NodeClaim {nodeclaim} {condition}={status}")
            }
            Event::NodeClaimNode { nodeclaim, node } => format!("NodeClaim {nodeclaim} is node {node}"),
            Event::NodeClaimDeleting { nodeclaim } => format!("NodeClaim {nodeclaim} deleting"),
            Event::NodeClaimDeleted { nodeclaim } => format!("NodeClaim {nodeclaim} gone"),
            Event::FallbackGpus { gpus } => format!("fallback holds {gpus} GPUs"),
            Event::KubeEvent { object, reason, message } => match object.strip_suffix('/') {
                // An event that named no object (recorded before the uid was kept): its kind alone, not `Kind/`.
                Some(kind) => format!("event {reason} on a {kind} it does not name: {message}"),
                None => format!("event {reason} on {object}: {message}"),
            },
            Event::ProbeResult { ok, detail } => {
                format!("probe {}: {detail}", if *ok { "passed" } else { "failed" })
            }
            Event::ExpectedAlertSeen { detail, silenced, .. } => {
                format!("expected alert firing{}: {detail}", if *silenced { " (silenced)" } else { "" })
            }
            Event::LastTierProbe { serving, detail, .. } => {
                format!("last tier {}: {detail}", if *serving { "serving" } else { "not serving" })
            }
            Event::ServiceRestored { ready_pods, held_since_ms: None } => {
                format!("service restored ({ready_pods} pods Ready)")
            }
            Event::ServiceRestored { ready_pods, held_since_ms: Some(ms) } => {
                format!(
                    "service restored ({ready_pods} pods Ready; held since +{:.1} s, now confirmed)",
                    *ms as f64 / 1000.0
                )
            }
            Event::ServiceLost { ready_pods } => {
                format!("service unavailable ({ready_pods} pods Ready)")
            }
            Event::BackOnPrem { ready_pods } => {
                format!("workload back on-prem ({ready_pods} pods Ready)")
            }
            Event::FallbackEmpty => "fallback reclaimed to 0".into(),
            Event::ReclaimBlocked { node: Some(node), cause, object, message } => {
                format!("reclaim of {node} blocked ({cause}): {object}: {message}")
            }
            Event::ReclaimBlocked { node: None, cause, object, message } => {
                format!("reclaim blocked ({cause}): {object}: {message}")
            }
            Event::FallbackReady { nodeclaims } => {
                format!("fallback ready ({nodeclaims} NodeClaims initialized)")
            }
            Event::WatchGap { resource, error } => {
                format!("watch of {resource} interrupted: {error}")
            }
            Event::WatchResumed { resource } => format!("watch of {resource} resumed"),
            Event::GuardTripped { guard, message } => format!("guard {guard} tripped: {message}"),
            Event::Aborted { reason } => format!("aborted: {reason}"),
            Event::UndoDone { action, target } => format!("undone: {action} {target}"),
            Event::UndoFailed { action, target, error } => format!("undo failed: {action} {target}: {error}"),
            Event::DrillFinished { outcome } => format!("drill finished: {outcome}"),
            Event::Warning { message } => format!("warning: {message}"),
            Event::GateOverridden { gate, by, reason, .. } => format!("start gate {gate} overridden by {by}: {reason}"),
            Event::EmergencyStop { reason, by, .. } => {
                format!("emergency stop pulled by {}: {reason}", by.as_deref().unwrap_or("(unknown)"))
            }
            Event::SloImpact { impact } => format!("users' impact read from {}", impact.prometheus),
            Event::RollbackFinished { undone, failed, .. } => {
                format!("rollback finished: {} undone, {} failed", undone.len(), failed.len())
            }
            Event::RestoreChecked { held: true, .. } => "restore checked: it held".into(),
            Event::RestoreChecked { left, .. } => format!("restore checked: not restored: {}", left.join("; ")),
            Event::RequestsSent { total, .. } => format!("{total} API requests sent"),
            Event::IncidentOpened { cause, nodes, .. } => {
                format!("incident opened ({cause}) on {}", if nodes.is_empty() { "-".into() } else { nodes.join(", ") })
            }
            Event::IncidentSpread { nodes, .. } => format!("incident spread to {}", nodes.join(", ")),
            Event::IncidentResumed { last_seen } => {
                format!("watch restarted; nothing observed since {}", rfc3339(last_seen))
            }
            Event::IncidentClosed { reason } => format!("incident closed: {reason}"),
        }
    }
}

pub fn role_name(role: NodeRole) -> &'static str {
    match role {
        NodeRole::OnPrem => "on-prem",
        NodeRole::Fallback => "fallback",
        NodeRole::Other => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::collateral::ClaimFacts;

    #[test]
    fn a_collateral_nodeclaim_keeps_nodeclaim_a_name_in_the_timeline() {
        let claim = ClaimFacts {
            name: "gpu-spot-x".into(),
            node_pool: "gpu-spot".into(),
            instance_type: None,
            capacity_type: Some("spot".into()),
            zone: None,
            node: None,
            created: None,
            gpus: 4,
            deleting: false,
        };
        let line = serde_json::to_value(Event::CollateralNodeClaim { claim, milestone: "created".into() }).unwrap();
        assert_eq!(line["type"], "collateral-node-claim");
        assert_eq!(line["claim"]["node_pool"], "gpu-spot");
        assert!(line.get("nodeclaim").is_none(), "{line}");
    }
}
