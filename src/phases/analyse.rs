//! Cuts the phases of a drill out of its timeline: each row of the phase table the drill shows, evaluated on the
//! moments found once, with its verdict against the drill's objective.

use super::cost::fallback_usage;
use super::definitions::{MILESTONES, PHASES};
use serde::{Deserialize, Serialize};

use super::cost::FallbackUsage;
use super::model::{Boundary, Phase, Verdict};
use super::moments::Moments;
use super::startup::{self, Startup};
use crate::domain::PhaseId;
use crate::drill::Drill;
use crate::timeline::{Event, Observation};

/// What the timeline of one drill comes to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub phases: Vec<Phase>,
    /// The key moments of the drill in the order they happened.
    pub milestones: Vec<Boundary>,
    pub fallback: FallbackUsage,
    pub objectives_missed: Vec<PhaseId>,
    /// The workload's pods on the fallback, pod by pod.
    pub startup: Startup,
}

impl Analysis {
    pub fn phase(&self, id: PhaseId) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == id)
    }
}

#[cfg(test)]
thread_local! {
    /// How many timelines this thread analysed: a run's finish analyses once (`record::seal`'s test counts).
    pub(crate) static ANALYSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The objective the drill sets for a phase, in seconds. The one place objectives are looked up.
fn objective(drill: &Drill, id: PhaseId) -> Option<f64> {
    drill.spec.objectives.get(id).map(|d| d.as_secs_f64()).or_else(|| super::gpu_fault::implied_objective(drill, id))
}

/// Who recorded the timeline: a drill's own watches from before its fault, or `hybrid-drill watch` meeting a real
/// incident, where a moment not seen may have passed before the watch looked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recorder {
    Drill,
    Incident,
}

impl Recorder {
    fn of(obs: &[Observation]) -> Recorder {
        match obs.iter().any(|o| matches!(o.event, Event::IncidentOpened { .. })) {
            true => Recorder::Incident,
            false => Recorder::Drill,
        }
    }

    /// How a phase end it did not see is told.
    fn unseen(self) -> &'static str {
        match self {
            Recorder::Drill => "not observed",
            Recorder::Incident => "unknown: not observed by the watch",
        }
    }
}

pub(super) fn phase(
    id: PhaseId,
    from: Option<Boundary>,
    to: Option<Boundary>,
    objective: Option<f64>,
    recorder: Recorder,
) -> Phase {
    let mut note = None;
    let mut reversed = false;
    let seconds = match (&from, &to) {
        (Some(f), Some(t)) if t.t_ms >= f.t_ms => Some((t.t_ms - f.t_ms) as f64 / 1000.0),
        (Some(f), Some(t)) => {
            // A clamp to zero would pass any objective; the report says what it saw instead.
            reversed = true;
            note = Some(format!(
                "inconsistent: its end ({}, {}) was observed before its start ({}, {}); no duration is claimed",
                t.label,
                t.received.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                f.label,
                f.received.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ));
            None
        }
        _ => None,
    };
    let server_seconds = match (from.as_ref().and_then(|b| b.server_time), to.as_ref().and_then(|b| b.server_time)) {
        (Some(f), Some(t)) => Some((t - f).num_seconds()),
        _ => None,
    };
    let verdict = match (seconds, objective) {
        _ if reversed => Verdict::Inconsistent,
        (None, _) => Verdict::Incomplete,
        (Some(_), None) => Verdict::NoObjective,
        (Some(s), Some(o)) if s <= o => Verdict::Met,
        (Some(_), Some(_)) => Verdict::Missed,
    };
    if seconds.is_none() && !reversed {
        let missing = if from.is_none() { "start" } else { "end" };
        note = Some(format!("{missing} {}", recorder.unseen()));
    }
    Phase {
        name: id,
        parent: id.parent(),
        from,
        to,
        seconds,
        server_seconds,
        objective_seconds: objective,
        verdict,
        note,
    }
}

/// Cuts the phases of a drill out of its timeline: every row of the phase table the drill shows, evaluated on the
/// moments found once.
pub fn analyse(drill: &Drill, obs: &[Observation]) -> Analysis {
    #[cfg(test)]
    ANALYSED.with(|n| n.set(n.get() + 1));
    let moments = Moments::new(obs);
    let recorder = Recorder::of(obs);
    let phases: Vec<Phase> = PHASES
        .iter()
        .filter(|d| moments.shows(d.shown, drill))
        .map(|d| {
            let mut p = phase(d.id, moments.find(d.from), moments.find(d.to), objective(drill, d.id), recorder);
            if let Some(extra) = moments.extra_note(d.id, drill) {
                p.note = Some(match p.note {
                    Some(n) => format!("{n}; {extra}"),
                    None => extra,
                });
            }
            p
        })
        .collect();
    let mut milestones: Vec<Boundary> = MILESTONES
        .iter()
        .filter_map(|&(bound, key)| moments.find(bound).map(|b| Boundary { key: Some(key), ..b }))
        .collect();
    milestones.sort_by_key(|m| m.seq);
    let objectives_missed = phases.iter().filter(|p| p.misses_objective()).map(|p| p.name).collect();
    let startup = startup::per_pod(obs, moments.t0_seq, moments.restored_seq.saturating_add(1));
    Analysis { phases, milestones, fallback: fallback_usage(drill, obs, moments.t0_seq), objectives_missed, startup }
}
