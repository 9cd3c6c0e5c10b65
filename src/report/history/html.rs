//! The history as one self-contained HTML page: per drill, the table of runs and the trend of each phase over the
//! runs (inline SVG line charts, the objective as a dashed line, regressions ringed in red).

use std::fmt::Write;

use super::{
    DrillHistory, History, PhaseColumn, REGRESSION_MIN_SECONDS, REGRESSION_RATIO, change_text, date, objective_text,
};
use crate::phases::Verdict;
use crate::report::Outcome;
use crate::report::human_seconds;
use crate::report::page::{axis, esc, page, tick_label};

pub fn render(h: &History) -> String {
    let mut b = String::from("<header><h1>Drill history</h1>");
    let _ = writeln!(
        b,
        "<p class=\"muted\">Durations on the tool's clock. A regression (<span class=\"regression\">⚠</span>) is a phase more than {:.0}% (and {}) slower than in the previous run that measured it, over its objective, or not measured.</p></header>",
        REGRESSION_RATIO * 100.0,
        human_seconds(REGRESSION_MIN_SECONDS)
    );
    for d in &h.drills {
        drill(&mut b, d);
    }
    page("Drill history", &b)
}

fn drill(b: &mut String, d: &DrillHistory) {
    let _ = write!(
        b,
        "<section class=\"drill\" data-drill=\"{0}\"><h2>{0}</h2><p>{1} runs.</p>",
        esc(&d.drill),
        d.runs.len()
    );
    let _ = write!(b, "<div class=\"scroll\"><table class=\"runs\"><thead><tr><th>Run (UTC)</th><th>Verdict</th>");
    for c in &d.phases {
        let name = match &c.parent {
            Some(_) => format!("└ {}", c.name),
            None => c.name.title().into(),
        };
        let objective =
            c.objective_seconds.map(|o| format!("<br><span class=\"muted\">obj {}</span>", human_seconds(o)));
        let _ = write!(b, "<th class=\"num\">{}{}</th>", esc(&name), objective.unwrap_or_default());
    }
    let _ = write!(b, "</tr></thead><tbody>");
    for r in &d.runs {
        let class = if r.outcome == Outcome::Passed { "passed" } else { "failed" };
        let _ = write!(
            b,
            "<tr class=\"run\"><td>{}<br><code class=\"muted\">{}</code></td><td><span class=\"badge {class}\">{}</span></td>",
            esc(&date(&r.started)),
            esc(&r.run_id),
            r.outcome.short()
        );
        for c in &r.phases {
            let flagged = c.regression.is_some();
            let value = match c.seconds {
                Some(s) => human_seconds(s),
                None if c.verdict.is_some() => "-".into(),
                None => String::new(),
            };
            let _ = write!(
                b,
                "<td class=\"num{}\"{}>{}{}<br><span class=\"muted\">{}</span><br><span class=\"muted\">{}</span></td>",
                if flagged { " regression" } else { "" },
                c.regression.as_ref().map(|w| format!(" title=\"{}\"", esc(w))).unwrap_or_default(),
                esc(&value),
                if flagged { " ⚠" } else { "" },
                esc(&change_text(c)),
                esc(&objective_text(c))
            );
        }
        let _ = write!(b, "</tr>");
    }
    let _ = write!(b, "</tbody></table></div>");
    let flagged: Vec<String> = d
        .runs
        .iter()
        .flat_map(|r| r.regressions.iter().map(move |g| format!("{} ({}): {g}", date(&r.started), r.run_id)))
        .collect();
    let _ = write!(b, "<h3>Regressions</h3><ul>");
    if flagged.is_empty() {
        let _ = write!(b, "<li>none</li>");
    }
    for f in flagged {
        let _ = write!(b, "<li class=\"regression\">{}</li>", esc(&f));
    }
    let _ = write!(b, "</ul><h3>Trends</h3><div class=\"trends\">");
    for (i, c) in d.phases.iter().enumerate() {
        trend(b, d, i, c);
    }
    let _ = writeln!(b, "</div></section>");
}

// Geometry of one small chart, in SVG user units.
const W: f64 = 320.0;
const H: f64 = 160.0;
const LEFT: f64 = 48.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 30.0;

fn trend(b: &mut String, d: &DrillHistory, column: usize, c: &PhaseColumn) {
    let points: Vec<(usize, f64)> =
        d.runs.iter().enumerate().filter_map(|(i, r)| r.phases[column].seconds.map(|s| (i, s))).collect();
    let max = points.iter().map(|p| p.1).fold(0.0, f64::max);
    // The objective joins the scale only when it is near the measurements; a far one would flatten the line.
    let objective_on_scale = c.objective_seconds.filter(|o| *o <= (max * 1.5).max(1.0));
    let (top, step) = axis(max.max(objective_on_scale.unwrap_or(0.0)), 5.0);
    let n = d.runs.len();
    let x = |i: usize| {
        if n == 1 { (LEFT + W - RIGHT) / 2.0 } else { LEFT + i as f64 / (n - 1) as f64 * (W - RIGHT - LEFT) }
    };
    let y = |v: f64| TOP + (1.0 - v / top) * (H - TOP - BOTTOM);

    let name = c.name.title();
    let _ = write!(b, "<figure class=\"trend\" data-phase=\"{}\"><figcaption>{}", esc(c.name.as_str()), esc(name));
    if let Some(o) = c.objective_seconds {
        let _ = write!(b, " <span class=\"muted\">objective {}</span>", human_seconds(o));
    }
    let _ =
        write!(b, "</figcaption><svg viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{} over {n} runs\">", esc(name));
    let mut v = 0.0;
    while v <= top + 1e-9 {
        let _ = write!(
            b,
            r#"<line class="grid" x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}"/><text class="tick" x="{2}" y="{3:.1}" text-anchor="end">{4}</text>"#,
            y(v),
            W - RIGHT,
            LEFT - 4.0,
            y(v) + 4.0,
            tick_label(v, step)
        );
        v += step;
    }
    let _ = write!(b, r#"<line class="axis" x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}"/>"#, H - BOTTOM, W - RIGHT);
    let every = n.div_ceil(6).max(1);
    // Quarterly runs differ by their date; runs on one day (the lab's) by their time.
    let mut days: Vec<String> = d.runs.iter().map(|r| r.started.format("%Y-%m-%d").to_string()).collect();
    days.dedup();
    let label_format = if days.len() == n { "%Y-%m-%d" } else { "%m-%d %H:%M" };
    for (i, r) in d.runs.iter().enumerate() {
        if i % every == 0 || i + 1 == n {
            // The first and last labels lean inwards so the chart's edges do not cut them.
            let anchor = match i {
                _ if n == 1 => "middle",
                0 => "start",
                _ if i + 1 == n => "end",
                _ => "middle",
            };
            let _ = write!(
                b,
                r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
                x(i),
                H - BOTTOM + 14.0,
                r.started.format(label_format)
            );
        }
    }
    match (c.objective_seconds, objective_on_scale) {
        (Some(o), Some(_)) => {
            let _ = write!(
                b,
                r#"<line class="objective-line" x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}"><title>objective {2}</title></line>"#,
                y(o),
                W - RIGHT,
                human_seconds(o)
            );
        }
        (Some(o), None) => {
            let _ = write!(
                b,
                r#"<text class="tick" x="{}" y="{}" text-anchor="end">objective {} (above the chart)</text>"#,
                W - RIGHT,
                TOP - 3.0,
                human_seconds(o)
            );
        }
        _ => {}
    }
    if points.len() > 1 {
        let path: Vec<String> = points.iter().map(|(i, s)| format!("{:.1},{:.1}", x(*i), y(*s))).collect();
        let _ = write!(b, r#"<polyline class="line" points="{}"/>"#, path.join(" "));
    }
    for (i, s) in &points {
        let cell = &d.runs[*i].phases[column];
        let class = match cell.verdict {
            Some(Verdict::Met) => "met",
            Some(Verdict::Missed) => "missed",
            Some(Verdict::Incomplete) => "incomplete",
            _ => "none",
        };
        let mut title = format!("{}: {}", date(&d.runs[*i].started), human_seconds(*s));
        for extra in [change_text(cell), objective_text(cell), cell.regression.clone().unwrap_or_default()] {
            if !extra.is_empty() {
                title.push_str(" · ");
                title.push_str(&extra);
            }
        }
        if cell.regression.is_some() {
            let _ = write!(b, r#"<circle class="regression-ring" cx="{:.1}" cy="{:.1}" r="7"/>"#, x(*i), y(*s));
        }
        let _ = write!(
            b,
            r#"<circle class="point-{class}" cx="{:.1}" cy="{:.1}" r="4"><title>{}</title></circle>"#,
            x(*i),
            y(*s),
            esc(&title)
        );
    }
    if points.is_empty() {
        let _ = write!(
            b,
            r#"<text class="tick" x="{}" y="{}" text-anchor="middle">never measured</text>"#,
            W / 2.0,
            H / 2.0
        );
    }
    let _ = write!(b, "</svg></figure>");
}

#[cfg(test)]
mod tests {
    use super::super::{build, tests::three_runs};
    use super::*;

    #[test]
    fn draws_a_trend_per_phase_and_a_row_per_run() {
        let h = build(three_runs());
        let html = render(&h);
        for c in &h.drills[0].phases {
            assert!(html.contains(&format!(r#"<figure class="trend" data-phase="{}">"#, c.name)), "{}", c.name);
        }
        assert_eq!(html.matches("<tr class=\"run\">").count(), 3);
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
