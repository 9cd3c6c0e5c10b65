//! The tables `whatif` and `predict` print: the knobs ranked, the model's parameters with their sources, the
//! forecast phase by phase.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};

use super::{Forecast, KnobResult, WhatIf};

/// `14m 09.9s`, `6.2s`.
pub fn human(s: f64) -> String {
    let sign = if s < -0.05 { "-" } else { "" };
    // Rounded to the tenth first, so 779.99 s reads 13m 00.0s and not 12m 60.0s.
    let s = (s.abs() * 10.0).round() / 10.0;
    if s >= 60.0 { format!("{sign}{}m {:04.1}s", (s / 60.0) as u64, s % 60.0) } else { format!("{sign}{s:.1}s") }
}

fn table(header: Vec<&str>) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    if t.width().is_none() {
        // Not a terminal: wrap for a log or a change request, not for an unknown screen.
        t.set_width(140);
    }
    t.set_header(header);
    t
}

fn money(v: Option<f64>) -> String {
    v.map_or("unknown".into(), |c| if c == 0.0 { "$0".into() } else { format!("${c:.0}") })
}

fn knob_row(t: &mut Table, k: &KnobResult) {
    let per_dollar = match (k.minutes_saved_per_dollar, k.monthly_cost) {
        (Some(m), _) if m < 0.01 => format!("{m:.1e}"),
        (Some(m), _) => format!("{m:.3}"),
        (None, Some(c)) if c <= 0.0 && k.delta_seconds < -0.05 => "free".into(),
        _ => "-".into(),
    };
    let mut notes = k.assumptions.join("; ");
    if let Some(r) = k.reclaim_seconds.filter(|_| k.name.contains("consolidate-after")) {
        notes = format!("reclaim {}{}{notes}", human(r), if notes.is_empty() { "" } else { "; " });
    }
    t.add_row(vec![
        Cell::new(&k.name),
        Cell::new(&k.value),
        Cell::new(human(k.rto_seconds)).set_alignment(CellAlignment::Right),
        Cell::new(human(k.delta_seconds)).set_alignment(CellAlignment::Right),
        Cell::new(money(k.monthly_cost)).set_alignment(CellAlignment::Right),
        Cell::new(per_dollar).set_alignment(CellAlignment::Right),
        Cell::new(notes),
    ]);
}

/// `hybrid-drill whatif` as text: the baseline, the knobs ranked, the combination, the parameters.
pub fn what_if(w: &WhatIf) -> String {
    let measured = w.measured_rto_seconds.map_or("not measured".into(), human);
    let mut out = format!(
        "what if: {} ({})\nmeasured RTO {measured}; the model gives {} ({} to {}) in {} wave(s)\n",
        w.drill,
        w.run_dir,
        human(w.baseline.rto_seconds),
        human(w.baseline.low_seconds),
        human(w.baseline.high_seconds),
        w.baseline.waves
    );
    let header = vec!["knob", "value", "RTO", "change", "per month", "min saved per $", "assumptions"];
    if let Some(c) = &w.combination {
        let mut t = table(header.clone());
        knob_row(&mut t, c);
        out.push_str(&format!("\nthe knobs set together:\n{t}\n"));
    }
    let mut t = table(header);
    w.knobs.iter().for_each(|k| knob_row(&mut t, k));
    out.push_str(&format!("\neach knob on its own, ranked by RTO minutes saved per dollar:\n{t}\n"));
    let mut p = table(vec!["parameter", "value", "source", "basis"]);
    for n in &w.parameters {
        p.add_row(vec![
            Cell::new(n.name),
            Cell::new(format!("{:.2}", n.param.value)).set_alignment(CellAlignment::Right),
            Cell::new(format!("{:?}", n.param.source).to_lowercase()),
            Cell::new(&n.param.basis),
        ]);
    }
    out.push_str(&format!("\nthe model (seconds unless counted):\n{p}\n"));
    out
}

/// `hybrid-drill predict` as text.
pub fn forecast(f: &Forecast) -> String {
    let Some(rto) = &f.rto else {
        return format!("forecast of {}: none ({})\n", f.drill, f.unavailable.as_deref().unwrap_or("no earlier run"));
    };
    let mut t = table(vec!["phase", "forecast", "low", "high"]);
    for p in &f.phases {
        let i = &p.interval;
        t.add_row(vec![
            Cell::new(&p.phase),
            Cell::new(human(i.seconds)).set_alignment(CellAlignment::Right),
            Cell::new(human(i.low_seconds)).set_alignment(CellAlignment::Right),
            Cell::new(human(i.high_seconds)).set_alignment(CellAlignment::Right),
        ]);
    }
    let errors: Vec<String> = f.history_errors.iter().map(|e| format!("{:+.0}%", e * 100.0)).collect();
    format!(
        "forecast of {}: RTO {} ({} to {})\nfrom {} earlier run(s), the latest {}; the model's error on the earlier \
         ones: {}\n{t}\n",
        f.drill,
        human(rto.seconds),
        human(rto.low_seconds),
        human(rto.high_seconds),
        f.based_on.len(),
        f.based_on.last().map_or("-", String::as_str),
        if errors.is_empty() { "none to measure yet".into() } else { errors.join(", ") }
    )
}
