//! What the chart and the sections of the page share: which phase is the RTO, verdict classes, legends, lane
//! labels and marker colours.

use maud::{Markup, html};

use crate::phases::{Boundary, Phase, PhaseId, Verdict};
use crate::report::{Marker, Report};
use crate::timeline::rfc3339;

// The only places this page reads a phase's name, so that a typed name changes them alone.
pub(super) fn is_rto(p: &Phase) -> bool {
    p.name == PhaseId::Rto
}

pub(super) fn rto(report: &Report) -> Option<&Phase> {
    report.phases.iter().find(|p| is_rto(p))
}

/// The CSS class of a phase's verdict; also names its bar in the chart.
pub(super) fn verdict_class(p: &Phase) -> &'static str {
    match p.verdict {
        Verdict::Met => "met",
        Verdict::Missed => "missed",
        Verdict::NoObjective => "none",
        Verdict::Incomplete | Verdict::Inconsistent if p.objective_seconds.is_some() => "missed",
        Verdict::Incomplete | Verdict::Inconsistent => "incomplete",
    }
}

/// The clocks and bounds of the figures just shown: one legend line each.
pub(super) fn legend_lines(lines: &[String]) -> Markup {
    html! {
        ul class="legend-lines muted" { @for line in lines { li { (line) } } }
    }
}

pub(super) fn time_or_dash(t: Option<&chrono::DateTime<chrono::Utc>>) -> String {
    t.map(rfc3339).unwrap_or_else(|| "-".into())
}

/// A phase's lane label: `RTO`, a top-level phase by its name, a sub-phase indented under its parent.
pub(super) fn lane_label(p: &Phase) -> String {
    match &p.parent {
        Some(_) => format!("└ {}", p.name.title()),
        None => p.name.title().into(),
    }
}

pub(super) fn marker_color(kind: Marker) -> &'static str {
    match kind {
        Marker::Fault => "#c62828",
        Marker::Eviction => "#ef6c00",
        Marker::NodeClaim => "#6a1b9a",
        Marker::Node => "#1565c0",
        Marker::Taint => "#8d6e63",
        Marker::Service => "#2e7d32",
        Marker::Restore => "#00838f",
        Marker::Other => "#757575",
    }
}

pub(super) fn seconds_of(b: &Boundary) -> f64 {
    b.t_ms as f64 / 1000.0
}
