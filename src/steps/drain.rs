//! The native drain: cordon, then evict through the Eviction API every pod kubectl drain would, honouring
//! PodDisruptionBudgets, all nodes at once, retrying blocked evictions until the step's deadline.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio::time::Instant;

use super::{StepContext, StepError, StepSuccess};
use crate::cluster::drain_selection::is_evictable;
use crate::safety::Eviction;
use crate::timeline::{Event, FaultKind};

pub async fn drain(
    ctx: &StepContext<'_>,
    step: &str,
    deadline: Instant,
    timeout: Duration,
) -> Result<StepSuccess, StepError> {
    ctx.timeline.record(Event::FaultInjected { step: step.into(), kind: FaultKind::Drain });
    for node in ctx.on_prem_nodes {
        ctx.mutator.cordon(node).await?;
    }
    let mut targets = Vec::new();
    for node in ctx.on_prem_nodes {
        let pods = ctx
            .reader
            .pods_on(node)
            .await
            .map_err(|e| StepError::Failed(format!("cannot list pods on {node}: {e}")))?;
        targets.extend(pods.into_iter().filter(is_evictable).map(|p| (node.clone(), p)));
    }
    ctx.progress.waiting(&format!("evicting {} pods from {} nodes", targets.len(), ctx.on_prem_nodes.len()));
    let results = join_all(targets.iter().map(|(node, pod)| evict_until_done(ctx, node, pod, deadline))).await;
    let mut blocked: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for result in results {
        if let Err((pod, pdb)) = result {
            blocked.entry(pdb.unwrap_or_else(|| "an unnamed PodDisruptionBudget".into())).or_default().push(pod);
        }
    }
    if !blocked.is_empty() {
        let detail = blocked
            .iter()
            .map(|(pdb, pods)| format!("PodDisruptionBudget {pdb} blocked the eviction of {}", pods.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(StepError::Timeout { after: timeout, detail });
    }
    // kubectl drain returns once the evicted pods are gone; so does this, watch-driven and bounded.
    ctx.progress.waiting(&format!("waiting for {} evicted pods to terminate", targets.len()));
    let gone = join_all(targets.iter().map(|(_, pod)| {
        let (namespace, name, uid) =
            (pod.namespace().unwrap_or_default(), pod.name_any(), pod.uid().unwrap_or_default());
        async move {
            // A watch broken by an API server restart is re-established until the deadline.
            loop {
                match tokio::time::timeout_at(deadline, ctx.reader.pod_deleted(&namespace, &name, &uid)).await {
                    Ok(Ok(_)) => return true,
                    Ok(Err(_)) => tokio::time::sleep(Duration::from_secs(1)).await,
                    Err(_) => return false,
                }
            }
        }
    }))
    .await;
    let remaining: Vec<String> = targets.iter().zip(gone).filter(|(_, g)| !g).map(|((_, p), _)| p.name_any()).collect();
    if !remaining.is_empty() {
        return Err(StepError::Timeout {
            after: timeout,
            detail: format!("evicted pods still terminating: {}", remaining.join(", ")),
        });
    }
    Ok(StepSuccess::ok(format!("drained {}: {} pods evicted", ctx.on_prem_nodes.join(", "), targets.len())))
}

/// Evicts one pod, backing off while a PodDisruptionBudget says no; Err names the pod and the budget.
async fn evict_until_done(
    ctx: &StepContext<'_>,
    node: &str,
    pod: &Pod,
    deadline: Instant,
) -> Result<(), (String, Option<String>)> {
    let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    let mut delay = Duration::from_secs(1);
    let mut last_pdb = None;
    loop {
        match ctx.mutator.evict(&namespace, &name, node).await {
            Ok(Eviction::Evicted | Eviction::AlreadyGone) => return Ok(()),
            Ok(Eviction::Blocked { pdb, .. }) => last_pdb = pdb,
            Err(e) => tracing::warn!("eviction of {namespace}/{name} failed, retrying: {e}"),
        }
        if Instant::now() + delay >= deadline {
            return Err((format!("{namespace}/{name}"), last_pdb));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}
