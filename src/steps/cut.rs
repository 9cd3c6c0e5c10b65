//! The link cut: deny policies between the on-prem side and the cloud side, at the fidelity the drill chooses; a host
//! cut pins its policy to the resolved nodes with the run's own label and fails when no node loses contact.

use std::time::Duration;

use tokio::time::Instant;

use super::node_failure::facts;
use super::{StepContext, StepError, StepSuccess};
use crate::cluster::marks::CUT_LABEL;
use crate::cluster::policy;
use crate::cluster::selector::{LabelRequirement, Operator};
use crate::drill::{Cni, CutAction, CutEnforcement, CutFidelity};
use crate::safety::journal::LastResort;
use crate::timeline::{Event, FaultKind, NodeRole};

pub async fn cut(
    ctx: &StepContext<'_>,
    step: &str,
    action: &CutAction,
    deadline: Instant,
) -> Result<StepSuccess, StepError> {
    match action.enforcement {
        CutEnforcement::Host(cni) => host(ctx, step, cni, action, deadline).await,
        CutEnforcement::PodNetwork => pod_network(ctx, step, &action.allow_cidrs).await,
    }
}

async fn host(
    ctx: &StepContext<'_>,
    step: &str,
    cni: Cni,
    action: &CutAction,
    deadline: Instant,
) -> Result<StepSuccess, StepError> {
    // The plan checked it before anything was touched; resolved again here for the kind to create.
    let kind = ctx.reader.host_firewall(cni).await.map_err(|e| StepError::Failed(e.to_string()))?;
    // Labelled first, so the policy selects exactly the nodes resolved before the drill, by a key no CNI filters out.
    let mut last_resorts = Vec::new();
    for node in ctx.on_prem_nodes {
        // Expanded from each Node object before anything changes: a placeholder a node cannot fill refuses the cut.
        let last_resort = match &action.last_resort {
            Some(hook) => Some(LastResort {
                command: last_resort_for(ctx, &hook.command, node).await?,
                after_seconds: hook.after.as_secs().max(1),
                timeout_seconds: hook.timeout.as_secs().max(1),
                env: hook.env.clone(),
            }),
            None => None,
        };
        last_resorts.push((node, last_resort));
    }
    for (node, last_resort) in last_resorts {
        ctx.mutator.label_node(step, node, last_resort).await?;
    }
    let pin =
        [LabelRequirement { key: CUT_LABEL.into(), operator: Operator::Equals, values: vec![ctx.mutator.run_label()] }];
    let (reference, object) =
        policy::host(kind, &pin, ctx.mutator.run_id(), &ctx.mutator.run_label(), &action.allow_cidrs);
    let fault = FaultKind::Cut(CutFidelity::Host);
    ctx.timeline.record(Event::FaultInjected { step: step.into(), kind: fault });
    ctx.mutator.create_policy(&reference, object).await?;
    let started = Instant::now();
    let lost = lost_contact(ctx, action.effect_within, deadline).await?;
    Ok(StepSuccess::ok(format!(
        "{reference} cuts {} off the control plane and the VPC; {} lost contact after {}s",
        ctx.on_prem_nodes.join(", "),
        lost.join(", "),
        started.elapsed().as_secs()
    )))
}

/// The last-resort hook of one node, its placeholders filled from the Node object as it is now.
async fn last_resort_for(ctx: &StepContext<'_>, hook: &[String], node: &str) -> Result<Vec<String>, StepError> {
    let object = crate::safety::transient_retry(|| ctx.reader.node(node))
        .await
        .map_err(|e| StepError::Failed(format!("cannot read node {node}: {e}")))?;
    crate::drill::placeholders::expand(hook, &facts(&object), &ctx.drill.spec.targets.on_prem.addresses)
        .map_err(|e| StepError::Failed(format!("nothing was cut: the last-resort hook cannot be built: {e}")))
}

/// Waits, watch-driven, until an on-prem node is not Ready: a host policy the CNI does not enforce (host firewall off,
/// a selector it filters out, an agent down) is stored and cuts nothing, and the drill must not report a cut then.
async fn lost_contact(ctx: &StepContext<'_>, within: Duration, deadline: Instant) -> Result<Vec<String>, StepError> {
    let mut changes = ctx.view.changes();
    let started = Instant::now();
    let bound = (started + within).min(deadline);
    loop {
        let lost: Vec<String> = ctx.view.read(|v| {
            ctx.on_prem_nodes.iter().filter(|n| v.nodes.get(*n).is_some_and(|s| !s.is_ready())).cloned().collect()
        });
        if !lost.is_empty() {
            return Ok(lost);
        }
        ctx.progress.waiting(&format!("waiting for the cut to show: {} still Ready", ctx.on_prem_nodes.join(", ")));
        match tokio::time::timeout_at(bound, changes.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(StepError::Failed("the drill's watches stopped".into())),
            Err(_) => {
                let waited = Duration::from_secs(bound.saturating_duration_since(started).as_secs());
                return Err(StepError::Failed(format!(
                    "cut had no effect: no on-prem node lost contact within {}; check that the CNI enforces host \
policies on these nodes",
                    humantime::format_duration(waited)
                )));
            }
        }
    }
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
