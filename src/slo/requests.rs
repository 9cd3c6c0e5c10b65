//! The requests of the drill and of each phase, counted by Prometheus: `sum(increase(counter[window]))` evaluated at
//! each window's end. Prometheus takes the increase per series, so a pod's series that leaves the sum (the pod
//! evicted) only stops adding, where a client-side increase of the sum would read the drop as a counter reset.

use chrono::{DateTime, Utc};

use super::impact::Window;
use crate::domain::impact::{PhaseRequests, RequestImpact};
use crate::drill::counter::increase;
use crate::drill::slo::{ErrorBudget, RequestCounters};
use crate::prometheus::{Prometheus, QueryError};

/// The requests sent and failed over the drill (`started` to `finished`) and each window.
pub async fn count(
    prometheus: &Prometheus,
    counters: &RequestCounters,
    started: DateTime<Utc>,
    finished: DateTime<Utc>,
    windows: &[Window],
    budget: ErrorBudget,
) -> Result<RequestImpact, QueryError> {
    let span = (finished - started).num_milliseconds() as f64 / 1000.0;
    let at = |seconds: f64| started + chrono::Duration::milliseconds((seconds * 1000.0).round() as i64);
    let counted = async |to: f64, seconds: f64| -> Result<(f64, f64), QueryError> {
        let total = requests(prometheus, &counters.total_counter, at(to), seconds).await?;
        let failed = requests(prometheus, &counters.failed_counter, at(to), seconds).await?;
        Ok((total, failed))
    };
    let (all, bad) = counted(span, span).await?;
    let mut by_phase = Vec::new();
    for w in windows.iter().filter(|w| w.to > w.from) {
        let (total, failed) = counted(w.to, w.to - w.from).await?;
        by_phase.push(PhaseRequests { phase: w.name.clone(), total: total.round(), failed: failed.round() });
    }
    Ok(RequestImpact {
        total: all.round(),
        failed: bad.round(),
        budget_burned_percent: burned(all, bad, span, budget),
        by_phase,
    })
}

/// The counts, or a note among the Prometheus errors that the report goes without them.
pub fn or_note(
    counted: Result<RequestImpact, QueryError>,
    errors: &mut Vec<crate::domain::impact::PrometheusError>,
) -> Option<RequestImpact> {
    counted
        .map_err(|e| {
            errors.push(crate::domain::impact::PrometheusError {
                at: Utc::now(),
                message: format!("request counts at the end: {e}"),
                action: "report without the requests".into(),
            })
        })
        .ok()
}

/// One counter's increase over the `seconds` before `at`; no series at all is no request.
async fn requests(prometheus: &Prometheus, counter: &str, at: DateTime<Utc>, seconds: f64) -> Result<f64, QueryError> {
    Ok(prometheus.instant(&increase(counter, seconds), at).await?.unwrap_or(0.0))
}

/// The failed requests as a share of what the budget allows at the drill's rate, in %.
fn burned(all: f64, bad: f64, seconds: f64, budget: ErrorBudget) -> f64 {
    let allowed =
        if seconds > 0.0 { all / seconds * budget.window.as_secs_f64() * (1.0 - budget.objective) } else { 0.0 };
    if allowed > 0.0 { (bad / allowed * 100.0 * 1e6).round() / 1e6 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_burned_is_the_failures_against_what_the_rate_allows() {
        let budget = ErrorBudget { objective: 0.99, window: std::time::Duration::from_secs(20) };
        // 150 requests in 20 s, 1% of the window's 150: 1.5 allowed, 20 failed.
        assert!((burned(150.0, 20.0, 20.0, budget) - 1333.333333).abs() < 0.001);
        assert_eq!(burned(0.0, 0.0, 20.0, budget), 0.0);
    }
}
