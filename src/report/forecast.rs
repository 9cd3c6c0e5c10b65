//! The forecast `run` recorded before its fault (forecast.json) against the phases the run measured: one section
//! per format, and the finding when the measured RTO fell outside the interval.

use std::fmt::{self, Write};
use std::path::Path;

use maud::{Markup, html};

use super::Report;
use super::words::human_seconds;
use crate::phases::PhaseId;
use crate::whatif::forecast::{self, PhaseCheck};

/// Sets `report.forecast` from the run directory's forecast.json, when the run recorded one with an RTO.
pub fn attach(run_dir: &Path, report: &mut Report) {
    let Some(f) = forecast::read(run_dir) else { return };
    let measured = |name: &str| name.parse::<PhaseId>().ok().and_then(|id| report.phase(id)).and_then(|p| p.seconds);
    report.forecast = forecast::check(&f, measured);
    if let Some(finding) = report.forecast.as_ref().and_then(|c| c.finding.clone()) {
        let text = format!("forecast: {finding}");
        if !report.headline.iter().any(|q| q.text == text) {
            report.headline.push(super::model::Qualifier { kind: super::model::QualifierKind::Warning, text });
        }
    }
}

fn rows(report: &Report) -> Vec<&PhaseCheck> {
    report.forecast.iter().flat_map(|f| f.phases.iter().chain([&f.rto])).collect()
}

fn measured(p: &PhaseCheck) -> String {
    p.measured_seconds.map_or("-".into(), human_seconds)
}

fn within(p: &PhaseCheck) -> &'static str {
    match (p.measured_seconds, p.inside) {
        (None, _) => "not measured",
        (Some(_), true) => "inside",
        (Some(_), false) => "outside",
    }
}

/// The report with its forecast attached, for writing it into the run directory.
pub fn with_forecast(run_dir: &Path, report: &Report) -> Report {
    let mut report = report.clone();
    attach(run_dir, &mut report);
    report
}

/// report.md's section.
pub fn markdown(md: &mut String, report: &Report) -> fmt::Result {
    let Some(f) = &report.forecast else { return Ok(()) };
    writeln!(md, "## Forecast against measured\n")?;
    writeln!(md, "Forecast before the fault from {} earlier run(s) (`hybrid-drill predict`).\n", f.based_on.len())?;
    if let Some(finding) = &f.finding {
        writeln!(md, "**Finding:** {finding}.\n")?;
    }
    writeln!(md, "| Phase | Forecast | Interval | Measured | |\n|---|---|---|---|---|")?;
    for p in rows(report) {
        writeln!(
            md,
            "| {} | {} | {} to {} | {} | {} |",
            p.phase,
            human_seconds(p.predicted_seconds),
            human_seconds(p.low_seconds),
            human_seconds(p.high_seconds),
            measured(p),
            within(p)
        )?;
    }
    writeln!(md)
}

/// report.html's section.
pub fn html(report: &Report) -> Markup {
    let Some(f) = &report.forecast else { return html! {} };
    html! {
        section {
            h2 { "Forecast against measured" }
            @if let Some(finding) = &f.finding { p { strong { "Finding: " } (finding) } }
            table {
                thead { tr { th { "Phase" } th { "Forecast" } th { "Interval" } th { "Measured" } th {} } }
                tbody {
                    @for p in rows(report) {
                        tr {
                            td { (p.phase) }
                            td { (human_seconds(p.predicted_seconds)) }
                            td { (human_seconds(p.low_seconds)) " to " (human_seconds(p.high_seconds)) }
                            td { (measured(p)) }
                            td { (within(p)) }
                        }
                    }
                }
            }
        }
    }
}

/// The lines the terminal summary adds.
pub fn terminal(report: &Report) -> String {
    let Some(f) = &report.forecast else { return String::new() };
    let r = &f.rto;
    let mut text = format!(
        "forecast RTO {} ({} to {}), measured {}: {}\n",
        human_seconds(r.predicted_seconds),
        human_seconds(r.low_seconds),
        human_seconds(r.high_seconds),
        measured(r),
        within(r)
    );
    if let Some(finding) = &f.finding {
        text.push_str(&format!("finding: {finding}\n"));
    }
    text
}
