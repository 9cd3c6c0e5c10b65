//! The link cut: deny policies between the on-prem side and the cloud side, at the fidelity the drill chooses.

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::{StepContext, StepError, StepSuccess};
use crate::cluster::policy;
use crate::cluster::selector::{self, LabelRequirement as Requirement, Operator};
use crate::drill::{CutAction, CutFidelity};
use crate::timeline::{Event, NodeRole};

const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

pub async fn cut(ctx: &StepContext<'_>, step: &str, action: &CutAction) -> Result<StepSuccess, StepError> {
    match action.fidelity {
        CutFidelity::Host => host(ctx, step, action).await,
        CutFidelity::PodNetwork => pod_network(ctx, step, action).await,
    }
}

async fn host(ctx: &StepContext<'_>, step: &str, action: &CutAction) -> Result<StepSuccess, StepError> {
    let cni = action.cni.ok_or_else(|| StepError::Failed("a host-level cut needs `cni`".into()))?;
    // The plan checked it before anything was touched; resolved again here for the kind to create.
    let kind = policy::host_firewall(&ctx.cluster.client, &ctx.cluster.context, cni)
        .await
        .map_err(|e| StepError::Failed(e.to_string()))?;
    let mut nodes = selector::parse(&ctx.drill.spec.targets.on_prem.nodes).map_err(StepError::Failed)?;
    if let Some(pin) = pin_to_resolved(ctx).await? {
        nodes.push(pin);
    }
    let (reference, object) =
        policy::host(kind, &nodes, ctx.mutator.run_id(), &ctx.mutator.run_label(), &action.allow_cidrs);
    ctx.timeline
        .record(Event::FaultInjected { step: step.into(), kind: crate::timeline::FaultKind::Cut(action.fidelity) });
    ctx.mutator.create_policy(&reference, object).await?;
    Ok(StepSuccess::ok(format!("{reference} cuts {} off the control plane and the VPC", ctx.on_prem_nodes.join(", "))))
}

/// A requirement that keeps the policy to the nodes resolved before the drill (not ones that join later), when each
/// carries its `kubernetes.io/hostname` label.
async fn pin_to_resolved(ctx: &StepContext<'_>) -> Result<Option<Requirement>, StepError> {
    let api: Api<Node> = Api::all(ctx.cluster.client.clone());
    let mut hostnames = Vec::new();
    for name in ctx.on_prem_nodes {
        let node = api.get(name).await.map_err(|e| StepError::Failed(format!("cannot read node {name}: {e}")))?;
        match node.metadata.labels.as_ref().and_then(|l| l.get(HOSTNAME_LABEL)) {
            Some(h) => hostnames.push(h.clone()),
            None => return Ok(None),
        }
    }
    Ok(Some(Requirement { key: HOSTNAME_LABEL.into(), operator: Operator::In, values: hostnames }))
}

async fn pod_network(ctx: &StepContext<'_>, step: &str, action: &CutAction) -> Result<StepSuccess, StepError> {
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
    ctx.timeline
        .record(Event::FaultInjected { step: step.into(), kind: crate::timeline::FaultKind::Cut(action.fidelity) });
    let mut isolated = Vec::new();
    for pod in &pods {
        if ctx.mutator.label_pod(namespace, pod).await? {
            isolated.push(pod.as_str());
        }
    }
    let (reference, object) =
        policy::pod_network(namespace, ctx.mutator.run_id(), &ctx.mutator.run_label(), &action.allow_cidrs);
    ctx.mutator.create_policy(&reference, object).await?;
    Ok(StepSuccess::ok(format!(
        "{reference} isolates {} pods on the on-prem nodes ({}); the nodes stay Ready",
        isolated.len(),
        isolated.join(", ")
    )))
}
