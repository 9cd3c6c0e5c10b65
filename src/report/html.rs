//! `report.html`: one self-contained page per run, for the change record: the verdict, a Gantt chart of the phases
//! with the drill's events and milestones in inline SVG, the objectives, steps, fidelity, fallback cost and overlap.
//! Written with maud: every value is escaped where it is interpolated, in text and attributes alike.

use std::collections::BTreeMap;

use maud::{Markup, html};

use super::legend::{self, Figure};
use super::page::{Coord, page, tick_step, time_axis};
use super::{Marker, Notable, Report, human_seconds, seconds_cell, verdict_word};
use crate::phases::{Boundary, MilestoneKey, Phase, PhaseId, Verdict};
use crate::timeline::rfc3339;

pub fn render(report: &Report) -> String {
    let body = html! {
        (header(report))
        (timeline(report))
        (phases(report))
        (startup(report))
        (steps(report))
        section { h2 { "Fidelity" } p { (report.fidelity) } }
        (fallback(report))
        (overlap(report))
        (restore_and_warnings(report))
        (events(report))
        section {
            h2 { "Drill file as run" }
            p class="muted" { (report.drill.file) }
            pre { (report.drill.source.trim_end()) }
        }
    };
    page(&format!("{}: {} · {}", report.kind.heading(), report.drill.name, report.run_id), body)
}

// The only places this page reads a phase's name, so that a typed name changes them alone.
fn is_rto(p: &Phase) -> bool {
    p.name == PhaseId::Rto
}

fn rto(report: &Report) -> Option<&Phase> {
    report.phases.iter().find(|p| is_rto(p))
}

/// The CSS class of a phase's verdict; also names its bar in the chart.
fn verdict_class(p: &Phase) -> &'static str {
    match p.verdict {
        Verdict::Met => "met",
        Verdict::Missed => "missed",
        Verdict::NoObjective => "none",
        Verdict::Incomplete | Verdict::Inconsistent if p.objective_seconds.is_some() => "missed",
        Verdict::Incomplete | Verdict::Inconsistent => "incomplete",
    }
}

fn figure(value: &str, label: &str, class: &str) -> Markup {
    html! {
        div class="figure" { div class={ "value " (class) } { (value) } div class="label" { (label) } }
    }
}

fn header(report: &Report) -> Markup {
    let judged: Vec<&Phase> = report.phases.iter().filter(|p| p.objective_seconds.is_some()).collect();
    let met = judged.iter().filter(|p| p.verdict == Verdict::Met).count();
    let f = &report.fallback;
    let cost = f.estimated_cost.map(|c| format!("${c:.2}")).unwrap_or_else(|| "-".into());
    let peak = match f.gpu_limit {
        Some(limit) => format!("peak GPUs · limit {limit}{}", if f.overrun { " · OVERRUN" } else { "" }),
        None => "peak GPUs".into(),
    };
    let cluster = format!(
        "context {}, {} (Kubernetes {})",
        report.cluster.context, report.cluster.server, report.cluster.version
    );
    let details = [
        ("Run", report.run_id.clone()),
        ("Started", rfc3339(&report.started)),
        ("Finished", rfc3339(&report.finished)),
        ("Cluster", cluster),
        ("Drill file", report.drill.file.clone()),
        ("Tool", format!("hybrid-drill {}", report.tool_version)),
        ("API requests", format!("{} (watch gaps: {})", super::requests_in_words(report), report.watch_gaps)),
    ];
    html! {
        header {
            h1 { (report.kind.heading()) ": " (report.drill.name) }
            @if let Some(d) = &report.drill.description { p class="muted" { (d) } }
            p { span class={ "badge verdict " (report.outcome.slug()) } id="verdict" { (report.outcome.as_str()) } }
            @if let Some(reason) = &report.abort_reason {
                div class="callout" { strong { "Stopped because:" } " " (reason) }
            }
            div class="figures" {
                @if let Some(rto) = rto(report) {
                    @let label = match rto.objective_seconds {
                        Some(o) => format!("RTO · objective {} · {}", human_seconds(o), verdict_word(rto)),
                        None => "RTO · no objective".into(),
                    };
                    (figure(&seconds_cell(rto.seconds), &label, verdict_class(rto)))
                }
                (figure(
                    &format!("{met} / {}", judged.len()),
                    "objectives met",
                    if met == judged.len() { "met" } else { "missed" },
                ))
                (figure(&format!("{:.3}", f.gpu_hours), &format!("fallback GPU-hours · {} nodes", f.nodes), ""))
                (figure(&cost, "estimated fallback cost", ""))
                (figure(&f.max_gpus.to_string(), &peak, if f.overrun { "missed" } else { "" }))
            }
            table class="details" {
                @for (k, v) in &details { tr { th { (k) } td { (v) } } }
            }
        }
    }
}

// Chart geometry, in SVG user units; the SVG scales to the page width.
const WIDTH: f64 = 1000.0;
const X0: f64 = 200.0;
const X1: f64 = 820.0;
const LANE: f64 = 24.0;
const EVENT_LANE: f64 = 18.0;
const MILESTONE_ROW: f64 = 20.0;

fn seconds_of(b: &Boundary) -> f64 {
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

/// The recovery drawn again on its own scale: from the fault until the service was restored and every phase that
/// began before the return had ended.
struct Zoom {
    window: Window,
    from: f64,
    to: f64,
    phases: Vec<Phase>,
}

/// The recovery (fault to service restored) often lasts a small part of a drill whose reclaim waits for
/// consolidation: it gets a chart of its own, so its phases can be read. `None` when the recovery was not observed
/// or already fills much of the chart.
fn recovery_zoom(report: &Report, whole: Window) -> Option<Zoom> {
    let rto = rto(report)?;
    let (from, restored) = (seconds_of(rto.from.as_ref()?), seconds_of(rto.to.as_ref()?));
    let returned = report.milestones.iter().find(|m| m.key == Some(MilestoneKey::ReturnStarted)).map(seconds_of);
    let phases: Vec<Phase> = report
        .phases
        .iter()
        .filter(|p| p.from.as_ref().is_some_and(|f| returned.is_none_or(|r| seconds_of(f) < r)))
        .cloned()
        .collect();
    let to = phases.iter().filter_map(|p| p.to.as_ref()).map(seconds_of).fold(restored, f64::max);
    (to - from < 0.4 * (whole.end - whole.start)).then(|| Zoom { window: Window::new(from, to), from, to, phases })
}

fn timeline(report: &Report) -> Markup {
    let ends = report
        .phases
        .iter()
        .flat_map(|p| [p.from.as_ref(), p.to.as_ref()])
        .flatten()
        .map(seconds_of)
        .chain(report.notable_events.iter().map(|n| n.t_seconds))
        .chain(report.milestones.iter().map(seconds_of));
    let whole = Window::new(0.0, ends.fold(0.0, f64::max));
    html! {
        section {
            h2 { "Timeline" }
            figure style="margin:0" { (chart(report, "gantt", whole, &report.phases)) }
            (legend())
            @if let Some(zoom) = recovery_zoom(report, whole) {
                h3 {
                    "Recovery, zoomed: from the fault (+" (human_seconds(zoom.from))
                    ") until the service was restored and every phase before the return had ended (+"
                    (human_seconds(zoom.to)) ")"
                }
                figure style="margin:0" { (chart(report, "gantt-recovery", zoom.window, &zoom.phases)) }
            }
            table {
                thead {
                    tr {
                        th class="num" { "#" } th { "Milestone" } th class="num" { "t" } th { "Received" }
                        th { "Server time" }
                    }
                }
                tbody {
                    @for (n, m) in report.milestones.iter().enumerate() {
                        tr {
                            td class="num" { (n + 1) }
                            td { (m.label) }
                            td class="num" { "+" (human_seconds(seconds_of(m))) }
                            td { (rfc3339(&m.received)) }
                            td { (time_or_dash(m.server_time.as_ref())) }
                        }
                    }
                }
            }
            (legend_lines(&[legend::line(Figure::Milestones)]))
        }
    }
}

/// The clocks and bounds of the figures just shown: one legend line each.
fn legend_lines(lines: &[String]) -> Markup {
    html! {
        ul class="legend-lines muted" { @for line in lines { li { (line) } } }
    }
}

fn time_or_dash(t: Option<&chrono::DateTime<chrono::Utc>>) -> String {
    t.map(rfc3339).unwrap_or_else(|| "-".into())
}

fn legend() -> Markup {
    let swatch = |style: &str, text: &str| html! { span { span class="swatch" style=(style) {} (text) } };
    html! {
        div class="legend" {
            (swatch("background:var(--met)", "objective met"))
            (swatch("background:var(--missed)", "objective missed or not measured"))
            (swatch("background:var(--none)", "no objective"))
            (swatch("border:1px dashed var(--incomplete)", "end not observed"))
            (swatch("background:var(--ink);width:3px", "objective (from the phase's start)"))
            span { "numbers: the milestones below · time from the drill's start, tool clock" }
        }
    }
}

/// A mark above the chart for one milestone, or for several that would overlap, labelled with their range (`3–7`).
struct MilestoneMark {
    label: String,
    x: f64,
    members: Vec<usize>,
}

fn milestone_marks(report: &Report, w: Window) -> Vec<MilestoneMark> {
    let mut marks: Vec<MilestoneMark> = Vec::new();
    for (i, m) in report.milestones.iter().enumerate() {
        let t = seconds_of(m);
        if !w.contains(t) {
            continue;
        }
        let x = w.x(t);
        match marks.last_mut() {
            Some(mark) if x - mark.x < 16.0 => mark.members.push(i),
            _ => marks.push(MilestoneMark { label: String::new(), x, members: vec![i] }),
        }
    }
    for mark in &mut marks {
        mark.label = match (mark.members.first(), mark.members.last()) {
            (Some(a), Some(z)) if a != z => format!("{}–{}", a + 1, z + 1),
            (Some(a), _) => (a + 1).to_string(),
            _ => String::new(),
        };
    }
    marks
}

/// Milestone marks with the half width of their label and their row: marks whose labels would still collide go on
/// further rows. Also returns how many rows there are.
fn place_marks(marks: Vec<MilestoneMark>) -> (Vec<(MilestoneMark, f64, usize)>, usize) {
    let mut rows: Vec<f64> = Vec::new();
    let mut placed = Vec::new();
    for mark in marks {
        let half = 5.0 + 3.2 * mark.label.chars().count() as f64;
        let row = match rows.iter().position(|right| mark.x - half >= *right + 2.0) {
            Some(r) => r,
            None => {
                rows.push(f64::MIN);
                rows.len() - 1
            }
        };
        rows[row] = mark.x + half;
        placed.push((mark, half, row));
    }
    (placed, rows.len())
}

/// One Gantt chart: milestone marks, a lane of event markers per kind, a lane per phase, over the window `w`.
fn chart(report: &Report, id: &str, w: Window, phases: &[Phase]) -> Markup {
    let (placed, rows) = place_marks(milestone_marks(report, w));
    let mut lanes: BTreeMap<Marker, Vec<&Notable>> = BTreeMap::new();
    for n in report.notable_events.iter().filter(|n| w.contains(n.t_seconds)) {
        lanes.entry(n.kind).or_default().push(n);
    }
    let events_top = rows.max(1) as f64 * MILESTONE_ROW + 6.0;
    let phases_top = events_top + lanes.len() as f64 * EVENT_LANE + 8.0;
    let overlap_lanes = usize::from(report.overlap.is_some());
    let bottom = phases_top + (phases.len() + overlap_lanes) as f64 * LANE + 4.0;
    let height = bottom + 22.0;
    html! {
        svg id=(id) viewBox={ "0 0 " (WIDTH) " " (format!("{height:.0}")) } role="img"
            aria-label="Timeline of the drill's phases" {
            defs {
                pattern id={ "hatch-" (id) } width="6" height="6" patternUnits="userSpaceOnUse"
                    patternTransform="rotate(45)" {
                    rect width="6" height="6" fill="#f0f0f0" {}
                    line x1="0" y1="0" x2="0" y2="6" stroke="#b0b0b0" stroke-width="2" {}
                }
            }
            (time_axis((w.start, w.end, w.step), X0, X1, events_top - 4.0, bottom))
            @for (mark, half, row) in &placed {
                @let cy = *row as f64 * MILESTONE_ROW + 10.0;
                (milestone_mark(report, mark, *half, cy, bottom))
            }
            text class="tick" x="4" y="14" { "milestones" }
            @for (i, (kind, notables)) in lanes.iter().enumerate() {
                (event_lane(*kind, notables, events_top + i as f64 * EVENT_LANE + EVENT_LANE / 2.0, w))
            }
            @for (i, p) in phases.iter().enumerate() {
                (phase_lane(p, phases_top + i as f64 * LANE, w, id))
            }
            @if let Some(o) = &report.overlap {
                (overlap_lane(o, phases_top + phases.len() as f64 * LANE, w))
            }
        }
    }
}

fn milestone_mark(report: &Report, mark: &MilestoneMark, half: f64, cy: f64, bottom: f64) -> Markup {
    let title: Vec<String> = mark
        .members
        .iter()
        .map(|i| {
            let m = &report.milestones[*i];
            format!("{}. {} at +{}", i + 1, m.label, human_seconds(seconds_of(m)))
        })
        .collect();
    let x = Coord(mark.x);
    html! {
        g class="milestone-mark" {
            title { (title.join("\n")) }
            line class="milestone-line" x1=(x) y1=(Coord(cy + 8.0)) x2=(x) y2=(Coord(bottom)) {}
            rect class="milestone" x=(Coord(mark.x - half)) y=(Coord(cy - 8.0)) width=(Coord(2.0 * half)) height="16"
                rx="8" {}
            text class="milestone-n" x=(x) y=(Coord(cy + 3.5)) text-anchor="middle" { (mark.label) }
        }
    }
}

fn event_lane(kind: Marker, notables: &[&Notable], y: f64, w: Window) -> Markup {
    html! {
        g class="event-lane" data-kind=(kind.label()) {
            text class="lane-label sub" x="4" y=(Coord(y + 4.0)) { (kind.label()) }
            @for n in notables {
                path class={ "marker-" (kind_slug(kind)) }
                    d=(format!("M{:.1} {:.1} l5 5 l-5 5 l-5 -5 z", w.x(n.t_seconds), y - 5.0))
                    fill=(marker_color(kind)) stroke="#fff" stroke-width="0.8" {
                    title { "+" (human_seconds(n.t_seconds)) " " (n.what) }
                }
            }
        }
    }
}

fn overlap_lane(o: &super::OverlapWindow, y: f64, w: Window) -> Markup {
    let from = seconds_of(&o.from);
    let (to, text) = match (&o.to, o.seconds) {
        (Some(to), Some(s)) => (seconds_of(to), human_seconds(s)),
        _ => (w.end, "not confirmed gone".to_string()),
    };
    html! {
        g class="lane" data-phase="overlap" {
            text class="lane-label" x="4" y=(Coord(y + 16.0)) { "overlap (split brain)" }
            rect class="bar-overlap" x=(Coord(w.x(from))) y=(Coord(y + 5.0))
                width=(Coord((w.x(to) - w.x(from)).max(2.0))) height="14" rx="2" {
                title { "old pods on-prem and replacements Ready at once" }
            }
            text class="value" x=(Coord(X1 + 10.0)) y=(Coord(y + 16.0)) { (text) }
        }
    }
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

/// A phase's lane label: `RTO`, a top-level phase by its name, a sub-phase indented under its parent.
fn lane_label(p: &Phase) -> String {
    match &p.parent {
        Some(_) => format!("└ {}", p.name.title()),
        None => p.name.title().into(),
    }
}

fn phase_lane(p: &Phase, y: f64, w: Window, chart: &str) -> Markup {
    let label = lane_label(p);
    let (indent, class) = if p.parent.is_some() { (20.0, "lane-label sub") } else { (4.0, "lane-label") };
    let weight = is_rto(p).then_some("700");
    let from = p.from.as_ref().map(seconds_of);
    let to = p.to.as_ref().map(seconds_of);
    let title = format!(
        "{}: {} → {}",
        label.trim_start_matches("└ "),
        p.from.as_ref().map_or("not observed", |b| b.label.as_str()),
        p.to.as_ref().map_or("not observed", |b| b.label.as_str())
    );
    let objective = match (from, p.objective_seconds) {
        (Some(f), Some(o)) if w.x(f + o) < X1 => Some((w.x(f + o), o)),
        _ => None,
    };
    let value = match (p.seconds, p.objective_seconds) {
        (Some(s), Some(o)) => format!("{} / {}", human_seconds(s), human_seconds(o)),
        (Some(s), None) => human_seconds(s),
        (None, _) => "-".into(),
    };
    let (bar_y, text_y) = (Coord(y + 5.0), Coord(y + 16.0));
    html! {
        g class="lane" data-phase=(p.name.as_str()) {
            text class=(class) x=(indent) y=(text_y) font-weight=[weight] { (label) }
            @match (from, to) {
                (Some(f), Some(t)) => {
                    rect class={ "bar-" (verdict_class(p)) } x=(Coord(w.x(f))) y=(bar_y)
                        width=(Coord((w.x(t) - w.x(f)).max(2.0))) height="14" rx="2" { title { (title) } }
                }
                (Some(f), None) => {
                    rect class="bar-incomplete" fill={ "url(#hatch-" (chart) ")" } x=(Coord(w.x(f))) y=(bar_y)
                        width=(Coord((X1 - w.x(f)).max(2.0))) height="14" { title { (title) } }
                }
                _ => {
                    text class="tick" x=(Coord(X0 + 4.0)) y=(text_y) { "not observed" title { (title) } }
                }
            }
            @if let Some((ox, o)) = objective {
                line class="objective" x1=(Coord(ox)) y1=(Coord(y + 2.0)) x2=(Coord(ox)) y2=(Coord(y + 22.0)) {
                    title { "objective " (human_seconds(o)) }
                }
            }
            text class="value" x=(Coord(X1 + 10.0)) y=(text_y) { (value) }
            text class={ "value " (verdict_class(p)) } x=(Coord(WIDTH - 4.0)) y=(text_y) text-anchor="end" {
                @if p.verdict != Verdict::NoObjective { (verdict_word(p)) }
            }
        }
    }
}

fn phases(report: &Report) -> Markup {
    let judged: Vec<&Phase> = report.phases.iter().filter(|p| p.objective_seconds.is_some()).collect();
    let missed = judged.iter().filter(|p| p.verdict != Verdict::Met).count();
    html! {
        section {
            h2 { "Phases and objectives" }
            p {
                (judged.len()) " objectives: " (judged.len() - missed) " met, " (missed) " missed or not measured."
                @if !report.objectives_missed.is_empty() { " Missed: " (report.missed_list()) "." }
            }
            p class="muted" {
                "Durations are on the tool's clock (sub-second); the server column gives the same phase from the \
                 objects' own timestamps (whole seconds) where both ends have one."
            }
            div class="scroll" {
                table {
                    thead {
                        tr {
                            th { "Phase" } th { "From" } th { "To" } th class="num" { "Duration" }
                            th class="num" { "Server clock" } th class="num" { "Objective" } th { "Verdict" }
                            th { "Note" }
                        }
                    }
                    tbody { @for p in &report.phases { (phase_row(p)) } }
                }
            }
            (legend_lines(&legend::phases(report)))
        }
    }
}

fn phase_row(p: &Phase) -> Markup {
    let boundary = |b: Option<&Boundary>| b.map_or("-", |b| b.label.as_str()).to_string();
    html! {
        tr {
            td {
                @if p.parent.is_some() { "\u{a0}\u{a0}" (lane_label(p)) }
                @else if is_rto(p) { strong { (p.name.title()) } }
                @else { (p.name.title()) }
            }
            td { (boundary(p.from.as_ref())) }
            td { (boundary(p.to.as_ref())) }
            td class="num" { (seconds_cell(p.seconds)) }
            td class="num" { (p.server_seconds.map(|s| format!("{s}s")).unwrap_or_else(|| "-".into())) }
            td class="num" { (seconds_cell(p.objective_seconds)) }
            td {
                @if p.verdict == Verdict::NoObjective { span class="muted" { "no objective" } }
                @else { span class={ "badge " (verdict_class(p)) } { (verdict_word(p)) } }
            }
            td { (p.note.as_deref().unwrap_or("")) }
        }
    }
}

/// Each fallback pod's startup in consecutive parts, on the server's clock.
fn startup(report: &Report) -> Markup {
    let s = &report.startup;
    html! {
        @if !s.pods.is_empty() {
            section {
                h2 { "Startup per pod" }
                p class="muted" { "Server clock (whole seconds where the kubelet reports those); each part runs from the end of the one before, so they add up to the pod's startup." }
                table {
                    thead { tr { th { "Pod" } th { "Node" } th class="num" { "Startup" } th { "Parts" } } }
                    tbody {
                        @for p in &s.pods {
                            tr {
                                td { (p.pod) } td { (p.node) }
                                td class="num" { (p.seconds.map(human_seconds).unwrap_or_else(|| "-".into())) }
                                td { (p.parts.iter().map(|part| format!("{} {}", part.name, human_seconds(part.seconds))).collect::<Vec<_>>().join(" · ")) }
                            }
                        }
                    }
                }
                @if let (Some(slowest), Some(spread)) = (&s.slowest, s.spread_seconds) {
                    p { "Slowest: " strong { (slowest) } ", " (human_seconds(spread)) " more than the quickest." }
                }
                (legend_lines(&[legend::line(Figure::Startup)]))
            }
        }
    }
}

fn steps(report: &Report) -> Markup {
    html! {
        section {
            h2 { "Steps" }
            table {
                thead {
                    tr { th { "Step" } th { "Action" } th { "Outcome" } th class="num" { "Duration" } th { "Detail" } }
                }
                tbody {
                    @for s in &report.steps {
                        tr {
                            td { (s.id) }
                            td { code { (s.action) } }
                            td { span class={ "badge " (s.outcome) } { (s.outcome) } }
                            td class="num" { (seconds_cell(s.seconds)) }
                            td { (s.message) }
                        }
                    }
                }
            }
            (legend_lines(&[legend::line(Figure::Steps)]))
        }
    }
}

fn fallback(report: &Report) -> Markup {
    let f = &report.fallback;
    html! {
        section {
            h2 { "Fallback" }
            p {
                (f.nodes) " cloud nodes, " (format!("{:.3}", f.node_hours)) " node-hours, "
                strong { (format!("{:.3}", f.gpu_hours)) " GPU-hours" } ", peak " (f.max_gpus) " GPUs."
            }
            @for line in super::billing_in_words(f) {
                p { "Hours " (line) "." }
            }
            @match f.estimated_cost {
                Some(c) => p {
                    "Estimated cost: " strong { (format!("${c:.2}")) } " (the drill's on-demand price table)."
                },
                None => p { "Estimated cost: not computed (add " code { "spec.pricing" } " to the drill)." },
            }
            @if !f.by_instance_type.is_empty() {
                table {
                    thead { tr { th { "Instance type" } th class="num" { "Node-hours" } } }
                    tbody {
                        @for (it, hours) in &f.by_instance_type {
                            tr { td { (it) } td class="num" { (format!("{hours:.3}")) } }
                        }
                    }
                }
            }
            @if !f.unpriced_instance_types.is_empty() {
                p { "No price given for: " (f.unpriced_instance_types.join(", ")) "." }
            }
            @if let Some(limit) = f.gpu_limit {
                @if f.overrun {
                    div class="callout" id="overrun" {
                        strong { "Overrun:" } " the fallback peaked at " (f.max_gpus)
                        " GPUs, above its NodePool limit of " (limit)
                        ". Karpenter's limits are eventually consistent: a burst can exceed them."
                    }
                } @else {
                    p { "NodePool GPU limit: " (limit) " (not exceeded)." }
                }
            }
            @if let Some(ceiling) = f.ceiling {
                @if f.over_ceiling {
                    div class="callout" id="over-ceiling" {
                        strong { "Above the drill's ceiling:" } " the fallback peaked at " (f.max_gpus) " GPUs, above "
                        code { "guards.maxFallbackGpus" } " " (ceiling)
                        "; the guard stopped the drill and restored the cluster."
                    }
                } @else {
                    p { "Drill ceiling (guards.maxFallbackGpus): " (ceiling) " (not exceeded)." }
                }
            }
            (legend_lines(&[Figure::FallbackHours, Figure::PeakGpus, Figure::Cost].map(legend::line)))
        }
    }
}

fn overlap(report: &Report) -> Markup {
    let Some(o) = &report.overlap else {
        return html! {};
    };
    let sentence = super::overlap_sentence(o);
    let mut chars = sentence.chars();
    let first = chars.next().map(|c| c.to_uppercase().to_string()).unwrap_or_default();
    html! {
        section id="overlap" {
            h2 { "Overlap window (split brain)" }
            div class="callout note" { (first) (chars.as_str()) }
            (legend_lines(&[legend::line(Figure::Overlap)]))
        }
    }
}

fn restore_and_warnings(report: &Report) -> Markup {
    html! {
        @if let Some(rb) = &report.rollback {
            section {
                h2 { "Restore" }
                ul {
                    @for u in &rb.undone { li { "restored: " (u) } }
                    @for u in &rb.failed { li class="missed" { strong { "NOT RESTORED:" } " " (u) } }
                    @if rb.undone.is_empty() && rb.failed.is_empty() { li { "nothing needed undoing" } }
                }
            }
        }
        @if !report.warnings.is_empty() {
            section { h2 { "Warnings" } ul { @for w in &report.warnings { li { (w) } } } }
        }
    }
}

fn events(report: &Report) -> Markup {
    html! {
        section {
            h2 { "Notable events" }
            table {
                thead { tr { th class="num" { "t" } th { "Kind" } th { "Event" } th { "Server time" } } }
                tbody {
                    @for n in &report.notable_events {
                        tr {
                            td class="num" { "+" (human_seconds(n.t_seconds)) }
                            td {
                                span class="swatch" style={ "background:" (marker_color(n.kind)) } {}
                                (n.kind.label())
                            }
                            td { (n.what) }
                            td { (time_or_dash(n.server_time.as_ref())) }
                        }
                    }
                }
            }
        }
    }
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
