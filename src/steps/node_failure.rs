//! The node failure: the drill's own hooks power the on-prem nodes off (BMC, IPMI, ssh), journalled with their
//! recovery hooks so any stop brings the nodes back.

use futures::future::join_all;

use super::{StepContext, StepError, StepSuccess};
use crate::drill::{NODE_PLACEHOLDER, NodeFailureAction};
use crate::timeline::{Event, FaultKind};

/// The hook with `{node}` replaced by the node's name.
pub fn for_node(hook: &[String], node: &str) -> Vec<String> {
    hook.iter().map(|a| a.replace(NODE_PLACEHOLDER, node)).collect()
}

pub async fn node_failure(
    ctx: &StepContext<'_>,
    step: &str,
    action: &NodeFailureAction,
) -> Result<StepSuccess, StepError> {
    let runs: Vec<(Option<&str>, Vec<String>, Vec<String>)> = if action.per_node() {
        ctx.on_prem_nodes
            .iter()
            .map(|n| (Some(n.as_str()), for_node(&action.fail, n), for_node(&action.recover, n)))
            .collect()
    } else {
        vec![(None, action.fail.clone(), action.recover.clone())]
    };
    ctx.timeline.record(Event::FaultInjected { step: step.into(), kind: FaultKind::NodeFailure });
    ctx.progress.waiting(&format!("running the failure hook: {}", action.fail.join(" ")));
    // All at once, as a rack losing power would: a sequence would skew t0 across the nodes.
    let results = join_all(
        runs.iter().map(|(node, fail, recover)| ctx.mutator.fail_node(step, *node, fail, recover, action.hook_timeout)),
    )
    .await;
    let mut failed = Vec::new();
    for ((_, fail, _), result) in runs.iter().zip(results) {
        match result {
            Ok(0) => {}
            Ok(code) => failed.push(format!("`{}` exited {code}", fail.join(" "))),
            Err(e) => failed.push(e.to_string()),
        }
    }
    if !failed.is_empty() {
        return Err(StepError::Failed(failed.join("; ")));
    }
    let targets = if action.per_node() { ctx.on_prem_nodes.join(", ") } else { "the on-prem nodes".into() };
    Ok(StepSuccess::ok(format!("failure hook ran for {targets}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placeholder_becomes_the_node() {
        let hook: Vec<String> = ["ipmitool", "-H", "{node}-bmc", "power", "off"].map(String::from).to_vec();
        assert_eq!(for_node(&hook, "h1"), ["ipmitool", "-H", "h1-bmc", "power", "off"]);
    }
}
