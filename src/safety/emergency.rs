//! The emergency stop, watched: anyone on call annotates the drill's Lease (`hybrid-drill.io/stop=REASON`) and the
//! run holding it, which watches that one Lease from the moment it takes it, aborts and restores. Read-only: the
//! annotation goes with the lock when the run releases it, so it never stops the next drill.

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cluster::lease::{LeaseRef, StopRequest};
use crate::cluster::{Cluster, first_line};
use crate::timeline::{Event, Timeline};

/// The watch on the lock's Lease; stops with the value.
pub struct StopWatch {
    task: JoinHandle<()>,
    pulled: watch::Receiver<Option<StopRequest>>,
}

impl StopWatch {
    /// Watches the Lease (list and watch by its name, granted on it alone) and records the stop in the timeline the
    /// moment it is seen; a watch that fails is said once, as the stop then cannot reach the run.
    pub fn start(cluster: &Cluster, lease: &LeaseRef, timeline: &Timeline) -> StopWatch {
        let api: Api<Lease> = Api::namespaced(cluster.client.clone(), &lease.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", lease.name));
        let (tell, pulled) = watch::channel(None);
        let (timeline, lease) = (timeline.clone(), lease.clone());
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config).default_backoff().applied_objects().boxed();
            let mut warned = false;
            while let Some(item) = stream.next().await {
                match item {
                    Ok(found) => {
                        if let Some(request) = StopRequest::of(&found) {
                            timeline.record(Event::EmergencyStop {
                                reason: request.reason.clone(),
                                by: request.by.clone(),
                                set_at: request.set_at,
                            });
                            let _ = tell.send(Some(request));
                            return;
                        }
                    }
                    Err(e) if !warned => {
                        warned = true;
                        timeline.record(Event::Warning {
                            message: format!(
                                "the emergency stop is not watched ({lease}): {}; grant list and watch on that \
                                 Lease (deploy/lock-role.yaml)",
                                first_line(&e.to_string())
                            ),
                        });
                    }
                    Err(_) => {}
                }
            }
        });
        StopWatch { task, pulled }
    }

    /// Says who stopped the drill and why, once someone has.
    pub async fn pulled(&self) -> StopRequest {
        let mut pulled = self.pulled.clone();
        if let Ok(request) = pulled.wait_for(Option::is_some).await
            && let Some(request) = request.clone()
        {
            return request;
        }
        std::future::pending().await
    }
}

impl Drop for StopWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
