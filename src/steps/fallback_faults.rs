//! The fallback's own failures: instance types out of capacity through the drill's hooks, and one fallback node lost
//! while the workload runs there.

use std::time::Duration;

use futures::future::join_all;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use tokio::time::Instant;

use super::{StepContext, StepError, StepSuccess};
use crate::cluster::karpenter::{INSTANCE_TYPE_LABEL, NodePool};
use crate::drill::CapacityAction;
use crate::timeline::Event;

/// The instance types the step takes away: those it names, or every type the fallback NodePools allow.
async fn types_to_remove(ctx: &StepContext<'_>, action: &CapacityAction) -> Result<Vec<String>, StepError> {
    if let Some(types) = &action.instance_types {
        return Ok(types.clone());
    }
    // Listed, as the run already may: a NodePool by name would need a `get` no other step does.
    let pools: Api<NodePool> = Api::all(ctx.reader.client().clone());
    let listed = pools
        .list(&ListParams::default())
        .await
        .map_err(|e| StepError::Failed(format!("cannot list the NodePools: {e}")))?;
    let mut all = Vec::new();
    for name in &ctx.drill.spec.targets.fallback.node_pools {
        let Some(pool) = listed.items.iter().find(|p| p.name_any() == *name) else {
            return Err(StepError::Failed(format!("NodePool {name} not found")));
        };
        let Some(types) = pool.allowed(INSTANCE_TYPE_LABEL) else {
            return Err(StepError::Failed(format!(
                "NodePool {name} names no instance types (no `In` requirement on {INSTANCE_TYPE_LABEL}): \
                 `instanceTypes: all` cannot list what to take away; name them"
            )));
        };
        for t in types {
            if !all.contains(&t) {
                all.push(t);
            }
        }
    }
    Ok(all)
}

pub async fn capacity(ctx: &StepContext<'_>, step: &str, action: &CapacityAction) -> Result<StepSuccess, StepError> {
    let types = types_to_remove(ctx, action).await?;
    ctx.progress.waiting(&format!("taking capacity away: {}", types.join(", ")));
    ctx.timeline.record(Event::CapacityRemoved { step: step.into(), instance_types: types.clone() });
    // Per type when the hooks name it, all at once (a sequence would skew when each type ran out); else one run.
    let runs: Vec<(String, Vec<String>, Vec<String>)> = if action.per_type() {
        types
            .iter()
            .map(|t| {
                (t.clone(), CapacityAction::hook_for(&action.remove, t), CapacityAction::hook_for(&action.give_back, t))
            })
            .collect()
    } else {
        vec![(types.join(", "), action.remove.clone(), action.give_back.clone())]
    };
    let results = join_all(runs.iter().map(|(what, remove, give_back)| async move {
        let result = ctx.mutator.remove_capacity(step, what, remove, give_back, action.hook_timeout, &action.env).await;
        (remove, result)
    }))
    .await;
    let failed: Vec<String> = results
        .into_iter()
        .filter_map(|(remove, result)| match result {
            Ok(0) => None,
            Ok(code) => Some(format!("`{}` exited {code}", remove.join(" "))),
            Err(e) => Some(e.to_string()),
        })
        .collect();
    if !failed.is_empty() {
        return Err(StepError::Failed(failed.join("; ")));
    }
    Ok(StepSuccess::ok(format!("no capacity for {}", types.join(", "))))
}

/// Deletes one fallback NodeClaim whose node runs a workload pod: the one with the fewest, so the loss is one node's
/// share of the service and the second recovery is the replacement of that node alone. Ends once the loss shows (no
/// workload pod left running there, or the NodeClaim gone), so the waits after it see the second recovery, not the
/// first one still holding.
pub async fn lose_fallback_node(
    ctx: &StepContext<'_>,
    deadline: Instant,
    timeout: Duration,
) -> Result<StepSuccess, StepError> {
    let mut changes = ctx.view.changes();
    let chosen = ctx.view.read(|v| {
        v.claims
            .values()
            .filter(|c| !c.deleting)
            .filter_map(|c| {
                let node = c.node.clone()?;
                let pods = v.pods.values().filter(|p| p.node.as_deref() == Some(&node) && !p.terminating).count();
                (pods > 0).then(|| (pods, c.name.clone(), node))
            })
            .min()
    });
    let Some((pods, claim, node)) = chosen else {
        return Err(StepError::Failed(
            "no fallback NodeClaim runs a workload pod: nothing to lose; put this step after `waitFor: workload-restored`"
                .into(),
        ));
    };
    ctx.timeline.record(Event::FallbackNodeLost { nodeclaim: claim.clone(), node: node.clone(), pods });
    ctx.mutator.delete_nodeclaim(&claim, Some(&node)).await?;
    loop {
        let shown = ctx.view.read(|v| {
            !v.claims.contains_key(&claim)
                || !v.pods.values().any(|p| p.node.as_deref() == Some(node.as_str()) && !p.terminating)
        });
        if shown {
            break;
        }
        ctx.progress.waiting(&format!("waiting for NodeClaim {claim}'s workload pods to leave {node}"));
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(StepError::Failed("the drill's watches stopped".into())),
            Err(_) => {
                return Err(StepError::Timeout {
                    after: timeout,
                    detail: format!("NodeClaim {claim} deleted, but the workload pods still run on {node}"),
                });
            }
        }
    }
    monitor_caught_up(ctx, deadline).await;
    Ok(StepSuccess::ok(format!("deleted NodeClaim {claim} (node {node}, {pods} workload pods); they left it")))
}

/// Waits (up to `deadline`) until the monitor's Ready count is no higher than the view's: it derives the service's
/// state from the same view a moment after this step sees the loss, and a wait right after the step, reading the
/// monitor, would otherwise find the service as it was before the loss (restored) and pass at once.
async fn monitor_caught_up(ctx: &StepContext<'_>, deadline: Instant) {
    let mut derived = ctx.derived.clone();
    while derived.borrow_and_update().ready_pods > ctx.view.read(|v| v.ready_pods()) {
        if !matches!(tokio::time::timeout_at(deadline, derived.changed()).await, Ok(Ok(()))) {
            return;
        }
    }
}
