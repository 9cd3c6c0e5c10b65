//! The link cut: deny policies between the on-prem side and the cloud side, at the fidelity the drill chooses.

use super::{StepContext, StepError, StepSuccess};
use crate::cluster::policy;
use crate::cluster::selector::{LabelRequirement, Operator};
use crate::drill::{Cni, CutAction, CutEnforcement, CutFidelity};
use crate::timeline::{Event, FaultKind, NodeRole};

const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

pub async fn cut(ctx: &StepContext<'_>, step: &str, action: &CutAction) -> Result<StepSuccess, StepError> {
    match action.enforcement {
        CutEnforcement::Host(cni) => host(ctx, step, cni, &action.allow_cidrs).await,
        CutEnforcement::PodNetwork => pod_network(ctx, step, &action.allow_cidrs).await,
    }
}

async fn host(ctx: &StepContext<'_>, step: &str, cni: Cni, allow_cidrs: &[String]) -> Result<StepSuccess, StepError> {
    // The plan checked it before anything was touched; resolved again here for the kind to create.
    let kind = ctx.reader.host_firewall(cni).await.map_err(|e| StepError::Failed(e.to_string()))?;
    let mut nodes = ctx.drill.spec.targets.on_prem.nodes.requirements().to_vec();
    if let Some(pin) = pin_to_resolved(ctx).await? {
        nodes.push(pin);
    }
    let (reference, object) = policy::host(kind, &nodes, ctx.mutator.run_id(), &ctx.mutator.run_label(), allow_cidrs);
    let fault = FaultKind::Cut(CutFidelity::Host);
    ctx.timeline.record(Event::FaultInjected { step: step.into(), kind: fault });
    ctx.mutator.create_policy(&reference, object).await?;
    Ok(StepSuccess::ok(format!("{reference} cuts {} off the control plane and the VPC", ctx.on_prem_nodes.join(", "))))
}

/// A requirement that keeps the policy to the nodes resolved before the drill (not ones that join later), when each
/// carries its `kubernetes.io/hostname` label.
async fn pin_to_resolved(ctx: &StepContext<'_>) -> Result<Option<LabelRequirement>, StepError> {
    let mut hostnames = Vec::new();
    for name in ctx.on_prem_nodes {
        let node =
            ctx.reader.node(name).await.map_err(|e| StepError::Failed(format!("cannot read node {name}: {e}")))?;
        match node.metadata.labels.as_ref().and_then(|l| l.get(HOSTNAME_LABEL)) {
            Some(h) => hostnames.push(h.clone()),
            None => return Ok(None),
        }
    }
    Ok(Some(LabelRequirement { key: HOSTNAME_LABEL.into(), operator: Operator::In, values: hostnames }))
}

async fn pod_network(ctx: &StepContext<'_>, step: &str, allow_cidrs: &[String]) -> Result<StepSuccess, StepError> {
    let namespace = &ctx.drill.spec.targets.workload.namespace;
    let pods: Vec<String> = ctx.view.read(|v| {
        v.live_pods()
            .filter(|p| p.node.as_deref().is_some_and(|n| v.role_of(n) == NodeRole::OnPrem))
            .map(|p| p.name.clone())
            .collect()
    });
    if pods.is_empty() {
        return Err(StepError::Failed(format!(
            "no pod of the workload runs on the on-prem nodes ({}): a pod-network cut would isolate nothing",
            ctx.on_prem_nodes.join(", ")
        )));
    }
    let fault = FaultKind::Cut(CutFidelity::PodNetwork);
    ctx.timeline.record(Event::FaultInjected { step: step.into(), kind: fault });
    let mut isolated = Vec::new();
    for pod in &pods {
        if ctx.mutator.label_pod(namespace, pod).await? {
            isolated.push(pod.as_str());
        }
    }
    let (reference, object) =
        policy::pod_network(namespace, ctx.mutator.run_id(), &ctx.mutator.run_label(), allow_cidrs);
    ctx.mutator.create_policy(&reference, object).await?;
    Ok(StepSuccess::ok(format!(
        "{reference} isolates {} pods on the on-prem nodes ({}); the nodes stay Ready",
        isolated.len(),
        isolated.join(", ")
    )))
}
