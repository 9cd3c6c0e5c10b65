//! The history as one self-contained HTML page: per drill, the table of runs and the trend of each phase over the
//! runs (inline SVG line charts, the objective as a dashed line, regressions ringed in red). Written with maud, which
//! escapes every interpolated value.

use maud::{Markup, html};

use super::{Change, DrillHistory, History, PhaseColumn, RunRow, change_text, date, objective_text};
use crate::phases::Verdict;
use crate::report::Outcome;
use crate::report::human_seconds;
use crate::report::page::{Coord, axis, page, tick_label, ticks};

pub fn render(h: &History) -> String {
    let body = html! {
        header {
            h1 { "Drill history" }
            p class="muted" {
                "Durations on the tool's clock. A regression (" span class="regression" { "⚠" } ") is a phase "
                (super::rule_text(h.regression_ratio)) "."
            }
        }
        @for d in &h.drills { (drill(d)) }
    };
    page("Drill history", body)
}

// The column's phase name is read here and in `trend` only, so that a typed name changes these alone.
fn column_header(c: &PhaseColumn) -> String {
    match &c.parent {
        Some(_) => format!("└ {}", c.name),
        None => c.name.title().into(),
    }
}

fn drill(d: &DrillHistory) -> Markup {
    let flagged: Vec<String> = d
        .runs
        .iter()
        .flat_map(|r| r.regressions.iter().map(move |g| format!("{} ({}): {g}", date(&r.started), r.run_id)))
        .collect();
    html! {
        section class="drill" data-drill=(d.drill) {
            h2 { (d.series.title()) }
            p { (crate::report::counted(d.runs.len(), "run")) "." }
            @for w in d.runs.windows(2).filter(|w| w[1].drill_changed) {
                p class="muted" {
                    "◆ " (date(&w[1].started)) ": the drill file changed (sha256 " (w[0].drill_sha256[..12]) " → "
                    (w[1].drill_sha256[..12]) "); figures before it measured another drill."
                }
            }
            // At most a page's width of phase columns per table, the run and verdict repeated: a wide table hides
            // columns behind a scroll bar on screen and cuts them off on paper, with a flagged regression among them.
            @for (part, columns) in d.phases.chunks(PHASES_PER_TABLE).enumerate() {
                @let first = part * PHASES_PER_TABLE;
                div class="scroll" {
                    table class="runs" {
                        @if d.phases.len() > PHASES_PER_TABLE {
                            caption class="muted" {
                                "Phases " (first + 1) " to " (first + columns.len()) " of " (d.phases.len())
                            }
                        }
                        thead {
                            tr {
                                th { "Run (UTC)" }
                                th { "Verdict" }
                                @for c in columns {
                                    th class="num" {
                                        (column_header(c))
                                        @if let Some(o) = c.objective_seconds {
                                            br; span class="muted" { "obj " (human_seconds(o)) }
                                        }
                                    }
                                }
                            }
                        }
                        tbody { @for r in &d.runs { (run_row(r, first, columns.len())) } }
                    }
                }
            }
            h3 { "Regressions" }
            ul {
                @if flagged.is_empty() { li { "none" } }
                @for f in &flagged { li class="regression" { (f) } }
            }
            h3 { "Trends" }
            div class="trends" { @for (i, c) in d.phases.iter().enumerate() { (trend(d, i, c)) } }
        }
    }
}

/// The phase columns of one table of the history: six fit an A4 page in portrait with the run and its verdict.
const PHASES_PER_TABLE: usize = 6;

/// One run's row of the table holding its phase columns `first..first + count`; the rows of the tables after the
/// first are marked `continued`, so each run is counted once.
fn run_row(r: &RunRow, first: usize, count: usize) -> Markup {
    let class = if r.outcome == Outcome::Passed { "passed" } else { "failed" };
    let row = if first == 0 { "run" } else { "run continued" };
    html! {
        tr class=(row) {
            td { (date(&r.started)) br; code class="muted" { (r.run_id) } }
            td { span class={ "badge " (class) } { (super::verdict_text(r)) } }
            @for c in r.phases.iter().skip(first).take(count) { (cell(c)) }
        }
    }
}

fn cell(c: &Change) -> Markup {
    let value = match c.seconds {
        Some(s) => human_seconds(s),
        None if c.verdict.is_some() => "-".into(),
        None => String::new(),
    };
    html! {
        td class={ "num" @if c.regression.is_some() { " regression" } } title=[c.regression.as_deref()] {
            (value) @if c.regression.is_some() { " ⚠" }
            br; span class="muted" { (change_text(c)) }
            br; span class="muted" { (objective_text(c)) }
        }
    }
}

// Geometry of one small chart, in SVG user units.
const W: f64 = 320.0;
const H: f64 = 160.0;
const LEFT: f64 = 48.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 30.0;

/// The scale of one trend chart: run index to x, seconds to y.
struct Scale {
    runs: usize,
    top: f64,
}

impl Scale {
    fn x(&self, i: usize) -> f64 {
        if self.runs == 1 {
            (LEFT + W - RIGHT) / 2.0
        } else {
            LEFT + i as f64 / (self.runs - 1) as f64 * (W - RIGHT - LEFT)
        }
    }

    fn y(&self, v: f64) -> f64 {
        TOP + (1.0 - v / self.top) * (H - TOP - BOTTOM)
    }
}

fn point_class(verdict: Option<Verdict>) -> &'static str {
    match verdict {
        Some(Verdict::Met) => "met",
        Some(Verdict::Missed) => "missed",
        Some(Verdict::Incomplete | Verdict::Inconsistent) => "incomplete",
        _ => "none",
    }
}

/// What a point of a trend says on hover: the run's date, the duration and how it compares.
fn point_title(r: &RunRow, cell: &Change, seconds: f64) -> String {
    let mut title = format!("{}: {}", date(&r.started), human_seconds(seconds));
    for extra in [change_text(cell), objective_text(cell), cell.regression.clone().unwrap_or_default()] {
        if !extra.is_empty() {
            title.push_str(" · ");
            title.push_str(&extra);
        }
    }
    title
}

/// The date labels under a trend: at most about six, the first and last leaning inwards so the chart's edges do not
/// cut them. Quarterly runs differ by their date; runs on one day (the lab's) by their time.
fn run_labels(d: &DrillHistory, scale: &Scale) -> Markup {
    let n = d.runs.len();
    let every = n.div_ceil(6).max(1);
    let mut days: Vec<String> = d.runs.iter().map(|r| r.started.format("%Y-%m-%d").to_string()).collect();
    days.dedup();
    let label_format = if days.len() == n { "%Y-%m-%d" } else { "%m-%d %H:%M" };
    let anchor = |i: usize| match i {
        _ if n == 1 => "middle",
        0 => "start",
        _ if i + 1 == n => "end",
        _ => "middle",
    };
    html! {
        @for (i, r) in d.runs.iter().enumerate().filter(|(i, _)| i % every == 0 || i + 1 == n) {
            text class="tick" x=(Coord(scale.x(i))) y=(Coord(H - BOTTOM + 14.0)) text-anchor=(anchor(i)) {
                (r.started.format(label_format).to_string())
            }
        }
    }
}

fn trend(d: &DrillHistory, column: usize, c: &PhaseColumn) -> Markup {
    let points: Vec<(usize, f64)> =
        d.runs.iter().enumerate().filter_map(|(i, r)| r.phases[column].seconds.map(|s| (i, s))).collect();
    let max = points.iter().map(|p| p.1).fold(0.0, f64::max);
    // The objective joins the scale only when it is near the measurements; a far one would flatten the line.
    let objective_on_scale = c.objective_seconds.filter(|o| *o <= (max * 1.5).max(1.0));
    let (top, step) = axis(max.max(objective_on_scale.unwrap_or(0.0)), 5.0);
    let n = d.runs.len();
    let scale = Scale { runs: n, top };
    let name = c.name.title();
    let line: Vec<String> = points.iter().map(|(i, s)| format!("{:.1},{:.1}", scale.x(*i), scale.y(*s))).collect();
    html! {
        figure class="trend" data-phase=(c.name) {
            figcaption {
                (name)
                @if let Some(o) = c.objective_seconds { " " span class="muted" { "objective " (human_seconds(o)) } }
            }
            svg viewBox={ "0 0 " (W) " " (H) } role="img" aria-label={ (name) " over " (n) " runs" } {
                @for v in ticks(0.0, top, step) {
                    line class="grid" x1=(LEFT) y1=(Coord(scale.y(v))) x2=(W - RIGHT) y2=(Coord(scale.y(v))) {}
                    text class="tick" x=(LEFT - 4.0) y=(Coord(scale.y(v) + 4.0)) text-anchor="end" {
                        (tick_label(v, step))
                    }
                }
                line class="axis" x1=(LEFT) y1=(Coord(H - BOTTOM)) x2=(W - RIGHT) y2=(Coord(H - BOTTOM)) {}
                (run_labels(d, &scale))
                @match (c.objective_seconds, objective_on_scale) {
                    (Some(o), Some(_)) => {
                        line class="objective-line" x1=(LEFT) y1=(Coord(scale.y(o))) x2=(W - RIGHT)
                            y2=(Coord(scale.y(o))) { title { "objective " (human_seconds(o)) } }
                    }
                    (Some(o), None) => {
                        text class="tick" x=(W - RIGHT) y=(TOP - 3.0) text-anchor="end" {
                            "objective " (human_seconds(o)) " (above the chart)"
                        }
                    }
                    _ => {}
                }
                @if points.len() > 1 { polyline class="line" points=(line.join(" ")) {} }
                @for (i, s) in &points {
                    @let cell = &d.runs[*i].phases[column];
                    @let (cx, cy) = (Coord(scale.x(*i)), Coord(scale.y(*s)));
                    @if cell.regression.is_some() { circle class="regression-ring" cx=(cx) cy=(cy) r="7" {} }
                    circle class={ "point-" (point_class(cell.verdict)) } cx=(cx) cy=(cy) r="4" {
                        title { (point_title(&d.runs[*i], cell, *s)) }
                    }
                }
                @if points.is_empty() {
                    text class="tick" x=(W / 2.0) y=(H / 2.0) text-anchor="middle" { "never measured" }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{build, tests::three_runs};
    use super::*;

    #[test]
    fn draws_a_trend_per_phase_and_a_row_per_run() {
        let h = build(three_runs(), super::super::REGRESSION_RATIO, &[]);
        let html = render(&h);
        for c in &h.drills[0].phases {
            assert!(html.contains(&format!(r#"<figure class="trend" data-phase="{}">"#, c.name)), "{}", c.name);
        }
        assert_eq!(html.matches("<tr class=\"run\">").count(), 3);
        let tables = html.matches("<table class=\"runs\">").count();
        assert_eq!(tables, h.drills[0].phases.len().div_ceil(PHASES_PER_TABLE), "at most six phases a table");
        for table in html.split("<table class=\"runs\">").skip(1) {
            let head = table.split("</thead>").next().unwrap();
            assert!(head.matches("<th class=\"num\">").count() <= PHASES_PER_TABLE, "{head}");
        }
        let provisioning =
            html.split(r#"data-phase="provisioning">"#).nth(1).unwrap().split("</figure>").next().unwrap();
        assert_eq!(provisioning.matches("<circle class=\"point-").count(), 3, "{provisioning}");
        assert!(provisioning.contains("objective-line"), "objective 5s sits on the scale of 6-9.5s");
        assert!(provisioning.contains("regression-ring"));
        let reclaim = html.split(r#"data-phase="reclaim">"#).nth(1).unwrap().split("</figure>").next().unwrap();
        assert!(reclaim.contains("<polyline"));
        assert!(!html.contains("<script") && !html.contains("href=") && !html.contains("src="));
    }
}
