//! `metrics.prom`: the run in Prometheus text exposition format (0.0.4), for node-exporter's textfile collector or a
//! Pushgateway, written by prometheus-client's text encoder (names, label escaping, number spelling). Gauges only, and
//! no sample timestamps: both consumers reject them; the run's time is a gauge.

use std::borrow::Cow;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::{Outcome, Report};
use crate::phases::{Phase, PhaseId, Verdict};

/// The content type of the format, for a push.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

const PREFIX: &str = "hybrid_drill";

/// One gauge family, its samples known when the report is. A report is a snapshot, so its families are constants
/// handed to the encoder in the order written here (a registered `Family` of live gauges would list its label sets
/// in hash order, and `Registry::register` appends a full stop to every help text).
#[derive(Debug)]
struct Gauge {
    name: &'static str,
    help: &'static str,
    /// Labels besides `drill` (which the registry adds to every sample), and the value.
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Gauge {
    fn single(name: &'static str, help: &'static str, value: f64) -> Gauge {
        Gauge { name, help, samples: vec![(Vec::new(), value)] }
    }
}

#[derive(Debug)]
struct RunGauges(Vec<Gauge>);

impl Collector for RunGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for gauge in &self.0 {
            let mut family = encoder.encode_descriptor(gauge.name, gauge.help, None, MetricType::Gauge)?;
            for (labels, value) in &gauge.samples {
                let mut sample = family.encode_family(labels)?;
                // Whole numbers as integers (`6`, not `6.0`), as Go's clients write them and as this file always had.
                if value.fract() == 0.0 && value.abs() < 1e15 {
                    sample.encode_gauge(&(*value as i64))?;
                } else {
                    sample.encode_gauge(value)?;
                }
            }
        }
        Ok(())
    }
}

// The only place this file reads a phase's name, so that a typed name changes it alone.
fn phase_label(p: &Phase) -> String {
    p.name.as_str().to_string()
}

fn is_rto(p: &Phase) -> bool {
    p.name == PhaseId::Rto
}

fn by_phase(name: &'static str, help: &'static str, report: &Report, value: impl Fn(&Phase) -> Option<f64>) -> Gauge {
    let samples = report.phases.iter().filter_map(|p| Some((vec![("phase", phase_label(p))], value(p)?))).collect();
    Gauge { name, help, samples }
}

fn bit(b: bool) -> f64 {
    f64::from(u8::from(b))
}

// Long: the list of every metric with its help text, one entry each; the exposition's order is this list's.
fn gauges(report: &Report) -> Vec<Gauge> {
    let rto = report.phases.iter().find(|p| is_rto(p));
    let f = &report.fallback;
    let optional = [
        rto.and_then(|p| p.seconds).map(|s| {
            Gauge::single("rto_seconds", "Recovery time: from the fault (t0) until the service was restored.", s)
        }),
        rto.and_then(|p| p.objective_seconds)
            .map(|o| Gauge::single("rto_objective_seconds", "The drill's RTO objective.", o)),
    ];
    let mut all = vec![
        by_phase(
            "phase_duration_seconds",
            "Duration of each phase of the drill's last run, on the tool's clock.",
            report,
            |p| p.seconds,
        ),
        by_phase("phase_objective_seconds", "The objective of each phase that has one.", report, |p| {
            p.objective_seconds
        }),
        by_phase(
            "phase_objective_met",
            "1 if the phase met its objective, 0 if it missed it or was not measured.",
            report,
            |p| p.objective_seconds.map(|_| bit(p.verdict == Verdict::Met)),
        ),
    ];
    all.extend(optional.into_iter().flatten());
    all.extend(super::impact::gauges(report).into_iter().map(|(name, help, samples)| Gauge { name, help, samples }));
    all.push(Gauge {
        name: "outcome",
        help: "1 for the outcome of the drill's last run, 0 for the others.",
        samples: Outcome::ALL
            .iter()
            .map(|o| (vec![("outcome", o.slug().to_string())], bit(report.outcome == *o)))
            .collect(),
    });
    all.extend([
        Gauge::single(
            "exit_code",
            "The exit code of the drill's last run (0 passed, 1 objective missed, 2 refused, 3 aborted, 4 restore failed).",
            f64::from(report.exit_code),
        ),
        Gauge::single(
            "objectives_missed",
            "How many objectives the last run missed or did not measure.",
            report.objectives_missed.len() as f64,
        ),
        Gauge::single("fallback_gpu_hours", "GPU-hours spent on cloud fallback nodes during the run.", f.gpu_hours),
        Gauge::single("fallback_node_hours", "Node-hours spent on cloud fallback nodes during the run.", f.node_hours),
        Gauge::single("fallback_nodes", "Cloud fallback nodes the run brought up.", f.nodes as f64),
        Gauge::single(
            "fallback_max_gpus",
            "Peak GPUs held by the fallback NodePool during the run.",
            f.max_gpus as f64,
        ),
        Gauge::single("fallback_overrun", "1 if the fallback exceeded its NodePool's GPU limit.", bit(f.overrun)),
    ]);
    let optional = [
        f.ceiling.map(|_| {
            Gauge::single(
                "fallback_over_ceiling",
                "1 if the fallback exceeded the drill's guards.maxFallbackGpus (which aborts the drill).",
                bit(f.over_ceiling),
            )
        }),
        f.estimated_cost.map(|cost| {
            Gauge::single(
                "fallback_estimated_cost_dollars",
                "Estimated on-demand cost of the fallback, from the drill's price table.",
                cost,
            )
        }),
        report.overlap.as_ref().and_then(|o| o.seconds).map(|s| {
            Gauge::single(
                "overlap_seconds",
                "How long old on-prem pods and cloud replacements may both have run (split brain).",
                s,
            )
        }),
    ];
    all.extend(optional.into_iter().flatten());
    all.extend(super::impact::gauges(report).into_iter().map(|(name, help, samples)| Gauge { name, help, samples }));
    all.extend([
        Gauge::single(
            "run_start_timestamp_seconds",
            "When the drill's last run started, in Unix seconds.",
            report.started.timestamp_millis() as f64 / 1000.0,
        ),
        Gauge::single(
            "run_finish_timestamp_seconds",
            "When the drill's last run finished, in Unix seconds.",
            report.finished.timestamp_millis() as f64 / 1000.0,
        ),
    ]);
    all
}

/// The run's metrics; an error only if the encoder refuses a value, which writing gauges to a string never does.
pub fn render(report: &Report) -> Result<String, std::fmt::Error> {
    let mut all = gauges(report);
    all.extend(evidence_gauges(report));
    encode(&report.drill.name, all)
}

/// The audit record's figures: deviations, action items, and who ran it under which change (an info gauge, 1).
fn evidence_gauges(report: &Report) -> Vec<Gauge> {
    let mut all = vec![
        Gauge::single(
            "deviations",
            "Deviations from the plan the last run's report lists.",
            report.deviations.len() as f64,
        ),
        Gauge::single("action_items", "Action items the last run's report raises.", report.action_items.len() as f64),
    ];
    if let Some(p) = &report.provenance {
        let labels = vec![
            ("initiated_by", p.initiator.as_ref().map(|i| i.user.clone()).unwrap_or_default()),
            ("change", p.change.clone().unwrap_or_default()),
            ("approved_by", p.approved_by.clone().unwrap_or_default()),
            ("tool_commit", p.git_commit.clone()),
        ];
        all.push(Gauge {
            name: "run_info",
            help: "Who ran the drill's last run and under which change; always 1.",
            samples: vec![(labels, 1.0)],
        });
    }
    all
}

/// Gauges labelled `drill`, in the text format.
fn encode(drill: &str, gauges: Vec<Gauge>) -> Result<String, std::fmt::Error> {
    let drill = (Cow::Borrowed("drill"), Cow::Owned(drill.to_string()));
    let mut registry = Registry::with_prefix_and_labels(PREFIX, std::iter::once(drill));
    registry.register_collector(Box::new(RunGauges(gauges)));
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

/// What `hybrid-drill watch` knows now, for its metrics endpoint.
#[derive(Debug, Clone, Default)]
pub struct WatchState {
    /// The watch has listed the cluster and follows it: until then a fault comes and goes unseen.
    pub synced: bool,
    /// When the episode under way began (its t0, else when it was seen), if one is.
    pub episode_since: Option<chrono::DateTime<chrono::Utc>>,
    pub episode_open: bool,
    /// An episode is open and it is a hybrid-drill run's (its marks or its drill lock), not an incident.
    pub drill_in_progress: bool,
    pub fallback_nodes: usize,
    pub fallback_gpus: i64,
    pub episodes_closed: u64,
    /// Requests the watch has sent to the API server since it started.
    pub api_requests: u64,
    /// The last closed episode's report.
    pub last: Option<Box<Report>>,
}

/// The watch's live metrics: the episode in progress, the fallback now, the last episode's RTO and phases.
pub fn render_watch(drill: &str, state: &WatchState) -> Result<String, std::fmt::Error> {
    let mut all = vec![
        Gauge::single(
            "watch_synced",
            "1 once the watch has listed the cluster and follows its changes; a fault before that is not seen.",
            bit(state.synced),
        ),
        Gauge::single(
            "watch_episode_in_progress",
            "1 while an incident episode is open (the on-prem side degraded, not yet back and reclaimed).",
            bit(state.episode_open),
        ),
        Gauge::single(
            "watch_drill_in_progress",
            "1 while the degraded on-prem side is a hybrid-drill run's (its marks on the nodes, or its drill lock held): a drill, not an incident.",
            bit(state.drill_in_progress),
        ),
        Gauge::single("watch_fallback_nodes", "Cloud fallback nodes now.", state.fallback_nodes as f64),
        Gauge::single("watch_fallback_gpus", "GPUs the fallback NodePool holds now.", state.fallback_gpus as f64),
        Gauge::single(
            "watch_episodes_closed",
            "Incident episodes closed (reports written) since this watch started.",
            state.episodes_closed as f64,
        ),
        Gauge::single(
            "watch_api_requests",
            "Requests this watch has sent to the API server since it started (lists, watches and their reconnects).",
            state.api_requests as f64,
        ),
    ];
    if let Some(since) = state.episode_since.filter(|_| state.episode_open) {
        all.push(Gauge::single(
            "watch_episode_start_timestamp_seconds",
            "When the open episode began (its t0, else when it was seen), in Unix seconds.",
            since.timestamp_millis() as f64 / 1000.0,
        ));
    }
    if let Some(last) = &state.last {
        all.push(by_phase(
            "watch_last_phase_duration_seconds",
            "Duration of each phase of the last closed incident, on the tool's clock.",
            last,
            |p| p.seconds,
        ));
        if let Some(rto) = last.phases.iter().find(|p| is_rto(p)).and_then(|p| p.seconds) {
            all.push(Gauge::single("watch_last_rto_seconds", "The last closed incident's RTO.", rto));
        }
        all.push(Gauge::single(
            "watch_last_finish_timestamp_seconds",
            "When the last incident closed, in Unix seconds.",
            last.finished.timestamp_millis() as f64 / 1000.0,
        ));
    }
    encode(drill, all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn phases_rto_outcome_and_cost_are_gauges_labelled_by_drill() {
        let text = render(&sample::report()).unwrap();
        for line in [
            r#"hybrid_drill_phase_duration_seconds{drill="onprem-gpu-drain",phase="provisioning"} 6"#,
            r#"hybrid_drill_phase_duration_seconds{drill="onprem-gpu-drain",phase="launched"} 1.5"#,
            r#"hybrid_drill_phase_objective_met{drill="onprem-gpu-drain",phase="provisioning"} 0"#,
            r#"hybrid_drill_rto_seconds{drill="onprem-gpu-drain"} 11.6"#,
            r#"hybrid_drill_outcome{drill="onprem-gpu-drain",outcome="objective-missed"} 1"#,
            r#"hybrid_drill_outcome{drill="onprem-gpu-drain",outcome="passed"} 0"#,
            r#"hybrid_drill_fallback_estimated_cost_dollars{drill="onprem-gpu-drain"} 0.04"#,
            r#"hybrid_drill_run_start_timestamp_seconds{drill="onprem-gpu-drain"} 1767605400"#,
            "# TYPE hybrid_drill_rto_seconds gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in:\n{text}");
        }
        // every sample line belongs to a family declared just before it
        let mut declared = String::new();
        for l in text.lines() {
            if let Some(name) = l.strip_prefix("# TYPE ") {
                declared = name.split(' ').next().unwrap().to_string();
            } else if !l.starts_with('#') {
                assert!(l.starts_with(&format!("{declared}{{")), "{l} outside {declared}");
            }
        }
    }

    #[test]
    fn a_drill_seen_by_the_watch_is_its_own_gauge_not_an_incident_episode() {
        let state = WatchState { drill_in_progress: true, ..WatchState::default() };
        let text = render_watch("d", &state).unwrap();
        assert!(text.lines().any(|l| l == r#"hybrid_drill_watch_drill_in_progress{drill="d"} 1"#), "{text}");
        assert!(text.lines().any(|l| l == r#"hybrid_drill_watch_episode_in_progress{drill="d"} 0"#), "{text}");
    }

    #[test]
    fn label_values_are_escaped_and_numbers_spelled_as_go_reads_them() {
        let mut report = sample::report();
        report.drill.name = "a\"b\\c\nd".into();
        report.fallback.gpu_hours = f64::NAN;
        report.fallback.nodes = 2;
        let text = render(&report).unwrap();
        assert!(text.contains(r#"drill="a\"b\\c\nd""#), "{text}");
        assert!(text.lines().any(|l| l.starts_with("hybrid_drill_fallback_gpu_hours{") && l.ends_with("} NaN")));
        assert!(text.lines().any(|l| l.starts_with("hybrid_drill_fallback_nodes{") && l.ends_with("} 2")));
    }
}
