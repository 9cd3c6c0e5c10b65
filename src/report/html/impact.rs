//! The users' impact in the HTML report: each SLI plotted on the Gantt chart's time axis (its objective a dashed
//! line, time outside it shaded), then a table of the figures over the drill and per phase.

use maud::{Markup, html};

use super::chart::{WIDTH, Window, X0, X1};
use crate::domain::impact::{Impact, SliImpact};
use crate::report::page::{Coord, time_axis};
use crate::report::{Report, human_seconds};

const PLOT: f64 = 70.0;

pub(super) fn plots(report: &Report, w: Window) -> Markup {
    let Some(impact) = &report.impact else { return html! {} };
    html! {
        h3 { "What users saw: the SLIs on the same time axis" }
        @if let Some(note) = &impact.stand_in { p class="muted" { (note) } }
        @for sli in &impact.slis {
            figure style="margin:0" { (plot(sli, w)) }
        }
        (figures(impact))
    }
}

fn plot(sli: &SliImpact, w: Window) -> Markup {
    let values: Vec<f64> = sli.series.iter().map(|p| p[1]).filter(|v| v.is_finite()).collect();
    let threshold: f64 = sli.objective.split_whitespace().last().and_then(|t| t.parse().ok()).unwrap_or(0.0);
    let (lo, hi) = values.iter().chain([&threshold]).fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
    let (lo, hi) = if hi - lo < 1e-9 { (lo - 1.0, hi + 1.0) } else { (lo, hi) };
    let top = 8.0;
    let y = |v: f64| top + (hi - v) / (hi - lo) * PLOT;
    let points: Vec<String> =
        sli.series.iter().filter(|p| p[1].is_finite()).map(|p| format!("{:.1},{:.1}", w.x(p[0]), y(p[1]))).collect();
    let bottom = top + PLOT;
    let unit = sli.unit.as_deref().unwrap_or("");
    html! {
        svg viewBox={ "0 0 " (WIDTH) " " (format!("{:.0}", bottom + 22.0)) } role="img"
            aria-label={ "SLI " (sli.name) " over the drill" } {
            (time_axis(w.bounds(), X0, X1, top, bottom))
            text class="tick" x="4" y=(Coord(top + 12.0)) { (sli.name) }
            text class="tick" x="4" y=(Coord(top + 28.0)) { "objective " (sli.objective) " " (unit) }
            text class="tick" x=(Coord(X1 + 6.0)) y=(Coord(top + 4.0)) { (format!("{hi:.3}")) }
            text class="tick" x=(Coord(X1 + 6.0)) y=(Coord(bottom)) { (format!("{lo:.3}")) }
            line x1=(X0) x2=(X1) y1=(Coord(y(threshold))) y2=(Coord(y(threshold))) stroke="var(--missed)"
                stroke-dasharray="4 3" {}
            polyline fill="none" stroke="var(--ink)" stroke-width="1.5" points=(points.join(" ")) {}
        }
    }
}

fn figures(impact: &Impact) -> Markup {
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    html! {
        table {
            thead { tr { th { "SLI" } th { "Objective" } th { "Window" } th class="num" { "min" } th class="num" { "mean" }
                th class="num" { "p99" } th class="num" { "outside objective" } th class="num" { "budget burned" } } }
            tbody {
                @for sli in &impact.slis {
                    @for (window, s) in std::iter::once(("whole drill", &sli.whole)).chain(sli.by_phase.iter().map(|p| (p.phase.as_str(), &p.stats))) {
                        tr {
                            td { (sli.name) } td { (sli.objective) } td { (window) }
                            td class="num" { (cell(s.min)) } td class="num" { (cell(s.mean)) } td class="num" { (cell(s.p99)) }
                            td class="num" { (human_seconds(s.seconds_outside_objective)) }
                            td class="num" { (format!("{:.4}%", s.budget_burned_percent)) }
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
        @if let Some(stop) = &impact.stop { p { strong { "Stopped: " } (stop.describe()) } }
        @for e in &impact.prometheus_errors { p class="muted" { (crate::timeline::rfc3339(&e.at)) " Prometheus: " (e.message) " (" (e.action) ")" } }
    }
}
