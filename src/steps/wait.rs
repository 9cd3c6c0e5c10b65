//! Watch-driven waits on the drill's derived states, always bounded by the step's deadline.

use std::time::Duration;

use tokio::time::Instant;

use super::{StepContext, StepError, StepSuccess};
use crate::drill::WaitCondition;
use crate::monitor::Derived;

fn holds(condition: WaitCondition, d: &Derived) -> bool {
    match condition {
        WaitCondition::FallbackReady => d.fallback_ready,
        WaitCondition::WorkloadRestored => d.available,
        WaitCondition::WorkloadOnPrem => d.back_on_prem,
        WaitCondition::FallbackEmpty => d.fallback_empty,
    }
}

/// What the wait is waiting on, in the words an operator watching the terminal needs.
fn status(condition: WaitCondition, d: &Derived, needed: u32) -> String {
    match condition {
        WaitCondition::FallbackReady => format!(
            "fallback: {} NodeClaims, {} GPUs; workload pods waiting for a node: {}, still on lost nodes: {}",
            d.nodeclaims, d.fallback_gpus, d.unscheduled_pods, d.pods_on_lost_nodes
        ),
        WaitCondition::WorkloadRestored => match d.probe_ok {
            Some(false) => format!("{}/{needed} pods Ready, HTTP probe not yet passing", d.ready_pods),
            _ => format!("{}/{needed} pods Ready", d.ready_pods),
        },
        WaitCondition::WorkloadOnPrem => {
            format!("{}/{needed} pods Ready; waiting for all of them on-prem and the rollout to settle", d.ready_pods)
        }
        WaitCondition::FallbackEmpty => {
            format!("fallback still holds {} NodeClaims ({} GPUs)", d.nodeclaims, d.fallback_gpus)
        }
    }
}

pub async fn wait_for(
    ctx: &mut StepContext<'_>,
    condition: WaitCondition,
    deadline: Instant,
    timeout: Duration,
) -> Result<StepSuccess, StepError> {
    let needed = ctx.drill.spec.targets.workload.restored_when.ready_pods;
    loop {
        let current = ctx.derived.borrow_and_update().clone();
        if holds(condition, &current) {
            return Ok(StepSuccess::ok(format!("{condition} holds")));
        }
        ctx.progress.waiting(&format!("waiting for {condition}: {}", status(condition, &current, needed)));
        match tokio::time::timeout_at(deadline, ctx.derived.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(StepError::Failed("the drill's monitor stopped".into())),
            Err(_) => {
                return Err(StepError::Timeout {
                    after: timeout,
                    detail: format!("{condition} never held; last: {}", status(condition, &current, needed)),
                });
            }
        }
    }
}
