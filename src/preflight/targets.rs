//! What preflight looks at (the on-prem nodes, the workload, the fallback NodePool) and what the drill being checked
//! expects of the design, from a drill file or from flags.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::drain_selection::DrainFlags;
use crate::drill::{Action, Drill};
use crate::phases::PhaseId;

/// What preflight looks at: the drill's targets, or the same given as flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightTargets {
    /// Label selector of the hybrid (on-prem) GPU nodes.
    pub nodes: String,
    pub namespace: String,
    /// Label selector of the workload's pods.
    pub selector: String,
    pub node_pool: String,
    /// The drill's further fallback NodePools (`nodePools` past the first): their GPU limits add to the first's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_pools: Vec<String>,
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
    Selector { flag: &'static str, selector: String, reason: crate::cluster::selector::SelectorError },
}

impl PreflightTargets {
    pub fn of(drill: &Drill) -> PreflightTargets {
        let t = &drill.spec.targets;
        PreflightTargets {
            nodes: t.on_prem.nodes.to_string(),
            namespace: t.workload.namespace.clone(),
            selector: t.workload.selector.to_string(),
            node_pool: t.fallback.node_pool.clone(),
            more_pools: t.fallback.node_pools.iter().skip(1).cloned().collect(),
        }
    }

    /// The drill's targets with the flags given in their place, or the flags alone when there is no drill.
    pub fn resolve(drill: Option<&Drill>, flags: TargetFlags) -> Result<PreflightTargets, TargetsError> {
        let base = drill.map(PreflightTargets::of);
        let pick =
            |flag: Option<String>, from: Option<&String>, name: &'static str, missing: &mut Vec<&'static str>| {
                flag.or_else(|| from.cloned()).unwrap_or_else(|| {
                    missing.push(name);
                    String::new()
                })
            };
        let mut missing = Vec::new();
        // --node-pool names one NodePool in place of the drill's list.
        let more_pools = match (&flags.node_pool, &base) {
            (None, Some(b)) => b.more_pools.clone(),
            _ => Vec::new(),
        };
        let targets = PreflightTargets {
            nodes: pick(flags.nodes, base.as_ref().map(|b| &b.nodes), "--nodes", &mut missing),
            namespace: pick(flags.namespace, base.as_ref().map(|b| &b.namespace), "--namespace", &mut missing),
            selector: pick(flags.selector, base.as_ref().map(|b| &b.selector), "--selector", &mut missing),
            node_pool: pick(flags.node_pool, base.as_ref().map(|b| &b.node_pool), "--node-pool", &mut missing),
            more_pools,
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

/// What the drill being checked expects of the design; without a drill, a drain and no RTO objective.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectations {
    /// The drill's RTO objective, to compare with the eviction delay of a node failure.
    pub rto_objective: Option<Duration>,
    /// Whether the drill drains: only the Eviction API honours PodDisruptionBudgets, a lost node's taint does not.
    pub drains: bool,
    /// The drain's kubectl flags (`force`, `deleteEmptyDirData`): a pod they do not cover refuses the drill.
    pub drain_flags: DrainFlags,
    /// Namespaces a drain leaves alone, and whose pods a lost node does not send to the fallback's budget.
    pub protected_namespaces: Vec<String>,
    /// Whether the fault takes the on-prem nodes NotReady (a node failure, a host-level cut), where the node
    /// lifecycle controller's zone rules decide whether they are evicted.
    pub loses_nodes: bool,
    /// When the drill is planned to run (`preflight --at`); none: now.
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// How long the drill may run (its deadline guard), over which a disruption budget's window must stay open.
    pub span: Option<Duration>,
    /// The drill's `readyPods` when it is a number: under an autoscaler it counts as 100% of the desired replicas.
    pub ready_pods_count: Option<u32>,
    /// The instance types the drill's capacity fault takes away: none without one; `Some(None)` for `all`.
    pub capacity_removed: Option<Option<Vec<String>>>,
    /// A node failure of part of the on-prem nodes: the share it fails (all when none).
    pub lost_share: Option<crate::drill::NodeShare>,
    /// Whether the drill fails GPUs (`gpuFault`): a remediation must quarantine the nodes for any fallback.
    pub gpu_fault: bool,
}

impl Default for Expectations {
    fn default() -> Self {
        Expectations {
            rto_objective: None,
            drains: true,
            drain_flags: DrainFlags::default(),
            protected_namespaces: vec!["kube-system".into()],
            loses_nodes: true,
            at: None,
            span: None,
            ready_pods_count: None,
            capacity_removed: None,
            lost_share: None,
            gpu_fault: false,
        }
    }
}

impl Expectations {
    pub fn of(drill: &Drill) -> Expectations {
        Expectations {
            rto_objective: drill.spec.objectives.get(PhaseId::Rto),
            drains: drill.spec.steps.iter().any(|s| matches!(s.action, Action::Drain(_))),
            drain_flags: drill
                .spec
                .steps
                .iter()
                .find_map(|s| match &s.action {
                    Action::Drain(d) => Some(d.flags),
                    _ => None,
                })
                .unwrap_or_default(),
            protected_namespaces: drill.spec.guards.protected_namespaces.clone(),
            loses_nodes: drill.spec.steps.iter().any(|s| s.action.loses_nodes()),
            at: None,
            span: Some(drill.spec.guards.deadline),
            ready_pods_count: match drill.spec.targets.workload.restored_when.ready_pods {
                crate::drill::ReadyPods::Count(n) => Some(n),
                crate::drill::ReadyPods::Share(_) => None,
            },
            lost_share: drill.spec.steps.iter().find_map(|s| match &s.action {
                Action::NodeFailure(f) => f.share,
                _ => None,
            }),
            capacity_removed: drill.spec.steps.iter().find_map(|s| match &s.action {
                Action::Capacity(c) => Some(c.instance_types.clone()),
                _ => None,
            }),
            gpu_fault: drill.spec.steps.iter().any(|s| matches!(s.action, Action::GpuFault(_))),
        }
    }
}
