//! Watch-driven waits on the drill's derived states, always bounded by the step's deadline.

use std::time::Duration;

use tokio::time::Instant;

use super::{StepContext, StepError, StepSuccess};
use crate::drill::WaitCondition;
use crate::monitor::Derived;

fn holds(condition: WaitCondition, d: &Derived) -> bool {
    match condition {
        WaitCondition::FallbackReady => d.fallback_ready,
        WaitCondition::WorkloadRestored => d.available,
        WaitCondition::WorkloadOnPrem => d.back_on_prem,
        WaitCondition::FallbackEmpty => d.fallback_empty,
    }
}

/// What the wait is waiting on, in the words an operator watching the terminal needs.
fn status(condition: WaitCondition, d: &Derived, needed: u32) -> String {
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
            format!("fallback still holds {} NodeClaims ({} GPUs)", d.nodeclaims, d.fallback_gpus)
        }
    }
}

pub async fn wait_for(
    ctx: &mut StepContext<'_>,
    condition: WaitCondition,
    deadline: Instant,
    timeout: Duration,
) -> Result<StepSuccess, StepError> {
    let needed = ctx.drill.spec.targets.workload.restored_when.ready_pods;
    loop {
        let current = ctx.derived.borrow_and_update().clone();
        if holds(condition, &current) {
            return Ok(StepSuccess::ok(format!("{condition} holds")));
        }
        ctx.progress.waiting(&format!("waiting for {condition}: {}", status(condition, &current, needed)));
        match tokio::time::timeout_at(deadline, ctx.derived.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(StepError::Failed("the drill's monitor stopped".into())),
            Err(_) => {
                return Err(StepError::Timeout {
                    after: timeout,
                    detail: format!("{condition} never held; last: {}", status(condition, &current, needed)),
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
        // One reconnect per watch held (two on nodes and on events: on-prem and fallback, namespace and NodeClaims).
        assert_eq!(during["watch"], set_up["watch"], "set up: {set_up:?}");
        assert_eq!(set_up["watch"].values().sum::<u64>(), 7, "{set_up:?}");
        drop(watches);
    }
}
