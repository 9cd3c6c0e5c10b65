//! The run's collateral, read from the cluster: the state before the fault (every NodeClaim, every other workload on
//! the on-prem nodes), the return of displaced workloads still on capacity the drill created, the NodeClaims the
//! reclaim waits for in every NodePool, and the leftovers at the end.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::{StepContext, StepError};
use crate::cluster::Reader;
use crate::cluster::collateral::{self, AtEnd, BlastGroup, Bystander, ClaimFacts, Leftover};
use crate::cluster::karpenter::NodeClaim;
use crate::drill::{Drill, WorkloadKind};
use crate::timeline::{Event, Timeline};

/// Every NodeClaim of the cluster, in any NodePool.
pub async fn claims(reader: &Reader) -> Result<Vec<ClaimFacts>, kube::Error> {
    let list = Api::<NodeClaim>::all(reader.client().clone()).list(&ListParams::default()).await?;
    Ok(list.items.iter().map(ClaimFacts::of).collect())
}

/// The state before the fault, as the timeline event the rest of the run compares with: every NodeClaim and every
/// workload on the on-prem nodes other than the drilled one (whose pods the drill's watch knows by name).
pub async fn before(
    reader: &Reader,
    drill: &Drill,
    on_prem_nodes: &[String],
    drilled: &BTreeSet<String>,
    blast_radius: Vec<BlastGroup>,
) -> Result<Event, kube::Error> {
    let nodeclaims = claims(reader).await?.into_iter().map(|c| c.name).collect();
    let mut on_prem = Vec::new();
    for node in on_prem_nodes {
        on_prem.extend(reader.pods_on(node).await?);
    }
    let namespace = &drill.spec.targets.workload.namespace;
    let is_drilled = |p: &Pod| p.namespace().as_ref() == Some(namespace) && drilled.contains(&p.name_any());
    let workloads = collateral::bystanders(&on_prem, is_drilled, &drill.spec.guards.protected_namespaces);
    Ok(Event::CollateralBefore { nodeclaims, workloads, blast_radius })
}

/// The state before the fault the run recorded: the NodeClaims then, and the other workloads on the on-prem nodes.
pub fn recorded(timeline: &Timeline) -> Option<(BTreeSet<String>, Vec<Bystander>)> {
    // Read during the reclaim's wait every few seconds: a copy of the whole timeline would hold the lock the watches
    // stamp their observations under.
    timeline.find_map(|o| match &o.event {
        Event::CollateralBefore { nodeclaims, workloads, .. } => {
            Some((nodeclaims.iter().cloned().collect(), workloads.clone()))
        }
        _ => None,
    })
}

/// The pods of the bystanders' namespaces and of the nodes of `claims`.
async fn pods_of(reader: &Reader, bystanders: &[Bystander], claims: &[&ClaimFacts]) -> Result<Vec<Pod>, kube::Error> {
    let namespaces: BTreeSet<&str> =
        bystanders.iter().filter_map(|b| b.workload.split_once('/')).map(|(ns, _)| ns).collect();
    let mut pods = Vec::new();
    for ns in namespaces {
        pods.extend(reader.pods_in(ns).await?);
    }
    for node in claims.iter().filter_map(|c| c.node.as_deref()) {
        pods.extend(reader.pods_on(node).await?.into_iter().filter(|p| {
            let ns = p.namespace().unwrap_or_default();
            !bystanders.iter().any(|b| b.workload.starts_with(&format!("{ns}/")))
        }));
    }
    Ok(pods)
}

/// What the accounting at the end compares; `None` when the run recorded no state before its fault.
pub async fn at_end(
    reader: &Reader,
    drill: &Drill,
    timeline: &Timeline,
    on_prem_nodes: &[String],
) -> Result<Option<AtEnd>, kube::Error> {
    let Some((before, bystanders)) = recorded(timeline) else { return Ok(None) };
    let claims = claims(reader).await?;
    let caused: Vec<&ClaimFacts> = collateral::caused(&before, &claims).collect();
    let pods = pods_of(reader, &bystanders, &caused).await?;
    Ok(Some(AtEnd {
        before,
        claims,
        pods,
        bystanders,
        on_prem_nodes: on_prem_nodes.to_vec(),
        leave: drill.spec.collateral_leave.clone(),
        pricing: drill.spec.pricing.clone(),
    }))
}

/// The NodeClaims the drill caused that the reclaim still waits for, in any NodePool: all but those running only
/// workloads the drill file leaves where they are.
pub async fn awaited(ctx: &StepContext<'_>) -> Result<Vec<ClaimFacts>, kube::Error> {
    let Some(at) = at_end(ctx.reader, ctx.drill, ctx.timeline, ctx.on_prem_nodes).await? else { return Ok(Vec::new()) };
    let left = collateral::leftovers(&at, Utc::now());
    Ok(left.into_iter().filter(|l| !l.expected).filter_map(|l| l.nodeclaim).collect())
}

fn restartable(kind: &str) -> Option<WorkloadKind> {
    match kind {
        "Deployment" => Some(WorkloadKind::Deployment),
        "StatefulSet" => Some(WorkloadKind::StatefulSet),
        _ => None,
    }
}

/// The return of the collateral, once on-prem is schedulable again: each displaced workload with pods on a
/// NodeClaim the drill caused is restarted once, as the drilled workload is, unless the drill file leaves it.
/// Returns what it did, for the step's message.
pub async fn return_displaced(ctx: &StepContext<'_>) -> Result<Vec<String>, StepError> {
    let unschedulable: Vec<String> = ctx.view.read(|v| {
        ctx.on_prem_nodes
            .iter()
            .filter(|n| !v.nodes.get(*n).is_some_and(|s| s.is_ready() && s.schedulable))
            .cloned()
            .collect()
    });
    let read = |e: kube::Error| StepError::Failed(format!("cannot read the displaced workloads: {e}"));
    // Read again while the API server cannot be reached (a restart during the drill): the return must not fail on it.
    let at = crate::safety::transient_retry(|| at_end(ctx.reader, ctx.drill, ctx.timeline, ctx.on_prem_nodes));
    let Some(at) = at.await.map_err(read)? else {
        return Ok(Vec::new());
    };
    let on_caused: BTreeMap<String, Vec<String>> = on_drill_capacity(&at);
    let mut done = Vec::new();
    for b in at.bystanders.iter().filter(|b| on_caused.contains_key(&b.workload)) {
        let (namespace, name) = b.workload.split_once('/').unwrap_or_default();
        let (restarted, detail) = match restartable(&b.kind) {
            _ if at.leave.contains(&b.workload) => (false, "left where it is, as collateral.leave declares".into()),
            _ if !unschedulable.is_empty() => {
                (false, format!("not restarted: on-prem not schedulable ({})", unschedulable.join(", ")))
            }
            None => (false, format!("not restarted: a {} has no rollout restart", b.kind)),
            Some(kind) => {
                ctx.mutator.restart(namespace, kind, name).await?;
                (true, format!("restarted ({} on drill capacity)", on_caused[&b.workload].join(", ")))
            }
        };
        done.push(format!("{} {}: {detail}", b.kind, b.workload));
        ctx.timeline.record(Event::CollateralReturned { workload: b.workload.clone(), restarted, detail });
    }
    Ok(done)
}

/// Each bystander with pods on the nodes of NodeClaims the drill caused, with those pods.
fn on_drill_capacity(at: &AtEnd) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for claim in collateral::caused(&at.before, &at.claims) {
        let Some(node) = claim.node.as_deref() else { continue };
        for (pod, owner) in collateral::pods_on(&at.pods, node) {
            if at.bystanders.iter().any(|b| b.workload == owner) {
                out.entry(owner).or_default().push(pod);
            }
        }
    }
    out
}

/// The leftovers at the end of a run, each recorded in the timeline; empty when nothing differs (or the run
/// recorded no state before its fault).
pub async fn account(
    reader: &Reader,
    drill: &Drill,
    timeline: &Timeline,
    on_prem_nodes: &[String],
) -> Result<Vec<Leftover>, kube::Error> {
    let Some(at) = at_end(reader, drill, timeline, on_prem_nodes).await? else { return Ok(Vec::new()) };
    let left = collateral::leftovers(&at, Utc::now());
    for leftover in &left {
        timeline.record(Event::Leftover { leftover: leftover.clone() });
    }
    Ok(left)
}
