//! What the drill watches for continuously: service availability (ready pods and the HTTP probe), the workload
//! back on-prem, the fallback's readiness, size and emptiness, the last tier serving, and the cost guard.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::drill::{Drill, HttpProbe};
use crate::timeline::view::{ClusterView, SharedView};
use crate::timeline::{Event, NodeRole, Timeline};

/// States derived from the view, each recorded in the timeline when it changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Derived {
    pub ready_pods: usize,
    /// The Ready pods that restore the service now (`readyPods` against the desired replicas).
    pub needed: usize,
    pub available: bool,
    pub back_on_prem: bool,
    pub fallback_ready: bool,
    pub fallback_empty: bool,
    pub fallback_gpus: i64,
    pub nodeclaims: usize,
    pub unscheduled_pods: usize,
    pub pods_on_lost_nodes: usize,
    pub probe_ok: Option<bool>,
    /// When the probe's current run of successes began (ms on the timeline's clock), while it lasts.
    pub probe_streak_since_ms: Option<u64>,
    /// Whether `spec.lastTier` serves, once its probe has answered; `None` without one.
    pub last_tier_serving: Option<bool>,
}

/// What the probe has seen: whether enough successes in a row confirm the criterion, and since when they run.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ProbeState {
    confirmed: bool,
    streak_since_ms: Option<u64>,
}

pub struct Monitor {
    pub derived: watch::Receiver<Derived>,
    /// Set once when a guard trips: the drill must abort and restore.
    pub guard: watch::Receiver<Option<String>>,
    tasks: Vec<JoinHandle<()>>,
    /// Held so a drill without a probe keeps a live (silent) probe channel.
    _no_probe: Option<watch::Sender<Option<ProbeState>>>,
    /// The same for a drill without a last tier.
    _no_last_tier: Option<watch::Sender<Option<bool>>>,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn derive(v: &ClusterView, drill: &Drill, probe: Option<ProbeState>, last_tier: Option<bool>) -> Derived {
    let needed = drill.spec.targets.workload.restored_when.ready_pods.needed(&v.replicas) as usize;
    let ready_pods = v.ready_pods();
    let probe_ok = probe.map(|p| p.confirmed);
    Derived {
        ready_pods,
        needed,
        available: ready_pods >= needed && probe_ok.unwrap_or(true),
        back_on_prem: v.ready_pods_on(NodeRole::OnPrem) >= needed
            && v.pods_off(NodeRole::OnPrem) == 0
            && v.workload_settled(),
        // Between an eviction and the replacement's creation the pods still counted can all sit on the fallback.
        fallback_ready: v.fallback_ready() && v.live_pods().count() >= needed,
        fallback_empty: v.fallback_empty(),
        fallback_gpus: v.fallback_gpus(),
        nodeclaims: v.claims.len(),
        unscheduled_pods: v.unscheduled_pods(),
        pods_on_lost_nodes: v.pods_on_lost_nodes(),
        probe_ok,
        probe_streak_since_ms: probe.and_then(|p| p.streak_since_ms),
        last_tier_serving: last_tier,
    }
}

/// Records what changed between two derived states. `fallback_announced` keeps the fallback's readiness to one event
/// per episode (until the fallback is empty again): a rollout onto a ready fallback flips it many times.
/// `pods_ready_since_ms` is when enough pods last became Ready: with a probe, the service was restored at the later
/// of that and the first success of the probe's confirming run, not when the last success confirmed it.
fn record_changes(
    before: &Derived,
    after: &Derived,
    timeline: &Timeline,
    fallback_announced: &mut bool,
    pods_ready_since_ms: Option<u64>,
) {
    if after.needed != before.needed {
        timeline.record(Event::ReadyPodsNeeded { needed: after.needed as u32 });
    }
    if after.available != before.available {
        let ready_pods = after.ready_pods;
        timeline.record(if after.available {
            let held_since_ms = after.probe_streak_since_ms.map(|p| p.max(pods_ready_since_ms.unwrap_or(0)));
            Event::ServiceRestored { ready_pods, held_since_ms }
        } else {
            Event::ServiceLost { ready_pods }
        });
    }
    if after.back_on_prem && !before.back_on_prem {
        timeline.record(Event::BackOnPrem { ready_pods: after.ready_pods });
    }
    if after.fallback_ready && !before.fallback_ready && !*fallback_announced {
        *fallback_announced = true;
        timeline.record(Event::FallbackReady { nodeclaims: after.nodeclaims });
    }
    if after.fallback_empty && !before.fallback_empty {
        *fallback_announced = false;
        timeline.record(Event::FallbackEmpty);
    }
    if after.fallback_gpus != before.fallback_gpus {
        timeline.record(Event::FallbackGpus { gpus: after.fallback_gpus });
    }
}

impl Monitor {
    /// Starts watching; the current state is the baseline and is not recorded as a change.
    pub fn start(drill: &Drill, view: &SharedView, timeline: &Timeline) -> Monitor {
        let (probe_tx, probe_rx) = watch::channel::<Option<ProbeState>>(None);
        let mut tasks = Vec::new();
        let no_probe = match drill.spec.targets.workload.restored_when.http.clone() {
            Some(probe) => {
                tasks.push(tokio::spawn(run_probe(probe, probe_tx, timeline.clone())));
                None
            }
            None => Some(probe_tx),
        };
        let (tier_tx, tier_rx) = watch::channel::<Option<bool>>(None);
        let no_last_tier = match drill.spec.last_tier.clone() {
            Some(tier) => {
                tasks.push(tokio::spawn(crate::last_tier::probe_forever(tier, tier_tx, timeline.clone())));
                None
            }
            None => Some(tier_tx),
        };
        let initial = view.read(|v| derive(v, drill, *probe_rx.borrow(), *tier_rx.borrow()));
        if !initial.available {
            // Recorded so phases know the service was down from the start, not restored by default.
            timeline.record(Event::ServiceLost { ready_pods: initial.ready_pods });
        }
        let (derived_tx, derived) = watch::channel(initial);
        let (guard_tx, guard) = watch::channel(None);
        let (drill, view, timeline) = (drill.clone(), view.clone(), timeline.clone());
        tasks.push(tokio::spawn(async move {
            let mut changes = view.changes();
            let mut probe_rx = probe_rx;
            let mut tier_rx = tier_rx;
            let guards = &drill.spec.guards;
            let mut down_since = (!derived_tx.borrow().available).then(tokio::time::Instant::now);
            let mut fallback_announced = derived_tx.borrow().fallback_ready;
            let mut pods_ready_since_ms = {
                let d = derived_tx.borrow();
                (d.ready_pods >= d.needed).then_some(0)
            };
            loop {
                let after = view.read(|v| derive(v, &drill, *probe_rx.borrow(), *tier_rx.borrow()));
                let before = derived_tx.borrow().clone();
                if after != before {
                    if after.ready_pods < after.needed {
                        pods_ready_since_ms = None;
                    } else if before.ready_pods < before.needed {
                        pods_ready_since_ms = Some(timeline.elapsed().as_millis() as u64);
                    }
                    record_changes(&before, &after, &timeline, &mut fallback_announced, pods_ready_since_ms);
                    if after.available != before.available {
                        down_since = (!after.available).then(tokio::time::Instant::now);
                    }
                    if let Some(max) = guards.max_fallback_gpus
                        && after.fallback_gpus > max as i64
                    {
                        let message = format!("the fallback holds {} GPUs, above the drill's ceiling of {max}", after.fallback_gpus);
                        trip(&guard_tx, &timeline, "maxFallbackGpus", message);
                    }
                    let _ = derived_tx.send(after);
                }
                let service_deadline = guards.max_service_down.zip(down_since).map(|(bound, since)| since + bound);
                tokio::select! {
                    r = changes.changed() => if r.is_err() { break },
                    r = probe_rx.changed() => if r.is_err() { break },
                    r = tier_rx.changed() => if r.is_err() { break },
                    _ = sleep_until(service_deadline) => {
                        let bound = guards.max_service_down.map(|b| humantime::format_duration(b).to_string()).unwrap_or_default();
                        trip(&guard_tx, &timeline, "maxServiceDown", format!("the service has been unavailable for longer than {bound}"));
                        down_since = None;
                    }
                }
            }
        }));
        Monitor { derived, guard, tasks, _no_probe: no_probe, _no_last_tier: no_last_tier }
    }
}

/// Trips a guard once: the first reason stands.
fn trip(guard: &watch::Sender<Option<String>>, timeline: &Timeline, name: &str, message: String) {
    if guard.borrow().is_none() {
        timeline.record(Event::GuardTripped { guard: name.into(), message: message.clone() });
        let _ = guard.send(Some(format!("guard {name} tripped: {message}")));
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Probes the service endpoint forever; confirmed once it has answered as expected enough times in a row, with the
/// moment the run of successes began.
async fn run_probe(probe: HttpProbe, out: watch::Sender<Option<ProbeState>>, timeline: Timeline) {
    let client = match crate::http::client(probe.timeout) {
        Ok(c) => c,
        Err(e) => {
            timeline.record(Event::ProbeResult { ok: false, detail: format!("cannot build an HTTP client: {e}") });
            let _ = out.send(Some(ProbeState { confirmed: false, streak_since_ms: None }));
            return;
        }
    };
    let mut streak = 0u32;
    let mut streak_since_ms = None;
    let mut last_ok: Option<bool> = None;
    let _ = out.send(Some(ProbeState { confirmed: false, streak_since_ms: None }));
    loop {
        let sent_at_ms = timeline.elapsed().as_millis() as u64;
        let (ok, detail) = match client.get(&probe.url).send().await {
            Ok(resp) => crate::http::judge_answer(&probe.url, resp.status().as_u16(), probe.expect_status),
            Err(e) => (false, format!("{}: {}", probe.url, crate::cluster::error_chain(&e))),
        };
        if last_ok != Some(ok) {
            timeline.record(Event::ProbeResult { ok, detail });
            last_ok = Some(ok);
        }
        streak = if ok { streak + 1 } else { 0 };
        streak_since_ms = match (ok, streak_since_ms) {
            (false, _) => None,
            (true, None) => Some(sent_at_ms),
            (true, since) => since,
        };
        out.send_if_modified(|v| {
            let now = Some(ProbeState { confirmed: streak >= probe.consecutive, streak_since_ms });
            let changed = *v != now;
            *v = now;
            changed
        });
        tokio::time::sleep(probe.interval.max(Duration::from_millis(100))).await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde_json::{Value, json};

    use super::*;
    use crate::timeline::view::{NodeState, PodState};

    fn node(name: &str, ready: &str, gpus: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}, "status": {
            "allocatable": {"nvidia.com/gpu": gpus}, "conditions": [{"type": "Ready", "status": ready}]}}))
        .unwrap()
    }

    fn pod(name: &str, node: Option<&str>, ready: bool) -> Pod {
        let status = if ready { "True" } else { "False" };
        let mut spec = json!({"containers": [{"name": "app", "image": "x"}]});
        if let Some(node) = node {
            spec["nodeName"] = Value::from(node);
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "n", "labels": {"app": "x", "pod-template-hash": "h1"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x-h1", "uid": "u"}]},
            "spec": spec,
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": status}]}
        }))
        .unwrap()
    }

    /// An on-prem node, a fallback node with 4 GPUs, and the workload's pods placed as given.
    fn view(pods: &[(&str, Option<&str>, bool)]) -> ClusterView {
        let mut v = ClusterView::default();
        v.nodes.insert("hybrid-1".into(), NodeState::from_node(&node("hybrid-1", "True", "8"), NodeRole::OnPrem));
        v.nodes.insert("cloud-1".into(), NodeState::from_node(&node("cloud-1", "True", "4"), NodeRole::Fallback));
        for (name, at, ready) in pods {
            v.pods.insert((*name).into(), PodState::from_pod(&pod(name, *at, *ready)));
        }
        v
    }

    /// The phases' test drill: restored with 2 Ready pods.
    fn drill() -> Drill {
        crate::phases::tests::drill()
    }

    #[test]
    fn available_needs_the_ready_pods_and_a_confirmed_probe() {
        let two = view(&[("a", Some("hybrid-1"), true), ("b", Some("cloud-1"), true)]);
        assert!(derive(&two, &drill(), None, None).available);
        let unconfirmed = ProbeState { confirmed: false, streak_since_ms: Some(1) };
        assert!(!derive(&two, &drill(), Some(unconfirmed), None).available, "the probe has not confirmed it yet");
        let one = view(&[("a", Some("hybrid-1"), true), ("b", Some("cloud-1"), false)]);
        assert_eq!(derive(&one, &drill(), None, None).ready_pods, 1);
        assert!(!derive(&one, &drill(), None, None).available);
    }

    #[test]
    fn back_on_prem_needs_every_pod_home_and_the_rollout_settled() {
        let home = view(&[("a", Some("hybrid-1"), true), ("b", Some("hybrid-1"), true)]);
        assert!(derive(&home, &drill(), None, None).back_on_prem);
        let one_away =
            view(&[("a", Some("hybrid-1"), true), ("b", Some("hybrid-1"), true), ("c", Some("cloud-1"), false)]);
        assert!(!derive(&one_away, &drill(), None, None).back_on_prem, "a pod still on the fallback");
        let pending = view(&[("a", Some("hybrid-1"), true), ("b", Some("hybrid-1"), true), ("c", None, false)]);
        assert!(
            !derive(&pending, &drill(), None, None).back_on_prem,
            "a pod still waiting for a node may land anywhere"
        );
    }

    #[test]
    fn the_fallback_is_ready_only_with_enough_pods_counted_and_empty_without_claims_or_nodes() {
        let mut v = view(&[("b", Some("cloud-1"), true)]);
        let claim: crate::cluster::karpenter::NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c1"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}},
            "status": {"nodeName": "cloud-1", "conditions": [{"type": "Initialized", "status": "True"}]}
        }))
        .unwrap();
        v.claims.insert("c1".into(), crate::timeline::view::ClaimState::from_claim(&claim));
        let derived = derive(&v, &drill(), None, None);
        assert!(!derived.fallback_ready, "one pod counted while the drill needs two: a replacement is still to come");
        assert!(!derived.fallback_empty);
        v.pods.insert("a".into(), PodState::from_pod(&pod("a", Some("cloud-1"), true)));
        let derived = derive(&v, &drill(), None, None);
        assert!(derived.fallback_ready);
        assert_eq!((derived.nodeclaims, derived.fallback_gpus), (1, 4));
        let mut gone = view(&[("a", Some("hybrid-1"), true)]);
        gone.nodes.remove("cloud-1");
        assert!(derive(&gone, &drill(), None, None).fallback_empty);
    }

    #[test]
    fn changes_are_recorded_once_and_the_fallback_announced_once_per_episode() {
        let timeline = Timeline::in_memory();
        let mut announced = false;
        let lost = Derived { ready_pods: 1, ..Derived::default() };
        let ready = Derived { fallback_ready: true, nodeclaims: 1, ..lost.clone() };
        record_changes(&lost, &ready, &timeline, &mut announced, None);
        record_changes(&ready, &lost, &timeline, &mut announced, None);
        record_changes(&lost, &ready, &timeline, &mut announced, None);
        let restored = Derived { available: true, ready_pods: 2, probe_streak_since_ms: Some(5_000), ..ready.clone() };
        record_changes(&ready, &restored, &timeline, &mut announced, Some(7_000));
        let events: Vec<Event> = timeline.observations().into_iter().map(|o| o.event).collect();
        assert_eq!(
            events,
            [
                Event::FallbackReady { nodeclaims: 1 },
                // With a probe, restored when the later of the pods' readiness and the probe's streak began.
                Event::ServiceRestored { ready_pods: 2, held_since_ms: Some(7_000) },
            ]
        );
    }
}
