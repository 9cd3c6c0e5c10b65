//! `junit.xml`: each objective a test case and one for the drill's outcome, so CI dashboards show a drill's verdict.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

use super::{Outcome, Report, human_seconds, verdict_word};
use crate::phases::{Phase, Verdict};

pub fn render(report: &Report) -> Result<String, quick_junit::SerializeError> {
    let mut suite = TestSuite::new(report.drill.name.as_str());
    suite.set_timestamp(report.started);
    suite.set_time(seconds((report.finished - report.started).num_milliseconds() as f64 / 1000.0));
    suite.add_properties([
        Property::new("run_id", report.run_id.as_str()),
        Property::new("context", report.cluster.context.as_str()),
        Property::new("drill_file", report.drill.file.as_str()),
        Property::new("fidelity", report.fidelity.as_str()),
        Property::new("fallback_gpu_hours", format!("{:.3}", report.fallback.gpu_hours)),
        Property::new("deviations", report.deviations.len().to_string()),
        Property::new("action_items", report.action_items.len().to_string()),
    ]);
    if let Some(p) = &report.provenance {
        suite.add_properties([
            Property::new("initiated_by", p.initiator_line()),
            Property::new("change", p.change.clone().unwrap_or_default()),
            Property::new("approved_by", p.approved_by.clone().unwrap_or_default()),
            Property::new("host", p.host.as_str()),
            Property::new("tool_commit", p.git_commit.as_str()),
            Property::new("drill_sha256", p.drill_sha256.as_str()),
        ]);
    }
    let classname = format!("hybrid-drill.{}", report.drill.name);

    suite.add_test_case(outcome_case(report, &classname));
    for p in report.phases.iter().filter(|p| p.objective_seconds.is_some()) {
        suite.add_test_case(objective_case(p, &classname));
    }

    let mut junit = quick_junit::Report::new("hybrid-drill");
    junit.set_timestamp(report.started);
    junit.add_test_suite(suite);
    junit.to_string()
}

/// The drill's outcome as one test case: a miss is a failure, a drill that did not run to its end an error.
fn outcome_case(report: &Report, classname: &str) -> TestCase {
    let mut outcome = match report.outcome {
        Outcome::Passed => TestCaseStatus::success(),
        Outcome::ObjectiveMissed => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_type("objective-missed");
            s.set_message(format!("objectives missed: {}", report.missed_list()));
            s
        }
        Outcome::LeftBehind => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_type(report.outcome.slug());
            let left: Vec<String> = report.leftovers.iter().map(|l| l.line()).collect();
            s.set_message(format!("left behind: {}", left.join("; ")));
            s
        }
        // The drill did not run to its end: an error, not a measured miss.
        Outcome::Aborted | Outcome::RestoreFailed | Outcome::Refused => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_type(report.outcome.slug());
            s.set_message(report.abort_reason.clone().unwrap_or_else(|| report.outcome.as_str().into()));
            s
        }
    };
    // What each step did explains an abort; a completed drill's steps all passed, and its misses have their own cases.
    if matches!(report.outcome, Outcome::Aborted | Outcome::RestoreFailed | Outcome::Refused) {
        let steps: Vec<String> = report
            .steps
            .iter()
            .map(|s| format!("{}: {}{}", s.id, s.outcome, if s.message.is_empty() { "" } else { ": " }) + &s.message)
            .collect();
        outcome.set_description(steps.join("\n"));
    }
    let mut case = TestCase::new("drill outcome", outcome);
    case.set_classname(classname);
    case.set_time(seconds((report.finished - report.started).num_milliseconds() as f64 / 1000.0));
    case
}

/// One phase with an objective as a test case: met, missed by how much, or not measured.
fn objective_case(p: &Phase, classname: &str) -> TestCase {
    let objective = p.objective_seconds.unwrap_or_default();
    let name = p.name.title();
    let status = match (p.verdict, p.seconds) {
        (Verdict::Met, _) => TestCaseStatus::success(),
        (_, Some(s)) => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_type("objective-missed");
            status.set_message(format!(
                "{name} took {} against an objective of {} ({} over)",
                human_seconds(s),
                human_seconds(objective),
                human_seconds(s - objective)
            ));
            status
        }
        (_, None) => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_type("not-measured");
            status.set_message(format!(
                "{name} was not measured ({}); objective {}",
                p.note.as_deref().unwrap_or(verdict_word(p)),
                human_seconds(objective)
            ));
            status
        }
    };
    let mut case = TestCase::new(format!("{name} within {}", human_seconds(objective)), status);
    case.set_classname(classname);
    if let Some(s) = p.seconds {
        case.set_time(seconds(s));
    }
    case
}

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::PhaseId;
    use crate::report::sample;

    #[test]
    fn each_objective_is_a_case_and_misses_are_failures() {
        let xml = render(&sample::report()).unwrap();
        assert!(xml.starts_with("<?xml"), "{xml}");
        assert!(xml.contains(r#"<testsuite name="onprem-gpu-drain" tests="4""#), "{xml}");
        assert!(xml.contains(r#"failures="3""#), "{xml}");
        assert!(xml.contains(r#"<testcase name="RTO within 1m 00.0s" classname="hybrid-drill.onprem-gpu-drain""#));
        assert!(xml.contains(r#"provisioning took 6.0s against an objective of 5.0s (1.0s over)"#), "{xml}");
        assert!(xml.contains(r#"<testcase name="drill outcome""#));
        assert!(xml.contains(r#"type="objective-missed""#));
    }

    #[test]
    fn an_aborted_drill_is_an_error_and_unmeasured_objectives_fail() {
        let mut report = sample::report();
        report.outcome = Outcome::Aborted;
        report.abort_reason = Some("interrupted by SIGINT & <restored>".into());
        for p in report.phases.iter_mut().filter(|p| p.name == PhaseId::Rto) {
            p.to = None;
            p.seconds = None;
            p.verdict = Verdict::Incomplete;
            p.note = Some("end not observed".into());
        }
        let xml = render(&report).unwrap();
        assert!(xml.contains(r#"errors="1""#), "{xml}");
        assert!(xml.contains("interrupted by SIGINT &amp; &lt;restored&gt;"), "{xml}");
        assert!(xml.contains("RTO was not measured (end not observed); objective 1m 00.0s"), "{xml}");
    }
}
