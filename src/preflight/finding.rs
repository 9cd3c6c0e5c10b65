//! What a check says: its id, how it ends, and the object and fix it names; the vocabulary every check and
//! renderer shares.

use serde::{Deserialize, Serialize};

/// Every check, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckId {
    /// Karpenter's NodePool and NodeClaim are served at `karpenter.sh/v1`.
    KarpenterCrds,
    /// The hybrid GPU nodes carry `nvidia.com/gpu:NoSchedule`.
    GpuTaint,
    /// Pods that do not tolerate the GPU taint run on hybrid GPU nodes: it came after they were scheduled.
    TaintAppliedLate,
    /// The device plugin family's DaemonSets run on hybrid GPU nodes only.
    DevicePluginScope,
    /// The fallback NodePool exists and is Ready.
    NodepoolReady,
    /// Its nodeClassRef names a NodeClass that exists (and is Ready).
    NodepoolNodeclass,
    /// Its `limits` cap `nvidia.com/gpu`.
    NodepoolLimits,
    /// Its consolidation policy and `consolidateAfter` reclaim idle fallback nodes.
    NodepoolConsolidation,
    /// It provisions on-demand capacity.
    NodepoolCapacityType,
    /// Its nodes carry the GPU taint.
    NodepoolTaint,
    /// It is at 0 NodeClaims and nodes now.
    NodepoolEmpty,
    /// Its disruption budgets let consolidation reclaim emptied nodes at the drill's time.
    NodepoolDisruption,
    /// The workload selector matches pods, and their controllers.
    WorkloadFound,
    /// The workload requests `nvidia.com/gpu`.
    WorkloadGpuRequest,
    /// Its pod template tolerates the GPU taint explicitly.
    WorkloadToleration,
    /// It prefers (or requires) the hybrid nodes.
    WorkloadAffinity,
    /// One PodDisruptionBudget covers it and allows a disruption now.
    WorkloadPdb,
    /// Its GPU demand fits under the fallback NodePool's GPU limit.
    WorkloadFitsLimit,
    /// The eviction delay a node failure adds before any fallback starts.
    RtoFloor,
    /// The HPA or KEDA ScaledObject scaling the workload, and how `readyPods` is judged against it.
    WorkloadAutoscaler,
    /// A drain would evict no pod kubectl drain refuses without a flag (bare pods, emptyDir data).
    DrainPods,
    ZoneDisruption,
    /// A fault that loses the on-prem nodes leaves no StatefulSet pod behind (they never fail over by themselves).
    StatefulsetFailover,
    /// The instance types, zones and capacity types the fallback NodePool allows, and what the drill takes away.
    FallbackDiversity,
    /// A drill with a GPU fault: a remediation that can quarantine the hybrid nodes runs on them.
    GpuRemediation,
    /// Each PromQL query of the drill's `spec.slo`, run once against its Prometheus (read-only): it answers a number.
    SliQueries,
    ExpectedAlerts,
    Warmers,
}

impl CheckId {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckId::KarpenterCrds => "karpenter-crds",
            CheckId::GpuTaint => "gpu-taint",
            CheckId::TaintAppliedLate => "taint-applied-late",
            CheckId::DevicePluginScope => "device-plugin-scope",
            CheckId::NodepoolReady => "nodepool-ready",
            CheckId::NodepoolNodeclass => "nodepool-nodeclass",
            CheckId::NodepoolLimits => "nodepool-limits",
            CheckId::NodepoolConsolidation => "nodepool-consolidation",
            CheckId::NodepoolCapacityType => "nodepool-capacity-type",
            CheckId::NodepoolTaint => "nodepool-taint",
            CheckId::NodepoolEmpty => "nodepool-empty",
            CheckId::NodepoolDisruption => "nodepool-disruption",
            CheckId::WorkloadFound => "workload-found",
            CheckId::WorkloadGpuRequest => "workload-gpu-request",
            CheckId::WorkloadToleration => "workload-toleration",
            CheckId::WorkloadAffinity => "workload-affinity",
            CheckId::WorkloadPdb => "workload-pdb",
            CheckId::WorkloadFitsLimit => "workload-fits-limit",
            CheckId::RtoFloor => "rto-floor",
            CheckId::WorkloadAutoscaler => "workload-autoscaler",
            CheckId::DrainPods => "drain-pods",
            CheckId::ZoneDisruption => "zone-disruption",
            CheckId::StatefulsetFailover => "statefulset-failover",
            CheckId::FallbackDiversity => "fallback-diversity",
            CheckId::GpuRemediation => "gpu-remediation",
            CheckId::SliQueries => "sli-queries",
            CheckId::ExpectedAlerts => "expected-alerts",
            CheckId::Warmers => "warmers",
        }
    }
}

/// How a finding ends. `info` and `skip` never change the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Info,
    /// Not checked: what it needs is missing, and another check already says so.
    Skip,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Info => "info",
            Status::Skip => "skip",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check's verdict on one object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub check: CheckId,
    pub status: Status,
    /// The object it is about, as `Kind namespace/name`.
    pub object: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}
