//! The end of a fault: the cut's policies and pod labels removed, or the nodes' recovery hooks run; then a
//! watch-driven wait, bounded by the step's deadline, until every on-prem node is Ready, and the restored-state check.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::ResourceExt;
use tokio::time::Instant;

use super::{StepContext, StepError, StepSuccess};
use crate::cluster::displacement;
use crate::drill::RestoreTarget;
use crate::safety::journal::Mutation;
use crate::timeline::Event;

fn ends(target: RestoreTarget, m: &Mutation) -> bool {
    match target {
        RestoreTarget::Cut => {
            matches!(m, Mutation::CreatePolicy { .. } | Mutation::LabelPod { .. } | Mutation::LabelNode { .. })
        }
        RestoreTarget::NodeFailure | RestoreTarget::GpuFault => matches!(m, Mutation::FailNode { .. }),
        RestoreTarget::Capacity => matches!(m, Mutation::RemoveCapacity { .. }),
    }
}

pub async fn restore(
    ctx: &StepContext<'_>,
    step: &str,
    target: RestoreTarget,
    deadline: Instant,
    timeout: Duration,
) -> Result<StepSuccess, StepError> {
    // Read before the restore is stamped: its start is the first undo request, within the fidelity bound.
    if ctx.drill.spec.steps.iter().any(|s| s.action.loses_nodes()) {
        record_displaced(ctx).await;
    }
    let mut changes = ctx.view.changes();
    ctx.timeline.record(Event::RestoreStarted { step: step.into(), what: target });
    let outcome = ctx.mutator.revert(|m| ends(target, m)).await;
    if !outcome.restored() {
        let failed: Vec<String> = outcome.failed.iter().map(|(what, why)| format!("{what}: {why}")).collect();
        return Err(StepError::Failed(format!("could not restore: {}", failed.join("; "))));
    }
    let what = match target {
        RestoreTarget::Cut => format!("link restored: {}", outcome.undone.join(", ")),
        RestoreTarget::NodeFailure | RestoreTarget::GpuFault => {
            format!("recovery hooks ran: {}", outcome.undone.join(", "))
        }
        RestoreTarget::Capacity => format!("capacity given back: {}", outcome.undone.join(", ")),
    };
    ctx.timeline.record(Event::FaultRemoved { step: step.into(), what: what.clone() });
    loop {
        let unready: Vec<String> = ctx.view.read(|v| {
            ctx.on_prem_nodes.iter().filter(|n| !v.nodes.get(*n).is_some_and(|s| s.is_ready())).cloned().collect()
        });
        if unready.is_empty() {
            break;
        }
        ctx.progress.waiting(&format!("waiting for the on-prem nodes to be Ready: {} not yet", unready.join(", ")));
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(StepError::Failed("the drill's watches stopped".into())),
            Err(_) => {
                // Reopens the reverted changes in the journal, so the rollback undoes them again and checks again.
                ctx.mutator.verify_restored(Duration::ZERO).await;
                return Err(StepError::Timeout {
                    after: timeout,
                    detail: format!("{what}, but on-prem nodes not Ready: {}", unready.join(", ")),
                });
            }
        }
    }
    if target == RestoreTarget::GpuFault {
        super::gpu_fault::await_gpus_back(ctx, deadline).await?;
    }
    ctx.timeline.record(Event::OnPremReady { nodes: ctx.on_prem_nodes.len() });
    // Ready is not restored: a node can be Ready and still cordoned, marked or under a policy of the run.
    let wait = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(5));
    let verified = ctx.mutator.verify_restored(wait).await;
    if !verified.restored() {
        let left: Vec<String> = verified.failed.iter().map(|(what, why)| format!("{what}: {why}")).collect();
        return Err(StepError::Failed(format!("{what}, but the restore did not hold: {}", left.join("; "))));
    }
    Ok(StepSuccess::ok(format!("{what}; on-prem nodes Ready: {}", ctx.on_prem_nodes.join(", "))))
}

/// Records, while the fault still holds, which workloads on the lost nodes were replaced elsewhere and which were not
/// (a StatefulSet waits for its old pods). Best effort: a failed read leaves the report without it, the restore goes
/// on.
async fn record_displaced(ctx: &StepContext<'_>) {
    let mut on_lost = Vec::new();
    for node in ctx.on_prem_nodes {
        match ctx.reader.pods_on(node).await {
            Ok(pods) => on_lost.extend(pods),
            Err(e) => return ctx.progress.waiting(&format!("cannot read the pods left on {node}: {e}")),
        }
    }
    let namespaces: BTreeSet<String> = on_lost.iter().filter_map(|p| p.namespace()).collect();
    let mut everywhere = Vec::new();
    for namespace in &namespaces {
        match ctx.reader.pods_in(namespace).await {
            Ok(pods) => everywhere.extend(pods),
            Err(e) => return ctx.progress.waiting(&format!("cannot read the pods of {namespace}: {e}")),
        }
    }
    let protected = &ctx.drill.spec.guards.protected_namespaces;
    let workloads = displacement::moves(&on_lost, &everywhere, ctx.on_prem_nodes, protected);
    if !workloads.is_empty() {
        ctx.timeline.record(Event::WorkloadsDisplaced { workloads });
    }
}
