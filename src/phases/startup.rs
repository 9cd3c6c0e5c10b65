//! The startup of the workload's pods on the fallback, pod by pod: the image pull (or a cached image), each init
//! container, the container start and the model load, cut on the server's clock so each pod's parts add up to its
//! startup, from its scheduling to its Ready.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::moments::Moments;
use crate::timeline::{ContainerStart, Event, NodeRole, Observation};

/// The workload's pods that became Ready on the fallback before the service was restored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Startup {
    pub pods: Vec<PodStartup>,
    /// The pod whose startup took longest, and how much longer it took than the quickest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_seconds: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodStartup {
    pub pod: String,
    pub node: String,
    /// From the pod's scheduling to its Ready, on the server's clock (whole seconds where the kubelet reports those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Consecutive parts, each from the end of the one before: they add up to `seconds`.
    pub parts: Vec<StartupPart>,
    /// The image was already on the node: no pull.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub image_cached: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartupPart {
    pub name: String,
    pub seconds: f64,
}

/// Every pod that became Ready on a fallback node between `after` and `before` (sequence numbers), with its parts.
pub fn per_pod(obs: &[Observation], after: u64, before: u64) -> Startup {
    let in_window = |o: &&Observation| o.seq > after && o.seq < before;
    let moments = PodMoments::of(obs);
    let mut pods: Vec<PodStartup> = obs
        .iter()
        .filter(in_window)
        .filter_map(|o| match &o.event {
            Event::PodReady { pod, node, role: NodeRole::Fallback, containers } => {
                Some(one_pod(&moments, pod, node, containers, o))
            }
            _ => None,
        })
        .collect();
    pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    let timed: Vec<&PodStartup> = pods.iter().filter(|p| p.seconds.is_some()).collect();
    let slowest = timed.iter().max_by(|a, b| a.seconds.partial_cmp(&b.seconds).unwrap_or(std::cmp::Ordering::Equal));
    let quickest = timed.iter().min_by(|a, b| a.seconds.partial_cmp(&b.seconds).unwrap_or(std::cmp::Ordering::Equal));
    let spread_seconds = slowest.zip(quickest).and_then(|(s, q)| Some(s.seconds? - q.seconds?));
    let slowest = slowest.map(|p| p.pod.clone());
    Startup { pods, slowest, spread_seconds }
}

/// A moment of a pod's start: the object's own time when it has one, else when the tool saw it.
fn at(o: &Observation) -> DateTime<Utc> {
    o.server_time.unwrap_or(o.received)
}

/// The kubelet's event for this pod with this reason, the first or the last of them.
pub fn pod_event<'a>(obs: &'a [Observation], pod: &str, reason: &str, last: bool) -> Option<&'a Observation> {
    let object = format!("Pod/{pod}");
    let mut matching = obs
        .iter()
        .filter(|o| matches!(&o.event, Event::KubeEvent { object: ob, reason: r, .. } if *ob == object && r == reason));
    if last { matching.next_back() } else { matching.next() }
}

/// Each pod's first scheduling, first `Pulling` and last `Pulled` event, read in one pass: a long timeline holds
/// hundreds of pods, and scanning it once per pod grows with their product.
#[derive(Default)]
struct PodMoments<'a> {
    scheduled: HashMap<&'a str, DateTime<Utc>>,
    pulling: HashMap<&'a str, &'a Observation>,
    pulled: HashMap<&'a str, &'a Observation>,
}

impl<'a> PodMoments<'a> {
    fn of(obs: &'a [Observation]) -> PodMoments<'a> {
        let mut m = PodMoments::default();
        for o in obs {
            match &o.event {
                Event::PodScheduled { pod, .. } => {
                    m.scheduled.entry(pod.as_str()).or_insert_with(|| at(o));
                }
                Event::KubeEvent { object, reason, .. } => {
                    let Some(pod) = object.strip_prefix("Pod/") else { continue };
                    match reason.as_str() {
                        "Pulling" => {
                            m.pulling.entry(pod).or_insert(o);
                        }
                        "Pulled" => {
                            m.pulled.insert(pod, o);
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        m
    }
}

fn one_pod(
    moments: &PodMoments<'_>,
    pod: &str,
    node: &str,
    containers: &[ContainerStart],
    ready: &Observation,
) -> PodStartup {
    let scheduled = moments.scheduled.get(pod).copied();
    let pulling = moments.pulling.get(pod).map(|o| at(o));
    let pulled = moments.pulled.get(pod).copied();
    let image_cached = pulling.is_none()
        && pulled.is_some_and(
            |o| matches!(&o.event, Event::KubeEvent { message, .. } if message.contains("already present")),
        );
    // The moments in the order a kubelet passes them; a part runs from the moment before it to its own.
    let mut marks: Vec<(String, Option<DateTime<Utc>>)> = Vec::new();
    if pulling.is_some() {
        marks.push(("waiting for the pull".into(), pulling));
    }
    let pull = if image_cached { "image (cached)" } else { "image pull" };
    marks.push((pull.into(), pulled.map(at)));
    for init in containers.iter().filter(|c| c.init) {
        marks.push((format!("init {}", init.name), init.finished));
    }
    let started = containers.iter().filter(|c| !c.init).filter_map(|c| c.started).max();
    marks.push(("container start".into(), started));
    marks.push(("model load".into(), Some(at(ready))));
    let mut parts = Vec::new();
    let mut previous = scheduled;
    for (name, moment) in marks {
        // A moment the kubelet did not report merges into the next part.
        let Some(moment) = moment else { continue };
        if let Some(from) = previous {
            parts.push(StartupPart { name, seconds: (moment - from).num_milliseconds() as f64 / 1000.0 });
        }
        previous = Some(moment);
    }
    let seconds = scheduled.map(|s| (at(ready) - s).num_milliseconds() as f64 / 1000.0);
    PodStartup { pod: pod.into(), node: node.into(), seconds, parts, image_cached }
}

impl<'a> Moments<'a> {
    /// That pod's own pull (its `Pulling`, or its `Pulled` "already present" for a cached image), never another's.
    pub(super) fn image_pull_started(&self) -> Option<&'a Observation> {
        let pod = self.last_ready_pod()?;
        let obs = self.scan.obs;
        pod_event(obs, pod, "Pulling", false)
            .or_else(|| pod_event(obs, pod, "Pulled", false))
            .filter(|o| o.seq > self.t0_seq && o.seq < self.restored_seq)
    }

    pub(super) fn image_pulled(&self) -> Option<&'a Observation> {
        let pod = self.last_ready_pod()?;
        pod_event(self.scan.obs, pod, "Pulled", true).filter(|o| o.seq > self.t0_seq && o.seq < self.restored_seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Event as E;

    fn timeline(events: Vec<(f64, Option<i64>, E)>) -> Vec<Observation> {
        let base = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        crate::timeline::observations_from(base, events)
    }

    fn kubelet(pod: &str, reason: &str, message: &str) -> E {
        E::KubeEvent { object: format!("Pod/{pod}"), reason: reason.into(), message: message.into() }
    }

    fn at_second(s: i64) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(1_767_225_600 + s, 0)
    }

    #[test]
    fn each_pod_is_cut_into_parts_that_add_up_and_events_of_other_pods_are_not_mixed_in() {
        let fb = NodeRole::Fallback;
        let containers = |init_done: i64, started: i64| {
            vec![
                ContainerStart {
                    name: "model-download".into(),
                    init: true,
                    started: at_second(init_done - 40),
                    finished: at_second(init_done),
                },
                ContainerStart { name: "server".into(), init: false, started: at_second(started), finished: None },
            ]
        };
        let events = vec![
            (10.0, Some(10), E::PodScheduled { pod: "a".into(), node: "f1".into(), role: fb }),
            (10.1, Some(10), E::PodScheduled { pod: "b".into(), node: "f1".into(), role: fb }),
            (11.0, Some(11), kubelet("a", "Pulling", "Pulling image \"llm\"")),
            // Another workload's pull in the same namespace, unpaired: not this startup's.
            (12.0, Some(12), kubelet("other", "Pulling", "Pulling image \"x\"")),
            (12.0, Some(10), kubelet("b", "Pulled", "Container image \"llm\" already present on machine")),
            (161.0, Some(161), kubelet("a", "Pulled", "Successfully pulled image \"llm\" in 2m30s")),
            (
                206.0,
                Some(206),
                E::PodReady { pod: "b".into(), node: "f1".into(), role: fb, containers: containers(55, 58) },
            ),
            (
                300.0,
                Some(300),
                E::PodReady { pod: "a".into(), node: "f1".into(), role: fb, containers: containers(206, 209) },
            ),
        ];
        let s = per_pod(&timeline(events), 0, u64::MAX);
        assert_eq!(s.pods.len(), 2);
        let a = &s.pods[0];
        let names: Vec<(&str, f64)> = a.parts.iter().map(|p| (p.name.as_str(), p.seconds)).collect();
        assert_eq!(
            names,
            [
                ("waiting for the pull", 1.0),
                ("image pull", 150.0),
                ("init model-download", 45.0),
                ("container start", 3.0),
                ("model load", 91.0)
            ]
        );
        assert_eq!(a.seconds, Some(290.0));
        assert_eq!(a.parts.iter().map(|p| p.seconds).sum::<f64>(), 290.0);
        let b = &s.pods[1];
        assert!(b.image_cached);
        assert_eq!(b.parts[0].name, "image (cached)");
        assert_eq!(b.parts.iter().map(|p| p.seconds).sum::<f64>(), b.seconds.unwrap());
        assert_eq!((s.slowest.as_deref(), s.spread_seconds), (Some("a"), Some(94.0)));
    }
}
