//! The return to on-prem: uncordon the on-prem nodes, then restart the workload so it re-places there, and each
//! other workload the fault moved onto capacity the drill created (see [`super::collateral`]).

use super::{StepContext, StepError, StepSuccess, nodes};
use crate::drill::ReturnAction;
use crate::timeline::Event;

pub async fn return_to_on_prem(
    ctx: &StepContext<'_>,
    step: &str,
    action: &ReturnAction,
) -> Result<StepSuccess, StepError> {
    ctx.timeline.record(Event::ReturnStarted { step: step.into() });
    let mut done = Vec::new();
    if action.uncordon {
        done.push(nodes::uncordon(ctx).await?.message);
    }
    if let Some(target) = &action.restart {
        ctx.mutator.restart(&ctx.drill.spec.targets.workload.namespace, target.kind, &target.name).await?;
        done.push(format!("restarted {target}"));
    }
    done.extend(super::collateral::return_displaced(ctx).await?);
    Ok(StepSuccess::ok(done.join("; ")))
}
