//! The summary printed on the terminal at the end of a run.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Color, ContentArrangement, Table};

use super::{Report, phase_label, seconds_cell, verdict_word};
use crate::phases::Verdict;

/// The summary within `width` columns (`history::terminal_width`: `COLUMNS`, else the terminal's, else 80): a CI log
/// is no terminal, and a table sized to its longest cells runs past any log viewer.
pub fn render(report: &Report, run_dir: &str, width: usize) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_content_arrangement(ContentArrangement::Dynamic);
    table.set_width(u16::try_from(width).unwrap_or(u16::MAX));
    table.set_header(vec!["phase", "from", "to", "duration", "server clock", "objective", "verdict"]);
    for p in &report.phases {
        let verdict = Cell::new(verdict_word(p)).fg(match p.verdict {
            Verdict::Met => Color::Green,
            Verdict::Missed => Color::Red,
            Verdict::Incomplete | Verdict::Inconsistent if p.objective_seconds.is_some() => Color::Red,
            _ => Color::Reset,
        });
        table.add_row(vec![
            Cell::new(phase_label(p)),
            Cell::new(p.from.as_ref().map(|b| b.label.as_str()).unwrap_or("-")),
            Cell::new(p.to.as_ref().map(|b| b.label.as_str()).unwrap_or("-")),
            Cell::new(seconds_cell(p.seconds)),
            Cell::new(p.server_seconds.map(|s| format!("{s}s")).unwrap_or_else(|| "-".into())),
            Cell::new(seconds_cell(p.objective_seconds)),
            verdict,
        ]);
    }
    let mut out =
        format!("\n{} · {} on {}\n", report.drill.name, super::headline::verdict(report), report.cluster.context);
    for q in &report.headline {
        out.push_str(&format!("  {}: {}\n", q.kind.tag(), q.text));
    }
    out.push_str(&format!("{table}\n{}", super::forecast::terminal(report)));
    for note in [super::figures::rto_breakdown(report), super::figures::startup_note(report)].into_iter().flatten() {
        out.push_str(&format!("{note}\n"));
    }
    let f = &report.fallback;
    if f.nodes > 0 {
        let cost = f.estimated_cost.map(|c| format!(", estimated ${c:.2}")).unwrap_or_default();
        out.push_str(&format!(
            "fallback: {} nodes, {:.3} GPU-hours, peak {} GPUs{cost}\n",
            f.nodes, f.gpu_hours, f.max_gpus
        ));
        if let Some(pools) = super::by_node_pool(f) {
            out.push_str(&format!("fallback by NodePool: {pools}\n"));
        }
    }
    if let Some(o) = &report.overlap {
        out.push_str(&format!("overlap (split brain): {}\n", super::overlap_sentence(o)));
    }
    for line in report.fallback_faults.lines() {
        out.push_str(&format!("fallback under failure: {line}\n"));
    }
    for line in report.gpu_fault.iter().flat_map(|g| g.lines()) {
        out.push_str(&format!("GPU fault: {line}\n"));
    }
    for line in report.last_tier.iter().flat_map(|t| t.lines()) {
        out.push_str(&format!("last tier: {line}\n"));
    }
    for line in report.safety_nets.iter().flat_map(super::nets::lines) {
        out.push_str(&format!("safety net: {line}\n"));
    }
    if let Some(rb) = &report.rollback {
        for u in &rb.undone {
            out.push_str(&format!("restored: {u}\n"));
        }
        for u in &rb.failed {
            out.push_str(&format!("NOT RESTORED: {u}\n"));
        }
        for v in &rb.verified {
            out.push_str(&format!("verified: {v}\n"));
        }
    }
    // The unexpected leftovers head the report among its qualifiers; the expected ones are said here.
    for l in report.leftovers.iter().filter(|l| l.expected) {
        out.push_str(&format!("{}\n", l.line()));
    }
    out.push_str(&evidence_lines(report));
    out.push_str(&format!("report: {run_dir}/report.md ({} API requests)\n", report.api_requests));
    out
}

/// Who ran it and under which change, and how many deviations and action items the report lists.
fn evidence_lines(report: &Report) -> String {
    let mut out = String::new();
    if let Some(p) = &report.provenance {
        let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        out.push_str(&format!(
            "initiated by {} · change {} · approved by {}\n",
            p.initiator_line(),
            or_none(&p.change),
            or_none(&p.approved_by)
        ));
    }
    out.push_str(&format!("deviations: {} · action items: {}\n", report.deviations.len(), report.action_items.len()));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_phase_table_fits_the_width_it_is_given() {
        let out = super::render(&crate::report::sample::report(), "reports/d/r", 80);
        let table: Vec<&str> = out.lines().filter(|l| l.starts_with(['│', '┌', '├', '└', '╞'])).collect();
        assert!(table.len() > 5, "{out}");
        for line in table {
            assert!(line.chars().count() <= 80, "{} columns: {line}", line.chars().count());
        }
    }
}
