//! The native drain, kubectl drain's semantics: cordon, then evict through the Eviction API exactly the pods the
//! plan listed (the shared selection: no DaemonSet, mirror or protected-namespace pod; finished pods too; bare,
//! orphaned and emptyDir pods only with their flag; pods already Terminating waited for), all nodes at once, pods under one budget one after another. A budget's block is retried
//! the moment the budget's status allows a disruption (watched), with a timer as the safety net, until the step's
//! deadline; throttling after its Retry-After; any other refusal fails the step at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use kube::ResourceExt;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{StepContext, StepError, StepSuccess};
use crate::cluster::budgets::BudgetWatch;
use crate::cluster::drain_selection::{DrainPod, DrainSelection, is_finished, missing_daemonsets};
use crate::drill::DrainAction;
use crate::safety::{Eviction, Mutator, eviction_refusal};
use crate::timeline::{Event, FaultKind};

/// How the eviction of one pod ended.
enum EvictionEnd {
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
    action: &DrainAction,
    deadline: Instant,
    timeout: Duration,
) -> Result<StepSuccess, StepError> {
    let (flags, nodes) = (action.flags, action.chosen(ctx.on_prem_nodes));
    ctx.timeline.record(Event::FaultInjected { step: step.into(), kind: FaultKind::Drain });
    if action.share.is_some() {
        ctx.timeline.record(Event::PartialLoss { nodes: nodes.clone(), of: ctx.on_prem_nodes.len(), lost: false });
    }
    for node in &nodes {
        ctx.mutator.cordon(node).await?;
    }
    let mut by_node = Vec::new();
    for node in &nodes {
        let pods = ctx
            .reader
            .pods_on(node)
            .await
            .map_err(|e| StepError::Failed(format!("cannot list pods on {node}: {e}")))?;
        by_node.push((node, pods));
    }
    let missing = missing_daemonsets(ctx.reader.client(), by_node.iter().flat_map(|(_, pods)| pods))
        .await
        .map_err(|e| StepError::Failed(format!("cannot read the DaemonSets of the pods on the on-prem nodes: {e}")))?;
    let mut selection = DrainSelection::knowing(missing);
    for (node, pods) in by_node {
        selection.add_node(node, pods, &ctx.drill.spec.guards.protected_namespaces, flags);
    }
    // A pod that arrived after the plan (the nodes were not cordoned then) is refused as the plan would have.
    if let Some(why) = selection.refusal(step, flags) {
        return Err(StepError::Failed(why));
    }
    let targets = &selection.evict;
    ctx.progress.waiting(&format!("evicting {} pods from {} nodes", targets.len(), nodes.len()));
    let namespaces: BTreeSet<String> = targets.iter().map(|t| t.pod.namespace().unwrap_or_default()).collect();
    let budgets = ctx.reader.watch_budgets(namespaces.iter().cloned());
    // The budgets' first listing, bounded: it tells which pods share a budget, so that their first evictions take
    // turns; a listing later than that only costs the first evictions their turns.
    let _ = tokio::time::timeout(LISTING_WAIT, budgets.listed(&namespaces)).await;
    let turns = BudgetTurns::default();
    let (stop, stopped) = watch::channel(false);
    let results = join_all(targets.iter().map(|target| {
        let (stop, mut stopped, budgets, turns) = (&stop, stopped.clone(), &budgets, &turns);
        async move {
            let outcome = evict_until_done(ctx.mutator, budgets, turns, target, deadline, &mut stopped).await;
            if matches!(outcome, EvictionEnd::Fatal(_)) {
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
            EvictionEnd::Fatal(why) => fatal.push(format!("eviction of {} failed: {why}", target.name())),
            EvictionEnd::Pending { blocker } => pending.entry(blocker).or_default().push(target.name()),
            EvictionEnd::Evicted | EvictionEnd::Stopped => {}
        }
    }
    if !fatal.is_empty() {
        return Err(StepError::Failed(fatal.join("; ")));
    }
    if !pending.is_empty() {
        return Err(StepError::Timeout { after: timeout, detail: held_by(ctx, &pending) });
    }
    // Pods already Terminating when the drain began are waited for too, as kubectl drain waits for them.
    let leaving: Vec<DrainPod> = targets.iter().chain(&selection.terminating).cloned().collect();
    all_gone(ctx, &leaving, deadline, timeout).await?;
    Ok(StepSuccess::ok(summary(&nodes, &selection)))
}

/// What held the evictions still pending at the timeout. A budget waits on replacements becoming Ready: with no
/// capacity to launch them, the shortage is the cause, named after it.
fn held_by(ctx: &StepContext<'_>, pending: &BTreeMap<String, Vec<String>>) -> String {
    let held = pending
        .iter()
        .map(|(why, pods)| format!("{why} the eviction of {}", pods.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    held + &super::wait::shortage(ctx)
}

/// Waits until every evicted pod is gone, as kubectl drain returns once they are: watch-driven, bounded by the
/// step's deadline.
async fn all_gone(
    ctx: &StepContext<'_>,
    targets: &[DrainPod],
    deadline: Instant,
    timeout: Duration,
) -> Result<(), StepError> {
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
    Ok(())
}

/// What the drain did, what it cost beyond restarts, and what it left alone on purpose.
fn summary(nodes: &[String], selection: &DrainSelection) -> String {
    let finished = selection.evict.iter().filter(|p| is_finished(&p.pod)).count();
    let live = selection.evict.len() - finished;
    let mut message = format!("drained {}: {live} pods evicted", nodes.join(", "));
    if finished > 0 {
        message.push_str(&format!(", {finished} finished pods deleted"));
    }
    if !selection.terminating.is_empty() {
        let names: Vec<String> = selection.terminating.iter().map(DrainPod::name).collect();
        message.push_str(&format!(", waited for {} already Terminating ({})", names.len(), names.join(", ")));
    }
    for p in selection.evict.iter().filter(|p| !p.loss.is_none()) {
        message.push_str(&format!("; {} on {}: {}", p.name(), p.node, p.loss));
    }
    for p in &selection.protected {
        message.push_str(&format!("; left alone (protected namespace): {} on {}", p.name(), p.node));
    }
    message
}

/// How long a blocked eviction waits at most for its budget's watch before asking again anyway: the watch may have
/// missed the change (a gap it has not yet relisted through).
const SAFETY_NET: Duration = Duration::from_secs(10);

/// How long the drain waits for the budgets' first listing before its first evictions.
const LISTING_WAIT: Duration = Duration::from_secs(2);

/// One eviction at a time under each budget. The API server takes an eviction's disruption off its budget by
/// writing the budget's status; of two evictions racing under one budget, the loser's write conflicts and the server
/// tries it again half a second later (the Eviction API's fixed retry), so sent one after the other, each answered
/// in milliseconds, both are done sooner. Pods under no budget, or under several (refused anyway), take no turn.
#[derive(Default)]
struct BudgetTurns(std::sync::Mutex<BTreeMap<(String, String), Turn>>);

/// Held while an eviction under one budget is on its way.
type Turn = Arc<tokio::sync::Mutex<()>>;

impl BudgetTurns {
    fn of(&self, namespace: &str, covering: &[String]) -> Option<Turn> {
        let [budget] = covering else { return None };
        let mut turns = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Some(turns.entry((namespace.to_string(), budget.clone())).or_default().clone())
    }
}

/// Evicts one pod: asks again when a budget that said no allows a disruption (or, unwatched, with backoff), waits out
/// throttling, stops at a final refusal.
async fn evict_until_done(
    mutator: &Mutator,
    budgets: &BudgetWatch,
    turns: &BudgetTurns,
    target: &DrainPod,
    deadline: Instant,
    stopped: &mut watch::Receiver<bool>,
) -> EvictionEnd {
    let (namespace, name) = (target.pod.namespace().unwrap_or_default(), target.pod.name_any());
    let mut backoff = Duration::from_secs(1);
    loop {
        let turn = turns.of(&namespace, &budgets.current().covering(&namespace, target.pod.labels()));
        let my_turn = match &turn {
            Some(turn) => Some(turn.lock().await),
            None => None,
        };
        // The budgets' versions as the request leaves: the refusal was made under a status at least this new.
        let before = budgets.current().versions(&namespace);
        let eviction = match mutator.evict(&namespace, &name, &target.node).await {
            Ok(eviction) => eviction,
            Err(e) => return EvictionEnd::Fatal(e.to_string()),
        };
        drop(my_turn);
        let (wait, watched, last) = match &eviction {
            Eviction::Evicted | Eviction::AlreadyGone => return EvictionEnd::Evicted,
            Eviction::Blocked { pdb, .. } => {
                let names: Vec<String> = pdb.iter().flat_map(|p| p.split(", ")).map(str::to_string).collect();
                let blocker =
                    format!("PodDisruptionBudget {} blocked", pdb.as_deref().unwrap_or("(not found by selector)"));
                let wait = if budgets.current().covers(&namespace, &names) {
                    SAFETY_NET
                } else {
                    let wait = backoff;
                    backoff = (backoff * 2).min(SAFETY_NET);
                    wait
                };
                (wait, names, EvictionEnd::Pending { blocker })
            }
            // Not a budget: the API server is shedding load and says when to come back.
            Eviction::Throttled { retry_after, message } => {
                let blocker = format!("API server throttling (429: {message}) held up");
                (retry_after.unwrap_or(backoff), Vec::new(), EvictionEnd::Pending { blocker })
            }
            Eviction::MultipleBudgets { .. } | Eviction::Refused { .. } => {
                return EvictionEnd::Fatal(eviction_refusal(&eviction));
            }
        };
        let now = Instant::now();
        if now >= deadline {
            return last;
        }
        let budget_allows = async {
            if watched.is_empty() {
                std::future::pending::<()>().await;
            }
            budgets.allowed(&namespace, &watched, &before).await;
        };
        tokio::select! {
            _ = tokio::time::sleep_until(deadline.min(now + wait)) => {
                if now + wait >= deadline {
                    return last;
                }
            }
            _ = budget_allows => {}
            _ = stopped.wait_for(|stop| *stop) => return EvictionEnd::Stopped,
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};
    use tower_test::mock::{Handle, SendResponse};

    use super::*;
    use crate::cluster::Cluster;
    use crate::cluster::drain_selection::Loss;
    use crate::safety::journal::Journal;
    use crate::timeline::Timeline;

    const BUDGETS: &str = "/apis/policy/v1/namespaces/inference/poddisruptionbudgets";

    fn budget(version: &str, allowed: i32) -> Value {
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "llm-inference", "namespace": "inference", "resourceVersion": version},
               "spec": {"maxUnavailable": 2, "selector": {"matchLabels": {"app": "llm-inference"}}},
               "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 4}})
    }

    fn answer(send: SendResponse<Response<Body>>, code: u16, body: &Value) {
        send.send_response(Response::builder().status(code).body(Body::from(body.to_string().into_bytes())).unwrap());
    }

    /// What the Eviction API answers while the budget allows no disruption.
    fn blocked() -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests",
               "message": "Cannot evict pod as it would violate the pod's disruption budget.",
               "details": {"causes": [{"reason": "DisruptionBudget",
                   "message": "The disruption budget llm-inference needs 2 healthy pods and has 2 currently"}]}})
    }

    /// Plays the API server for one blocked pod: lists the budget allowing nothing, refuses the first eviction, then,
    /// if `allow_after_refusal`, answers the budget's watch with a status allowing one disruption at once. Returns
    /// when the eviction is accepted, with the evictions' times since the start.
    async fn play(mut handle: Handle<Request<Body>, Response<Body>>, allow_after_refusal: bool) -> Vec<Duration> {
        let start = Instant::now();
        let (mut evictions, mut held_watches) = (Vec::new(), Vec::new());
        while let Some((request, send)) = handle.next_request().await {
            let uri = request.uri().to_string();
            if uri.starts_with(BUDGETS) && uri.contains("watch=true") {
                // A watch is answered only when the budget changes: until then the connection stays open.
                held_watches.push(send);
            } else if uri.starts_with(BUDGETS) {
                let list = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudgetList",
                                  "metadata": {"resourceVersion": "10"}, "items": [budget("10", 0)]});
                answer(send, 200, &list);
            } else if uri.starts_with("/api/v1/namespaces/inference/pods/gpu-0/eviction") {
                evictions.push(start.elapsed());
                if evictions.len() > 1 {
                    answer(send, 201, &json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}));
                    return evictions;
                }
                answer(send, 429, &blocked());
                if allow_after_refusal {
                    // A replacement turned Ready: the disruption controller's status update, as the watch delivers it.
                    let modified = json!({"type": "MODIFIED", "object": budget("11", 1)}).to_string();
                    let watch = held_watches.pop().expect("the budget is watched before the first eviction");
                    watch.send_response(Response::new(Body::from(modified.into_bytes())));
                }
            } else {
                answer(send, 404, &json!({"kind": "Status", "code": 404, "reason": "NotFound"}));
            }
        }
        panic!("the client went away before the eviction was accepted: {evictions:?}");
    }

    /// Evicts the pod gpu-0 under the lab's budget against [`play`]; returns when each eviction was asked.
    async fn drain_one(allow_after_refusal: bool) -> Vec<Duration> {
        let dir = tempfile::tempdir().unwrap();
        let (cluster, handle) = Cluster::mock();
        let journal = Journal::create(&dir.path().join("journal.jsonl")).unwrap();
        let mutator = Mutator::new(cluster.clone(), journal, Timeline::in_memory(), "drain-1".into());
        let server = tokio::spawn(play(handle, allow_after_refusal));
        let budgets = cluster.reader().watch_budgets(["inference".to_string()]);
        let names = ["llm-inference".to_string()];
        while !budgets.current().covers("inference", &names) {
            tokio::task::yield_now().await;
        }
        let pod = serde_json::from_value(json!({"metadata": {"name": "gpu-0", "namespace": "inference"}})).unwrap();
        let target = DrainPod { pod, node: "hybrid-0".into(), loss: Loss::default() };
        let (_stop, mut stopped) = watch::channel(false);
        let deadline = Instant::now() + Duration::from_secs(600);
        let outcome =
            evict_until_done(&mutator, &budgets, &BudgetTurns::default(), &target, deadline, &mut stopped).await;
        assert!(matches!(outcome, EvictionEnd::Evicted));
        drop((budgets, mutator, cluster));
        server.await.unwrap()
    }

    // Paused time: the clock moves only when every task waits, so a retry at 0 s was not a timer's.
    #[tokio::test(start_paused = true)]
    async fn a_blocked_eviction_is_asked_again_when_its_budget_allows_not_when_a_timer_fires() {
        let asked = drain_one(true).await;
        assert_eq!(asked, [Duration::ZERO, Duration::ZERO], "the retry waited for a timer");
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_status_change_the_timer_is_the_safety_net() {
        let asked = drain_one(false).await;
        assert_eq!(asked, [Duration::ZERO, SAFETY_NET]);
    }

    /// Plays the API server for pods under one budget that allows every eviction: each eviction is answered only once
    /// the client has sent, for a second of paused time, nothing else. Returns what it saw, in order.
    async fn play_unanswered_until_quiet(
        mut handle: Handle<Request<Body>, Response<Body>>,
        pods: usize,
    ) -> Vec<String> {
        let (mut seen, mut held_watches, mut unanswered) = (Vec::new(), Vec::new(), Vec::new());
        let mut evicted = 0;
        loop {
            let Ok(next) = tokio::time::timeout(Duration::from_secs(1), handle.next_request()).await else {
                for (pod, send) in unanswered.drain(..) {
                    seen.push(format!("answered {pod}"));
                    answer(send, 201, &json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}));
                    evicted += 1;
                }
                if evicted == pods {
                    return seen;
                }
                continue;
            };
            let (request, send) = next.expect("the client stays until every pod is evicted");
            let uri = request.uri().to_string();
            if uri.starts_with(BUDGETS) && uri.contains("watch=true") {
                held_watches.push(send);
            } else if uri.starts_with(BUDGETS) {
                let list = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudgetList",
                                  "metadata": {"resourceVersion": "10"}, "items": [budget("10", 2)]});
                answer(send, 200, &list);
            } else if let Some(rest) = uri.strip_prefix("/api/v1/namespaces/inference/pods/") {
                let pod = rest.split('/').next().unwrap_or_default().to_string();
                seen.push(format!("asked {pod}"));
                unanswered.push((pod, send));
            } else {
                answer(send, 404, &json!({"kind": "Status", "code": 404, "reason": "NotFound"}));
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn pods_under_one_budget_are_evicted_one_after_the_other() {
        let dir = tempfile::tempdir().unwrap();
        let (cluster, handle) = Cluster::mock();
        let journal = Journal::create(&dir.path().join("journal.jsonl")).unwrap();
        let mutator = Mutator::new(cluster.clone(), journal, Timeline::in_memory(), "drain-1".into());
        let server = tokio::spawn(play_unanswered_until_quiet(handle, 2));
        let budgets = cluster.reader().watch_budgets(["inference".to_string()]);
        budgets.listed(&BTreeSet::from(["inference".to_string()])).await;
        let targets: Vec<DrainPod> = ["gpu-0", "gpu-1"]
            .map(|name| DrainPod {
                pod: serde_json::from_value(json!({"metadata": {"name": name, "namespace": "inference",
                                                                "labels": {"app": "llm-inference"}}}))
                .unwrap(),
                node: "hybrid-0".into(),
                loss: Loss::default(),
            })
            .into();
        let (turns, deadline) = (BudgetTurns::default(), Instant::now() + Duration::from_secs(600));
        let outcomes = join_all(targets.iter().map(|target| {
            let (mut stopped, budgets, turns, mutator) = (watch::channel(false).1, &budgets, &turns, &mutator);
            async move { evict_until_done(mutator, budgets, turns, target, deadline, &mut stopped).await }
        }))
        .await;
        assert!(outcomes.iter().all(|o| matches!(o, EvictionEnd::Evicted)));
        drop((budgets, mutator, cluster));
        let seen = server.await.unwrap();
        assert_eq!(seen, ["asked gpu-0", "answered gpu-0", "asked gpu-1", "answered gpu-1"], "sent side by side");
    }
}
