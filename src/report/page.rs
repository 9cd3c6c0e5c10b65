//! What the HTML pages (the run report and the history) share: the page shell with its inline style sheet, the
//! number formats of SVG coordinates, and the time axis of their charts. Pages load nothing from anywhere: no script,
//! font or style sheet. Markup is written with maud, which escapes every interpolated value: text cannot become markup.

use maud::{DOCTYPE, Markup, PreEscaped, Render, html};

const STYLE: &str = r#"
:root { --met: #2e7d32; --missed: #c62828; --none: #3f51b5; --incomplete: #8a8a8a; --overlap: #ef6c00;
        --ink: #1f2328; --muted: #59636e; --rule: #d0d7de; --band: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); margin: 0 auto; padding: 24px; max-width: 1180px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--rule); }
p { margin: 6px 0; }
.muted { color: var(--muted); }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 12px; }
pre { background: var(--band); padding: 10px; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--rule); vertical-align: top; }
th { background: var(--band); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.scroll { overflow-x: auto; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 12px;
         border: 1px solid currentColor; white-space: nowrap; }
.met, .passed { color: var(--met); }
.missed, .failed, .aborted, .restore-failed, .refused, .objective-missed, .regression { color: var(--missed); }
.none, .warned { color: var(--none); }
.incomplete, .skipped { color: var(--incomplete); }
.verdict { font-size: 18px; padding: 3px 12px; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; margin: 14px 0; }
.figure { border: 1px solid var(--rule); border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.figure .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.figure .label { color: var(--muted); font-size: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 16px; font-size: 12px; color: var(--muted); margin: 4px 0 10px; }
.legend-lines { font-size: 12px; margin: 4px 0 10px; padding-left: 18px; }
.swatch { display: inline-block; width: 14px; height: 10px; margin-right: 4px; vertical-align: middle; }
.callout { border-left: 4px solid var(--missed); background: #fff5f5; padding: 8px 12px; margin: 8px 0; }
.qualifiers { list-style: none; padding: 0; margin: 8px 0; }
.qualifier { border-left: 4px solid var(--none); background: var(--band); padding: 4px 10px; margin: 4px 0; color: var(--ink); }
.qualifier.missed { border-color: var(--missed); background: #fff5f5; }
.qualifier.missed strong { color: var(--missed); }
p.note { border-left: 4px solid var(--rule); padding: 2px 10px; }
.callout.note { border-color: var(--overlap); background: #fff8f0; }
.trends { display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap: 12px; }
.trend { margin: 0; border: 1px solid var(--rule); border-radius: 6px; padding: 6px 8px; }
.trend figcaption { font-weight: 600; font-size: 13px; }
svg { display: block; width: 100%; height: auto; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: var(--ink); }
svg .axis { stroke: var(--rule); stroke-width: 1; }
svg .grid { stroke: #eaeef2; stroke-width: 1; }
svg .tick { font-size: 11px; fill: var(--muted); }
svg .lane-label { font-size: 12px; }
svg .sub { fill: var(--muted); }
svg .bar-met { fill: var(--met); }
svg .bar-missed { fill: var(--missed); }
svg .bar-none { fill: var(--none); }
svg .bar-overlap { fill: var(--overlap); }
svg .bar-incomplete { stroke: var(--incomplete); stroke-dasharray: 3 2; }
svg .objective { stroke: var(--ink); stroke-width: 2; }
svg .milestone-line { stroke: #9aa4ae; stroke-width: 1; stroke-dasharray: 2 3; }
svg .milestone { fill: #fff; stroke: var(--ink); stroke-width: 1; }
svg .milestone-n { font-size: 10px; font-weight: 600; }
svg .value { font-size: 12px; font-variant-numeric: tabular-nums; }
svg .line { fill: none; stroke: var(--none); stroke-width: 2; }
svg .point-met { fill: var(--met); }
svg .point-missed { fill: var(--missed); }
svg .point-none { fill: var(--none); }
svg .point-incomplete { fill: var(--incomplete); }
svg .regression-ring { fill: none; stroke: var(--missed); stroke-width: 2; }
svg .objective-line { stroke: var(--missed); stroke-width: 1; stroke-dasharray: 5 3; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  h2 { break-after: avoid; }
  tr, figure, svg, .figures, .callout, .trend { break-inside: avoid; }
  table.runs { font-size: 9px; }
  .scroll { overflow: visible; }
  pre { white-space: pre-wrap; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"#;

/// A complete HTML document around `body`.
pub(crate) fn page(title: &str, body: Markup) -> String {
    let document = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                // The style sheet is this file's own constant, and CSS must not be entity-escaped.
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    };
    document.into_string() + "\n"
}

/// An SVG coordinate or length, written with one decimal: enough for a chart that scales to the page width.
#[derive(Clone, Copy)]
pub(super) struct Coord(pub f64);

impl Render for Coord {
    fn render_to(&self, buffer: &mut String) {
        format_args!("{:.1}", self.0).render_to(buffer);
    }
}

/// A compact duration for axis ticks: `45s`, `2m`, `2m30s`, `1h15m`.
fn short_seconds(s: f64) -> String {
    let s = s.round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// A tick label that stays readable for phases of a second as well as of an hour.
pub(super) fn tick_label(v: f64, step: f64) -> String {
    if step < 1.0 { format!("{v:.1}s") } else { short_seconds(v) }
}

/// A round tick step for an axis of `span` seconds, giving at most `ticks` steps.
pub(super) fn tick_step(span: f64, ticks: f64) -> f64 {
    const STEPS: [f64; 17] =
        [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0];
    STEPS.into_iter().find(|step| span / step <= ticks).unwrap_or_else(|| (span / ticks / 3600.0).ceil() * 3600.0)
}

/// The end of an axis that starts at 0 and must show `max` in at most `ticks` steps, and that step.
pub(super) fn axis(max: f64, ticks: f64) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
    let step = tick_step(max, ticks);
    ((max / step - 1e-9).ceil() * step, step)
}

/// The values from `start` to `end` (inclusive, give or take rounding) every `step`.
pub(super) fn ticks(start: f64, end: f64, step: f64) -> impl Iterator<Item = f64> {
    std::iter::successors(Some(start), move |t| Some(t + step)).take_while(move |t| *t <= end + 1e-9)
}

/// Vertical grid lines and tick labels every `step` seconds from `start` to `end`, mapped to x0..x1, the grid
/// spanning top..bottom and the labels under it.
pub(super) fn time_axis((start, end, step): (f64, f64, f64), x0: f64, x1: f64, top: f64, bottom: f64) -> Markup {
    html! {
        @for t in ticks(start, end, step) {
            @let x = Coord(x0 + (t - start) / (end - start) * (x1 - x0));
            line class="grid" x1=(x) y1=(Coord(top)) x2=(x) y2=(Coord(bottom)) {}
            text class="tick" x=(x) y=(Coord(bottom + 14.0)) text-anchor="middle" { (tick_label(t, step)) }
        }
        line class="axis" x1=(x0) y1=(Coord(bottom)) x2=(x1) y2=(Coord(bottom)) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped() {
        let hostile = r#"<a href="x">'&'</a>"#;
        let doc = page(hostile, html! { p title=(hostile) { (hostile) } });
        assert!(doc.contains("<title>&lt;a href=&quot;x&quot;&gt;'&amp;'&lt;/a&gt;</title>"), "{doc}");
        assert!(doc.contains(r#"<p title="&lt;a href=&quot;x&quot;&gt;'&amp;'&lt;/a&gt;">"#), "{doc}");
        assert!(!doc.contains("<a href"));
        assert!(doc.starts_with("<!DOCTYPE html>") && doc.contains("@media print"));
    }

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick_step(9.0, 10.0), 1.0);
        assert_eq!(tick_step(140.0, 10.0), 15.0);
        assert_eq!(tick_step(1500.0, 10.0), 300.0);
        assert_eq!(axis(142.0, 10.0), (150.0, 15.0));
        assert_eq!(axis(65.0, 5.0), (75.0, 15.0));
        assert_eq!(axis(0.4, 5.0), (0.4, 0.1));
        assert_eq!(axis(0.0, 10.0), (1.0, 0.1));
        assert_eq!(short_seconds(150.0), "2m30s");
        assert_eq!(short_seconds(3600.0), "1h");
        assert_eq!(ticks(0.0, 0.3, 0.1).count(), 4);
    }
}
