//! `report.html`: one self-contained page per run, for the change record: the verdict, a Gantt chart of the phases
//! with the drill's events and milestones in inline SVG, the objectives, steps, fidelity, fallback cost and overlap.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::page::{esc, page, tick_step, time_axis};
use super::{Marker, Report, human_seconds, seconds_cell, verdict_word};
use crate::phases::{Phase, PhaseId, Verdict};
use crate::timeline::rfc3339;

pub fn render(report: &Report) -> String {
    let mut b = String::new();
    header(&mut b, report);
    timeline(&mut b, report);
    phases(&mut b, report);
    steps(&mut b, report);
    let _ = writeln!(b, "<section><h2>Fidelity</h2><p>{}</p></section>", esc(&report.fidelity));
    fallback(&mut b, report);
    overlap(&mut b, report);
    restore_and_warnings(&mut b, report);
    events(&mut b, report);
    let _ = writeln!(
        b,
        "<section><h2>Drill file as run</h2><p class=\"muted\">{}</p><pre>{}</pre></section>",
        esc(&report.drill.file),
        esc(report.drill.source.trim_end())
    );
    page(&format!("Drill report: {} · {}", report.drill.name, report.run_id), &b)
}

/// The CSS class of a phase's verdict; also names its bar in the chart.
fn verdict_class(p: &Phase) -> &'static str {
    match p.verdict {
        Verdict::Met => "met",
        Verdict::Missed => "missed",
        Verdict::NoObjective => "none",
        Verdict::Incomplete if p.objective_seconds.is_some() => "missed",
        Verdict::Incomplete => "incomplete",
    }
}

fn header(b: &mut String, report: &Report) {
    let _ = writeln!(b, "<header><h1>Drill report: {}</h1>", esc(&report.drill.name));
    if let Some(d) = &report.drill.description {
        let _ = writeln!(b, "<p class=\"muted\">{}</p>", esc(d));
    }
    let _ = writeln!(
        b,
        "<p><span class=\"badge verdict {}\" id=\"verdict\">{}</span></p>",
        report.outcome.slug(),
        esc(report.outcome.as_str())
    );
    if let Some(reason) = &report.abort_reason {
        let _ = writeln!(b, "<div class=\"callout\"><strong>Stopped because:</strong> {}</div>", esc(reason));
    }
    let _ = write!(b, "<div class=\"figures\">");
    let figure = |b: &mut String, value: &str, label: &str, class: &str| {
        let _ = write!(
            b,
            "<div class=\"figure\"><div class=\"value {class}\">{}</div><div class=\"label\">{}</div></div>",
            esc(value),
            esc(label)
        );
    };
    if let Some(rto) = report.phase(PhaseId::Rto) {
        let label = match rto.objective_seconds {
            Some(o) => format!("RTO · objective {} · {}", human_seconds(o), verdict_word(rto)),
            None => "RTO · no objective".into(),
        };
        figure(b, &seconds_cell(rto.seconds), &label, verdict_class(rto));
    }
    let judged: Vec<&Phase> = report.phases.iter().filter(|p| p.objective_seconds.is_some()).collect();
    let met = judged.iter().filter(|p| p.verdict == Verdict::Met).count();
    let class = if met == judged.len() { "met" } else { "missed" };
    figure(b, &format!("{met} / {}", judged.len()), "objectives met", class);
    let f = &report.fallback;
    figure(b, &format!("{:.3}", f.gpu_hours), &format!("fallback GPU-hours · {} nodes", f.nodes), "");
    let cost = f.estimated_cost.map(|c| format!("${c:.2}")).unwrap_or_else(|| "-".into());
    figure(b, &cost, "estimated fallback cost", "");
    let peak = match f.gpu_limit {
        Some(limit) => format!("peak GPUs · limit {limit}{}", if f.overrun { " · OVERRUN" } else { "" }),
        None => "peak GPUs".into(),
    };
    figure(b, &f.max_gpus.to_string(), &peak, if f.overrun { "missed" } else { "" });
    let _ = write!(b, "</div>\n<table class=\"details\">");
    let cluster = format!(
        "context {}, {} (Kubernetes {})",
        report.cluster.context, report.cluster.server, report.cluster.version
    );
    for (k, v) in [
        ("Run", report.run_id.clone()),
        ("Started", rfc3339(&report.started)),
        ("Finished", rfc3339(&report.finished)),
        ("Cluster", cluster),
        ("Drill file", report.drill.file.clone()),
        ("Tool", format!("hybrid-drill {}", report.tool_version)),
        ("API requests", format!("{} (watch gaps: {})", report.api_requests, report.watch_gaps)),
    ] {
        let _ = write!(b, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    let _ = writeln!(b, "</table></header>");
}

// Chart geometry, in SVG user units; the SVG scales to the page width.
const WIDTH: f64 = 1000.0;
const X0: f64 = 200.0;
const X1: f64 = 820.0;
const LANE: f64 = 24.0;
const EVENT_LANE: f64 = 18.0;
const MILESTONE_ROW: f64 = 20.0;

fn seconds_of(b: &crate::phases::Boundary) -> f64 {
    b.t_ms as f64 / 1000.0
}

/// A stretch of the drill's time that a chart shows, with its tick step.
#[derive(Clone, Copy)]
struct Window {
    start: f64,
    end: f64,
    step: f64,
}

impl Window {
    /// From `start` to `end` seconds, widened to whole ticks.
    fn new(start: f64, end: f64) -> Window {
        let step = tick_step((end - start).max(0.1), 10.0);
        let start = (start / step).floor() * step;
        let end = ((end / step) - 1e-9).ceil().max(start / step + 1.0) * step;
        Window { start, end, step }
    }

    fn x(&self, t: f64) -> f64 {
        X0 + ((t - self.start) / (self.end - self.start)).clamp(0.0, 1.0) * (X1 - X0)
    }

    fn contains(&self, t: f64) -> bool {
        (self.start..=self.end).contains(&t)
    }
}

fn timeline(b: &mut String, report: &Report) {
    let ends = report
        .phases
        .iter()
        .flat_map(|p| [p.from.as_ref(), p.to.as_ref()])
        .flatten()
        .map(seconds_of)
        .chain(report.notable_events.iter().map(|n| n.t_seconds))
        .chain(report.milestones.iter().map(seconds_of));
    let whole = Window::new(0.0, ends.fold(0.0, f64::max));
    let _ = writeln!(b, "<section><h2>Timeline</h2>");
    let _ = writeln!(b, "<figure style=\"margin:0\">{}</figure>", chart(report, "gantt", whole, &report.phases));
    legend(b);

    // The recovery (fault to service restored) often lasts a small part of a drill whose reclaim waits for
    // consolidation: drawn again on its own scale, so its phases can be read.
    let recovery_end = report.phase(PhaseId::Rto).and_then(|p| p.to.as_ref()).map(seconds_of);
    let t0 = report.phase(PhaseId::Rto).and_then(|p| p.from.as_ref()).map(seconds_of);
    if let (Some(t0), Some(restored)) = (t0, recovery_end) {
        let returned = report.milestones.iter().find(|m| m.label == "return started").map(seconds_of);
        let recovery: Vec<crate::phases::Phase> = report
            .phases
            .iter()
            .filter(|p| p.from.as_ref().is_some_and(|f| returned.is_none_or(|r| seconds_of(f) < r)))
            .cloned()
            .collect();
        let end = recovery.iter().filter_map(|p| p.to.as_ref()).map(seconds_of).fold(restored, f64::max);
        if end - t0 < 0.4 * (whole.end - whole.start) {
            let zoom = Window::new(t0, end);
            let _ = writeln!(
                b,
                "<h3>Recovery, zoomed: from the fault (+{}) until the service was restored and every phase before the return had ended (+{})</h3><figure style=\"margin:0\">{}</figure>",
                human_seconds(t0),
                human_seconds(end),
                chart(report, "gantt-recovery", zoom, &recovery)
            );
        }
    }

    let _ = write!(
        b,
        "<table><thead><tr><th class=\"num\">#</th><th>Milestone</th><th class=\"num\">t</th><th>Received</th><th>Server time</th></tr></thead><tbody>"
    );
    for (n, m) in report.milestones.iter().enumerate() {
        let _ = write!(
            b,
            "<tr><td class=\"num\">{}</td><td>{}</td><td class=\"num\">+{}</td><td>{}</td><td>{}</td></tr>",
            n + 1,
            esc(&m.label),
            human_seconds(seconds_of(m)),
            rfc3339(&m.received),
            m.server_time.as_ref().map(rfc3339).unwrap_or_else(|| "-".into())
        );
    }
    let _ = writeln!(b, "</tbody></table></section>");
}

fn legend(b: &mut String) {
    let _ = writeln!(
        b,
        "<div class=\"legend\"><span><span class=\"swatch\" style=\"background:var(--met)\"></span>objective met</span>\
         <span><span class=\"swatch\" style=\"background:var(--missed)\"></span>objective missed or not measured</span>\
         <span><span class=\"swatch\" style=\"background:var(--none)\"></span>no objective</span>\
         <span><span class=\"swatch\" style=\"border:1px dashed var(--incomplete)\"></span>end not observed</span>\
         <span><span class=\"swatch\" style=\"background:var(--ink);width:3px\"></span>objective (from the phase's start)</span>\
         <span>numbers: the milestones below · time from the drill's start, tool clock</span></div>"
    );
}

/// Milestones that would overlap on the chart share one mark, labelled with their range (`3–7`).
fn milestone_marks(report: &Report, w: Window) -> Vec<(String, f64, Vec<usize>)> {
    let mut marks: Vec<(String, f64, Vec<usize>)> = Vec::new();
    for (i, m) in report.milestones.iter().enumerate() {
        let t = seconds_of(m);
        if !w.contains(t) {
            continue;
        }
        let x = w.x(t);
        match marks.last_mut() {
            Some((_, first_x, members)) if x - *first_x < 16.0 => members.push(i),
            _ => marks.push((String::new(), x, vec![i])),
        }
    }
    for (label, _, members) in &mut marks {
        *label = match (members.first(), members.last()) {
            (Some(a), Some(z)) if a != z => format!("{}–{}", a + 1, z + 1),
            (Some(a), _) => (a + 1).to_string(),
            _ => String::new(),
        };
    }
    marks
}

/// One Gantt chart: milestone marks, a lane of event markers per kind, a lane per phase, over the window `w`.
fn chart(report: &Report, id: &str, w: Window, phases: &[crate::phases::Phase]) -> String {
    let x = |t: f64| w.x(t);
    // Marks whose labels would still collide go on further rows.
    let mut rows: Vec<f64> = Vec::new();
    let mut placed = Vec::new();
    for (label, mx, members) in milestone_marks(report, w) {
        let half = 5.0 + 3.2 * label.chars().count() as f64;
        let row = match rows.iter().position(|right| mx - half >= *right + 2.0) {
            Some(r) => r,
            None => {
                rows.push(f64::MIN);
                rows.len() - 1
            }
        };
        rows[row] = mx + half;
        placed.push((label, mx, half, row, members));
    }
    let mut lanes: BTreeMap<Marker, Vec<&super::Notable>> = BTreeMap::new();
    for n in report.notable_events.iter().filter(|n| w.contains(n.t_seconds)) {
        lanes.entry(n.kind).or_default().push(n);
    }
    let events_top = rows.len().max(1) as f64 * MILESTONE_ROW + 6.0;
    let phases_top = events_top + lanes.len() as f64 * EVENT_LANE + 8.0;
    let overlap_lanes = usize::from(report.overlap.is_some());
    let bottom = phases_top + (phases.len() + overlap_lanes) as f64 * LANE + 4.0;
    let height = bottom + 22.0;

    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg id="{id}" viewBox="0 0 {WIDTH} {height:.0}" role="img" aria-label="Timeline of the drill's phases"><defs><pattern id="hatch-{id}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f0f0f0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#b0b0b0" stroke-width="2"/></pattern></defs>"##
    );
    time_axis(&mut svg, (w.start, w.end, w.step), X0, X1, events_top - 4.0, bottom);
    for (label, mx, half, row, members) in &placed {
        let cy = *row as f64 * MILESTONE_ROW + 10.0;
        let title: Vec<String> = members
            .iter()
            .map(|i| {
                let m = &report.milestones[*i];
                format!("{}. {} at +{}", i + 1, m.label, human_seconds(seconds_of(m)))
            })
            .collect();
        let _ = write!(
            svg,
            r#"<g class="milestone-mark"><title>{}</title><line class="milestone-line" x1="{mx:.1}" y1="{:.1}" x2="{mx:.1}" y2="{bottom:.1}"/><rect class="milestone" x="{:.1}" y="{:.1}" width="{:.1}" height="16" rx="8"/><text class="milestone-n" x="{mx:.1}" y="{:.1}" text-anchor="middle">{}</text></g>"#,
            esc(&title.join("\n")),
            cy + 8.0,
            mx - half,
            cy - 8.0,
            2.0 * half,
            cy + 3.5,
            esc(label),
        );
    }
    let _ = write!(svg, r#"<text class="tick" x="4" y="14">milestones</text>"#);
    for (i, (kind, notables)) in lanes.iter().enumerate() {
        let y = events_top + i as f64 * EVENT_LANE + EVENT_LANE / 2.0;
        let _ = write!(
            svg,
            r#"<g class="event-lane" data-kind="{0}"><text class="lane-label sub" x="4" y="{1:.1}">{0}</text>"#,
            esc(kind.label()),
            y + 4.0
        );
        for n in notables {
            let _ = write!(
                svg,
                r##"<path class="marker-{}" d="M{:.1} {:.1} l5 5 l-5 5 l-5 -5 z" fill="{}" stroke="#fff" stroke-width="0.8"><title>+{} {}</title></path>"##,
                kind_slug(*kind),
                x(n.t_seconds),
                y - 5.0,
                marker_color(*kind),
                human_seconds(n.t_seconds),
                esc(&n.what)
            );
        }
        let _ = write!(svg, "</g>");
    }
    for (i, p) in phases.iter().enumerate() {
        let y = phases_top + i as f64 * LANE;
        phase_lane(&mut svg, p, y, &x, id);
    }
    if let Some(o) = &report.overlap {
        let y = phases_top + phases.len() as f64 * LANE;
        let from = seconds_of(&o.from);
        let (to, text) = match (&o.to, o.seconds) {
            (Some(to), Some(s)) => (seconds_of(to), human_seconds(s)),
            _ => (w.end, "not confirmed gone".to_string()),
        };
        let _ = write!(
            svg,
            r#"<g class="lane" data-phase="overlap"><text class="lane-label" x="4" y="{:.1}">overlap (split brain)</text><rect class="bar-overlap" x="{:.1}" y="{:.1}" width="{:.1}" height="14" rx="2"><title>old pods on-prem and replacements Ready at once</title></rect><text class="value" x="{:.1}" y="{:.1}">{}</text></g>"#,
            y + 16.0,
            x(from),
            y + 5.0,
            (x(to) - x(from)).max(2.0),
            X1 + 10.0,
            y + 16.0,
            esc(&text)
        );
    }
    let _ = write!(svg, "</svg>");
    svg
}

fn kind_slug(kind: Marker) -> &'static str {
    match kind {
        Marker::Fault => "fault",
        Marker::Eviction => "eviction",
        Marker::NodeClaim => "nodeclaim",
        Marker::Node => "node",
        Marker::Taint => "taint",
        Marker::Service => "service",
        Marker::Restore => "restore",
        Marker::Other => "other",
    }
}

fn marker_color(kind: Marker) -> &'static str {
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

fn phase_lane(svg: &mut String, p: &Phase, y: f64, x: &impl Fn(f64) -> f64, chart: &str) {
    let label = match (&p.parent, p.name.as_str()) {
        (Some(_), name) => format!("└ {name}"),
        (None, "rto") => "RTO".into(),
        (None, name) => name.into(),
    };
    let (indent, class) = if p.parent.is_some() { (20.0, "lane-label sub") } else { (4.0, "lane-label") };
    let weight = if p.name == PhaseId::Rto { r#" font-weight="700""# } else { "" };
    let _ = write!(
        svg,
        r#"<g class="lane" data-phase="{}"><text class="{class}" x="{indent}" y="{:.1}"{weight}>{}</text>"#,
        esc(p.name.as_str()),
        y + 16.0,
        esc(&label)
    );
    let from = p.from.as_ref().map(|b| b.t_ms as f64 / 1000.0);
    let to = p.to.as_ref().map(|b| b.t_ms as f64 / 1000.0);
    let title = format!(
        "{}: {} → {}",
        label.trim_start_matches("└ "),
        p.from.as_ref().map_or("not observed", |b| b.label.as_str()),
        p.to.as_ref().map_or("not observed", |b| b.label.as_str())
    );
    match (from, to) {
        (Some(f), Some(t)) => {
            let _ = write!(
                svg,
                r#"<rect class="bar-{}" x="{:.1}" y="{:.1}" width="{:.1}" height="14" rx="2"><title>{}</title></rect>"#,
                verdict_class(p),
                x(f),
                y + 5.0,
                (x(t) - x(f)).max(2.0),
                esc(&title)
            );
        }
        (Some(f), None) => {
            let _ = write!(
                svg,
                r#"<rect class="bar-incomplete" fill="url(#hatch-{chart})" x="{:.1}" y="{:.1}" width="{:.1}" height="14"><title>{}</title></rect>"#,
                x(f),
                y + 5.0,
                (X1 - x(f)).max(2.0),
                esc(&title)
            );
        }
        _ => {
            let _ = write!(
                svg,
                r#"<text class="tick" x="{:.1}" y="{:.1}">not observed<title>{}</title></text>"#,
                X0 + 4.0,
                y + 16.0,
                esc(&title)
            );
        }
    }
    if let (Some(f), Some(o)) = (from, p.objective_seconds)
        && x(f + o) < X1
    {
        let ox = x(f + o);
        let _ = write!(
            svg,
            r#"<line class="objective" x1="{ox:.1}" y1="{:.1}" x2="{ox:.1}" y2="{:.1}"><title>objective {}</title></line>"#,
            y + 2.0,
            y + 22.0,
            human_seconds(o)
        );
    }
    let value = match (p.seconds, p.objective_seconds) {
        (Some(s), Some(o)) => format!("{} / {}", human_seconds(s), human_seconds(o)),
        (Some(s), None) => human_seconds(s),
        (None, _) => "-".into(),
    };
    let _ = write!(
        svg,
        r#"<text class="value" x="{:.1}" y="{:.1}">{}</text><text class="value {}" x="{:.1}" y="{:.1}" text-anchor="end">{}</text></g>"#,
        X1 + 10.0,
        y + 16.0,
        esc(&value),
        verdict_class(p),
        WIDTH - 4.0,
        y + 16.0,
        if p.verdict == Verdict::NoObjective { String::new() } else { esc(verdict_word(p)) }
    );
}

fn phases(b: &mut String, report: &Report) {
    let judged: Vec<&Phase> = report.phases.iter().filter(|p| p.objective_seconds.is_some()).collect();
    let missed = judged.iter().filter(|p| p.verdict != Verdict::Met).count();
    let _ = writeln!(
        b,
        "<section><h2>Phases and objectives</h2><p>{} objectives: {} met, {missed} missed or not measured.{}</p>",
        judged.len(),
        judged.len() - missed,
        if report.objectives_missed.is_empty() {
            String::new()
        } else {
            format!(" Missed: {}.", esc(&report.missed_list()))
        }
    );
    let _ = write!(
        b,
        "<p class=\"muted\">Durations are on the tool's clock (sub-second); the server column gives the same phase from the objects' own timestamps (whole seconds) where both ends have one.</p>\
         <div class=\"scroll\"><table><thead><tr><th>Phase</th><th>From</th><th>To</th><th class=\"num\">Duration</th><th class=\"num\">Server clock</th><th class=\"num\">Objective</th><th>Verdict</th><th>Note</th></tr></thead><tbody>"
    );
    for p in &report.phases {
        let name = match (&p.parent, p.name.as_str()) {
            (Some(_), n) => format!("&nbsp;&nbsp;└ {}", esc(n)),
            (None, "rto") => "<strong>RTO</strong>".into(),
            (None, n) => esc(n),
        };
        let _ = write!(
            b,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(p.from.as_ref().map_or("-", |x| x.label.as_str())),
            esc(p.to.as_ref().map_or("-", |x| x.label.as_str())),
            seconds_cell(p.seconds),
            p.server_seconds.map(|s| format!("{s}s")).unwrap_or_else(|| "-".into()),
            seconds_cell(p.objective_seconds),
            verdict_badge(p),
            esc(p.note.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(b, "</tbody></table></div></section>");
}

fn verdict_badge(p: &Phase) -> String {
    match p.verdict {
        Verdict::NoObjective => "<span class=\"muted\">no objective</span>".into(),
        _ => format!("<span class=\"badge {}\">{}</span>", verdict_class(p), esc(verdict_word(p))),
    }
}

fn steps(b: &mut String, report: &Report) {
    let _ = write!(
        b,
        "<section><h2>Steps</h2><table><thead><tr><th>Step</th><th>Action</th><th>Outcome</th><th class=\"num\">Duration</th><th>Detail</th></tr></thead><tbody>"
    );
    for s in &report.steps {
        let _ = write!(
            b,
            "<tr><td>{}</td><td><code>{}</code></td><td><span class=\"badge {}\">{}</span></td><td class=\"num\">{}</td><td>{}</td></tr>",
            esc(&s.id),
            esc(&s.action),
            s.outcome,
            s.outcome,
            seconds_cell(s.seconds),
            esc(&s.message)
        );
    }
    let _ = writeln!(b, "</tbody></table></section>");
}

fn fallback(b: &mut String, report: &Report) {
    let f = &report.fallback;
    let _ = write!(
        b,
        "<section><h2>Fallback</h2><p>{} cloud nodes, {:.3} node-hours, <strong>{:.3} GPU-hours</strong>, peak {} GPUs.</p>",
        f.nodes, f.node_hours, f.gpu_hours, f.max_gpus
    );
    match f.estimated_cost {
        Some(c) => {
            let _ = write!(b, "<p>Estimated cost: <strong>${c:.2}</strong> (the drill's on-demand price table).</p>");
        }
        None => {
            let _ = write!(b, "<p>Estimated cost: not computed (add <code>spec.pricing</code> to the drill).</p>");
        }
    }
    if !f.by_instance_type.is_empty() {
        let _ =
            write!(b, "<table><thead><tr><th>Instance type</th><th class=\"num\">Node-hours</th></tr></thead><tbody>");
        for (it, hours) in &f.by_instance_type {
            let _ = write!(b, "<tr><td>{}</td><td class=\"num\">{hours:.3}</td></tr>", esc(it));
        }
        let _ = write!(b, "</tbody></table>");
    }
    if !f.unpriced_instance_types.is_empty() {
        let _ = write!(b, "<p>No price given for: {}.</p>", esc(&f.unpriced_instance_types.join(", ")));
    }
    if let Some(limit) = f.gpu_limit {
        if f.overrun {
            let _ = write!(
                b,
                "<div class=\"callout\" id=\"overrun\"><strong>Overrun:</strong> the fallback peaked at {} GPUs, above its NodePool limit of {limit}. Karpenter's limits are eventually consistent: a burst can exceed them.</div>",
                f.max_gpus
            );
        } else {
            let _ = write!(b, "<p>NodePool GPU limit: {limit} (not exceeded).</p>");
        }
    }
    if let Some(ceiling) = f.ceiling {
        if f.over_ceiling {
            let _ = write!(
                b,
                "<div class=\"callout\" id=\"over-ceiling\"><strong>Above the drill's ceiling:</strong> the fallback peaked at {} GPUs, above <code>guards.maxFallbackGpus</code> {ceiling}; the guard stopped the drill and restored the cluster.</div>",
                f.max_gpus
            );
        } else {
            let _ = write!(b, "<p>Drill ceiling (guards.maxFallbackGpus): {ceiling} (not exceeded).</p>");
        }
    }
    let _ = writeln!(b, "</section>");
}

fn overlap(b: &mut String, report: &Report) {
    let Some(o) = &report.overlap else {
        return;
    };
    let sentence = super::overlap_sentence(o);
    let _ = writeln!(
        b,
        "<section id=\"overlap\"><h2>Overlap window (split brain)</h2><div class=\"callout note\">{}{}</div></section>",
        sentence[..1].to_uppercase(),
        esc(&sentence[1..])
    );
}

fn restore_and_warnings(b: &mut String, report: &Report) {
    if let Some(rb) = &report.rollback {
        let _ = write!(b, "<section><h2>Restore</h2><ul>");
        for u in &rb.undone {
            let _ = write!(b, "<li>restored: {}</li>", esc(u));
        }
        for u in &rb.failed {
            let _ = write!(b, "<li class=\"missed\"><strong>NOT RESTORED:</strong> {}</li>", esc(u));
        }
        if rb.undone.is_empty() && rb.failed.is_empty() {
            let _ = write!(b, "<li>nothing needed undoing</li>");
        }
        let _ = writeln!(b, "</ul></section>");
    }
    if !report.warnings.is_empty() {
        let _ = write!(b, "<section><h2>Warnings</h2><ul>");
        for w in &report.warnings {
            let _ = write!(b, "<li>{}</li>", esc(w));
        }
        let _ = writeln!(b, "</ul></section>");
    }
}

fn events(b: &mut String, report: &Report) {
    let _ = write!(
        b,
        "<section><h2>Notable events</h2><table><thead><tr><th class=\"num\">t</th><th>Kind</th><th>Event</th><th>Server time</th></tr></thead><tbody>"
    );
    for n in &report.notable_events {
        let _ = write!(
            b,
            "<tr><td class=\"num\">+{}</td><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td><td>{}</td></tr>",
            human_seconds(n.t_seconds),
            marker_color(n.kind),
            esc(n.kind.label()),
            esc(&n.what),
            n.server_time.as_ref().map(rfc3339).unwrap_or_else(|| "-".into())
        );
    }
    let _ = writeln!(b, "</tbody></table></section>");
}

#[cfg(test)]
mod tests {
    use super::*;
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
