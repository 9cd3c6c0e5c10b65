//! The service's last tier (Tier 3) in a run: when it served after the fault, the windows with no tier serving (no
//! Ready pod of the workload and the last tier not answering), and its cost per hour against the cloud GPU fallback.

use super::human_seconds;
use super::service::ReadyPodsSeen;
use crate::drill::{Drill, LastTier};
use crate::phases::last_tier::{ErrorWindow, LastTierOutcome, TierCost};
use crate::timeline::{Event, Observation};

/// The windows listed one by one; past it they are only counted.
const MAX_WINDOWS: usize = 10;

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Replays the Ready pods and the last tier's answers from t0 to the end of the run.
struct Replay {
    t0_ms: u64,
    windows: Vec<ErrorWindow>,
    window_count: usize,
    error_ms: u64,
    served_ms: u64,
    down_since: Option<u64>,
    serving_since: Option<u64>,
}

impl Replay {
    fn step(&mut self, t_ms: u64, ready: usize, serving: bool) {
        let t = t_ms.max(self.t0_ms);
        match (ready == 0 && !serving, self.down_since) {
            (true, None) => {
                self.down_since = Some(t);
                self.window_count += 1;
                if self.windows.len() < MAX_WINDOWS {
                    self.windows.push(ErrorWindow { from_seconds: secs(t - self.t0_ms), to_seconds: None });
                }
            }
            (false, Some(since)) => {
                self.error_ms += t - since;
                self.down_since = None;
                if self.window_count <= MAX_WINDOWS
                    && let Some(w) = self.windows.last_mut()
                {
                    w.to_seconds = Some(secs(t - self.t0_ms));
                }
            }
            _ => {}
        }
        match (serving, self.serving_since) {
            (true, None) => self.serving_since = Some(t),
            (false, Some(since)) => {
                self.served_ms += t - since;
                self.serving_since = None;
            }
            _ => {}
        }
    }

    fn close(&mut self, end_ms: u64) {
        let end = end_ms.max(self.t0_ms);
        self.error_ms += self.down_since.map_or(0, |s| end - s);
        self.served_ms += self.serving_since.map_or(0, |s| end - s);
    }
}

/// The last tier's outcome in a run; `None` for a drill without one, or a run that never reached its fault.
pub fn last_tier(drill: &Drill, observations: &[Observation]) -> Option<LastTierOutcome> {
    let tier = drill.spec.last_tier.as_ref()?;
    let t0 = observations.iter().find(|o| matches!(o.event, Event::FaultInjected { .. }))?;
    let mut seen = ReadyPodsSeen::default();
    let mut serving = false;
    let mut replay = Replay {
        t0_ms: t0.t_ms,
        windows: Vec::new(),
        window_count: 0,
        error_ms: 0,
        served_ms: 0,
        down_since: None,
        serving_since: None,
    };
    let (mut time_to_serve, mut primary_lost, mut stand_in, mut last_failure) = (None, None, None, None);
    for o in observations {
        seen.apply(&o.event);
        if let Event::LastTierProbe { serving: s, detail, stand_in: named } = &o.event {
            serving = *s;
            stand_in = stand_in.or_else(|| named.clone());
            if !s {
                last_failure = Some(detail.clone());
            }
        }
        if o.seq < t0.seq {
            continue;
        }
        if serving && time_to_serve.is_none() {
            time_to_serve = Some(secs(o.t_ms - t0.t_ms));
        }
        if seen.count() == 0 && primary_lost.is_none() {
            primary_lost = Some(secs(o.t_ms - t0.t_ms));
        }
        replay.step(o.t_ms, seen.count(), serving);
    }
    replay.close(observations.last().map_or(t0.t_ms, |o| o.t_ms));
    Some(LastTierOutcome {
        name: tier.name.clone(),
        url: crate::http::service_url(&tier.url).map_or_else(|_| tier.url.clone(), |u| crate::http::bare(&u)),
        stand_in,
        time_to_serve_seconds: time_to_serve,
        primary_lost_seconds: primary_lost,
        error_window_seconds: secs(replay.error_ms),
        error_windows: replay.windows,
        served_seconds: secs(replay.served_ms),
        last_failure: last_failure.filter(|_| time_to_serve.is_none()),
        cost: cost(drill, tier, observations),
    })
}

/// The last tier's price per hour at the drill's traffic, against `fallbackNodes` of the cheapest fallback type.
fn cost(drill: &Drill, tier: &LastTier, observations: &[Observation]) -> Option<TierCost> {
    let (price_per_request, requests_per_hour) = tier.price_per_request.zip(tier.requests_per_hour)?;
    let taken: Vec<&String> = observations
        .iter()
        .filter_map(|o| match &o.event {
            Event::CapacityRemoved { instance_types, .. } => Some(instance_types),
            _ => None,
        })
        .flatten()
        .collect();
    let cheapest = drill
        .spec
        .pricing
        .iter()
        .filter(|(t, _)| taken.is_empty() || taken.contains(t))
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(t, p)| (t.clone(), *p));
    let fallback_per_hour = tier.fallback_nodes.zip(cheapest.as_ref()).map(|(n, (_, p))| f64::from(n) * p);
    Some(TierCost {
        price_per_request,
        requests_per_hour,
        last_tier_per_hour: price_per_request * requests_per_hour,
        fallback_nodes: tier.fallback_nodes,
        fallback_node_per_hour: cheapest.as_ref().map(|c| c.1),
        fallback_instance_type: cheapest.map(|c| c.0),
        fallback_per_hour,
    })
}

impl LastTierOutcome {
    /// The section as lines: each renderer lays them out its own way.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![match &self.name {
            Some(n) => format!("{n} ({})", self.url),
            None => self.url.clone(),
        }];
        if let Some(s) = &self.stand_in {
            out.push(format!("served by a stand-in: {s}; its times are the lab's, not the real last tier's"));
        }
        match self.time_to_serve_seconds {
            Some(t) => out.push(format!("served {} after the fault (t0)", human_seconds(t))),
            None => out.push(format!(
                "never served after the fault: {}",
                self.last_failure.as_deref().unwrap_or("its probe never answered as expected")
            )),
        }
        if let (Some(lost), Some(served)) = (self.primary_lost_seconds, self.time_to_serve_seconds) {
            out.push(format!(
                "no Ready pod of the workload from {}: the gateway failed over {} after that",
                human_seconds(lost),
                human_seconds((served - lost).max(0.0))
            ));
        }
        out.push(self.window_line());
        out.push(format!("the last tier served {} of the run after t0", human_seconds(self.served_seconds)));
        if let Some(c) = &self.cost {
            out.push(c.line());
        }
        out
    }

    fn window_line(&self) -> String {
        if self.error_windows.is_empty() {
            return "error window (no tier serving): none".into();
        }
        let each: Vec<String> = self
            .error_windows
            .iter()
            .map(|w| {
                let to = w.to_seconds.map_or_else(|| "the end".into(), human_seconds);
                format!("{} to {to}", human_seconds(w.from_seconds))
            })
            .collect();
        format!(
            "error window (no tier serving): {} in all, since t0: {}",
            human_seconds(self.error_window_seconds),
            each.join(", ")
        )
    }
}

impl TierCost {
    fn line(&self) -> String {
        let last = format!(
            "cost per hour: last tier ${:.2} ({:.0} requests at ${})",
            self.last_tier_per_hour, self.requests_per_hour, self.price_per_request
        );
        match (self.fallback_per_hour, self.fallback_nodes, &self.fallback_instance_type) {
            (Some(gpu), Some(n), Some(t)) => {
                let per = self.fallback_node_per_hour.unwrap_or_default();
                let verdict = if self.last_tier_per_hour > gpu {
                    format!("the last tier costs {:.1}x the GPUs", self.last_tier_per_hour / gpu)
                } else {
                    "the last tier costs less than the GPUs at this traffic".to_string()
                };
                format!("{last}; cloud GPU fallback ${gpu:.2} ({n} x {t} at ${per:.2}); {verdict}")
            }
            _ => format!(
                "{last}; cloud GPU fallback not priced: give `lastTier.fallbackNodes` and the fallback types' prices \
                 in `pricing`"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;
    use crate::timeline::{FaultKind, NodeRole};

    fn probe(serving: bool) -> Event {
        let stand_in = serving.then(|| "lab stand-in".to_string());
        Event::LastTierProbe { serving, detail: "answered".into(), stand_in }
    }

    #[test]
    fn the_error_window_is_no_ready_pod_and_the_last_tier_not_serving_from_t0() {
        let on = NodeRole::OnPrem;
        let not_ready = |p: &str| Event::PodNotReady { pod: p.into(), node: "h1".into(), role: on };
        let obs = crate::timeline::observations_from(
            sample::base(),
            vec![
                (
                    0.0,
                    None,
                    Event::Baseline {
                        on_prem_nodes: 1,
                        workload_pods: 2,
                        ready_pods: 2,
                        fallback_nodeclaims: 0,
                        fallback_nodes: 0,
                        fallback_gpu_limit: None,
                        on_prem_pods: vec!["a".into(), "b".into()],
                    },
                ),
                (0.5, None, probe(false)),
                (1.0, None, Event::FaultInjected { step: "off".into(), kind: FaultKind::NodeFailure }),
                (3.0, None, not_ready("a")),
                (4.0, None, not_ready("b")),
                (5.5, None, probe(true)),
                (10.0, None, Event::PodReady { pod: "a".into(), node: "h1".into(), role: on, containers: vec![] }),
                (10.5, None, probe(false)),
                (12.0, None, Event::DrillFinished { outcome: crate::domain::Outcome::Passed }),
            ],
        );
        let mut drill = sample::drill();
        drill.spec.last_tier = Some(LastTier {
            name: None,
            url: "http://127.0.0.1:29097/v1/generate".into(),
            expect_status: 200,
            interval: std::time::Duration::from_secs(1),
            timeout: std::time::Duration::from_secs(2),
            price_per_request: Some(0.005),
            requests_per_hour: Some(1000.0),
            fallback_nodes: Some(2),
        });
        let t = last_tier(&drill, &obs).unwrap();
        assert_eq!(t.time_to_serve_seconds, Some(4.5));
        assert_eq!(t.primary_lost_seconds, Some(3.0));
        assert_eq!(t.error_window_seconds, 1.5);
        assert_eq!(t.error_windows, [ErrorWindow { from_seconds: 3.0, to_seconds: Some(4.5) }]);
        assert_eq!(t.served_seconds, 5.0);
        assert_eq!(t.stand_in.as_deref(), Some("lab stand-in"));
        let cost = t.cost.clone().unwrap();
        assert_eq!(cost.last_tier_per_hour, 5.0);
        let text = t.lines().join("\n");
        assert!(text.contains("served by a stand-in: lab stand-in"), "{text}");
        assert!(text.contains("the gateway failed over 1.5s after that"), "{text}");
        assert!(text.contains("error window (no tier serving): 1.5s in all, since t0: 3.0s to 4.5s"), "{text}");
    }
}
