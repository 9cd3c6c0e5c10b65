//! The history on a terminal, within its width (`COLUMNS`, else the terminal's, else 80): per series one row per run
//! (date, verdict, RTO and its change), the latest run phase by phase, where the drill file changed, and the
//! regressions, each wrapped at a word.

use std::fmt::Write;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Color, ContentArrangement, Table};

use super::{
    Change, DrillHistory, History, RunRow, change_text, date, header, objective_text, value_text, verdict_text,
};
use crate::phases::PhaseId;
use crate::report::{Outcome, counted};

/// The width to fit: `COLUMNS` when set, else the terminal's, else 80.
pub fn terminal_width() -> usize {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|c| *c >= 40);
    columns.or_else(|| Table::new().width().map(usize::from)).unwrap_or(80)
}

/// The history as text no wider than `width` columns.
pub fn render_text(h: &History, width: usize) -> String {
    let mut out = String::new();
    for d in &h.drills {
        wrapped(&mut out, &format!("{}: {}", d.series.title(), counted(d.runs.len(), "run")), width, "");
        let _ = writeln!(out, "{}", runs_table(d, width));
        if let Some(b) = &d.against {
            wrapped(&mut out, &b.sentence(), width, "  ");
        }
        for (r, before) in changed_files(d) {
            wrapped(
                &mut out,
                &format!(
                    "◆ {}: the drill file changed (sha256 {} → {}); figures before it measured another drill",
                    date(&r.started),
                    &before[..12],
                    &r.drill_sha256[..12]
                ),
                width,
                "  ",
            );
        }
        if let Some(latest) = d.runs.last() {
            wrapped(&mut out, &format!("latest run ({}), phase by phase:", date(&latest.started)), width, "");
            let _ = writeln!(out, "{}", phases_table(d, latest, width));
        }
        wrapped(
            &mut out,
            &format!(
                "regressions (a phase {}; an incident against the latest drill):",
                super::rule_text(h.regression_ratio)
            ),
            width,
            "",
        );
        let flagged: Vec<String> = d
            .runs
            .iter()
            .flat_map(|r| r.regressions.iter().map(move |g| format!("{} {}: {g}", date(&r.started), verdict_text(r))))
            .collect();
        if flagged.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for line in flagged {
            wrapped(&mut out, &format!("  {line}"), width, "    ");
        }
        out.push('\n');
    }
    out
}

fn table(width: usize) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_width(width.min(u16::MAX as usize) as u16);
    table
}

/// One row per run: date, verdict, the RTO, its change, and a mark for regressions and a changed drill file.
fn runs_table(d: &DrillHistory, width: usize) -> Table {
    let rto = d.phases.iter().position(|c| c.name == PhaseId::Rto);
    let mut t = table(width);
    let rto_head = rto.map_or_else(|| "RTO".to_string(), |i| header(&d.phases[i]));
    t.set_header(vec!["run (UTC)".to_string(), "verdict".into(), rto_head, "vs previous".into(), "⚠".into()]);
    for r in &d.runs {
        let cell = rto.map(|i| &r.phases[i]);
        let flags = [
            (!r.regressions.is_empty()).then(|| format!("⚠{}", r.regressions.len())),
            r.drill_changed.then(|| "◆".to_string()),
        ];
        t.add_row(vec![
            Cell::new(date(&r.started)),
            Cell::new(verdict_text(r)).fg(if r.outcome == Outcome::Passed && !r.crashed {
                Color::Green
            } else {
                Color::Red
            }),
            Cell::new(cell.map(value_text).unwrap_or_default()),
            Cell::new(cell.map(change_text).unwrap_or_default()),
            Cell::new(flags.into_iter().flatten().collect::<Vec<_>>().join(" ")),
        ]);
    }
    t
}

/// The latest run's phases: how long each took, against the previous run and the objective.
fn phases_table(d: &DrillHistory, latest: &RunRow, width: usize) -> Table {
    let mut t = table(width);
    t.set_header(vec!["phase", "took", "vs previous", "vs objective"]);
    for (c, cell) in d.phases.iter().zip(&latest.phases) {
        if cell.seconds.is_none() && cell.verdict.is_none() {
            continue;
        }
        let flagged = |text: String, c: &Change| {
            if c.regression.is_some() { Cell::new(text).fg(Color::Red) } else { Cell::new(text) }
        };
        t.add_row(vec![
            Cell::new(header(&super::PhaseColumn { objective_seconds: None, ..c.clone() })),
            flagged(value_text(cell), cell),
            Cell::new(change_text(cell)),
            Cell::new(objective_text(cell)),
        ]);
    }
    t
}

/// Each run whose drill file differs from the run before it, with that run's sha256.
fn changed_files(d: &DrillHistory) -> Vec<(&RunRow, &str)> {
    d.runs.windows(2).filter(|w| w[1].drill_changed).map(|w| (&w[1], w[0].drill_sha256.as_str())).collect()
}

/// Appends `text` wrapped at words to `width`, continuation lines indented by `indent`.
fn wrapped(out: &mut String, text: &str, width: usize, indent: &str) {
    let mut line = String::new();
    for word in text.split(' ') {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            let _ = writeln!(out, "{line}");
            line = indent.to_string();
        } else if len > 0 && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    let _ = writeln!(out, "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::history::{build, tests::three_runs};

    #[test]
    fn every_line_fits_in_80_columns() {
        let h = build(three_runs(), 0.2, &[]);
        let text = render_text(&h, 80);
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{} columns: {line}\n{text}", line.chars().count());
        }
        assert!(text.contains("latest run (2026-07-06 09:30), phase by phase:"), "{text}");
        assert!(text.contains("+1m 03.0s"), "{text}");
    }

    #[test]
    fn words_wrap_without_cutting_one() {
        let mut out = String::new();
        wrapped(&mut out, "aaa bbb ccc ddd", 8, "  ");
        assert_eq!(out, "aaa bbb\n  ccc\n  ddd\n");
    }
}
