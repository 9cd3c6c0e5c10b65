//! The validated drill the rest of the crate sees: every step holds exactly one action, every reference and selector
//! is parsed, every default applied. Only `validate` builds it, so nothing after validation meets an invalid drill.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster::drain_selection::DrainFlags;
use crate::cluster::lease::LeaseRef;
use crate::cluster::selector::{self, LabelRequirement};
use crate::domain::{Cni, CutFidelity, PhaseId, RestoreTarget};

/// A failure drill: what to break, what to watch, what counts as restored, and how fast it must be.
#[derive(Debug, Clone)]
pub struct Drill {
    pub metadata: Metadata,
    pub spec: DrillSpec,
}

#[derive(Debug, Clone)]
pub struct Metadata {
    pub name: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone)]
pub struct DrillSpec {
    pub cluster: ExpectedCluster,
    pub targets: DrillTargets,
    pub objectives: Objectives,
    pub guards: Guards,
    /// On-demand price per hour of each fallback instance type, in dollars.
    pub pricing: BTreeMap<String, f64>,
    /// The service's last tier (Tier 3), probed through the run.
    pub last_tier: Option<LastTier>,
    pub steps: Vec<Step>,
    /// Keep what the steps leave in place at the end instead of undoing it (see [`left_in_place::left_in_place`]).
    ///
    /// [`left_in_place::left_in_place`]: super::left_in_place::left_in_place
    pub keep_changes: bool,
    /// The drill lock: one drill at a time.
    pub lock: LeaseRef,
    /// Webhooks told of the start, each missed objective, an abort and the end (`--notify` adds more).
    pub notify: Vec<Webhook>,
    /// Alertmanager silences held from the fault to the end of the drill.
    pub silences: Vec<SilenceSpec>,
    /// What must hold before the drill may start.
    pub gates: Gates,
    /// The service's SLIs, stop conditions and error budget.
    pub slo: Option<super::slo::SloSpec>,
    /// The displaced workloads (`namespace/name`) the return leaves where the fault moved them.
    pub collateral_leave: Vec<String>,
    /// What each run's audit record must hold; who owns its action items.
    pub evidence: EvidencePolicy,
    /// The alerts the design relies on, each to fire within its deadline after the fault.
    pub expected_alerts: Option<super::nets::ExpectedAlerts>,
    /// What the RTO relies on, checked on the fallback's nodes.
    pub warmers: Vec<super::nets::Warmer>,
}

/// `spec.lastTier`: the URL the gateway fails over to, how it is probed, and what it costs.
#[derive(Debug, Clone, PartialEq)]
pub struct LastTier {
    pub name: Option<String>,
    pub url: String,
    pub expect_status: u16,
    pub interval: Duration,
    pub timeout: Duration,
    pub price_per_request: Option<f64>,
    pub requests_per_hour: Option<f64>,
    pub fallback_nodes: Option<u32>,
}

/// The start gates of a drill (`spec.gates`).
#[derive(Debug, Clone, PartialEq)]
pub struct Gates {
    pub alerts: Vec<AlertGate>,
    /// Refuse while `watch` has an incident open in the reports directory.
    pub incidents: bool,
    pub freeze_windows: Vec<super::freeze::FreezeWindow>,
    /// Refuse while the cluster's freeze marker exists.
    pub cluster_freeze: bool,
}

impl Default for Gates {
    /// A drill that says nothing still honours an open incident and the cluster's freeze marker: both are set by
    /// others (the watch, a release process) for every drill.
    fn default() -> Gates {
        Gates { alerts: Vec::new(), incidents: true, freeze_windows: Vec::new(), cluster_freeze: true }
    }
}

/// An alert that must not be firing when the drill starts.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertGate {
    pub alertmanager: String,
    pub alert: String,
    /// `alertname="ALERT"` first, then the drill file's further matchers.
    pub matchers: Vec<crate::alertmanager::Matcher>,
}

/// `spec.evidence`: the change reference and approver a run must be given, the action items' owner, and where run
/// directories are shipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvidencePolicy {
    pub require_change: bool,
    pub require_approver: bool,
    pub owner: Option<String>,
    pub ship: Option<crate::store::ShipPolicy>,
}

impl EvidencePolicy {
    /// The flags a run lacks that this drill requires: `--change`, `--approved-by`.
    pub fn missing(&self, change: Option<&str>, approver: Option<&str>) -> Vec<&'static str> {
        let absent = |v: Option<&str>| v.is_none_or(|v| v.trim().is_empty());
        let mut missing = Vec::new();
        if self.require_change && absent(change) {
            missing.push("--change");
        }
        if self.require_approver && absent(approver) {
            missing.push("--approved-by");
        }
        missing
    }
}

/// How a webhook wants its messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NotifyFormat {
    /// Slack's incoming-webhook message, `{"text": "..."}` (Mattermost and others read it too).
    Slack,
    /// The plain event: `{"schema": "hybrid-drill.io/event/v1", "event": "started", "drill": ..., ...}`.
    #[default]
    Json,
}

/// A webhook a drill's messages are POSTed to.
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    pub url: reqwest::Url,
    pub format: NotifyFormat,
    /// Bound on each message.
    pub timeout: Duration,
}

impl Webhook {
    /// The bound on one message when the drill file or `--notify` sets none.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Where it goes, without the path that is often the webhook's secret.
    pub fn shown(&self) -> String {
        crate::http::shown(&self.url)
    }
}

/// An Alertmanager silence a drill creates when it injects its fault and expires at its end.
#[derive(Debug, Clone, PartialEq)]
pub struct SilenceSpec {
    pub alertmanager: String,
    pub matchers: Vec<crate::alertmanager::Matcher>,
    pub comment: Option<String>,
}

/// The cluster this drill is meant for: the tool refuses to run against any other.
pub use crate::cluster::ExpectedCluster;

#[derive(Debug, Clone)]
pub struct DrillTargets {
    pub on_prem: OnPremTarget,
    pub workload: WorkloadTarget,
    pub fallback: FallbackTarget,
}

#[derive(Debug, Clone)]
pub struct OnPremTarget {
    pub nodes: ParsedSelector,
    /// The hooks' `{address}` of each node, by node name.
    pub addresses: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct WorkloadTarget {
    pub namespace: String,
    pub selector: ParsedSelector,
    pub restored_when: RestoredWhen,
}

/// What "service restored" means for this workload; every criterion given must hold.
#[derive(Debug, Clone)]
pub struct RestoredWhen {
    /// A number (at least one) or a share of the desired replicas at t0.
    pub ready_pods: super::ReadyPods,
    pub http: Option<HttpProbe>,
}

/// An HTTP(S) probe of the service's endpoint, which must answer as expected several times in a row.
#[derive(Debug, Clone)]
pub struct HttpProbe {
    pub url: String,
    pub expect_status: u16,
    pub consecutive: u32,
    pub interval: Duration,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct FallbackTarget {
    /// The first (or only) NodePool: the one the design checks of preflight read.
    pub node_pool: String,
    /// Every fallback NodePool, `node_pool` first.
    pub node_pools: Vec<String>,
}

impl FallbackTarget {
    pub fn new(node_pools: Vec<String>) -> FallbackTarget {
        FallbackTarget { node_pool: node_pools.first().cloned().unwrap_or_default(), node_pools }
    }

    /// The label selector of the fallback's NodeClaims and nodes: `karpenter.sh/nodepool=A` or `... in (A,B)`.
    pub fn label_selector(&self) -> String {
        match self.node_pools.as_slice() {
            [one] => format!("{}={one}", crate::cluster::karpenter::NODEPOOL_LABEL),
            many => format!("{} in ({})", crate::cluster::karpenter::NODEPOOL_LABEL, many.join(",")),
        }
    }

    /// `NodePool A` or `NodePools A, B`, for messages.
    pub fn describe(&self) -> String {
        match self.node_pools.as_slice() {
            [one] => format!("NodePool {one}"),
            many => format!("NodePools {}", many.join(", ")),
        }
    }
}

/// A Kubernetes label selector as the drill wrote it, parsed once: the text for reports and the API server's
/// `labelSelector` parameter, the requirements for the objects that select the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSelector {
    text: String,
    requirements: Vec<LabelRequirement>,
}

impl ParsedSelector {
    pub fn parse(text: &str) -> Result<ParsedSelector, selector::SelectorError> {
        Ok(ParsedSelector { requirements: selector::parse(text)?, text: text.to_string() })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }
}

impl fmt::Display for ParsedSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Budgets the drill is judged against, one per phase (the RTO included). A missed objective does not abort it.
#[derive(Debug, Clone, Default)]
pub struct Objectives {
    pub(super) rto: Option<Duration>,
    pub(super) phases: BTreeMap<PhaseId, Duration>,
}

impl Objectives {
    /// The budget of a phase; `PhaseId::Rto` reads `objectives.rto`.
    pub fn get(&self, id: PhaseId) -> Option<Duration> {
        match id {
            PhaseId::Rto => self.rto,
            phase => self.phases.get(&phase).copied(),
        }
    }
}

/// Limits that abort the drill and restore the cluster when crossed.
#[derive(Debug, Clone)]
pub struct Guards {
    pub max_nodes: u32,
    pub max_fallback_gpus: Option<u64>,
    pub deadline: Duration,
    pub max_service_down: Option<Duration>,
    pub protected_namespaces: Vec<String>,
}

/// One step: its id, its bound, and the one thing it does.
#[derive(Debug, Clone)]
pub struct Step {
    pub id: String,
    pub timeout: Duration,
    pub action: Action,
}

pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone)]
pub enum Action {
    Check(Check, OnDeviation),
    Drain(DrainAction),
    Cut(CutAction),
    NodeFailure(NodeFailureAction),
    GpuFault(GpuFaultAction),
    Restore(RestoreTarget),
    Cordon(NodeTargetRef),
    Uncordon(NodeTargetRef),
    WaitFor(WaitCondition),
    Return(ReturnAction),
    Exec(ExecAction),
    Pause(Duration),
    Capacity(CapacityAction),
    LoseFallbackNode,
}

impl Action {
    /// The action as progress lines, the plan and reports name it.
    pub fn name(&self) -> String {
        match self {
            Action::Check(check, _) => format!("check {check}"),
            Action::Drain(d) => {
                let flags: Vec<&str> =
                    [(d.flags.force, "force"), (d.flags.delete_empty_dir_data, "deleteEmptyDirData")]
                        .iter()
                        .filter(|(on, _)| *on)
                        .map(|(_, name)| *name)
                        .collect();
                let nodes = match d.share {
                    Some(share) => format!("drain {share} of onPrem"),
                    None => "drain onPrem".into(),
                };
                if flags.is_empty() { nodes } else { format!("{nodes} ({})", flags.join(", ")) }
            }
            Action::Cut(c) => match c.enforcement {
                CutEnforcement::Host(cni) => format!("cut {} ({cni})", c.fidelity()),
                CutEnforcement::PodNetwork => format!("cut {}", c.fidelity()),
            },
            Action::NodeFailure(f) => format!("nodeFailure {}", f.fail.join(" ")),
            Action::GpuFault(g) => format!("gpuFault {}", g.hooks.fail.join(" ")),
            Action::Restore(t) => format!("restore {t}"),
            Action::Cordon(_) => "cordon onPrem".into(),
            Action::Uncordon(_) => "uncordon onPrem".into(),
            Action::WaitFor(c) => format!("waitFor {c}"),
            Action::Return(_) => "return".into(),
            Action::Exec(e) => format!("exec {}", e.command.join(" ")),
            Action::Pause(d) => format!("pause {}", humantime::format_duration(*d)),
            Action::Capacity(c) => match &c.instance_types {
                Some(types) => format!("capacity out: {}", types.join(", ")),
                None => "capacity out: every fallback type".into(),
            },
            Action::LoseFallbackNode => "lose a fallback node".into(),
        }
    }

    /// Whether the action injects the drill's fault (t0).
    pub fn is_fault(&self) -> bool {
        matches!(self, Action::Drain(_) | Action::Cut(_) | Action::NodeFailure(_) | Action::GpuFault(_))
    }

    /// Whether the fault takes nodes NotReady: a node failure, or a cut at the host (a pod-network cut keeps the
    /// kubelets reporting).
    pub fn loses_nodes(&self) -> bool {
        match self {
            Action::NodeFailure(_) => true,
            Action::Cut(c) => matches!(c.enforcement, CutEnforcement::Host(_)),
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// Workload available on-prem and the fallback at 0 nodes.
    SteadyState,
    /// The fallback design against the seed's recommendations (`hybrid-drill preflight`): a failed check refuses
    /// the drill before anything is touched. Must come before any step that changes the cluster.
    Preflight,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Check::SteadyState => "steady-state",
            Check::Preflight => "preflight",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OnDeviation {
    Fail,
    Warn,
}

/// A drain: its nodes, kubectl drain's flags, and the share of the nodes it drains (all when none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainAction {
    pub nodes: NodeTargetRef,
    pub flags: DrainFlags,
    pub share: Option<NodeShare>,
}

/// A partial loss: how many of the on-prem nodes a drain takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeShare {
    Count(u32),
    Percent(u32),
}

impl NodeShare {
    /// The nodes taken: the first by name, so a plan and its run choose the same ones. A percentage is rounded up
    /// to whole nodes, at least one.
    pub fn of(self, nodes: &[String]) -> Vec<String> {
        let mut sorted = nodes.to_vec();
        sorted.sort();
        let n = match self {
            NodeShare::Count(n) => n as usize,
            NodeShare::Percent(p) => (nodes.len() * p as usize).div_ceil(100).max(1),
        };
        sorted.truncate(n);
        sorted
    }
}

impl fmt::Display for NodeShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeShare::Count(n) => write!(f, "{n} node{}", if *n == 1 { "" } else { "s" }),
            NodeShare::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl DrainAction {
    /// The on-prem nodes this drain empties.
    pub fn chosen(&self, on_prem: &[String]) -> Vec<String> {
        self.share.map_or_else(|| on_prem.to_vec(), |share| share.of(on_prem))
    }
}

/// Stands for an instance type in a capacity hook's arguments: the hook then runs once per type.
pub const INSTANCE_TYPE_PLACEHOLDER: &str = "{instanceType}";

/// Instance types out of capacity for the drill, through its hooks.
#[derive(Debug, Clone)]
pub struct CapacityAction {
    /// The types taken away; none means every type the fallback NodePool allows, read when the step runs.
    pub instance_types: Option<Vec<String>>,
    pub remove: Vec<String>,
    pub give_back: Vec<String>,
    pub hook_timeout: Duration,
    /// What the hooks may read of the tool's environment, by name, besides `PATH` and `HOME`.
    pub env: Vec<String>,
}

impl CapacityAction {
    /// Whether the hooks run once per instance type (they name `{instanceType}`), rather than once for all of them
    /// (an FIS experiment covers a zone, whatever the type).
    pub fn per_type(&self) -> bool {
        self.remove.iter().any(|a| a.contains(INSTANCE_TYPE_PLACEHOLDER))
    }

    /// A hook with the type in place of its placeholder.
    pub fn hook_for(hook: &[String], instance_type: &str) -> Vec<String> {
        hook.iter().map(|a| a.replace(INSTANCE_TYPE_PLACEHOLDER, instance_type)).collect()
    }
}

/// Which declared node target a step acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NodeTargetRef {
    #[serde(rename = "onPrem")]
    OnPrem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WaitCondition {
    /// Fallback NodeClaims Initialized, their nodes Ready with `nvidia.com/gpu` allocatable, and no workload pod
    /// still waiting for a node or left on a node that is not Ready.
    FallbackReady,
    /// The workload's `restoredWhen` criterion holds.
    WorkloadRestored,
    /// The workload is Ready on the on-prem nodes, has no pod left on other nodes or waiting for one, and its
    /// rollout has settled.
    WorkloadOnPrem,
    /// The fallback NodePool has no NodeClaim and no node left.
    FallbackEmpty,
    /// The probe of `spec.lastTier` answers as expected: the gateway sends the traffic to the last tier.
    LastTierServing,
}

impl fmt::Display for WaitCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitCondition::FallbackReady => "fallback-ready",
            WaitCondition::WorkloadRestored => "workload-restored",
            WaitCondition::WorkloadOnPrem => "workload-on-prem",
            WaitCondition::FallbackEmpty => "fallback-empty",
            WaitCondition::LastTierServing => "last-tier-serving",
        })
    }
}

/// A link cut: deny policies between the on-prem side and the cloud side, enforced where the drill chose.
#[derive(Debug, Clone)]
pub struct CutAction {
    pub enforcement: CutEnforcement,
    /// CIDRs that stay reachable through the cut.
    pub allow_cidrs: Vec<String>,
    /// A host cut that leaves every on-prem node Ready this long had no effect.
    pub effect_within: Duration,
    /// A host cut's way back for a node that does not come back once the cut is lifted.
    pub last_resort: Option<LastResortHook>,
}

/// How long a host cut may take to show when the drill does not say: the node-monitor grace period (50 s by
/// default) plus a margin.
pub const DEFAULT_EFFECT_WITHIN: Duration = Duration::from_secs(120);

/// The command run for a node still not Ready `after` its cut was lifted; `{node}` expands as in node-failure hooks.
#[derive(Debug, Clone)]
pub struct LastResortHook {
    pub command: Vec<String>,
    pub after: Duration,
    pub timeout: Duration,
    /// What the hook may read of the tool's environment, by name, besides `PATH` and `HOME`.
    pub env: Vec<String>,
}

/// Who enforces a cut: a CNI's host firewall on the nodes, or a NetworkPolicy around the workload's pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutEnforcement {
    Host(Cni),
    PodNetwork,
}

impl CutEnforcement {
    /// The policy this cut creates, by type, as the report and the plan name it.
    pub fn policy_type(self) -> &'static str {
        match self {
            CutEnforcement::Host(Cni::Cilium) => "Cilium host policy",
            CutEnforcement::Host(Cni::Calico) => "Calico GlobalNetworkPolicy on host endpoints",
            CutEnforcement::PodNetwork => "Kubernetes NetworkPolicy",
        }
    }

    /// What the cut blocks, for which endpoints. Each CNI filters a different layer: a Cilium host policy (a
    /// clusterwide policy with a nodeSelector) only the host endpoint, a Calico host endpoint policy with
    /// applyOnForward the host and what it forwards, a NetworkPolicy only the pods it selects.
    pub fn blocks(self) -> &'static str {
        match self {
            CutEnforcement::Host(Cni::Cilium) => {
                "the on-prem nodes' own traffic (the host endpoint: kubelet, host-network pods, node agents) to and \
                 from everything but the nodes themselves and allowCidrs, so their kubelets lose the API server"
            }
            CutEnforcement::Host(Cni::Calico) => {
                "the on-prem nodes' own traffic (kubelet, host-network pods) to and from everything but allowCidrs, \
                 so their kubelets lose the API server, and, as the policy applies on forward, the pods' traffic \
                 that leaves or enters through those nodes' host interfaces"
            }
            CutEnforcement::PodNetwork => {
                "the traffic of the workload's pods on the on-prem nodes (labelled for the run) to and from \
                 everything but each other and allowCidrs, where the CNI enforces NetworkPolicy (Cilium and Calico \
                 enforce it as a pod policy on those pods' endpoints)"
            }
        }
    }

    /// What the cut does not block, which a real DX/VPN cut would.
    pub fn leaves(self) -> &'static str {
        match self {
            CutEnforcement::Host(Cni::Cilium) => {
                "the pods' own traffic: a Cilium host policy filters the host endpoint, not pod endpoints (that \
                 takes a Cilium pod policy, an endpointSelector, which this cut does not create), so the workload's \
                 pods on those nodes keep reaching the cloud side and their clients keep reaching them"
            }
            CutEnforcement::Host(Cni::Calico) => {
                "Calico's failsafe ports (FailsafeInboundHostPorts and FailsafeOutboundHostPorts: SSH, DHCP, BGP, \
                 etcd, Typha and the API server's 6443 by default), traffic between pods on the same node, and any \
                 node without a host endpoint"
            }
            CutEnforcement::PodNetwork => {
                "the nodes' own traffic (the kubelets keep reporting: the nodes stay Ready, nothing is evicted and \
                 the cut does not trigger the fallback), host-network pods, the other pods on those nodes, and pods \
                 created after the cut"
            }
        }
    }
}

impl CutAction {
    pub fn fidelity(&self) -> CutFidelity {
        match self.enforcement {
            CutEnforcement::Host(_) => CutFidelity::Host,
            CutEnforcement::PodNetwork => CutFidelity::PodNetwork,
        }
    }
}

/// Stands for a node's name in a hook's arguments: the hook then runs once per on-prem node.
pub const NODE_PLACEHOLDER: &str = "{node}";

/// A node failure caused by the drill's own hooks; both hooks have a program, and name `{node}` both or neither.
#[derive(Debug, Clone)]
pub struct NodeFailureAction {
    pub fail: Vec<String>,
    pub recover: Vec<String>,
    /// The share of the on-prem nodes failed (all when none).
    pub share: Option<NodeShare>,
    pub hook_timeout: Duration,
    /// What the hook may read of the tool's environment, by name, besides `PATH` and `HOME`.
    pub env: Vec<String>,
}

impl NodeFailureAction {
    /// Whether the hooks run once per on-prem node, with the node's name, labels or addresses in place of the
    /// placeholders (see [`super::placeholders`]).
    pub fn per_node(&self) -> bool {
        super::placeholders::names_node(&self.fail)
    }

    /// The on-prem nodes the hooks fail.
    pub fn chosen(&self, on_prem: &[String]) -> Vec<String> {
        self.share.map_or_else(|| on_prem.to_vec(), |share| share.of(on_prem))
    }
}

/// A failed GPU on Ready nodes: the hooks (as a node failure's, `{node}` and the same placeholders) and how long a
/// remediation may take to quarantine a faulty node before the drill calls the fallback never triggered.
#[derive(Debug, Clone)]
pub struct GpuFaultAction {
    pub hooks: NodeFailureAction,
    pub quarantine_within: Duration,
    /// A query for the faulty GPUs' errors (DCGM's Xid), `{nodes}` not yet expanded.
    pub detected_by: Option<String>,
}

/// Move the workload back: uncordon the on-prem nodes, then restart the workload so it re-places on-prem.
#[derive(Debug, Clone)]
pub struct ReturnAction {
    pub uncordon: bool,
    pub restart: Option<WorkloadRef>,
}

/// A workload a `return` restarts, in the workload's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRef {
    pub kind: WorkloadKind,
    pub name: String,
}

impl fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
}

impl WorkloadKind {
    pub const ALL: &'static [WorkloadKind] = &[WorkloadKind::Deployment, WorkloadKind::StatefulSet];

    /// As `kubectl` and drill files write it: `deployment`, `statefulset`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "deployment",
            WorkloadKind::StatefulSet => "statefulset",
        }
    }

    /// The kind as kubectl reads it in `KIND/NAME`, in any case: its short name (`deploy`, `sts`), singular or plural,
    /// alone or with its group (`deployment.apps`) or version and group (`deployments.v1.apps`).
    pub fn from_kubectl(text: &str) -> Option<WorkloadKind> {
        let text = text.to_lowercase();
        let resource = text.strip_suffix(".v1.apps").or_else(|| text.strip_suffix(".apps")).unwrap_or(&text);
        let grouped = resource.len() != text.len();
        match resource {
            "deployment" | "deployments" => Some(WorkloadKind::Deployment),
            "statefulset" | "statefulsets" => Some(WorkloadKind::StatefulSet),
            // Short names stand alone: kubectl has no `deploy.apps`.
            "deploy" if !grouped => Some(WorkloadKind::Deployment),
            "sts" if !grouped => Some(WorkloadKind::StatefulSet),
            _ => None,
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A command a step runs; the program is never empty.
#[derive(Debug, Clone)]
pub struct ExecAction {
    pub command: Vec<String>,
    /// Run when the drill is aborted after this step ran.
    pub undo: Option<Vec<String>>,
    /// What the hook may read of the tool's environment, by name, besides `PATH` and `HOME`.
    pub env: Vec<String>,
}
