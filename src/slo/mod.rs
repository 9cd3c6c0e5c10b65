//! The users' side of a drill, read from Prometheus: the SLIs' steady state before the fault, the stop conditions
//! while it runs, and the users' impact in the report (`impact` of report.json). `crate::prometheus` speaks Prometheus's
//! API, `watch` reads the SLIs while the drill runs, `impact` turns the drill's series into figures,
//! `trial` tries each query once for `plan` and `preflight`.

mod error;
pub mod impact;
pub mod requests;
pub mod scrape;
pub mod trial;
pub mod watch;

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::impact as model;
pub use crate::domain::impact::{Impact, PodAnswer, Reading, StopRecord};
pub use crate::prometheus::{Prometheus, QueryError, Series};
pub use error::{SteadyStateError, StopError};
pub use watch::SloWatch;

use crate::cluster::Reader;
use crate::drill::slo::SloSpec;
use crate::phases::Phase;
use crate::timeline::Timeline;

/// Said in every report of a lab run: the lab's service is simulated.
pub const LAB_STAND_IN: &str = "the lab's service is a stand-in (lab/service-stand-in): its users and requests are \
                                simulated from the Service's EndpointSlices, not served by real pods";

/// A drill's SLIs from set-up to report.
pub struct Slo {
    spec: SloSpec,
    prometheus: Prometheus,
    steady: Vec<Reading>,
    watch: Option<SloWatch>,
    stand_in: Option<String>,
    /// The SLIs' windows against their targets' scrape intervals, as read at the start.
    windows: Vec<scrape::WindowCheck>,
}

/// What the report needs of the run besides the SLIs: its span, its phases and the pods that replaced the evicted.
/// The replacements are every workload pod Ready on a fallback node from t0 to the run's end, not only those Ready
/// before the service was restored: a stop condition that aborts the drill early (while no replacement is Ready
/// yet) still leaves users waiting for the replacements' first good answers, which come during the restore.
pub struct RunSpan<'a> {
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    pub phases: &'a [Phase],
    pub replacements: Vec<String>,
}

impl<'a> RunSpan<'a> {
    pub fn of(
        started: &DateTime<Utc>,
        finished: &DateTime<Utc>,
        phases: &'a [Phase],
        observations: &[crate::timeline::Observation],
    ) -> RunSpan<'a> {
        let t0 = phases.iter().find(|p| p.name == crate::phases::PhaseId::Rto).and_then(|p| p.from.as_ref());
        let replacements = match t0 {
            Some(t0) => crate::phases::per_pod(observations, t0.seq, u64::MAX).pods,
            None => Vec::new(),
        };
        RunSpan {
            started: *started,
            finished: *finished,
            phases,
            replacements: replacements.into_iter().map(|p| p.pod).collect(),
        }
    }
}

/// Connects, checks the steady state and starts the watch: the SLIs ready for the drill, and the receiver of the
/// reason to stop it; or why the drill must not start.
pub async fn begin(
    spec: &SloSpec,
    reader: &Reader,
    lab: bool,
    timeline: &Timeline,
    progress: &crate::progress::Progress,
) -> Result<(Slo, tokio::sync::watch::Receiver<Option<String>>), SteadyStateError> {
    let mut slo = Slo::connect(spec, reader, lab).await.map_err(SteadyStateError::Connect)?;
    slo.check_windows(progress).await?;
    slo.steady_state().await?;
    let read: Vec<String> = slo.steady.iter().map(|r| format!("{} {}", r.sli, r.value)).collect();
    progress.line(&format!("SLIs within their objectives before the fault: {}", read.join(", ")));
    let tripped = slo.start(timeline);
    Ok((slo, tripped))
}

impl Slo {
    /// Reads the credentials and makes the client; nothing is queried yet.
    pub async fn connect(spec: &SloSpec, reader: &Reader, lab: bool) -> Result<Slo, QueryError> {
        let prometheus = Prometheus::connect(&spec.prometheus, reader).await?;
        Ok(Slo {
            spec: spec.clone(),
            prometheus,
            steady: Vec::new(),
            watch: None,
            stand_in: lab.then(|| LAB_STAND_IN.to_string()),
            windows: Vec::new(),
        })
    }

    /// Reads the targets' scrape intervals; a window too short for its scrape refuses the drill, naming it (rather
    /// than the empty SLI it causes). Targets that cannot be read leave the windows unchecked, with a line saying so.
    pub async fn check_windows(&mut self, progress: &crate::progress::Progress) -> Result<(), SteadyStateError> {
        match scrape::windows(&self.spec, &self.prometheus).await {
            Ok(windows) => self.windows = windows,
            Err(e) => progress.line(&format!("the SLIs' windows are not checked against the scrape interval: {e}")),
        }
        match self.windows.iter().find(|w| w.fit() == scrape::Fit::TooShort) {
            Some(w) => Err(SteadyStateError::WindowTooShort { window: w.describe() }),
            None => Ok(()),
        }
    }

    /// The longest scrape interval behind the SLIs, and how late after users the stop conditions see a change:
    /// a window's lag (a scrape and half the window) plus the tool's own reading interval.
    fn detection_lag(&self) -> (Option<f64>, Option<f64>) {
        let scrape = self.windows.iter().map(|w| w.scrape).max();
        let lag = self.windows.iter().map(|w| w.lag()).max().map(|l| l + self.spec.interval);
        (scrape.map(|s| s.as_secs_f64()), lag.map(|l| l.as_secs_f64()))
    }

    /// Every SLI within its objective now, or why the drill must not start.
    pub async fn steady_state(&mut self) -> Result<(), SteadyStateError> {
        let read = watch::steady_state(&self.spec, &self.prometheus).await?;
        self.steady = read.into_iter().map(|(sli, value)| Reading { sli, value: watch::round(value) }).collect();
        Ok(())
    }

    /// Starts reading the SLIs every interval; the receiver says why to stop, once a condition trips.
    pub fn start(&mut self, timeline: &Timeline) -> tokio::sync::watch::Receiver<Option<String>> {
        let watch = SloWatch::start(&self.spec, self.prometheus.clone(), timeline);
        let tripped = watch.tripped.clone();
        self.watch = Some(watch);
        tripped
    }

    /// Stops the watch and reads the drill's span back: one range query per SLI (and per request counter).
    pub async fn finish(self, run: RunSpan<'_>) -> Impact {
        let (scrape_interval_seconds, detection_lag_seconds) = self.detection_lag();
        let readings = self.watch.map(SloWatch::stop).unwrap_or_default();
        let span = (run.finished - run.started).to_std().unwrap_or_default();
        let step = watch::step_for(span, self.spec.interval);
        let windows = impact::windows(run.phases);
        let budget = self.spec.error_budget;
        let mut errors = readings.errors.clone();
        let mut range = async |query: &str| -> Option<Vec<(f64, f64)>> {
            match self.prometheus.range(query, run.started, run.finished, step).await {
                Ok(series) => {
                    Some(impact::relative(&series.first().map(|s| s.points.clone()).unwrap_or_default(), run.started))
                }
                Err(e) => {
                    errors.push(model::PrometheusError {
                        at: Utc::now(),
                        message: format!("range query at the end: {e}"),
                        action: "report from the instant queries".into(),
                    });
                    None
                }
            }
        };
        let mut slis = Vec::new();
        let mut bounds = Vec::new();
        for (i, sli) in self.spec.slis.iter().enumerate() {
            let (points, used) = match range(&sli.query).await {
                Some(points) => (points, step),
                None => {
                    let fallback: Vec<(f64, f64)> =
                        readings.samples[i].iter().map(|(t, v)| (t.timestamp_millis() as f64 / 1000.0, *v)).collect();
                    (impact::relative(&fallback, run.started), self.spec.interval)
                }
            };
            let points = impact::on_grid(&points, span.as_secs_f64(), used);
            slis.push(impact::sli(sli, &points, used, &windows, budget));
            bounds.push((sli.objective, points));
        }
        let counted = async |c| requests::count(&self.prometheus, c, run.started, run.finished, &windows, budget).await;
        let requests = match &self.spec.requests {
            Some(counters) => requests::or_note(counted(counters).await, &mut errors),
            None => None,
        };
        let t0 = impact::t0(run.phases);
        let wait = FIRST_ANSWER_WAIT.max(Duration::from_secs_f64(scrape_interval_seconds.unwrap_or(0.0)) * 2);
        let answers = match &self.spec.first_good_answer {
            Some(query) => first_answers(&self.prometheus, query, self.spec.interval, wait, &run.replacements).await,
            None => Vec::new(),
        };
        Impact {
            prometheus: self.prometheus.shown(),
            stand_in: self.stand_in,
            interval_seconds: self.spec.interval.as_secs_f64(),
            scrape_interval_seconds,
            detection_lag_seconds,
            resolution_seconds: step.as_secs_f64(),
            error_budget: model::BudgetBasis {
                objective: budget.objective,
                window_seconds: budget.window.as_secs_f64(),
            },
            steady_state: self.steady,
            slis,
            requests,
            users_served_again_seconds: t0.and_then(|t0| impact::served_again(&bounds, t0)),
            rto_seconds: run.phases.iter().find(|p| p.name == crate::phases::PhaseId::Rto).and_then(|p| p.seconds),
            ready_to_first_good_answer: answers,
            stop: readings.stop,
            prometheus_errors: errors,
        }
    }
}

/// How long the end of a drill waits for replacement pods that were Ready but had not answered well yet: a pod that
/// came up just before the drill ended is still in its cold start, and its first good answer is what users waited for.
/// Never less than two scrape intervals: the answer must be scraped before it can be read.
const FIRST_ANSWER_WAIT: Duration = Duration::from_secs(20);

/// The replacement pods' seconds from Ready to their first good answer, as the drill's query gives them per `pod`:
/// read again every interval, up to [`FIRST_ANSWER_WAIT`], while a replacement has none yet.
async fn first_answers(
    prometheus: &Prometheus,
    query: &str,
    interval: Duration,
    wait: Duration,
    pods: &[String],
) -> Vec<PodAnswer> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let answers = first_answers_now(prometheus, query, pods).await;
        if answers.len() >= pods.len() || tokio::time::Instant::now() + interval > deadline {
            return answers;
        }
        tokio::time::sleep(interval).await;
    }
}

async fn first_answers_now(prometheus: &Prometheus, query: &str, pods: &[String]) -> Vec<PodAnswer> {
    let Ok(series) = prometheus.instant_vector(query, Utc::now()).await else { return Vec::new() };
    series
        .into_iter()
        .filter_map(|s| {
            let pod = s.labels.get("pod")?.clone();
            let seconds = s.points.first()?.1;
            (pods.contains(&pod) && seconds.is_finite()).then(|| PodAnswer {
                location: s.labels.get("location").cloned(),
                pod,
                seconds: (seconds * 1000.0).round() / 1000.0,
            })
        })
        .collect()
}
