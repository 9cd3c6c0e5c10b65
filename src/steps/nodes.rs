//! Cordon and uncordon of the on-prem nodes.

use super::{StepContext, StepError, StepSuccess};

pub async fn cordon(ctx: &StepContext<'_>) -> Result<StepSuccess, StepError> {
    for node in ctx.on_prem_nodes {
        ctx.mutator.cordon(node).await?;
    }
    Ok(StepSuccess::ok(format!("cordoned {}", ctx.on_prem_nodes.join(", "))))
}

/// Uncordons the on-prem nodes a drill cordoned (they carry its run annotation); others stay as they are.
pub async fn uncordon(ctx: &StepContext<'_>) -> Result<StepSuccess, StepError> {
    let cordoned: Vec<String> = ctx.view.read(|v| {
        ctx.on_prem_nodes
            .iter()
            .filter(|n| v.nodes.get(*n).is_some_and(|s| !s.schedulable && s.run_annotation.is_some()))
            .cloned()
            .collect()
    });
    for node in &cordoned {
        ctx.mutator.uncordon(node).await?;
    }
    if cordoned.is_empty() {
        return Ok(StepSuccess::ok("no on-prem node was cordoned"));
    }
    Ok(StepSuccess::ok(format!("uncordoned {}", cordoned.join(", "))))
}
