//! Watch-driven waits on the drill's derived states, always bounded by the step's deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::reclaim_blockers::{self, Blocker};
use super::{StepContext, StepError, StepSuccess};
use crate::cluster::collateral::ClaimFacts;
use crate::cluster::tolerations;
use crate::cluster::zones::{HELD_BY_ZONE_DISRUPTION, LARGE_CLUSTER_SIZE_THRESHOLD, ZoneState, zone_of, zone_state};
use crate::drill::WaitCondition;
use crate::monitor::Derived;
use crate::timeline::{Event, NodeRole};

fn holds(condition: WaitCondition, d: &Derived) -> bool {
    match condition {
        WaitCondition::FallbackReady => d.fallback_ready,
        WaitCondition::WorkloadRestored => d.available,
        WaitCondition::WorkloadOnPrem => d.back_on_prem,
        WaitCondition::FallbackEmpty => d.fallback_empty,
        WaitCondition::LastTierServing => d.last_tier_serving == Some(true),
    }
}

/// What the wait is waiting on, in the words an operator watching the terminal needs.
fn status(condition: WaitCondition, d: &Derived) -> String {
    let needed = d.needed;
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
            format!("the fallback still holds {} NodeClaims ({} GPUs)", d.nodeclaims, d.fallback_gpus)
        }
        WaitCondition::LastTierServing => {
            format!("{}/{needed} pods Ready; the last tier does not serve yet (its probe fails)", d.ready_pods)
        }
    }
}

/// How often the reclaim wait re-reads what blocks consolidation (budgets and annotations change without an event
/// the drill watches).
const BLOCKERS_EVERY: Duration = Duration::from_secs(5);

/// The NodeClaims the drill caused that the reclaim still waits for, for the live line and a timed-out step's message:
/// those in the fallback's NodePools apart from those in any other, so the line agrees with the fallback's count
/// before it (`fallback NodePool gpu-fallback holds 0 NodeClaims; in other NodePools, still running: ...`).
fn awaited_line(others: Option<&[ClaimFacts]>, fallback_pools: &[String]) -> String {
    let Some(claims) = others.filter(|c| !c.is_empty()) else { return String::new() };
    let (fallback, elsewhere): (Vec<&ClaimFacts>, Vec<&ClaimFacts>) =
        claims.iter().partition(|c| fallback_pools.contains(&c.node_pool));
    let names = |claims: &[&ClaimFacts]| claims.iter().map(|c| c.describe()).collect::<Vec<_>>().join(", ");
    let mut line = String::new();
    if !fallback.is_empty() {
        line.push_str(&format!("; the drill's NodeClaims in the fallback, not yet gone: {}", names(&fallback)));
    }
    if !elsewhere.is_empty() {
        line.push_str(&format!(
            "; NodeClaims the drill caused in other NodePools, not yet gone: {}",
            names(&elsewhere)
        ));
    }
    line
}

/// The blockers seen last, for the live line and a timed-out step's message.
fn blocked_by(blocked: &[Blocker]) -> String {
    if blocked.is_empty() {
        return String::new();
    }
    format!("; blocked by {}", blocked.iter().map(Blocker::line).collect::<Vec<_>>().join("; "))
}

/// How long a lost on-prem node may stay NotReady without the NoExecute taint, its zone partially disrupted, before
/// the wait calls its eviction held: the controller taints a node of a normal zone within a monitor period or, rate
/// limited (0.1 nodes/s), within seconds per node queued before it.
const HELD_AFTER: Duration = Duration::from_secs(30);
/// How often a wait that may meet held evictions re-reads the zones (a held node changes nothing the watches see).
const HELD_CHECK_EVERY: Duration = Duration::from_secs(5);

/// The on-prem nodes whose eviction the node lifecycle controller holds: NotReady for at least [`HELD_AFTER`],
/// without a NoExecute taint, in a zone that is partially disrupted (more than 2 and at least 55% NotReady) and no
/// larger than 50 nodes, where the controller's eviction rate is 0. With the zone, its NotReady count and size.
pub fn held_evictions(
    nodes: &[Node],
    lost: &[String],
    now: DateTime<Utc>,
) -> Option<(Vec<String>, String, usize, usize)> {
    let not_ready = |n: &Node| {
        crate::cluster::readiness::ready_condition(n)
            .filter(|c| c.status != "True")
            .map(|c| c.last_transition_time.as_ref().map(|t| crate::cluster::to_utc(&t.0)))
    };
    let no_execute = |n: &Node| {
        n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|ts| {
            ts.iter().any(|t| {
                t.effect == "NoExecute" && (t.key == tolerations::UNREACHABLE || t.key == tolerations::NOT_READY)
            })
        })
    };
    for zone in nodes.iter().map(zone_of).collect::<std::collections::BTreeSet<_>>() {
        let members: Vec<&Node> = nodes.iter().filter(|n| zone_of(n) == zone).collect();
        let down = members.iter().filter(|n| not_ready(n).is_some()).count();
        if zone_state(down, members.len()) != ZoneState::Partial || members.len() > LARGE_CLUSTER_SIZE_THRESHOLD {
            continue;
        }
        let held: Vec<String> = members
            .iter()
            .filter(|n| lost.contains(&n.name_any()) && !no_execute(n))
            .filter(|n| {
                not_ready(n)
                    .is_some_and(|since| since.is_none_or(|s| (now - s).to_std().is_ok_and(|d| d >= HELD_AFTER)))
            })
            .map(|n| n.name_any())
            .collect();
        if !held.is_empty() {
            return Some((held, zone, down, members.len()));
        }
    }
    None
}

/// The step's end when evictions are held: not a slow fallback, the zone rule at work.
fn held_verdict(held: &[String], zone: &str, down: usize, size: usize) -> StepError {
    StepError::Failed(format!(
        "{HELD_BY_ZONE_DISRUPTION}: {} NotReady without the NoExecute taint; zone {zone} has {down} of {size} nodes NotReady, a partial disruption (more than 2 and at least 55%) in a zone of at most 50 nodes, where the node lifecycle controller's eviction rate is 0 (--unhealthy-zone-threshold 0.55, --large-cluster-size-threshold 50): nothing is evicted and nothing falls back while it lasts; the drill restores the nodes",
        held.join(", ")
    ))
}

/// The fallback's nodes (node -> NodePool) and their NodeClaims (node -> claim), as the drill's watches see them.
fn fallback_nodes(ctx: &StepContext<'_>) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    ctx.view.read(|v| {
        let nodes = v
            .nodes
            .values()
            .filter(|n| n.role == NodeRole::Fallback)
            .map(|n| (n.name.clone(), n.node_pool.clone().unwrap_or_default()))
            .collect();
        let claims = v.claims.values().filter_map(|c| Some((c.node.clone()?, c.name.clone()))).collect();
        (nodes, claims)
    })
}

/// Reads why the fallback (and the NodeClaims the drill caused in other pools, `others`) stays, records each
/// blocker once in the timeline, and returns those seen now. A failed read leaves the blockers unknown this round:
/// the wait itself goes on.
async fn reclaim_blockers(ctx: &StepContext<'_>, seen: &mut BTreeSet<Blocker>, others: &[ClaimFacts]) -> Vec<Blocker> {
    let (mut nodes, mut claims) = fallback_nodes(ctx);
    for claim in others {
        if let Some(node) = &claim.node {
            nodes.insert(node.clone(), claim.node_pool.clone());
            claims.insert(node.clone(), claim.name.clone());
        }
    }
    if nodes.is_empty() {
        return Vec::new();
    }
    let Ok(observed) = reclaim_blockers::observe(ctx.reader, nodes, claims, ctx.timeline.started_at()).await else {
        return Vec::new();
    };
    let now = reclaim_blockers::find(&observed, Utc::now());
    for b in now.iter().filter(|b| seen.insert((*b).clone())) {
        ctx.timeline.record(Event::ReclaimBlocked {
            node: b.node.clone(),
            cause: b.cause,
            object: b.object.clone(),
            message: b.message.clone(),
        });
    }
    now
}

/// Why the fallback could not launch, when the drill took capacity away and every launch since was refused.
fn capacity_cause(ctx: &StepContext<'_>, condition: WaitCondition) -> String {
    let waits_on_launches = matches!(condition, WaitCondition::FallbackReady | WaitCondition::WorkloadRestored);
    if !waits_on_launches {
        return String::new();
    }
    shortage(ctx)
}

/// `; no fallback capacity: ...` when the drill's capacity fault left nothing to launch, else nothing: what a wait on
/// the fallback, or a drain whose budget waits on replacements, ran out of time for.
pub(super) fn shortage(ctx: &StepContext<'_>) -> String {
    if !ctx.drill.spec.steps.iter().any(|s| matches!(s.action, crate::drill::Action::Capacity(_))) {
        return String::new();
    }
    crate::phases::fallback_faults::fallback_faults(&ctx.timeline.observations(), None)
        .capacity
        .and_then(|c| c.cause)
        .map(|cause| format!("; {cause}"))
        .unwrap_or_default()
}

pub async fn wait_for(
    ctx: &mut StepContext<'_>,
    condition: WaitCondition,
    deadline: Instant,
    timeout: Duration,
) -> Result<StepSuccess, StepError> {
    // Only a fault that loses nodes meets the zone rule, and only a wait for the fallback or the restore waits on it.
    let may_be_held = matches!(condition, WaitCondition::FallbackReady | WaitCondition::WorkloadRestored)
        && ctx.drill.spec.steps.iter().any(|s| s.action.loses_nodes());
    // Only the reclaim waits on Karpenter's consolidation, whose blockers no watch shows.
    let reclaiming = condition == WaitCondition::FallbackEmpty;
    let (mut seen, mut blocked, mut next_look) = (BTreeSet::new(), Vec::new(), Instant::now());
    // The NodeClaims the drill caused outside the fallback's pools, read with the blockers: the reclaim waits for them.
    let mut others: Option<Vec<ClaimFacts>> = None;
    loop {
        let current = ctx.derived.borrow_and_update().clone();
        if holds(condition, &current) && (!reclaiming || others.as_ref().is_some_and(Vec::is_empty)) {
            return Ok(StepSuccess::ok(format!("{condition} holds")));
        }
        if may_be_held
            && let Ok(nodes) = ctx.reader.nodes().await
            && let Some((held, zone, down, size)) = held_evictions(&nodes, ctx.on_prem_nodes, Utc::now())
        {
            return Err(held_verdict(&held, &zone, down, size));
        }
        if reclaiming && Instant::now() >= next_look {
            // A failed read leaves them unknown: the wait goes on rather than end on a guess.
            others = super::collateral::awaited(ctx).await.ok();
            blocked = reclaim_blockers(ctx, &mut seen, others.as_deref().unwrap_or_default()).await;
            next_look = Instant::now() + BLOCKERS_EVERY;
            if holds(condition, &current) && others.as_ref().is_some_and(Vec::is_empty) {
                continue;
            }
        }
        let pools = &ctx.drill.spec.targets.fallback.node_pools;
        let why = format!("{}{}", awaited_line(others.as_deref(), pools), blocked_by(&blocked));
        ctx.progress.waiting(&format!("waiting for {condition}: {}{why}", status(condition, &current)));
        let wake = match (may_be_held, reclaiming) {
            (true, _) => deadline.min(Instant::now() + HELD_CHECK_EVERY),
            (_, true) => deadline.min(next_look),
            _ => deadline,
        };
        match tokio::time::timeout_at(wake, ctx.derived.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(StepError::Failed("the drill's monitor stopped".into())),
            Err(_) if Instant::now() < deadline => {}
            Err(_) => {
                return Err(StepError::Timeout {
                    after: timeout,
                    detail: format!(
                        "{condition} never held; last: {}{}{}{}",
                        status(condition, &current),
                        awaited_line(others.as_deref(), pools),
                        blocked_by(&blocked),
                        capacity_cause(ctx, condition)
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{Request, Response};
    use kube::client::Body;

    use super::super::{StepContext, StepError, run_step};
    use crate::cluster::Cluster;
    use crate::domain::RequestsByVerb;
    use crate::monitor::Monitor;
    use crate::progress::Progress;
    use crate::safety::Mutator;
    use crate::safety::journal::Journal;
    use crate::timeline::Timeline;
    use crate::timeline::view::SharedView;
    use crate::timeline::watch::Watches;

    /// Plays an API server with nothing to report: every list is empty, and every watch is held open for its
    /// `timeoutSeconds`, as the API server holds it, then ends without an event, so the client reconnects.
    fn quiet_api_server(handle: tower_test::mock::Handle<Request<Body>, Response<Body>>) {
        tokio::spawn(async move {
            let mut handle = std::pin::pin!(handle);
            while let Some((request, send)) = handle.next_request().await {
                let query = request.uri().query().unwrap_or_default().to_string();
                let param = |key: &str| {
                    query.split('&').find_map(|p| p.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
                };
                if matches!(param("watch"), Some("true" | "1")) {
                    let held = param("timeoutSeconds").and_then(|s| s.parse().ok()).unwrap_or(290);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(held)).await;
                        send.send_response(Response::new(Body::from(Vec::new())));
                    });
                } else {
                    let list = serde_json::json!({"apiVersion": "v1", "kind": "List",
                                                  "metadata": {"resourceVersion": "1"}, "items": []});
                    send.send_response(Response::new(Body::from(list.to_string().into_bytes())));
                }
            }
        });
    }

    /// The requests in `after` that `before` did not hold yet, by verb and resource.
    fn since(before: &RequestsByVerb, after: &RequestsByVerb) -> RequestsByVerb {
        let mut out = RequestsByVerb::new();
        for (verb, resources) in after {
            for (resource, n) in resources {
                let earlier = before.get(verb).and_then(|r| r.get(resource)).copied().unwrap_or(0);
                if *n > earlier {
                    out.entry(verb.clone()).or_default().insert(resource.clone(), n - earlier);
                }
            }
        }
        out
    }

    /// A wait costs the API server nothing but the watches it already holds: five minutes of waiting (on tokio's
    /// paused clock) send one watch reconnect per watch, when the server ends it after its timeoutSeconds, and no
    /// list, get or anything else.
    #[tokio::test(start_paused = true)]
    async fn a_five_minute_wait_sends_no_request_beyond_watch_reconnects() {
        let src = r#"
apiVersion: hybrid-drill.io/v1alpha1
kind: Drill
metadata: {name: t}
spec:
  cluster: {context: mock}
  targets:
    onPrem: {nodes: "node-type=hybrid-gpu"}
    workload: {namespace: inference, selector: "app=llm-inference", restoredWhen: {readyPods: 4}}
    fallback: {nodePool: gpu-fallback}
  steps: [{id: restored, waitFor: workload-restored, timeout: 5m}]
"#;
        let drill = crate::drill::from_source(std::path::Path::new("t.yaml"), src.into()).unwrap().drill;
        let (cluster, handle) = Cluster::mock();
        quiet_api_server(handle);
        let (view, timeline) = (SharedView::default(), Timeline::in_memory());
        let mut watches = Watches::start(&cluster, &drill, &view, &timeline);
        watches.synced(Duration::from_secs(10)).await.unwrap();
        let monitor = Monitor::start(&drill, &view, &timeline);
        // Every watch listed and opened its watch before the wait begins.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let set_up = cluster.requests_by_verb();

        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::create(&dir.path().join("journal.jsonl")).unwrap();
        let mutator = Mutator::new(cluster.clone(), journal, timeline.clone(), "t-run".into());
        let (reader, progress) = (cluster.reader(), Progress::new(true));
        let mut ctx = StepContext {
            reader: &reader,
            drill: &drill,
            view: &view,
            timeline: &timeline,
            mutator: &mutator,
            derived: monitor.derived.clone(),
            progress: &progress,
            on_prem_nodes: &[],
        };
        let started = tokio::time::Instant::now();
        let waited = run_step(&mut ctx, &drill.spec.steps[0]).await;
        assert!(matches!(waited, Err(StepError::Timeout { .. })), "{waited:?}");
        assert_eq!(started.elapsed().as_secs(), 300);

        let during = since(&set_up, &cluster.requests_by_verb());
        assert_eq!(during.keys().collect::<Vec<_>>(), ["watch"], "{during:?}");
        // One reconnect per watch held (two on nodes and on events: on-prem and fallback, namespace and NodeClaims;
        // two on NodeClaims: the fallback's and every other pool's, for the collateral).
        assert_eq!(during["watch"], set_up["watch"], "set up: {set_up:?}");
        assert_eq!(set_up["watch"].values().sum::<u64>(), 8, "{set_up:?}");
        drop(watches);
    }

    /// A node of zone onprem-dc1: Ready, or NotReady since `since` (RFC 3339), perhaps with the NoExecute taint.
    fn node(name: &str, not_ready_since: Option<&str>, tainted: bool) -> k8s_openapi::api::core::v1::Node {
        let ready = match not_ready_since {
            Some(t) => serde_json::json!({"type": "Ready", "status": "Unknown", "lastTransitionTime": t}),
            None => serde_json::json!({"type": "Ready", "status": "True"}),
        };
        let taints = if tainted {
            serde_json::json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}])
        } else {
            serde_json::json!([])
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/region": "onprem", "topology.kubernetes.io/zone": "onprem-dc1"}},
            "spec": {"taints": taints},
            "status": {"conditions": [ready]}
        }))
        .unwrap()
    }

    /// The reclaim's live line agrees with itself: the fallback's count, then the drill's NodeClaims in the fallback
    /// apart from those it caused in other pools, each with its pool and `deleting` once Karpenter deletes it.
    #[test]
    fn the_reclaim_line_tells_the_fallbacks_nodeclaims_from_other_pools() {
        use crate::cluster::collateral::ClaimFacts;
        let claim = |name: &str, pool: &str, capacity: &str, deleting: bool| ClaimFacts {
            name: name.into(),
            node_pool: pool.into(),
            instance_type: Some("g6.12xlarge".into()),
            capacity_type: Some(capacity.into()),
            zone: Some("zone-a".into()),
            node: None,
            created: None,
            gpus: 4,
            deleting,
        };
        let pools = vec!["gpu-fallback".to_string()];
        let derived = crate::monitor::Derived { nodeclaims: 1, fallback_gpus: 4, ..Default::default() };
        let others = [
            claim("gpu-fallback-a", "gpu-fallback", "on-demand", true),
            claim("gpu-spot-b", "gpu-spot", "spot", false),
        ];
        let line = format!(
            "{}{}",
            super::status(crate::drill::WaitCondition::FallbackEmpty, &derived),
            super::awaited_line(Some(&others), &pools)
        );
        assert_eq!(
            line,
            "the fallback still holds 1 NodeClaims (4 GPUs); the drill's NodeClaims in the fallback, not yet gone: \
             gpu-fallback-a (gpu-fallback, g6.12xlarge, on-demand, zone-a, deleting); NodeClaims the drill caused in \
             other NodePools, not yet gone: gpu-spot-b (gpu-spot, g6.12xlarge, spot, zone-a)"
        );
        // Only the other pools' NodeClaims left: the fallback's count is 0 and nothing is listed as in it.
        let empty = crate::monitor::Derived::default();
        let line = format!(
            "{}{}",
            super::status(crate::drill::WaitCondition::FallbackEmpty, &empty),
            super::awaited_line(Some(&others[1..]), &pools)
        );
        assert_eq!(
            line,
            "the fallback still holds 0 NodeClaims (0 GPUs); NodeClaims the drill caused in other NodePools, not yet \
             gone: gpu-spot-b (gpu-spot, g6.12xlarge, spot, zone-a)"
        );
        assert_eq!(super::awaited_line(Some(&[]), &pools), "");
        assert_eq!(super::awaited_line(None, &pools), "");
    }

    #[test]
    fn evictions_are_held_in_a_small_partially_disrupted_zone_only() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:01:00Z").unwrap().with_timezone(&chrono::Utc);
        let lost: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let early = Some("2026-01-01T00:00:00Z");
        // 3 of 4 NotReady for a minute; the first was tainted before the zone crossed the line.
        let nodes = [node("a", early, true), node("b", early, false), node("c", early, false), node("d", None, false)];
        let (held, zone, down, size) = super::held_evictions(&nodes, &lost, now).unwrap();
        assert_eq!(
            (held, zone.as_str(), down, size),
            (vec!["b".to_string(), "c".to_string()], "onprem/onprem-dc1", 3, 4)
        );
        // Not for long enough yet: the taint may still come.
        let just = Some("2026-01-01T00:00:45Z");
        let fresh = [node("a", just, false), node("b", just, false), node("c", just, false), node("d", None, false)];
        assert!(super::held_evictions(&fresh, &lost, now).is_none());
        // All four: a full disruption, tainted at the normal rate.
        let all: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let four = [node("a", early, false), node("b", early, false), node("c", early, false), node("d", early, false)];
        assert!(super::held_evictions(&four, &all, now).is_none());
        // Two of four: a normal zone.
        let two = [node("a", early, false), node("b", early, false), node("c", None, false), node("d", None, false)];
        assert!(super::held_evictions(&two, &lost, now).is_none());
    }
}
