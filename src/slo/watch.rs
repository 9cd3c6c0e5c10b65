//! The SLIs while a drill runs: one instant query per SLI (and per stop query of its own) every interval, each stop
//! condition judged on them, Prometheus's failures handled by the drill's policy. What it read is kept for the
//! report; a tripped condition or an aborting failure is handed to the run as the reason to stop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::domain::impact::{PrometheusError, StopRecord};
use crate::drill::slo::{OnNoData, OnPrometheusError, SloSpec, StopCondition};
use crate::prometheus::Prometheus;
use crate::timeline::{Event, Timeline};

/// What the watch has read so far.
#[derive(Debug, Default, Clone)]
pub struct Readings {
    /// Per SLI (in the drill's order): (time, value) of every instant query that answered a number.
    pub samples: Vec<Vec<(DateTime<Utc>, f64)>>,
    pub errors: Vec<PrometheusError>,
    pub stop: Option<StopRecord>,
}

/// The running watch; dropped or stopped, its task ends.
pub struct SloWatch {
    task: JoinHandle<()>,
    readings: Arc<Mutex<Readings>>,
    pub tripped: watch::Receiver<Option<String>>,
}

impl SloWatch {
    pub fn start(spec: &SloSpec, prometheus: Prometheus, timeline: &Timeline) -> SloWatch {
        let readings =
            Arc::new(Mutex::new(Readings { samples: vec![Vec::new(); spec.slis.len()], ..Readings::default() }));
        let (trip, tripped) = watch::channel(None);
        let state = Loop {
            spec: spec.clone(),
            prometheus,
            timeline: timeline.clone(),
            readings: readings.clone(),
            held_since: vec![None; spec.stop_when.len()],
            failing: false,
        };
        let task = tokio::spawn(state.run(trip));
        SloWatch { task, readings, tripped }
    }

    /// Stops reading; what was read.
    pub fn stop(self) -> Readings {
        self.task.abort();
        self.readings.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for SloWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Loop {
    spec: SloSpec,
    prometheus: Prometheus,
    timeline: Timeline,
    readings: Arc<Mutex<Readings>>,
    held_since: Vec<Option<DateTime<Utc>>>,
    /// Whether the last round failed: a failure is warned of once, and so is the recovery.
    failing: bool,
}

impl Loop {
    async fn run(mut self, trip: watch::Sender<Option<String>>) {
        let mut ticks = tokio::time::interval(self.spec.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Some(reason) = self.round().await {
                let _ = trip.send(Some(reason));
                return;
            }
        }
    }

    /// One round of queries; the reason to stop the drill, if any.
    async fn round(&mut self) -> Option<String> {
        let now = Utc::now();
        let mut values = Vec::new();
        let mut failure = None;
        for sli in &self.spec.slis {
            match self.prometheus.instant(&sli.query, now).await {
                Ok(v) => values.push(Some(v)),
                Err(e) => {
                    failure.get_or_insert(format!("SLI {}: {e}", sli.name));
                    values.push(None);
                }
            }
        }
        {
            let mut r = self.readings.lock().unwrap_or_else(|e| e.into_inner());
            for (i, v) in values.iter().enumerate() {
                if let Some(Some(v)) = v {
                    r.samples[i].push((now, *v));
                }
            }
        }
        for i in 0..self.spec.stop_when.len() {
            match self.judge(i, now, &values).await {
                Ok(Some(stop)) => {
                    let reason = format!("stop condition {}", stop.describe());
                    self.readings.lock().unwrap_or_else(|e| e.into_inner()).stop = Some(stop);
                    return Some(reason);
                }
                Ok(None) => {}
                Err(e) => {
                    failure.get_or_insert(e.to_string());
                }
            }
        }
        self.failed(now, failure)
    }

    /// Records a round's failure (or the recovery from one); the reason to stop when the policy is to abort.
    fn failed(&mut self, now: DateTime<Utc>, failure: Option<String>) -> Option<String> {
        let Some(message) = failure else {
            if self.failing {
                self.failing = false;
                self.timeline.record(Event::Warning {
                    message: format!("Prometheus answers again ({})", self.prometheus.shown()),
                });
            }
            return None;
        };
        let policy = self.spec.on_error;
        self.readings.lock().unwrap_or_else(|e| e.into_inner()).errors.push(PrometheusError {
            at: now,
            message: message.clone(),
            action: policy.as_str().into(),
        });
        let first = !self.failing;
        self.failing = true;
        match policy {
            OnPrometheusError::Abort => Some(format!(
                "Prometheus could not be read ({message}) and spec.slo.onError is abort: without its SLIs the drill \
                 cannot tell whether it hurts users"
            )),
            OnPrometheusError::Continue => {
                if first {
                    self.timeline.record(Event::Warning {
                        message: format!(
                            "Prometheus could not be read ({message}); spec.slo.onError is continue: the drill goes \
                             on without its SLIs and stop conditions until Prometheus answers again"
                        ),
                    });
                }
                None
            }
        }
    }

    /// Whether stop condition `i` now holds long enough; an error when it could not be read.
    async fn judge(
        &mut self,
        i: usize,
        now: DateTime<Utc>,
        values: &[Option<Option<f64>>],
    ) -> Result<Option<StopRecord>, super::StopError> {
        let condition = &self.spec.stop_when[i];
        let (value, breached, hold) = match condition {
            StopCondition::Alert { name, alertmanager } => {
                let firing = alert_firing(alertmanager, name)
                    .await
                    .map_err(|error| super::StopError::Alert { name: name.clone(), error })?;
                return Ok(firing.then(|| StopRecord {
                    condition: condition.describe(),
                    value: None,
                    at: now,
                    since: now,
                    no_data: false,
                }));
            }
            StopCondition::Query { query, breached, hold, name, on_no_data } => {
                let known = self.spec.slis.iter().position(|s| &s.query == query);
                let value = match known {
                    // A failed read is the onError policy's, neither data nor no data.
                    Some(k) => match values[k] {
                        Some(v) => v,
                        None => return Ok(None),
                    },
                    None => self
                        .prometheus
                        .instant(query, now)
                        .await
                        .map_err(|error| super::StopError::Query { name: name.clone(), error })?,
                };
                if value.is_none() && *on_no_data == OnNoData::Ignore {
                    return Ok(None);
                }
                (value, *breached, *hold)
            }
        };
        // No number here is no data under `onNoData: breach`: the serving pods that export the SLI are gone.
        let holds = value.is_none_or(|v| breached.holds(v));
        if !holds {
            self.held_since[i] = None;
            return Ok(None);
        }
        let since = *self.held_since[i].get_or_insert(now);
        let held = (now - since).to_std().unwrap_or_default();
        let no_data = value.is_none();
        Ok((held >= hold).then(|| StopRecord { condition: condition.describe(), value, at: now, since, no_data }))
    }
}

/// Every SLI within its objective now, or the first one that is not (with its value), for the steady state.
pub async fn steady_state(
    spec: &SloSpec,
    prometheus: &Prometheus,
) -> Result<Vec<(String, f64)>, super::SteadyStateError> {
    use super::SteadyStateError;
    let now = Utc::now();
    let mut read = Vec::new();
    for sli in &spec.slis {
        let value = prometheus
            .instant(&sli.query, now)
            .await
            .map_err(|error| SteadyStateError::Unread { sli: sli.name.clone(), error })?;
        let Some(value) = value else {
            return Err(SteadyStateError::NoValue { sli: sli.name.clone() });
        };
        if !sli.objective.holds(value) {
            let objective = sli.objective.describe();
            return Err(SteadyStateError::Outside { sli: sli.name.clone(), value: round(value), objective });
        }
        read.push((sli.name.clone(), value));
    }
    Ok(read)
}

pub(super) use crate::domain::impact::round;

/// The range query's step: the interval, or coarser so that a long drill keeps at most `MAX_POINTS` per SLI.
pub fn step_for(span: Duration, interval: Duration) -> Duration {
    let fine = span.as_secs_f64() / crate::domain::impact::MAX_POINTS as f64;
    Duration::from_secs_f64(fine.max(interval.as_secs_f64()).max(1.0).ceil())
}

/// Whether an alert of this name is firing in Alertmanager, silenced or not.
async fn alert_firing(alertmanager: &reqwest::Url, name: &str) -> Result<bool, crate::alertmanager::AlertmanagerError> {
    let am = crate::alertmanager::Alertmanager::new(alertmanager.as_str())?;
    let alertname =
        crate::alertmanager::Matcher { name: "alertname".into(), value: name.into(), is_regex: false, is_equal: true };
    Ok(!am.firing_even_if_silenced(&[alertname]).await?.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::slo::Bound;

    #[test]
    fn the_step_keeps_the_series_bounded() {
        assert_eq!(step_for(Duration::from_secs(60), Duration::from_secs(2)), Duration::from_secs(2));
        let long = Duration::from_secs(6 * 3600);
        assert!(long.as_secs_f64() / step_for(long, Duration::from_secs(2)).as_secs_f64() <= 240.0);
        assert!(Bound::AtLeast(0.99).holds(0.995) && !Bound::AtMost(1.0).holds(1.5));
    }
}
