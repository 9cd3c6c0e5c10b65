//! The steady-state check: the workload available on-prem and the fallback at 0 before anything is touched.

use super::{StepContext, StepError, StepSuccess};
use crate::drill::OnDeviation;
use crate::timeline::NodeRole;

pub fn steady_state(ctx: &StepContext<'_>, on_deviation: OnDeviation) -> Result<StepSuccess, StepError> {
    let targets = &ctx.drill.spec.targets;
    let needed = ctx.derived.borrow().needed;
    let deviations = ctx.view.read(|v| {
        let mut d = Vec::new();
        let on_prem_ready = v.ready_pods_on(NodeRole::OnPrem);
        if on_prem_ready < needed {
            d.push(format!("{on_prem_ready} of the {needed} required workload pods are Ready on-prem"));
        }
        let elsewhere: Vec<String> = v
            .live_pods()
            .filter(|p| p.node.as_deref().is_some_and(|n| v.role_of(n) != NodeRole::OnPrem))
            .map(|p| format!("{} on {}", p.name, p.node.clone().unwrap_or_default()))
            .collect();
        if !elsewhere.is_empty() {
            d.push(format!(
                "workload pods run off the on-prem nodes ({}): preferred affinity is not a guarantee",
                elsewhere.join(", ")
            ));
        }
        if !v.fallback_empty() {
            let claims: Vec<&str> = v.claims.keys().map(String::as_str).collect();
            d.push(format!(
                "fallback {} is not at 0 (NodeClaims: {}; nodes: {})",
                targets.fallback.describe(),
                if claims.is_empty() { "none".into() } else { claims.join(", ") },
                v.fallback_nodes().count()
            ));
        }
        let unready: Vec<&str> = v.on_prem_nodes().filter(|n| !n.is_ready()).map(|n| n.name.as_str()).collect();
        if !unready.is_empty() {
            d.push(format!("on-prem nodes not Ready: {}", unready.join(", ")));
        }
        d
    });
    if deviations.is_empty() {
        return Ok(StepSuccess::ok(format!("{needed} pods Ready on-prem, fallback at 0")));
    }
    let message = deviations.join("; ");
    match on_deviation {
        OnDeviation::Fail => Err(StepError::Failed(format!("cluster is not in steady state: {message}"))),
        OnDeviation::Warn => Ok(StepSuccess {
            message: format!("deviates from steady state: {message}"),
            warning: true,
            skip_to_restore: false,
        }),
    }
}
