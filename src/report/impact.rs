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
                s.set_message(format!(
                    "{} was outside its objective {} for {:.0}s (min {}, p99 {}), {:.4}% of the error budget",
                    sli.name,
                    sli.objective,
                    sli.whole.seconds_outside_objective,
                    sli.whole.min.map_or("-".into(), |v| v.to_string()),
                    sli.whole.p99.map_or("-".into(), |v| v.to_string()),
                    sli.whole.budget_burned_percent
                ));
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

/// How long an SLI was outside its objective, how far, and what it cost the error budget.
fn outside(sli: &SliImpact) -> String {
    format!(
        "{} was outside its objective {} for {:.0} s (min {}, max {}), {:.4}% of the error budget",
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
                "{:.0} s outside, min {}, max {}",
                s.whole.seconds_outside_objective,
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
