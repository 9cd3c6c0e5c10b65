//! The native drain, kubectl drain's semantics: cordon, then evict through the Eviction API exactly the pods the
//! plan listed (the shared selection: no DaemonSet, mirror, finished or protected-namespace pod; bare and emptyDir
//! pods only with their flag), all nodes at once. A budget's block is retried until the step's deadline, throttling
//! after its Retry-After; any other refusal fails the step at once.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use kube::ResourceExt;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{StepContext, StepError, StepSuccess};
use crate::cluster::drain_selection::{DrainFlags, DrainPod, DrainSelection};
use crate::safety::{Eviction, eviction_refusal};
use crate::timeline::{Event, FaultKind};

/// How the eviction of one pod ended.
enum Outcome {
    Evicted,
    /// Still refused at the deadline, by a budget or by throttling: `blocker` reads "... the eviction of POD".
    Pending {
        blocker: String,
    },
    /// Refused in a way asking again does not change: the step fails at once.
    Fatal(String),
    /// Given up because another pod's eviction failed for good.
    Stopped,
}

pub async fn drain(
    ctx: &StepContext<'_>,
    step: &str,
    flags: DrainFlags,
    deadline: Instant,
    timeout: Duration,
) -> Result<StepSuccess, StepError> {
    ctx.timeline.record(Event::FaultInjected { step: step.into(), kind: FaultKind::Drain });
    for node in ctx.on_prem_nodes {
        ctx.mutator.cordon(node).await?;
    }
    let mut selection = DrainSelection::default();
    for node in ctx.on_prem_nodes {
        let pods = ctx
            .reader
            .pods_on(node)
            .await
            .map_err(|e| StepError::Failed(format!("cannot list pods on {node}: {e}")))?;
        selection.add_node(node, pods, &ctx.drill.spec.guards.protected_namespaces, flags);
    }
    // A pod that arrived after the plan (the nodes were not cordoned then) is refused as the plan would have.
    if let Some(why) = selection.refusal(step, flags) {
        return Err(StepError::Failed(why));
    }
    let targets = &selection.evict;
    ctx.progress.waiting(&format!("evicting {} pods from {} nodes", targets.len(), ctx.on_prem_nodes.len()));
    let (stop, stopped) = watch::channel(false);
    let results = join_all(targets.iter().map(|target| {
        let (stop, mut stopped) = (&stop, stopped.clone());
        async move {
            let outcome = evict_until_done(ctx, target, deadline, &mut stopped).await;
            if matches!(outcome, Outcome::Fatal(_)) {
                let _ = stop.send(true);
            }
            outcome
        }
    }))
    .await;
    let mut fatal = Vec::new();
    let mut pending: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (target, result) in targets.iter().zip(results) {
        match result {
            Outcome::Fatal(why) => fatal.push(format!("eviction of {} failed: {why}", target.name())),
            Outcome::Pending { blocker } => pending.entry(blocker).or_default().push(target.name()),
            Outcome::Evicted | Outcome::Stopped => {}
        }
    }
    if !fatal.is_empty() {
        return Err(StepError::Failed(fatal.join("; ")));
    }
    if !pending.is_empty() {
        let detail = pending
            .iter()
            .map(|(why, pods)| format!("{why} the eviction of {}", pods.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(StepError::Timeout { after: timeout, detail });
    }
    // kubectl drain returns once the evicted pods are gone; so does this, watch-driven and bounded.
    ctx.progress.waiting(&format!("waiting for {} evicted pods to terminate", targets.len()));
    let gone = join_all(targets.iter().map(|target| {
        let pod = &target.pod;
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
    let remaining: Vec<String> = targets.iter().zip(gone).filter(|(_, g)| !g).map(|(p, _)| p.name()).collect();
    if !remaining.is_empty() {
        return Err(StepError::Timeout {
            after: timeout,
            detail: format!("evicted pods still terminating: {}", remaining.join(", ")),
        });
    }
    Ok(StepSuccess::ok(summary(ctx.on_prem_nodes, &selection)))
}

/// What the drain did, what it cost beyond restarts, and what it left alone on purpose.
fn summary(nodes: &[String], selection: &DrainSelection) -> String {
    let mut message = format!("drained {}: {} pods evicted", nodes.join(", "), selection.evict.len());
    for p in selection.evict.iter().filter(|p| !p.loss.is_none()) {
        message.push_str(&format!("; {} on {}: {}", p.name(), p.node, p.loss));
    }
    for p in &selection.protected {
        message.push_str(&format!("; left alone (protected namespace): {} on {}", p.name(), p.node));
    }
    message
}

/// Evicts one pod: backs off while a budget says no, waits out throttling, stops at a final refusal.
async fn evict_until_done(
    ctx: &StepContext<'_>,
    target: &DrainPod,
    deadline: Instant,
    stopped: &mut watch::Receiver<bool>,
) -> Outcome {
    let (namespace, name) = (target.pod.namespace().unwrap_or_default(), target.pod.name_any());
    let mut backoff = Duration::from_secs(1);
    loop {
        let eviction = match ctx.mutator.evict(&namespace, &name, &target.node).await {
            Ok(eviction) => eviction,
            Err(e) => return Outcome::Fatal(e.to_string()),
        };
        let (wait, last) = match &eviction {
            Eviction::Evicted | Eviction::AlreadyGone => return Outcome::Evicted,
            Eviction::Blocked { pdb, .. } => {
                let wait = backoff;
                backoff = (backoff * 2).min(Duration::from_secs(10));
                let pdb = pdb.clone().unwrap_or_else(|| "(not found by selector)".into());
                (wait, Outcome::Pending { blocker: format!("PodDisruptionBudget {pdb} blocked") })
            }
            // Not a budget: the API server is shedding load and says when to come back.
            Eviction::Throttled { retry_after, message } => {
                let blocker = format!("API server throttling (429: {message}) held up");
                (retry_after.unwrap_or(backoff), Outcome::Pending { blocker })
            }
            Eviction::MultipleBudgets { .. } | Eviction::Refused { .. } => {
                return Outcome::Fatal(eviction_refusal(&eviction));
            }
        };
        if Instant::now() + wait >= deadline {
            return last;
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stopped.wait_for(|stop| *stop) => return Outcome::Stopped,
        }
    }
}
