//! From what Prometheus holds for the drill's span to the users' impact: statistics of each SLI over the drill and
//! per phase, time outside objective and budget burned, requests failed, and when users were served again.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::impact::{PhaseStats, SliImpact, Stats};
use crate::drill::slo::{Bound, ErrorBudget, Sli};
use crate::phases::{Phase, PhaseId};

/// A window of the drill: a phase's name and its span in seconds since the run started.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub name: String,
    pub from: f64,
    pub to: f64,
}

/// The phases that have both ends, as windows.
pub fn windows(phases: &[Phase]) -> Vec<Window> {
    phases
        .iter()
        .filter_map(|p| {
            let (from, to) = (p.from.as_ref()?, p.to.as_ref()?);
            Some(Window { name: p.name.as_str().into(), from: from.t_ms as f64 / 1000.0, to: to.t_ms as f64 / 1000.0 })
        })
        .collect()
}

/// When the fault began, in seconds since the run started: the RTO phase's start.
pub fn t0(phases: &[Phase]) -> Option<f64> {
    let rto = phases.iter().find(|p| p.name == PhaseId::Rto)?;
    Some(rto.from.as_ref()?.t_ms as f64 / 1000.0)
}

/// The points on the range query's grid (0, step, 2 step ... up to `span`), a step Prometheus left out (no series
/// then) as NaN: no data is a fact about the drill, not a gap to close over.
pub fn on_grid(points: &[(f64, f64)], span: f64, step: Duration) -> Vec<(f64, f64)> {
    let step = step.as_secs_f64();
    if step <= 0.0 || span < 0.0 {
        return points.to_vec();
    }
    let mut grid: Vec<(f64, f64)> = (0..=(span / step).floor() as usize).map(|k| (k as f64 * step, f64::NAN)).collect();
    for &(t, v) in points {
        let k = (t / step).round();
        match grid.get_mut(k as usize) {
            Some(slot) if k >= 0.0 && (t - slot.0).abs() < step / 2.0 => *slot = (t, v),
            _ => grid.push((t, v)),
        }
    }
    grid.sort_by(|a, b| a.0.total_cmp(&b.0));
    grid
}

/// One SLI's impact from its points (seconds since the run started, value), `step` apart; a point without a number
/// (see [`on_grid`]) is time with no data.
pub fn sli(sli: &Sli, points: &[(f64, f64)], step: Duration, windows: &[Window], budget: ErrorBudget) -> SliImpact {
    let all = stats(points, sli.objective, step, budget);
    SliImpact {
        name: sli.name.clone(),
        query: sli.query.clone(),
        objective: sli.objective.describe(),
        unit: sli.unit.clone(),
        met: all.seconds_outside_objective == 0.0 && all.seconds_no_data == 0.0,
        whole: all,
        by_phase: windows
            .iter()
            .map(|w| {
                let inside: Vec<(f64, f64)> =
                    points.iter().copied().filter(|(t, _)| *t >= w.from && *t <= w.to).collect();
                PhaseStats { phase: w.name.clone(), stats: stats(&inside, sli.objective, step, budget) }
            })
            .collect(),
        series: points.iter().filter(|(_, v)| v.is_finite()).map(|(t, v)| [round3(*t), round6(*v)]).collect(),
    }
}

fn stats(points: &[(f64, f64)], objective: Bound, step: Duration, budget: ErrorBudget) -> Stats {
    let mut values: Vec<f64> = points.iter().map(|p| p.1).filter(|v| v.is_finite()).collect();
    let no_data = (points.len() - values.len()) as f64 * step.as_secs_f64();
    if values.is_empty() {
        return Stats { seconds_no_data: no_data, ..Stats::default() };
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let outside = values.iter().filter(|v| !objective.holds(**v)).count() as f64 * step.as_secs_f64();
    let bad_time = (1.0 - budget.objective) * budget.window.as_secs_f64();
    Stats {
        samples: n,
        min: Some(round6(values[0])),
        mean: Some(round6(values.iter().sum::<f64>() / n as f64)),
        p99: Some(round6(values[((n as f64 * 0.99).ceil() as usize).clamp(1, n) - 1])),
        max: Some(round6(values[n - 1])),
        seconds_outside_objective: outside,
        seconds_no_data: no_data,
        budget_burned_percent: if bad_time > 0.0 { round6(outside / bad_time * 100.0) } else { 0.0 },
    }
}

/// Seconds from t0 until every SLI that left its objective (or had no data) after t0 was back within it; 0 when none
/// left it; `None` when one never came back.
pub fn served_again(slis: &[(Bound, Vec<(f64, f64)>)], t0: f64) -> Option<f64> {
    let mut latest = 0.0_f64;
    let within = |objective: &Bound, v: f64| v.is_finite() && objective.holds(v);
    for (objective, points) in slis {
        let after: Vec<&(f64, f64)> = points.iter().filter(|(t, _)| *t >= t0).collect();
        let Some(first_bad) = after.iter().position(|(_, v)| !within(objective, *v)) else { continue };
        let back = after[first_bad..].iter().find(|(_, v)| within(objective, *v))?;
        latest = latest.max(back.0 - t0);
    }
    Some(round3(latest))
}

/// Points of a series in seconds since `started`.
pub fn relative(points: &[(f64, f64)], started: DateTime<Utc>) -> Vec<(f64, f64)> {
    let origin = started.timestamp_millis() as f64 / 1000.0;
    points.iter().map(|(t, v)| (t - origin, *v)).collect()
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    fn success() -> Sli {
        Sli { name: "success-ratio".into(), query: "q".into(), objective: Bound::AtLeast(0.99), unit: None }
    }

    #[test]
    fn time_outside_the_objective_and_the_budget_it_burns() {
        let points: Vec<(f64, f64)> =
            (0..10).map(|i| (f64::from(i) * 2.0, if (3..6).contains(&i) { 0.5 } else { 1.0 })).collect();
        let budget = ErrorBudget { objective: 0.999, window: Duration::from_secs(6000) };
        let w = [Window { name: "rto".into(), from: 5.0, to: 9.0 }];
        let impact = sli(&success(), &points, Duration::from_secs(2), &w, budget);
        assert_eq!(impact.whole.seconds_outside_objective, 6.0);
        // 6 s of the 6 s of bad time the budget allows.
        assert_eq!(impact.whole.budget_burned_percent, 100.0);
        assert_eq!((impact.whole.min, impact.whole.max), (Some(0.5), Some(1.0)));
        assert_eq!(impact.by_phase[0].stats.samples, 2);
        assert!(!impact.met);
        assert_eq!(served_again(&[(Bound::AtLeast(0.99), points.clone())], 1.0), Some(11.0));
        assert_eq!(served_again(&[(Bound::AtLeast(0.4), points)], 1.0), Some(0.0));
    }

    #[test]
    fn steps_without_a_series_are_no_data_not_time_within_the_objective() {
        // The SLI at 0..4 s, then nothing from 6 to 10 s (every serving pod gone), back at 12 s.
        let read = [(0.0, 1.0), (2.0, 1.0), (4.0, 1.0), (12.0, 1.0), (14.0, 1.0)];
        let points = on_grid(&read, 14.5, Duration::from_secs(2));
        assert_eq!(points.len(), 8);
        let budget = ErrorBudget { objective: 0.999, window: Duration::from_secs(6000) };
        let w = [Window { name: "rto".into(), from: 5.0, to: 13.0 }];
        let impact = sli(&success(), &points, Duration::from_secs(2), &w, budget);
        assert_eq!((impact.whole.seconds_outside_objective, impact.whole.seconds_no_data), (0.0, 6.0));
        assert_eq!(impact.by_phase[0].stats.seconds_no_data, 6.0);
        assert!(!impact.met, "an SLI with no data for 6 s is not met");
        assert_eq!(impact.series.len(), 5, "no data is left out of the series, not written as a value");
        assert_eq!(served_again(&[(Bound::AtLeast(0.99), points)], 3.0), Some(9.0));
    }
}
