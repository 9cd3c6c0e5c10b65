//! The node failure: the drill's own hooks power the on-prem nodes off (BMC, IPMI, ssh), journalled with their
//! recovery hooks so any stop brings the nodes back.

use futures::future::join_all;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::{StepContext, StepError, StepSuccess};
use crate::drill::NodeFailureAction;
use crate::drill::placeholders::{self, NodeFacts};
use crate::timeline::{Event, FaultKind};

/// What a Node object offers the hooks' placeholders.
pub fn facts(node: &Node) -> NodeFacts {
    let internal_ip = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone());
    NodeFacts {
        name: node.name_any(),
        labels: node.labels().clone(),
        annotations: node.annotations().clone(),
        internal_ip,
    }
}

/// Both hooks of every on-prem node, expanded from its Node object as it is now; any placeholder the node cannot fill
/// refuses the step before a hook runs.
async fn per_node_hooks(
    ctx: &StepContext<'_>,
    action: &NodeFailureAction,
) -> Result<Vec<(Option<String>, Vec<String>, Vec<String>)>, StepError> {
    let addresses = &ctx.drill.spec.targets.on_prem.addresses;
    let mut runs = Vec::new();
    for name in &action.chosen(ctx.on_prem_nodes) {
        let node = crate::safety::transient_retry(|| ctx.reader.node(name))
            .await
            .map_err(|e| StepError::Failed(format!("cannot read node {name}: {e}")))?;
        let facts = facts(&node);
        let expand = |hook| {
            placeholders::expand(hook, &facts, addresses).map_err(|e| StepError::Failed(format!("no hook ran: {e}")))
        };
        runs.push((Some(name.clone()), expand(&action.fail)?, expand(&action.recover)?));
    }
    Ok(runs)
}

pub async fn node_failure(
    ctx: &StepContext<'_>,
    step: &str,
    action: &NodeFailureAction,
) -> Result<StepSuccess, StepError> {
    let targets = run_fault_hooks(ctx, step, action, FaultKind::NodeFailure).await?;
    Ok(StepSuccess::ok(format!("failure hook ran for {targets}")))
}

/// Runs a fault's hooks on the chosen nodes, all at once, journalled with their recovery hooks (t0 recorded just
/// before as `kind`); says which nodes they ran for.
pub(super) async fn run_fault_hooks(
    ctx: &StepContext<'_>,
    step: &str,
    action: &NodeFailureAction,
    kind: FaultKind,
) -> Result<String, StepError> {
    let runs = if action.per_node() {
        per_node_hooks(ctx, action).await?
    } else {
        vec![(None, action.fail.clone(), action.recover.clone())]
    };
    ctx.timeline.record(Event::FaultInjected { step: step.into(), kind });
    if action.share.is_some() {
        let nodes = action.chosen(ctx.on_prem_nodes);
        ctx.timeline.record(Event::PartialLoss { nodes, of: ctx.on_prem_nodes.len(), lost: kind.loses_nodes() });
    }
    ctx.progress.waiting(&format!("running the failure hook: {}", action.fail.join(" ")));
    // All at once, as a rack losing power would: a sequence would skew t0 across the nodes.
    let results = join_all(runs.iter().map(|(node, fail, recover)| {
        ctx.mutator.fail_node(step, node.as_deref(), fail, recover, action.hook_timeout, &action.env)
    }))
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
    Ok(if action.per_node() { action.chosen(ctx.on_prem_nodes).join(", ") } else { "the on-prem nodes".into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facts_of_a_node_come_from_its_object() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "mi-0abc", "labels": {"bmc": "10.9.0.1"}},
            "status": {"addresses": [{"type": "Hostname", "address": "h"}, {"type": "InternalIP", "address": "10.0.1.21"}]},
        }))
        .unwrap();
        let hook: Vec<String> = ["ipmitool", "-H", "{label:bmc}", "{internalIP}"].map(String::from).to_vec();
        let expanded = placeholders::expand(&hook, &facts(&node), &Default::default()).unwrap();
        assert_eq!(expanded, ["ipmitool", "-H", "10.9.0.1", "10.0.1.21"]);
    }
}
