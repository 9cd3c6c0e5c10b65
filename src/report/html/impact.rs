//! The users' impact in the HTML report: each SLI plotted on the Gantt chart's time axis (its objective a dashed
//! line, time outside it shaded), then a table of the figures over the drill and per phase.

use maud::{Markup, html};

use super::chart::{WIDTH, Window, X0, X1};
use super::parts::{is_rto, rto, seconds_of};
use crate::domain::impact::{Impact, SliImpact};
use crate::phases::Phase;
use crate::report::page::{Coord, time_axis};
use crate::report::{Report, human_seconds};

const PLOT: f64 = 70.0;

pub(super) fn plots(report: &Report, w: Window) -> Markup {
    let Some(impact) = &report.impact else { return html! {} };
    let frame = Frame::of(report, w, None);
    html! {
        h3 { "What users saw: the SLIs on the same time axis" }
        @if let Some(note) = &impact.stand_in { p class="muted" { (note) } }
        @for sli in &impact.slis {
            figure style="margin:0" { (plot(sli, &frame)) }
        }
        (figures(impact))
    }
}

/// The SLIs again under the zoomed recovery, on its scale: on a real drill the recovery is minutes of an hour, and
/// what users felt in it is a sliver of the full-scale plot.
pub(super) fn zoomed_plots(report: &Report, w: Window, phases: &[Phase]) -> Markup {
    let Some(impact) = &report.impact else { return html! {} };
    let frame = Frame::of(report, w, Some(phases));
    html! {
        h3 { "What users saw during the recovery, on the zoomed scale" }
        @for sli in &impact.slis {
            figure style="margin:0" { (plot(sli, &frame)) }
        }
    }
}

/// What every SLI plot of one time axis shares: the window, the top-level phases as bands, and the fault (t0) and
/// service-restored lines, so a dip reads against the phase it fell in.
struct Frame {
    w: Window,
    bands: Vec<(String, f64, f64)>,
    marks: Vec<(&'static str, f64)>,
}

impl Frame {
    fn of(report: &Report, w: Window, phases: Option<&[Phase]>) -> Frame {
        let phases = phases.unwrap_or(&report.phases);
        let bands = phases
            .iter()
            .filter(|p| p.parent.is_none() && !is_rto(p))
            .filter_map(|p| {
                Some((p.name.as_str().to_string(), seconds_of(p.from.as_ref()?), seconds_of(p.to.as_ref()?)))
            })
            .filter(|(_, from, to)| to > from)
            .collect();
        let mut marks = Vec::new();
        if let Some(rto) = rto(report) {
            if let Some(from) = &rto.from {
                marks.push(("t0", seconds_of(from)));
            }
            if let Some(to) = &rto.to {
                marks.push(("restored", seconds_of(to)));
            }
        }
        Frame { w, bands, marks }
    }
}

fn plot(sli: &SliImpact, frame: &Frame) -> Markup {
    let w = frame.w;
    let (start, end, _) = w.bounds();
    let shown: Vec<&[f64; 2]> =
        sli.series.iter().filter(|p| p[1].is_finite() && (start..=end).contains(&p[0])).collect();
    let values: Vec<f64> = shown.iter().map(|p| p[1]).collect();
    let threshold: f64 = sli.objective.split_whitespace().last().and_then(|t| t.parse().ok()).unwrap_or(0.0);
    let (lo, hi) = values.iter().chain([&threshold]).fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
    let (lo, hi) = if hi - lo < 1e-9 { (lo - 1.0, hi + 1.0) } else { (lo, hi) };
    let top = 8.0;
    let y = |v: f64| top + (hi - v) / (hi - lo) * PLOT;
    let points: Vec<String> = shown.iter().map(|p| format!("{:.1},{:.1}", w.x(p[0]), y(p[1]))).collect();
    let bottom = top + PLOT;
    let unit = sli.unit.as_deref().unwrap_or("");
    let visible = |t: f64| (start..=end).contains(&t);
    html! {
        svg viewBox={ "0 0 " (WIDTH) " " (format!("{:.0}", bottom + 22.0)) } role="img"
            aria-label={ "SLI " (sli.name) " over the drill" } {
            @for (i, (name, from, to)) in frame.bands.iter().enumerate() {
                @if *to > start && *from < end {
                    rect class="phase-band" x=(Coord(w.x(*from))) y=(Coord(top)) width=(Coord((w.x(*to) - w.x(*from)).max(0.5)))
                        height=(Coord(PLOT)) fill=(if i % 2 == 0 { "var(--band)" } else { "#eef1f4" }) {
                        title { (name) ": +" (human_seconds(*from)) " to +" (human_seconds(*to)) }
                    }
                }
            }
            (time_axis(w.bounds(), X0, X1, top, bottom))
            @for (label, t) in &frame.marks {
                @if visible(*t) {
                    line class="mark" x1=(Coord(w.x(*t))) x2=(Coord(w.x(*t))) y1=(Coord(top)) y2=(Coord(bottom))
                        stroke="var(--muted)" stroke-dasharray="2 2" {}
                    text class="tick" x=(Coord(w.x(*t) + 2.0)) y=(Coord(bottom - 2.0)) { (label) }
                }
            }
            text class="tick" x="4" y=(Coord(top + 12.0)) { (sli.name) }
            text class="tick" x="4" y=(Coord(top + 28.0)) { "objective " (sli.objective) " " (unit) }
            text class="tick" x=(Coord(X1 + 6.0)) y=(Coord(top + 4.0)) { (format!("{hi:.3}")) }
            text class="tick" x=(Coord(X1 + 6.0)) y=(Coord(bottom)) { (format!("{lo:.3}")) }
            line x1=(X0) x2=(X1) y1=(Coord(y(threshold))) y2=(Coord(y(threshold))) stroke="var(--missed)"
                stroke-dasharray="4 3" {}
            @if points.is_empty() {
                text class="tick" x=(Coord((X0 + X1) / 2.0)) y=(Coord(top + PLOT / 2.0)) { "no data in this window" }
            } @else {
                polyline fill="none" stroke="var(--ink)" stroke-width="1.5" points=(points.join(" ")) {}
            }
        }
    }
}

fn figures(impact: &Impact) -> Markup {
    use crate::report::impact::{burned_text, objective_with_unit, outside_text, with_unit};
    html! {
        table {
            thead { tr { th { "SLI" } th { "Objective" } th { "Window" } th class="num" { "min" } th class="num" { "mean" }
                th class="num" { "p99" } th class="num" { "outside objective" } th class="num" { "budget burned" } } }
            tbody {
                @for sli in &impact.slis {
                    @for (window, s) in std::iter::once(("whole drill", &sli.whole)).chain(sli.by_phase.iter().map(|p| (p.phase.as_str(), &p.stats))) {
                        tr {
                            @let unit = sli.unit.as_deref();
                            td { (sli.name) } td { (objective_with_unit(sli)) } td { (window) }
                            td class="num" { (with_unit(s.min, unit)) } td class="num" { (with_unit(s.mean, unit)) }
                            td class="num" { (with_unit(s.p99, unit)) }
                            td class="num" { (outside_text(s)) }
                            td class="num" { (burned_text(s)) }
                        }
                    }
                }
            }
        }
        p {
            @if let Some(r) = &impact.requests {
                (format!("{} of {} requests failed ({:.4}% of the error budget). ", r.failed, r.total, r.budget_burned_percent))
            }
            @match impact.users_served_again_seconds {
                Some(s) => { "Users were served again " (human_seconds(s)) " after the fault" }
                None => { "Users were not served again by the end of the drill" }
            }
            @if let Some(rto) = impact.rto_seconds { "; the RTO was " (human_seconds(rto)) }
            ". "
            @for a in &impact.ready_to_first_good_answer {
                (a.pod) ": first good answer " (human_seconds(a.seconds)) " after Ready. "
            }
        }
        @if let Some(lag) = crate::report::impact::lag_text(impact) { p class="muted" { (lag) } }
        @if let Some(stop) = &impact.stop { p { strong { "Stopped: " } (stop.describe()) } }
        @for e in &impact.prometheus_errors { p class="muted" { (crate::timeline::rfc3339(&e.at)) " Prometheus: " (e.message) " (" (e.action) ")" } }
    }
}
