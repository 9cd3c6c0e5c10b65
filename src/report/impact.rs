//! The users' impact (`report.impact`) in the JUnit and Prometheus formats: a test case per SLO, and gauges of each
//! SLI's figures, the requests failed and the time until users were served again.

use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus};

use super::Report;

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
