//! The safety nets judged from a run's timeline alone, so a report rebuilt later judges them the same way: each
//! expected alert timed from the fault (t0) and held to its deadline, each warmer checked on the fallback's nodes and
//! credited with the time it saved against what its step takes without it.

use serde::{Deserialize, Serialize};

use crate::drill::Drill;
use crate::drill::nets::{Warmer, WarmerKind};
use crate::timeline::{Event, Observation};
use crate::whatif::measure::{self, PodPath};

/// What the drill proved of its safety nets (report.json's `safety_nets`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SafetyNets {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertCheck>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmers: Vec<WarmerCheck>,
}

impl SafetyNets {
    /// An expected alert missed its deadline: the drill misses its objective.
    pub fn missed(&self) -> bool {
        self.alerts.iter().any(|a| a.verdict.missed())
    }
}

/// One expected alert as the drill saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertCheck {
    pub name: String,
    pub within_seconds: f64,
    pub verdict: AlertVerdict,
    /// Time to detect: from t0 to the alert's `startsAt` (Prometheus's clock, whole seconds at its evaluation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect_seconds: Option<f64>,
    /// From t0 to when the tool first read it in Alertmanager (the tool's clock; one reading interval late at most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_seconds: Option<f64>,
    /// Silenced or inhibited when it fired (by the drill's own silence, usually): it fired, nobody was paged.
    #[serde(default)]
    pub silenced: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlertVerdict {
    /// Fired within its deadline.
    Fired,
    /// Fired, after its deadline.
    Late,
    /// Never fired while the drill ran.
    Missing,
    /// Already firing before the fault and still the same alert: it says nothing of this fault's detection.
    FiringBeforeFault,
    /// The drill injected no fault: nothing to time.
    NotJudged,
}

impl AlertVerdict {
    pub fn missed(self) -> bool {
        matches!(self, AlertVerdict::Late | AlertVerdict::Missing | AlertVerdict::FiringBeforeFault)
    }
}

/// One warmer as the drill found it on the fallback's nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmerCheck {
    pub name: String,
    pub kind: String,
    pub verdict: WarmerVerdict,
    /// What its step took on the fallback, for the slowest replacement pod (its critical path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_seconds: Option<f64>,
    pub without_it_seconds: f64,
    /// `withoutIt` minus what was measured, never below 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_seconds: Option<f64>,
    /// Where the slowest pod ran: `pod on node`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub on: String,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarmerVerdict {
    InEffect,
    NotInEffect,
    /// No replacement pod ran on the fallback: nothing to check it on.
    NotMeasured,
}

/// The safety nets of a run; `None` when the drill declares neither expected alerts nor warmers.
pub fn judge(drill: &Drill, obs: &[Observation]) -> Option<SafetyNets> {
    let spec = &drill.spec;
    if spec.expected_alerts.is_none() && spec.warmers.is_empty() {
        return None;
    }
    let t0 = obs.iter().find(|o| matches!(o.event, Event::FaultInjected { .. }));
    let alerts = spec.expected_alerts.iter().flat_map(|e| &e.alerts).map(|a| alert(a, t0, obs)).collect();
    let pods = measure::measure(obs).map(|m| m.pods).unwrap_or_default();
    let warmers = spec.warmers.iter().map(|w| warmer(w, &pods)).collect();
    Some(SafetyNets { alerts, warmers })
}

/// Prometheus stamps `startsAt` at an evaluation, the tool stamps t0 to the millisecond: a second's grace so an
/// alert that started with the fault is not taken for one that fired before it.
const CLOCK_GRACE_MS: i64 = 1000;

fn alert(expected: &crate::drill::nets::ExpectedAlert, t0: Option<&Observation>, obs: &[Observation]) -> AlertCheck {
    let within = expected.within.as_secs_f64();
    let mut check = AlertCheck {
        name: expected.name.clone(),
        within_seconds: within,
        verdict: AlertVerdict::NotJudged,
        detect_seconds: None,
        seen_seconds: None,
        silenced: false,
        detail: String::new(),
    };
    let Some(t0) = t0 else { return check };
    let sightings: Vec<(&Observation, &Option<chrono::DateTime<chrono::Utc>>, bool, &String)> = obs
        .iter()
        .filter_map(|o| match &o.event {
            Event::ExpectedAlertSeen { alert, starts_at, silenced, detail } if *alert == expected.name => {
                Some((o, starts_at, *silenced, detail))
            }
            _ => None,
        })
        .collect();
    let after_fault = |starts: &Option<chrono::DateTime<chrono::Utc>>, o: &Observation| match starts {
        Some(s) => (*s - t0.received).num_milliseconds() >= -CLOCK_GRACE_MS,
        None => o.t_ms >= t0.t_ms,
    };
    let Some((o, starts, silenced, detail)) = sightings.iter().find(|(o, s, ..)| after_fault(s, o)) else {
        check.verdict = match sightings.first() {
            Some(_) => AlertVerdict::FiringBeforeFault,
            None => AlertVerdict::Missing,
        };
        check.detail = sightings.first().map(|s| s.3.clone()).unwrap_or_default();
        return check;
    };
    let seen = o.t_ms.saturating_sub(t0.t_ms) as f64 / 1000.0;
    let detect = starts.map_or(seen, |s| ((s - t0.received).num_milliseconds().max(0)) as f64 / 1000.0);
    check.verdict = if detect <= within { AlertVerdict::Fired } else { AlertVerdict::Late };
    check.detect_seconds = Some(detect);
    check.seen_seconds = Some(seen);
    check.silenced = *silenced;
    check.detail = (*detail).clone();
    check
}

/// What a warmer's step took for one pod: the pull, the model's download, or the wait for capacity; and whether a
/// new node had to be made for it.
fn step_of(kind: WarmerKind, pod: &PodPath) -> f64 {
    match kind {
        WarmerKind::ImageCache if pod.cached => 0.0,
        WarmerKind::ImageCache => pod.pulled - pod.scheduled,
        WarmerKind::WeightsCache => pod.initialized - pod.pulled,
        WarmerKind::WarmCapacity => pod.scheduled - pod.created,
    }
}

fn warmer(w: &Warmer, pods: &[PodPath]) -> WarmerCheck {
    let without = w.without_it.as_secs_f64();
    let slowest = pods.iter().map(|p| (step_of(w.kind, p), p)).max_by(|a, b| a.0.total_cmp(&b.0));
    let mut check = WarmerCheck {
        name: w.name.clone(),
        kind: w.kind.as_str().into(),
        verdict: WarmerVerdict::NotMeasured,
        measured_seconds: None,
        bound_seconds: w.under.map(|u| u.as_secs_f64()),
        without_it_seconds: without,
        saved_seconds: None,
        on: String::new(),
        detail: "no replacement pod ran on the fallback: nothing to check it on".into(),
    };
    let Some((measured, pod)) = slowest else { return check };
    let measured = (measured.max(0.0) * 10.0).round() / 10.0;
    check.measured_seconds = Some(measured);
    check.on = format!("{} on {}", pod.pod, pod.node);
    let in_effect = match (w.kind, w.under) {
        (WarmerKind::WarmCapacity, _) => pods.iter().all(|p| !p.new_node),
        (_, Some(under)) => measured <= under.as_secs_f64(),
        (_, None) => false,
    };
    check.verdict = if in_effect { WarmerVerdict::InEffect } else { WarmerVerdict::NotInEffect };
    check.saved_seconds = in_effect.then(|| (without - measured).max(0.0));
    let cached = pods.iter().filter(|p| p.cached).count();
    check.detail = match (w.kind, in_effect) {
        (WarmerKind::ImageCache, true) if cached == pods.len() => {
            format!("the image was already present on every fallback node ({} pods)", pods.len())
        }
        (WarmerKind::ImageCache, true) => format!("the slowest pull took {measured:.1}s, within the bound"),
        (WarmerKind::ImageCache, false) => format!(
            "the image was pulled on the fallback node: {measured:.1}s for {} ({cached} of {} pods found it present)",
            check.on,
            pods.len()
        ),
        (WarmerKind::WeightsCache, true) => format!("the slowest model download took {measured:.1}s, within the bound"),
        (WarmerKind::WeightsCache, false) => {
            format!("the model's download took {measured:.1}s for {}, past the bound", check.on)
        }
        (WarmerKind::WarmCapacity, true) => {
            let class = w.priority_class.as_deref().map(|c| format!(" (PriorityClass {c})")).unwrap_or_default();
            format!("every replacement landed on fallback capacity already running{class}: no new NodeClaim waited for")
        }
        (WarmerKind::WarmCapacity, false) => format!(
            "{} of {} replacement pods waited for a new NodeClaim: no placeholder was preempted for them",
            pods.iter().filter(|p| p.new_node).count(),
            pods.len()
        ),
    };
    check
}
