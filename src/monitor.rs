//! What the drill watches for continuously: service availability (ready pods and the HTTP probe), the workload
//! back on-prem, the fallback's readiness, size and emptiness, and the cost guard.

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
    pub available: bool,
    pub back_on_prem: bool,
    pub fallback_ready: bool,
    pub fallback_empty: bool,
    pub fallback_gpus: i64,
    pub nodeclaims: usize,
    pub unscheduled_pods: usize,
    pub pods_on_lost_nodes: usize,
    pub probe_ok: Option<bool>,
}

pub struct Monitor {
    pub derived: watch::Receiver<Derived>,
    /// Set once when a guard trips: the drill must abort and restore.
    pub guard: watch::Receiver<Option<String>>,
    tasks: Vec<JoinHandle<()>>,
    /// Held so a drill without a probe keeps a live (silent) probe channel.
    _no_probe: Option<watch::Sender<Option<bool>>>,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn derive(v: &ClusterView, drill: &Drill, probe_ok: Option<bool>) -> Derived {
    let needed = drill.spec.targets.workload.restored_when.ready_pods as usize;
    let ready_pods = v.ready_pods();
    Derived {
        ready_pods,
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
    }
}

/// Records what changed between two derived states. `fallback_announced` keeps the fallback's readiness to one event
/// per episode (until the fallback is empty again): a rollout onto a ready fallback flips it many times.
fn record_changes(before: &Derived, after: &Derived, timeline: &Timeline, fallback_announced: &mut bool) {
    if after.available != before.available {
        let ready_pods = after.ready_pods;
        timeline.record(if after.available {
            Event::ServiceRestored { ready_pods }
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
        let (probe_tx, probe_rx) = watch::channel::<Option<bool>>(None);
        let mut tasks = Vec::new();
        let no_probe = match drill.spec.targets.workload.restored_when.http.clone() {
            Some(probe) => {
                tasks.push(tokio::spawn(run_probe(probe, probe_tx, timeline.clone())));
                None
            }
            None => Some(probe_tx),
        };
        let initial = view.read(|v| derive(v, drill, *probe_rx.borrow()));
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
            let guards = &drill.spec.guards;
            let mut down_since = (!derived_tx.borrow().available).then(tokio::time::Instant::now);
            let mut fallback_announced = derived_tx.borrow().fallback_ready;
            loop {
                let after = view.read(|v| derive(v, &drill, *probe_rx.borrow()));
                let before = derived_tx.borrow().clone();
                if after != before {
                    record_changes(&before, &after, &timeline, &mut fallback_announced);
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
                    _ = sleep_until(service_deadline) => {
                        let bound = guards.max_service_down.map(|b| humantime::format_duration(b).to_string()).unwrap_or_default();
                        trip(&guard_tx, &timeline, "maxServiceDown", format!("the service has been unavailable for longer than {bound}"));
                        down_since = None;
                    }
                }
            }
        }));
        Monitor { derived, guard, tasks, _no_probe: no_probe }
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

/// Probes the service endpoint forever; `Some(true)` once it has answered as expected enough times in a row.
async fn run_probe(probe: HttpProbe, out: watch::Sender<Option<bool>>, timeline: Timeline) {
    let client = match reqwest::Client::builder().timeout(probe.timeout).build() {
        Ok(c) => c,
        Err(e) => {
            timeline.record(Event::ProbeResult { ok: false, detail: format!("cannot build an HTTP client: {e}") });
            let _ = out.send(Some(false));
            return;
        }
    };
    let mut streak = 0u32;
    let mut last_ok: Option<bool> = None;
    let _ = out.send(Some(false));
    loop {
        let (ok, detail) = match client.get(&probe.url).send().await {
            Ok(resp) if resp.status().as_u16() == probe.expect_status => {
                (true, format!("{} answered {}", probe.url, resp.status().as_u16()))
            }
            Ok(resp) => {
                (false, format!("{} answered {}, expected {}", probe.url, resp.status().as_u16(), probe.expect_status))
            }
            Err(e) => (false, format!("{}: {}", probe.url, crate::cluster::error_chain(&e))),
        };
        if last_ok != Some(ok) {
            timeline.record(Event::ProbeResult { ok, detail });
            last_ok = Some(ok);
        }
        streak = if ok { streak + 1 } else { 0 };
        out.send_if_modified(|v| {
            let now = Some(streak >= probe.consecutive);
            let changed = *v != now;
            *v = now;
            changed
        });
        tokio::time::sleep(probe.interval.max(Duration::from_millis(100))).await;
    }
}
