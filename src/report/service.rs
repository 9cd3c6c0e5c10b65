//! The service level a run showed, from the workload's Ready pods as the timeline saw them: the lowest Ready count
//! and the time below target, during the fault and during the return (a second dip).

pub use super::model::{Dip, ServiceLevel};
use super::{counted, human_seconds};
use crate::drill::{Drill, ReadyPods};
use crate::timeline::{Event, Observation};

/// Replays the Ready pods: the baseline's count (its pods unnamed but those on-prem), then every pod event.
#[derive(Default)]
pub(super) struct ReadyPodsSeen {
    ready: std::collections::BTreeSet<String>,
    /// Ready at the baseline without a name the timeline gave.
    unnamed: usize,
    /// Pods counted out once: a pod terminating, then deleted, leaves only once.
    out: std::collections::BTreeSet<String>,
}

impl ReadyPodsSeen {
    pub(super) fn count(&self) -> usize {
        self.ready.len() + self.unnamed
    }

    pub(super) fn apply(&mut self, event: &Event) {
        match event {
            Event::Baseline { ready_pods, on_prem_pods, .. } => {
                self.ready = on_prem_pods.iter().take(*ready_pods).cloned().collect();
                self.unnamed = ready_pods.saturating_sub(self.ready.len());
            }
            Event::PodReady { pod, .. } => {
                self.out.remove(pod);
                self.ready.insert(pod.clone());
            }
            Event::PodNotReady { pod, .. } | Event::PodTerminating { pod, .. } | Event::PodDeleted { pod, .. } => {
                if self.ready.remove(pod) {
                    self.out.insert(pod.clone());
                } else if self.unnamed > 0 && self.out.insert(pod.clone()) {
                    self.unnamed -= 1;
                }
            }
            // The monitor's own count where it judged availability: what a replay without names cannot know.
            Event::ServiceLost { ready_pods }
            | Event::ServiceRestored { ready_pods, .. }
            | Event::BackOnPrem { ready_pods } => {
                self.unnamed = ready_pods.saturating_sub(self.ready.len());
            }
            _ => {}
        }
    }
}

/// A window being measured: its lowest count, and when the count went below target.
struct Window {
    dip: Dip,
    below_since: Option<u64>,
}

impl Window {
    fn open(count: usize, needed: usize, t_ms: u64) -> Window {
        let below = count < needed;
        Window {
            dip: Dip { lowest_ready: count, needed, seconds_below: 0.0, dips: usize::from(below) },
            below_since: below.then_some(t_ms),
        }
    }

    fn observe(&mut self, count: usize, needed: usize, t_ms: u64) {
        if count < self.dip.lowest_ready || (count == self.dip.lowest_ready && needed > self.dip.needed) {
            self.dip.lowest_ready = count;
            self.dip.needed = needed;
        }
        match (count < needed, self.below_since) {
            (true, None) => {
                self.below_since = Some(t_ms);
                self.dip.dips += 1;
            }
            (false, Some(since)) => {
                self.dip.seconds_below += t_ms.saturating_sub(since) as f64 / 1000.0;
                self.below_since = None;
            }
            _ => {}
        }
    }

    fn close(mut self, t_ms: u64) -> Dip {
        if let Some(since) = self.below_since {
            self.dip.seconds_below += t_ms.saturating_sub(since) as f64 / 1000.0;
        }
        self.dip.seconds_below = (self.dip.seconds_below * 1000.0).round() / 1000.0;
        self.dip
    }
}

/// The pods needed Ready before the timeline says: the drill's count, else the pods Ready at the baseline.
fn needed_at_start(drill: &Drill, observations: &[Observation]) -> usize {
    let baseline = observations.iter().find_map(|o| match &o.event {
        Event::Baseline { ready_pods, .. } => Some(*ready_pods),
        _ => None,
    });
    match drill.spec.targets.workload.restored_when.ready_pods {
        ReadyPods::Count(n) => n as usize,
        ReadyPods::Share(_) => baseline.unwrap_or(1),
    }
}

/// The service level of a run; `None` for a run with no fault (refused, or stopped before it).
pub fn service_level(drill: &Drill, observations: &[Observation]) -> Option<ServiceLevel> {
    let t0 = observations.iter().position(|o| matches!(o.event, Event::FaultInjected { .. }))?;
    let mut needed = needed_at_start(drill, observations);
    let mut seen = ReadyPodsSeen::default();
    // A run recorded before the baseline was: the service is taken as whole until the timeline says otherwise.
    if !observations.iter().any(|o| matches!(o.event, Event::Baseline { .. })) {
        seen.unnamed = needed;
    }
    let mut ready_before = None;
    let mut fault: Option<Window> = None;
    let mut back: Option<(Dip, Option<Window>)> = None;
    let end = observations.last().map_or(0, |o| o.t_ms);
    for (i, o) in observations.iter().enumerate() {
        seen.apply(&o.event);
        match &o.event {
            Event::ReplicasAtFault { ready_pods_needed, .. } => needed = *ready_pods_needed as usize,
            Event::ReadyPodsNeeded { needed: n } => needed = *n as usize,
            _ => {}
        }
        if i < t0 {
            continue;
        }
        if i == t0 {
            ready_before = Some(seen.count());
            fault = Some(Window::open(seen.count(), needed, o.t_ms));
        }
        if matches!(o.event, Event::ReturnStarted { .. })
            && let Some(w) = fault.take()
        {
            back = Some((w.close(o.t_ms), Some(Window::open(seen.count(), needed, o.t_ms))));
        }
        let current = match &mut back {
            Some((_, w)) => w.as_mut(),
            None => fault.as_mut(),
        };
        if let Some(w) = current {
            w.observe(seen.count(), needed, o.t_ms);
        }
    }
    let (fault, back) = match back {
        Some((fault, w)) => (Some(fault), w.map(|w| w.close(end))),
        None => (fault.map(|w| w.close(end)), None),
    };
    Some(ServiceLevel { ready_before: ready_before.unwrap_or_default(), fault, back })
}

/// `as few as 3 of the 4 pods needed Ready, below target for 1m 02.0s`, or `never below the 4 pods needed Ready`.
pub fn dip_words(d: &Dip) -> String {
    if !d.dipped() {
        return format!("never below the {} needed Ready", counted(d.needed, "pod"));
    }
    let lowest = match d.lowest_ready {
        0 => format!("no pod Ready (down; {} needed)", d.needed),
        n => format!("as few as {n} of the {} needed Ready (degraded, still serving)", counted(d.needed, "pod")),
    };
    let times = if d.dips > 1 { format!(" in {} dips", d.dips) } else { String::new() };
    format!("{lowest}, below target for {}{times}", human_seconds(d.seconds_below))
}

/// One line per window: `during the fault: ...`, `during the return: ...`.
pub fn sentences(s: &ServiceLevel) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(d) = &s.fault {
        lines.push(format!("during the fault: {}", dip_words(d)));
    }
    if let Some(d) = &s.back {
        let again = if d.dipped() { " (a second dip)" } else { "" };
        lines.push(format!("during the return{again}: {}", dip_words(d)));
    }
    lines
}

/// The notable-event line of a change of availability, with the pods needed beside the pods Ready: `3 pods Ready`
/// alone reads as an outage when 3 of 4 still serve.
pub fn availability_words(event: &Event, needed: usize) -> Option<String> {
    Some(match event {
        Event::ServiceLost { ready_pods: 0 } => format!("service down: no pod Ready ({needed} needed)"),
        Event::ServiceLost { ready_pods } if *ready_pods < needed => {
            format!("service below target: {ready_pods} of the {needed} pods needed Ready (degraded, still serving)")
        }
        Event::ServiceLost { ready_pods } => {
            format!("service below target: {ready_pods} pods Ready ({needed} needed) but the probe failing")
        }
        _ => return None,
    })
}

/// The pods needed Ready as the timeline has it at each observation, for wording events one by one.
pub struct Needed(usize);

impl Needed {
    pub fn start(drill: Option<&Drill>, observations: &[Observation]) -> Needed {
        Needed(match drill {
            Some(d) => needed_at_start(d, observations),
            None => observations
                .iter()
                .find_map(|o| match &o.event {
                    Event::Baseline { ready_pods, .. } => Some(*ready_pods),
                    _ => None,
                })
                .unwrap_or(1),
        })
    }

    /// The count after `event`.
    pub fn after(&mut self, event: &Event) -> usize {
        match event {
            Event::ReplicasAtFault { ready_pods_needed, .. } => self.0 = *ready_pods_needed as usize,
            Event::ReadyPodsNeeded { needed } => self.0 = *needed as usize,
            _ => {}
        }
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;
    use crate::timeline::{ConditionStatus, NodeRole};

    #[test]
    fn the_sample_drain_went_down_to_no_pod_during_the_fault_and_held_during_the_return() {
        let s = service_level(&sample::drill(), &sample::timeline()).unwrap();
        let fault = s.fault.as_ref().unwrap();
        assert_eq!((fault.lowest_ready, fault.needed, fault.dips), (0, 1, 1));
        assert!((fault.seconds_below - 10.9).abs() < 1e-9, "{fault:?}");
        let back = s.back.as_ref().unwrap();
        assert!(!back.dipped(), "{back:?}");
        let lines = sentences(&s);
        assert!(lines[0].contains("no pod Ready (down; 1 needed), below target for 10.9s"), "{lines:?}");
        assert_eq!(lines[1], "during the return: never below the 1 pod needed Ready");
    }

    #[test]
    fn three_of_four_is_degraded_not_down_and_a_second_dip_in_the_return_is_measured() {
        let on = NodeRole::OnPrem;
        let pod = |p: &str| p.to_string();
        let obs = crate::timeline::observations_from(
            sample::base(),
            vec![
                (
                    0.0,
                    None,
                    Event::Baseline {
                        on_prem_nodes: 4,
                        workload_pods: 4,
                        ready_pods: 4,
                        fallback_nodeclaims: 0,
                        fallback_nodes: 0,
                        fallback_gpu_limit: None,
                        on_prem_pods: ["a", "b", "c", "d"].map(pod).to_vec(),
                    },
                ),
                (1.0, None, Event::FaultInjected { step: "cut".into(), kind: crate::timeline::FaultKind::Drain }),
                (1.0, None, Event::ReplicasAtFault { desired_replicas: Some(4), ready_pods_needed: 4 }),
                (2.0, None, Event::PodNotReady { pod: pod("a"), node: "h1".into(), role: on }),
                (2.0, None, Event::ServiceLost { ready_pods: 3 }),
                (2.5, None, Event::PodDeleted { pod: pod("a"), node: "h1".into(), role: on }),
                (7.0, None, Event::PodReady { pod: pod("e"), node: "f1".into(), role: on, containers: vec![] }),
                (10.0, None, Event::ReturnStarted { step: "return".into() }),
                (11.0, None, Event::PodTerminating { pod: pod("e"), node: "f1".into(), role: on }),
                (11.5, None, Event::PodNotReady { pod: pod("b"), node: "h2".into(), role: on }),
                (13.0, None, Event::PodReady { pod: pod("f"), node: "h1".into(), role: on, containers: vec![] }),
                (14.0, None, Event::PodReady { pod: pod("g"), node: "h2".into(), role: on, containers: vec![] }),
                (15.0, None, Event::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 1 }),
            ],
        );
        let s = service_level(&sample::drill(), &obs).unwrap();
        assert_eq!(s.ready_before, 4);
        let fault = s.fault.unwrap();
        assert_eq!((fault.lowest_ready, fault.needed, fault.dips), (3, 4, 1));
        assert!((fault.seconds_below - 5.0).abs() < 1e-9, "{fault:?}");
        assert!(dip_words(&fault).starts_with("as few as 3 of the 4 pods needed Ready (degraded, still serving)"));
        let back = s.back.unwrap();
        assert_eq!((back.lowest_ready, back.dips), (2, 1));
        assert!((back.seconds_below - 3.0).abs() < 1e-9, "{back:?}");
        let lost = availability_words(&Event::ServiceLost { ready_pods: 3 }, 4).unwrap();
        assert!(!lost.contains("unavailable") && lost.contains("3 of the 4 pods needed Ready"), "{lost}");
    }
}
