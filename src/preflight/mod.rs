//! Preflight: the fallback design checked read-only against the seed's recommendations (GPU taint, device plugin
//! scope, fallback NodePool, workloads, Karpenter's CRDs, the RTO floor), each check ending pass, warn or fail with
//! the object it names and the fix.

pub mod checks;
pub mod gather;
pub mod matching;
pub mod render;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::Reader;
use crate::drill::{Action, Check, Drill, OnDeviation};
use crate::phases::PhaseId;

pub use gather::{PreflightError, Snapshot, gather};

/// Bumped on any change a consumer of `preflight --output json` could notice.
pub const PREFLIGHT_SCHEMA: &str = "hybrid-drill.io/preflight/v1";

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
            CheckId::WorkloadFound => "workload-found",
            CheckId::WorkloadGpuRequest => "workload-gpu-request",
            CheckId::WorkloadToleration => "workload-toleration",
            CheckId::WorkloadAffinity => "workload-affinity",
            CheckId::WorkloadPdb => "workload-pdb",
            CheckId::WorkloadFitsLimit => "workload-fits-limit",
            CheckId::RtoFloor => "rto-floor",
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

/// What preflight looks at: the drill's targets, or the same given as flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Targets {
    /// Label selector of the hybrid (on-prem) GPU nodes.
    pub nodes: String,
    pub namespace: String,
    /// Label selector of the workload's pods.
    pub selector: String,
    pub node_pool: String,
}

/// The targets as flags give them; each one given replaces the drill's.
#[derive(Debug, Clone, Default)]
pub struct TargetFlags {
    pub nodes: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<String>,
    pub node_pool: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetsError {
    #[error("without a drill file, preflight needs --nodes, --namespace, --selector and --node-pool (missing: {0})")]
    Missing(String),
    #[error("invalid label selector `{selector}` given to {flag}: {reason}")]
    Selector { flag: &'static str, selector: String, reason: String },
}

impl Targets {
    pub fn of(drill: &Drill) -> Targets {
        let t = &drill.spec.targets;
        Targets {
            nodes: t.on_prem.nodes.to_string(),
            namespace: t.workload.namespace.clone(),
            selector: t.workload.selector.to_string(),
            node_pool: t.fallback.node_pool.clone(),
        }
    }

    /// The drill's targets with the flags given in their place, or the flags alone when there is no drill.
    pub fn resolve(drill: Option<&Drill>, flags: TargetFlags) -> Result<Targets, TargetsError> {
        let base = drill.map(Targets::of);
        let pick =
            |flag: Option<String>, from: Option<&String>, name: &'static str, missing: &mut Vec<&'static str>| {
                flag.or_else(|| from.cloned()).unwrap_or_else(|| {
                    missing.push(name);
                    String::new()
                })
            };
        let mut missing = Vec::new();
        let targets = Targets {
            nodes: pick(flags.nodes, base.as_ref().map(|b| &b.nodes), "--nodes", &mut missing),
            namespace: pick(flags.namespace, base.as_ref().map(|b| &b.namespace), "--namespace", &mut missing),
            selector: pick(flags.selector, base.as_ref().map(|b| &b.selector), "--selector", &mut missing),
            node_pool: pick(flags.node_pool, base.as_ref().map(|b| &b.node_pool), "--node-pool", &mut missing),
        };
        if !missing.is_empty() {
            return Err(TargetsError::Missing(missing.join(", ")));
        }
        for (flag, selector) in [("--nodes", &targets.nodes), ("--selector", &targets.selector)] {
            crate::drill::validate::check_label_selector(selector).map_err(|reason| TargetsError::Selector {
                flag,
                selector: selector.clone(),
                reason,
            })?;
        }
        Ok(targets)
    }
}

/// For `hybrid-drill plan`: what the verdict means for a run of this drill.
pub fn plan_note(drill: &Drill, report: &PreflightReport) -> String {
    let step = drill.spec.steps.iter().find_map(|s| match s.action {
        Action::Check(Check::Preflight, on_deviation) => Some((s, on_deviation)),
        _ => None,
    });
    let failed = report.count(Status::Fail);
    match step {
        None => "the drill has no `check: preflight` step: a run would not stop on these findings".into(),
        Some((s, on_deviation)) if failed > 0 && on_deviation != OnDeviation::Warn => {
            format!("a run would be refused at step `{}` (exit 2) before anything is touched", s.id)
        }
        Some((s, _)) if failed > 0 => format!("step `{}` has onDeviation: warn: a run would go on despite these", s.id),
        Some((s, _)) => format!("step `{}` would let the run go on", s.id),
    }
}

/// The findings of one preflight run and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreflightReport {
    pub schema: String,
    pub context: String,
    pub server: String,
    pub targets: Targets,
    /// `pass`, `warn` or `fail`: the worst status found.
    pub verdict: Status,
    pub findings: Vec<Finding>,
}

impl PreflightReport {
    pub fn new(context: &str, server: &str, targets: Targets, findings: Vec<Finding>) -> PreflightReport {
        let verdict = findings.iter().map(|f| f.status).filter(|s| *s >= Status::Warn).max().unwrap_or(Status::Pass);
        PreflightReport {
            schema: PREFLIGHT_SCHEMA.into(),
            context: context.into(),
            server: server.into(),
            targets,
            verdict,
            findings,
        }
    }

    pub fn with_status(&self, status: Status) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.status == status)
    }

    pub fn count(&self, status: Status) -> usize {
        self.with_status(status).count()
    }

    /// Whether the design passes: no fail, and with `strict` no warning either.
    pub fn passed(&self, strict: bool) -> bool {
        self.count(Status::Fail) == 0 && (!strict || self.count(Status::Warn) == 0)
    }

    /// One line per failed (or warned) check: `check: object: message; fix: ...`, for a step's message.
    pub fn summary(&self, status: Status) -> Vec<String> {
        self.with_status(status)
            .map(|f| {
                let fix = f.fix.as_ref().map(|x| format!("; fix: {x}")).unwrap_or_default();
                format!("{}: {}: {}{fix}", f.check.as_str(), f.object, f.message)
            })
            .collect()
    }
}

/// What the drill being checked expects of the design; without a drill, a drain and no RTO objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectations {
    /// The drill's RTO objective, to compare with the eviction delay of a node failure.
    pub rto_objective: Option<Duration>,
    /// Whether the drill drains: only the Eviction API honours PodDisruptionBudgets, a lost node's taint does not.
    pub drains: bool,
}

impl Default for Expectations {
    fn default() -> Self {
        Expectations { rto_objective: None, drains: true }
    }
}

impl Expectations {
    pub fn of(drill: &Drill) -> Expectations {
        Expectations {
            rto_objective: drill.spec.objectives.get(PhaseId::Rto),
            drains: drill.spec.steps.iter().any(|s| matches!(s.action, Action::Drain(_))),
        }
    }
}

/// Reads the cluster (never changes it) and checks the design against the targets.
pub async fn run(reader: &Reader, targets: &Targets, expect: &Expectations) -> Result<PreflightReport, PreflightError> {
    let snapshot = gather(reader.client(), targets).await?;
    let findings = checks::evaluate(&snapshot, targets, expect);
    Ok(PreflightReport::new(reader.context(), reader.server(), targets.clone(), findings))
}
