//! Preflight for people (a table) and for scripts (JSON): pure functions of the report.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Color, ContentArrangement, Table};

use super::{PreflightReport, Status};

fn colour(status: Status) -> Color {
    match status {
        Status::Pass => Color::Green,
        Status::Warn => Color::Yellow,
        Status::Fail => Color::Red,
        Status::Info | Status::Skip => Color::Reset,
    }
}

/// The findings as a table, each with its fix, and the verdict.
pub fn table(report: &PreflightReport) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    if table.width().is_none() {
        // Not a terminal: wrap for a log or a change record, not for an unknown screen.
        table.set_width(140);
    }
    table.set_header(vec!["check", "status", "object", "finding"]);
    for f in &report.findings {
        let mut text = f.message.clone();
        if let Some(fix) = &f.fix
            && f.status >= Status::Warn
        {
            text.push_str(&format!("\nfix: {fix}"));
        }
        table.add_row(vec![
            Cell::new(f.check.as_str()),
            Cell::new(f.status.as_str().to_uppercase()).fg(colour(f.status)),
            Cell::new(&f.object),
            Cell::new(text),
        ]);
    }
    let t = &report.targets;
    format!(
        "preflight of context {} ({}): on-prem nodes {}, workload {}/{}, fallback NodePool {}\n{table}\n{}\n",
        report.context,
        report.server,
        t.nodes,
        t.namespace,
        t.selector,
        t.node_pool,
        verdict_line(report)
    )
}

/// `preflight: FAIL (2 failed, 1 warning, 14 passed)`.
pub fn verdict_line(report: &PreflightReport) -> String {
    format!(
        "preflight: {} ({} failed, {} warnings, {} passed)",
        report.verdict.as_str().to_uppercase(),
        report.count(Status::Fail),
        report.count(Status::Warn),
        report.count(Status::Pass)
    )
}

pub fn json(report: &PreflightReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_default()
}
