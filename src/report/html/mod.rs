//! `report.html`: one self-contained page per run, for the change record: the verdict, a Gantt chart of the phases
//! with the drill's events and milestones in inline SVG, the objectives, steps, fidelity, fallback cost and overlap.
//! Written with maud: every value is escaped where it is interpolated, in text and attributes alike.

mod chart;
mod impact;
mod parts;
mod sections;

use maud::html;

use crate::report::Report;
use crate::report::page::page;
use chart::timeline;
use sections::{
    autoscaler, deviations_and_actions, events, fallback, fallback_faults, header, last_tier, measured, overlap,
    phases, plain_legend, restore_and_warnings, startup, steps,
};

pub fn render(report: &Report) -> String {
    let body = html! {
        (header(report))
        (plain_legend())
        (timeline(report, impact::plots, impact::zoomed_plots))
        (phases(report))
        (crate::report::forecast::html(report))
        (startup(report))
        (steps(report))
        (deviations_and_actions(report))
        section { h2 { "Fidelity" } p { (report.fidelity) } }
        (fallback(report))
        (fallback_faults(report))
        (last_tier(report))
        (crate::report::nets::html(report))
        (overlap(report))
        (autoscaler(report))
        (restore_and_warnings(report))
        (events(report))
        (measured(report))
        section {
            h2 { "Drill file as run" }
            p class="muted" { (report.drill.file) }
            pre { (report.drill.source.trim_end()) }
        }
    };
    page(&format!("{}: {} · {}", report.kind.heading(), report.drill.name, report.run_id), body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::PhaseId;
    use crate::report::sample;

    #[test]
    fn every_phase_has_a_lane_and_every_event_kind_a_marker_lane() {
        let report = sample::report();
        let html = render(&report);
        for p in &report.phases {
            assert!(html.contains(&format!(r#"data-phase="{}""#, p.name)), "no lane for {}", p.name);
        }
        for kind in ["fault / abort", "evictions", "NodeClaims", "nodes", "taints", "service", "return / restore"] {
            assert!(html.contains(&format!(r#"data-kind="{kind}""#)), "no marker lane {kind}");
        }
        for n in 1..=report.milestones.len() {
            assert!(html.contains(&format!("<tr><td class=\"num\">{n}</td>")), "milestone {n} not listed");
        }
        // the reclaim waits long after the service is back: the recovery gets its own chart
        let recovery = html.split(r#"<svg id="gantt-recovery""#).nth(1).expect("a zoomed recovery chart");
        assert!(recovery.contains(r#"data-phase="rto""#) && !recovery.contains(r#"data-phase="reclaim""#));
        // provisioning took 6s against 5s: its bar is red; the RTO met its objective
        assert!(html.contains(r#"data-phase="provisioning"><text class="lane-label" x="4" y="#));
        let provisioning = html.split(r#"data-phase="provisioning""#).nth(1).unwrap();
        assert!(provisioning.split("</g>").next().unwrap().contains("bar-missed"));
        let rto = html.split(r#"data-phase="rto""#).nth(1).unwrap().split("</g>").next().unwrap();
        assert!(rto.contains("bar-met") && rto.contains("11.6s / 1m 00.0s"), "{rto}");
        assert!(html.contains("objective missed") && html.contains("$0.04"), "verdict and cost shown");
    }

    #[test]
    fn is_self_contained_and_escapes_text() {
        let html = render(&sample::report());
        assert!(!html.contains("<script"));
        assert!(!html.contains("src=") && !html.contains("href=") && !html.contains("@import"));
        assert_eq!(html.matches("url(").count(), html.matches("url(#hatch-").count(), "only the page's own pattern");
        assert!(html.contains("Drain &lt;h200&gt; &amp; fall back"));
        assert!(html.contains("&lt;timings shortened&gt;"));
        assert!(!html.contains("<h200>") && !html.contains("<timings"));
        assert!(html.contains("@media print"));
    }

    #[test]
    fn values_in_attributes_cannot_leave_them() {
        let mut report = sample::report();
        report.notable_events[0].what = "</title><script>".into();
        let html = render(&report);
        // A step's outcome, the one value in a class attribute, is a StepOutcome now: it cannot carry markup.
        assert!(!html.contains(r#"" onmouseover"#) && !html.contains("<script"));
        assert!(html.contains("&lt;/title&gt;&lt;script&gt;"));
    }

    #[test]
    fn an_aborted_run_with_an_overlap_says_so() {
        let mut report = sample::report();
        report.outcome = crate::report::Outcome::Aborted;
        report.abort_reason = Some("interrupted by SIGINT".into());
        let from = report.milestones[0].clone();
        report.overlap = Some(crate::report::OverlapWindow {
            from,
            to: None,
            seconds: None,
            unconfirmed_pods: vec!["llm-old".into()],
        });
        report.phases.retain(|p| p.name != PhaseId::Reclaim);
        report.phases.iter_mut().filter(|p| p.name == PhaseId::Return).for_each(|p| p.to = None);
        let html = render(&report);
        assert!(html.contains("Stopped because:</strong> interrupted by SIGINT"));
        assert!(html.contains(r#"data-phase="overlap""#) && html.contains("never confirmed gone: llm-old"));
        let ret = html.split(r#"data-phase="return""#).nth(1).unwrap().split("</g>").next().unwrap();
        assert!(ret.contains("bar-incomplete"), "{ret}");
    }
}
