//! The timeline chart: one lane per phase, the milestones above it, the notable events' lanes and the overlap,
//! drawn in SVG; with a zoomed chart of the recovery when it is a small part of the drill.

use std::collections::BTreeMap;

use maud::{Markup, html};

use crate::phases::{MilestoneKey, Phase, Verdict};
use crate::report::page::{Coord, tick_step, time_axis};
use crate::report::{Marker, Notable, Report, human_seconds, verdict_word};
use crate::timeline::rfc3339;

use super::parts::{is_rto, lane_label, marker_color, rto, seconds_of, time_or_dash, verdict_class};

// Chart geometry, in SVG user units; the SVG scales to the page width.
pub(super) const WIDTH: f64 = 1000.0;

pub(super) const X0: f64 = 200.0;

pub(super) const X1: f64 = 820.0;

pub(super) const LANE: f64 = 24.0;

pub(super) const EVENT_LANE: f64 = 18.0;

pub(super) const MILESTONE_ROW: f64 = 20.0;

/// A stretch of the drill's time that a chart shows, with its tick step.
#[derive(Clone, Copy)]
pub(super) struct Window {
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

    pub(super) fn bounds(&self) -> (f64, f64, f64) {
        (self.start, self.end, self.step)
    }

    pub(super) fn x(&self, t: f64) -> f64 {
        X0 + ((t - self.start) / (self.end - self.start)).clamp(0.0, 1.0) * (X1 - X0)
    }

    fn contains(&self, t: f64) -> bool {
        (self.start..=self.end).contains(&t)
    }
}

/// The recovery drawn again on its own scale: from the fault until the service was restored and every phase that
/// began before the return had ended.
pub(super) struct Zoom {
    window: Window,
    from: f64,
    to: f64,
    phases: Vec<Phase>,
}

/// The recovery (fault to service restored) often lasts a small part of a drill whose reclaim waits for
/// consolidation: it gets a chart of its own, so its phases can be read. `None` when the recovery was not observed
/// or already fills much of the chart.
pub(super) fn recovery_zoom(report: &Report, whole: Window) -> Option<Zoom> {
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

/// The timeline section: the Gantt chart, then what `below` draws on its time axis (the SLIs' plots), then the
/// recovery zoomed.
pub(super) fn timeline(
    report: &Report,
    below: impl Fn(&Report, Window) -> Markup,
    below_zoom: impl Fn(&Report, Window, &[Phase]) -> Markup,
) -> Markup {
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
            (below(report, whole))
            @if let Some(zoom) = recovery_zoom(report, whole) {
                h3 {
                    "Recovery, zoomed: from the fault (+" (human_seconds(zoom.from))
                    ") until the service was restored and every phase before the return had ended (+"
                    (human_seconds(zoom.to)) ")"
                }
                figure style="margin:0" { (chart(report, "gantt-recovery", zoom.window, &zoom.phases)) }
                (below_zoom(report, zoom.window, &zoom.phases))
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
        }
    }
}

pub(super) fn legend() -> Markup {
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
pub(super) struct MilestoneMark {
    label: String,
    x: f64,
    members: Vec<usize>,
}

pub(super) fn milestone_marks(report: &Report, w: Window) -> Vec<MilestoneMark> {
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
pub(super) fn place_marks(marks: Vec<MilestoneMark>) -> (Vec<(MilestoneMark, f64, usize)>, usize) {
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
pub(super) fn chart(report: &Report, id: &str, w: Window, phases: &[Phase]) -> Markup {
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

pub(super) fn milestone_mark(report: &Report, mark: &MilestoneMark, half: f64, cy: f64, bottom: f64) -> Markup {
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

pub(super) fn event_lane(kind: Marker, notables: &[&Notable], y: f64, w: Window) -> Markup {
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

pub(super) fn overlap_lane(o: &crate::report::OverlapWindow, y: f64, w: Window) -> Markup {
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

pub(super) fn kind_slug(kind: Marker) -> &'static str {
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

pub(super) fn phase_lane(p: &Phase, y: f64, w: Window, chart: &str) -> Markup {
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
