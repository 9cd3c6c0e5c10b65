//! `metrics.prom`: the run in Prometheus text exposition format (0.0.4), for node-exporter's textfile collector or a
//! Pushgateway. Gauges only, and no sample timestamps: both consumers reject them; the run's time is a gauge.

use std::fmt::Write;

use super::{Outcome, Report};
use crate::phases::{PhaseId, Verdict};

/// The content type of the format, for a push.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Escapes a label value: backslash, double quote and line feed.
fn label(v: &str) -> String {
    v.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

struct Family<'a> {
    out: &'a mut String,
    drill: String,
}

impl Family<'_> {
    fn header(&mut self, name: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP hybrid_drill_{name} {help}\n# TYPE hybrid_drill_{name} gauge");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let mut all = format!("drill=\"{}\"", self.drill);
        for (k, v) in labels {
            let _ = write!(all, ",{k}=\"{}\"", label(v));
        }
        let _ = writeln!(self.out, "hybrid_drill_{name}{{{all}}} {}", number(value));
    }

    fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.header(name, help);
        self.sample(name, &[], value);
    }
}

/// Numbers as Go's parser reads them: no exponent surprises for ordinary values, `NaN` and `+Inf` spelled out.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let mut m = Family { out: &mut out, drill: label(&report.drill.name) };

    m.header("phase_duration_seconds", "Duration of each phase of the drill's last run, on the tool's clock.");
    for p in &report.phases {
        if let Some(s) = p.seconds {
            m.sample("phase_duration_seconds", &[("phase", p.name.as_str())], s);
        }
    }
    m.header("phase_objective_seconds", "The objective of each phase that has one.");
    for p in &report.phases {
        if let Some(o) = p.objective_seconds {
            m.sample("phase_objective_seconds", &[("phase", p.name.as_str())], o);
        }
    }
    m.header("phase_objective_met", "1 if the phase met its objective, 0 if it missed it or was not measured.");
    for p in report.phases.iter().filter(|p| p.objective_seconds.is_some()) {
        m.sample("phase_objective_met", &[("phase", p.name.as_str())], f64::from(u8::from(p.verdict == Verdict::Met)));
    }
    if let Some(rto) = report.phase(PhaseId::Rto).and_then(|p| p.seconds) {
        m.gauge("rto_seconds", "Recovery time: from the fault (t0) until the service was restored.", rto);
    }
    if let Some(o) = report.phase(PhaseId::Rto).and_then(|p| p.objective_seconds) {
        m.gauge("rto_objective_seconds", "The drill's RTO objective.", o);
    }
    m.header("outcome", "1 for the outcome of the drill's last run, 0 for the others.");
    for outcome in Outcome::ALL {
        m.sample("outcome", &[("outcome", outcome.slug())], f64::from(u8::from(report.outcome == outcome)));
    }
    m.gauge(
        "exit_code",
        "The exit code of the drill's last run (0 passed, 1 objective missed, 2 refused, 3 aborted, 4 restore failed).",
        f64::from(report.exit_code),
    );
    m.gauge(
        "objectives_missed",
        "How many objectives the last run missed or did not measure.",
        report.objectives_missed.len() as f64,
    );
    let f = &report.fallback;
    m.gauge("fallback_gpu_hours", "GPU-hours spent on cloud fallback nodes during the run.", f.gpu_hours);
    m.gauge("fallback_node_hours", "Node-hours spent on cloud fallback nodes during the run.", f.node_hours);
    m.gauge("fallback_nodes", "Cloud fallback nodes the run brought up.", f.nodes as f64);
    m.gauge("fallback_max_gpus", "Peak GPUs held by the fallback NodePool during the run.", f.max_gpus as f64);
    m.gauge("fallback_overrun", "1 if the fallback exceeded its NodePool's GPU limit.", f64::from(u8::from(f.overrun)));
    if f.ceiling.is_some() {
        m.gauge(
            "fallback_over_ceiling",
            "1 if the fallback exceeded the drill's guards.maxFallbackGpus (which aborts the drill).",
            f64::from(u8::from(f.over_ceiling)),
        );
    }
    if let Some(cost) = f.estimated_cost {
        m.gauge(
            "fallback_estimated_cost_dollars",
            "Estimated on-demand cost of the fallback, from the drill's price table.",
            cost,
        );
    }
    if let Some(s) = report.overlap.as_ref().and_then(|o| o.seconds) {
        m.gauge(
            "overlap_seconds",
            "How long old on-prem pods and cloud replacements may both have run (split brain).",
            s,
        );
    }
    m.gauge(
        "run_start_timestamp_seconds",
        "When the drill's last run started, in Unix seconds.",
        report.started.timestamp_millis() as f64 / 1000.0,
    );
    m.gauge(
        "run_finish_timestamp_seconds",
        "When the drill's last run finished, in Unix seconds.",
        report.finished.timestamp_millis() as f64 / 1000.0,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn phases_rto_outcome_and_cost_are_gauges_labelled_by_drill() {
        let text = render(&sample::report());
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
    fn label_values_are_escaped() {
        let mut report = sample::report();
        report.drill.name = "a\"b\\c\nd".into();
        let text = render(&report);
        assert!(text.contains(r#"drill="a\"b\\c\nd""#), "{text}");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(2.0), "2");
    }
}
