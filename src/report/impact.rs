//! The users' impact (`report.impact`) in the report: what the headline, the deviations and the action items say of
//! it, a JUnit test case per SLO, and gauges of each SLI's figures, the requests failed and the time until users were
//! served again.

use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus};

use super::Report;
use super::model::{ActionItem, ActionSource, Deviation, DeviationKind};
use crate::domain::impact::SliImpact;

/// One case per SLO: met, or outside its objective for how long and at what cost to the error budget.
pub fn junit_cases(report: &Report, classname: &str) -> Vec<TestCase> {
    let Some(impact) = &report.impact else { return Vec::new() };
    impact
        .slis
        .iter()
        .map(|sli| {
            let status = if sli.met {
                TestCaseStatus::success()
            } else {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_type("slo-breached");
                s.set_message(outside(sli));
                s
            };
            let mut case = TestCase::new(format!("SLO {} {}", sli.name, sli.objective), status);
            case.set_classname(classname);
            case
        })
        .collect()
}

/// The users' impact the run recorded at its end; the last one, should a rebuild have recorded another.
pub fn recorded(observations: &[crate::timeline::Observation]) -> Option<crate::domain::impact::Impact> {
    observations.iter().rev().find_map(|o| match &o.event {
        crate::timeline::Event::SloImpact { impact } => Some((**impact).clone()),
        _ => None,
    })
}

type Samples = Vec<(Vec<(&'static str, String)>, f64)>;

/// The impact's gauges: (name, help, samples).
pub fn gauges(report: &Report) -> Vec<(&'static str, &'static str, Samples)> {
    let Some(impact) = &report.impact else { return Vec::new() };
    let per_sli = |f: &dyn Fn(&crate::domain::impact::SliImpact) -> Option<f64>| -> Samples {
        impact.slis.iter().filter_map(|s| Some((vec![("sli", s.name.clone())], f(s)?))).collect()
    };
    let mut out = vec![
        ("sli_min", "Each SLI's lowest value over the drill.", per_sli(&|s| s.whole.min)),
        ("sli_mean", "Each SLI's mean over the drill.", per_sli(&|s| s.whole.mean)),
        ("sli_p99", "Each SLI's 99th percentile over the drill.", per_sli(&|s| s.whole.p99)),
        (
            "sli_seconds_outside_objective",
            "Seconds each SLI spent outside its objective during the drill.",
            per_sli(&|s| Some(s.whole.seconds_outside_objective)),
        ),
        (
            "sli_seconds_no_data",
            "Seconds each SLI had no value during the drill (no series: the serving pods that export it gone).",
            per_sli(&|s| Some(s.whole.seconds_no_data)),
        ),
        (
            "sli_error_budget_burned_percent",
            "Each SLI's time outside its objective as a share of the error budget, in percent.",
            per_sli(&|s| Some(s.whole.budget_burned_percent)),
        ),
    ];
    if let Some(r) = &impact.requests {
        out.push(("requests_failed", "Requests that failed during the drill.", vec![(Vec::new(), r.failed)]));
        out.push(("requests_total", "Requests sent during the drill.", vec![(Vec::new(), r.total)]));
    }
    if let Some(s) = impact.users_served_again_seconds {
        out.push((
            "users_served_again_seconds",
            "Seconds from the fault until every SLI was within its objective again.",
            vec![(Vec::new(), s)],
        ));
    }
    out
}

/// `-` for a figure Prometheus never gave.
fn figure(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| crate::domain::impact::round(v).to_string())
}

/// A value of an SLI with its unit (`0.9871 ratio`, `2.31 s`); `no data` when Prometheus returned none.
pub fn with_unit(v: Option<f64>, unit: Option<&str>) -> String {
    match (v, unit.filter(|u| !u.is_empty())) {
        (None, _) => NO_DATA.into(),
        (Some(v), Some(unit)) => format!("{} {unit}", crate::domain::impact::round(v)),
        (Some(v), None) => crate::domain::impact::round(v).to_string(),
    }
}

/// An SLI's objective with its unit (`>= 0.99 ratio`).
pub fn objective_with_unit(sli: &SliImpact) -> String {
    match sli.unit.as_deref().filter(|u| !u.is_empty()) {
        Some(unit) => format!("{} {unit}", sli.objective),
        None => sli.objective.clone(),
    }
}

/// What a window without a single sample shows wherever a figure would stand: not `0 s outside`, which reads as met.
pub const NO_DATA: &str = "no data";

/// The time an SLI spent outside its objective in a window, or `no data` when the window had no sample.
/// Time with no data is said beside it (`4.0s, no data 12.0s`), never folded into a `0.0s` that reads as met.
pub fn outside_text(stats: &crate::domain::impact::Stats) -> String {
    let no_data = format!("{NO_DATA} {}", super::human_seconds(stats.seconds_no_data));
    match (stats.samples, stats.seconds_no_data > 0.0) {
        (0, false) => NO_DATA.into(),
        (0, true) => no_data,
        (_, true) => format!("{}, {no_data}", super::human_seconds(stats.seconds_outside_objective)),
        (_, false) => super::human_seconds(stats.seconds_outside_objective),
    }
}

/// The error budget a window burned, or `no data`.
pub fn burned_text(stats: &crate::domain::impact::Stats) -> String {
    if stats.samples == 0 { NO_DATA.into() } else { format!("{:.4}%", stats.budget_burned_percent) }
}

/// How long an SLI was outside its objective, how far, and what it cost the error budget.
fn outside(sli: &SliImpact) -> String {
    let no_data = match sli.whole.seconds_no_data {
        s if s > 0.0 => format!(" and had no data for {s:.0} s"),
        _ => String::new(),
    };
    format!(
        "{} was outside its objective {} for {:.0} s{no_data} (min {}, max {}), {:.4}% of the error budget",
        sli.name,
        sli.objective,
        sli.whole.seconds_outside_objective,
        figure(sli.whole.min),
        figure(sli.whole.max),
        sli.whole.budget_burned_percent
    )
}

/// The users' side of the verdict, once an SLI left its objective: each such SLI, then the requests that failed.
pub fn headline(report: &Report) -> Vec<String> {
    let Some(impact) = &report.impact else { return Vec::new() };
    let mut out: Vec<String> =
        impact.slis.iter().filter(|s| !s.met).map(|s| format!("users: {}", outside(s))).collect();
    if let Some(r) = impact.requests.as_ref().filter(|r| r.failed > 0.0 && !out.is_empty()) {
        out.push(format!("users: {:.0} of {:.0} requests failed during the drill", r.failed, r.total));
    }
    out
}

/// A stop condition that fired is a departure from the plan: the drill was cut short to spare the users.
pub fn deviations(report: &Report) -> Vec<Deviation> {
    let Some(stop) = report.impact.as_ref().and_then(|i| i.stop.as_ref()) else { return Vec::new() };
    let at = (stop.at - report.started).num_milliseconds() as f64 / 1000.0;
    vec![Deviation {
        kind: DeviationKind::StepAborted,
        t_seconds: Some(at.max(0.0)),
        what: format!("stop condition {}: the drill was aborted and the cluster restored", stop.describe()),
    }]
}

/// One action item per SLI the drill pushed outside its objective: users felt the fallback.
pub fn action_items(report: &Report, owner: &str) -> Vec<ActionItem> {
    let Some(impact) = &report.impact else { return Vec::new() };
    impact
        .slis
        .iter()
        .filter(|s| !s.met)
        .map(|s| ActionItem {
            source: ActionSource::MissedSlo,
            objective: format!("SLO {} {}", s.name, s.objective),
            measured: format!(
                "{} outside, min {}, max {}",
                outside_text(&s.whole),
                figure(s.whole.min),
                figure(s.whole.max)
            ),
            cause: worst_phase(s),
            owner: owner.into(),
        })
        .collect()
}

/// The phase in which the SLI spent longest outside its objective, where the fix is to be looked for.
fn worst_phase(sli: &SliImpact) -> String {
    sli.by_phase
        .iter()
        .filter(|p| p.stats.seconds_outside_objective > 0.0)
        .max_by(|a, b| a.stats.seconds_outside_objective.total_cmp(&b.stats.seconds_outside_objective))
        .map_or_else(
            || format!("{}: the users' side of the fallback", outside(sli)),
            |p| {
                format!(
                    "{} outside its objective mostly during {} ({:.0} s): users waited on that phase",
                    sli.name, p.phase, p.stats.seconds_outside_objective
                )
            },
        )
}

/// How late the SLIs show what users see, from the scrape interval and the rate windows.
pub fn lag_text(impact: &crate::domain::impact::Impact) -> Option<String> {
    let lag = impact.detection_lag_seconds?;
    let scrape = impact.scrape_interval_seconds.map(|s| format!("a {} scrape, ", super::human_seconds(s)));
    Some(format!(
        "Detection lag: the SLIs show a change up to {} after users see it ({}half the widest rate window and the \
         drill's {} reading interval): stop conditions fire and users are seen served again that much later.",
        super::human_seconds(lag),
        scrape.unwrap_or_default(),
        super::human_seconds(impact.interval_seconds)
    ))
}

/// The Markdown report's section on the users: each SLI over the drill, the requests, when users were served again
/// beside the RTO, and each replacement's first good answer.
pub fn markdown(md: &mut String, report: &Report) -> std::fmt::Result {
    use std::fmt::Write;
    let Some(impact) = &report.impact else { return Ok(()) };
    writeln!(md, "\n## What users saw (SLIs from {})\n", impact.prometheus)?;
    if let Some(stand_in) = &impact.stand_in {
        writeln!(md, "{stand_in}.\n")?;
    }
    writeln!(
        md,
        "| SLI | Objective | Met | Min | Mean | p99 | Max | Outside | Error budget |\n|---|---|---|---|---|---|---|---|---|"
    )?;
    for s in &impact.slis {
        let w = &s.whole;
        let unit = s.unit.as_deref();
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.name,
            objective_with_unit(s),
            if s.met { "yes" } else { "no" },
            with_unit(w.min, unit),
            with_unit(w.mean, unit),
            with_unit(w.p99, unit),
            with_unit(w.max, unit),
            outside_text(w),
            burned_text(w)
        )?;
    }
    if let Some(r) = &impact.requests {
        writeln!(
            md,
            "\nRequests: {:.0} sent, {:.0} failed ({:.4}% of the error budget).",
            r.total, r.failed, r.budget_burned_percent
        )?;
    }
    let served = impact.users_served_again_seconds.map_or("not within the drill".into(), super::human_seconds);
    let rto = impact.rto_seconds.map_or("not measured".into(), super::human_seconds);
    writeln!(md, "\nUsers served again after the fault: {served} (RTO: {rto}).")?;
    if let Some(lag) = lag_text(impact) {
        writeln!(md, "\n{lag}")?;
    }
    for a in &impact.ready_to_first_good_answer {
        let at = a.location.as_deref().map(|l| format!(" ({l})")).unwrap_or_default();
        writeln!(md, "- {}{at}: first good answer {} after Ready", a.pod, super::human_seconds(a.seconds))?;
    }
    if let Some(stop) = &impact.stop {
        writeln!(md, "\nStopped by: {}.", stop.describe())?;
    }
    for e in &impact.prometheus_errors {
        writeln!(md, "\nPrometheus error at {} ({}): {}", e.at.format("%H:%M:%S UTC"), e.action, e.message)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use crate::domain::impact::{Impact, RequestImpact, SliImpact, Stats, StopRecord};
    use crate::timeline::Event;

    /// The sample run with an impact recorded at its end: the success ratio 8 s outside its objective, a stop.
    fn with_impact() -> super::Report {
        let stats =
            Stats { samples: 8, min: Some(0.69), max: Some(1.0), seconds_outside_objective: 8.0, ..Stats::default() };
        let at = sample::base() + chrono::Duration::seconds(20);
        let impact = Impact {
            prometheus: "http://prometheus:9090/".into(),
            slis: vec![SliImpact {
                name: "success-ratio".into(),
                query: "q".into(),
                objective: ">= 0.99".into(),
                unit: None,
                met: false,
                whole: stats,
                by_phase: Vec::new(),
                series: vec![[0.0, 1.0], [10.0, 0.69]],
            }],
            requests: Some(RequestImpact {
                total: 280.0,
                failed: 111.0,
                budget_burned_percent: 0.3,
                by_phase: Vec::new(),
            }),
            stop: Some(StopRecord {
                condition: "success-ratio <= 0.9 for 4s".into(),
                value: Some(0.69),
                since: at,
                at,
                no_data: false,
            }),
            ..Impact::default()
        };
        let mut timeline = sample::timeline();
        let last = timeline.last().unwrap().clone();
        timeline.push(crate::timeline::Observation { event: Event::SloImpact { impact: Box::new(impact) }, ..last });
        super::super::build(&sample::drill(), &timeline, &sample::meta())
    }

    #[test]
    fn the_recorded_impact_reaches_the_headline_the_deviations_the_action_items_and_the_markdown() {
        let report = with_impact();
        let impact = report.impact.as_ref().expect("the impact the timeline recorded");
        assert_eq!(impact.slis[0].name, "success-ratio");
        let headline: Vec<&str> = report.headline.iter().map(|q| q.text.as_str()).collect();
        assert!(
            headline.iter().any(|t| t.starts_with("users: success-ratio was outside its objective >= 0.99 for 8 s"))
        );
        assert!(headline.contains(&"users: 111 of 280 requests failed during the drill"), "{headline:?}");
        assert!(report.deviations.iter().any(|d| d.what.starts_with("stop condition `success-ratio <= 0.9 for 4s`")));
        assert!(report.action_items.iter().any(|a| a.source == super::ActionSource::MissedSlo));
        let md = super::super::markdown::render(&report);
        assert!(md.contains("## What users saw") && md.contains("| success-ratio | >= 0.99 | no |"), "{md}");
    }

    #[test]
    fn a_run_without_slis_says_nothing_of_users() {
        let report = sample::report();
        assert!(report.impact.is_none() && super::headline(&report).is_empty());
        assert!(!super::super::markdown::render(&report).contains("What users saw"));
    }
}
