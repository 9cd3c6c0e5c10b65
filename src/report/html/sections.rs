//! The sections of the page below the chart: the headline figures, the phase table, startup, steps, fallback,
//! overlap, restore and warnings, and the notable events.

use maud::{Markup, html};

use crate::phases::{Boundary, Phase, Verdict};
use crate::report::legend;
use crate::report::{Report, human_seconds, seconds_cell, verdict_word};
use crate::timeline::rfc3339;

use super::parts::{is_rto, lane_label, legend_lines, marker_color, rto, time_or_dash, verdict_class};

pub(super) fn figure(value: &str, label: &str, class: &str) -> Markup {
    html! {
        div class="figure" { div class={ "value " (class) } { (value) } div class="label" { (label) } }
    }
}

pub(super) fn header(report: &Report) -> Markup {
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
    let mut details = vec![
        ("Run", report.run_id.clone()),
        ("Started", rfc3339(&report.started)),
        ("Finished", rfc3339(&report.finished)),
        ("Cluster", cluster),
        ("Drill file", report.drill.file.clone()),
        ("Tool", format!("hybrid-drill {}", report.tool_version)),
        ("API requests", format!("{} (watch gaps: {})", crate::report::requests_in_words(report), report.watch_gaps)),
    ];
    if let Some(p) = &report.provenance {
        // Who and why first, the build with its commit in place of the bare version.
        details.retain(|(k, _)| *k != "Tool");
        details.splice(0..0, p.rows());
    }
    html! {
        header {
            h1 { (report.kind.heading()) ": " (report.drill.name) }
            @if let Some(d) = &report.drill.description { p class="muted" { (d) } }
            p { span class={ "badge verdict " (report.outcome.slug()) } id="verdict" { (crate::report::headline::verdict(report)) } }
            @if let Some(reason) = &report.abort_reason {
                div class="callout" { strong { "Stopped because:" } " " (reason) }
            }
            (qualifiers(report))
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
                @if let Some(s) = &report.service_level {
                    @for (when, dip) in [("fault", &s.fault), ("return", &s.back)] {
                        @if let Some(d) = dip {
                            (figure(
                                &format!("{} / {}", d.lowest_ready, d.needed),
                                &format!("fewest pods Ready during the {when} · below target {}", human_seconds(d.seconds_below)),
                                if d.dipped() { "missed" } else { "met" },
                            ))
                        }
                    }
                }
                (figure(&f.max_gpus.to_string(), &peak, if f.overrun { "missed" } else { "" }))
            }
            table class="details" {
                @for (k, v) in &details { tr { th { (k) } td { (v) } } }
            }
        }
    }
}

/// What qualifies the verdict, beside it: the abort's reason has its own callout above.
fn qualifiers(report: &Report) -> Markup {
    use crate::report::headline::QualifierKind;
    let shown = report.headline.iter().filter(|q| q.kind != QualifierKind::Stopped);
    html! {
        ul class="qualifiers" id="qualifiers" {
            @for q in shown {
                li class={ "qualifier " (q.kind.slug()) @if q.kind.is_serious() { " missed" } } {
                    strong { (q.kind.tag()) ":" } " " (q.text)
                }
            }
        }
    }
}

/// The legend in plain words, near the top.
pub(super) fn plain_legend() -> Markup {
    html! {
        section id="legend" {
            h2 { "Legend" }
            ul class="legend-lines" { @for line in legend::PLAIN { li { (line) } } }
        }
    }
}

/// Every figure's clock and bound, at the end.
pub(super) fn measured(report: &Report) -> Markup {
    html! {
        section id="measured" {
            h2 { "How each figure is measured" }
            (legend_lines(&legend::measured(report)))
        }
    }
}

pub(super) fn phases(report: &Report) -> Markup {
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
            @if let Some(note) = crate::report::figures::rto_breakdown(report) { p class="note" { (note) } }
        }
    }
}

pub(super) fn phase_row(p: &Phase) -> Markup {
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
pub(super) fn startup(report: &Report) -> Markup {
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
                @if let Some(note) = crate::report::figures::startup_note(report) { p class="note" { (note) } }
            }
        }
    }
}

pub(super) fn steps(report: &Report) -> Markup {
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
        }
    }
}

pub(super) fn fallback(report: &Report) -> Markup {
    let f = &report.fallback;
    html! {
        section {
            h2 { "Fallback" }
            p {
                (f.nodes) " cloud nodes, " (format!("{:.3}", f.node_hours)) " node-hours, "
                strong { (format!("{:.3}", f.gpu_hours)) " GPU-hours" } ", peak " (f.max_gpus) " GPUs."
            }
            @for line in crate::report::billing_in_words(f) {
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
        }
    }
}

pub(super) fn fallback_faults(report: &Report) -> Markup {
    if report.fallback_faults.is_empty() {
        return html! {};
    }
    html! {
        section id="fallback-faults" {
            h2 { "Fallback under failure" }
            ul { @for line in report.fallback_faults.lines() { li { (line) } } }
        }
    }
}

pub(super) fn last_tier(report: &Report) -> Markup {
    let Some(tier) = &report.last_tier else {
        return html! {};
    };
    html! {
        section id="last-tier" {
            h2 { "Last tier" }
            ul { @for line in tier.lines() { li { (line) } } }
        }
    }
}

pub(super) fn overlap(report: &Report) -> Markup {
    let Some(o) = &report.overlap else {
        return html! {};
    };
    let sentence = crate::report::overlap_sentence(o);
    let mut chars = sentence.chars();
    let first = chars.next().map(|c| c.to_uppercase().to_string()).unwrap_or_default();
    html! {
        section id="overlap" {
            h2 { "Overlap window (split brain)" }
            div class="callout note" { (first) (chars.as_str()) }
        }
    }
}

pub(super) fn autoscaler(report: &Report) -> Markup {
    let Some(a) = &report.autoscaler else {
        return html! {};
    };
    let mut lines = crate::report::autoscaling::autoscaling_sentences(a).into_iter();
    let first = lines.next().unwrap_or_default();
    html! {
        section id="autoscaler" {
            h2 { "Autoscaler" }
            p { (first) }
            ul { @for line in lines { li { (line) } } }
        }
    }
}

/// Every deviation from the plan, then the action items with their likely cause and owner.
pub(super) fn deviations_and_actions(report: &Report) -> Markup {
    html! {
        section id="deviations" {
            h2 { "Deviations from the plan" }
            @if report.deviations.is_empty() { p { "None: every step ran as planned, with no retry, warning or override." } }
            ul {
                @for d in &report.deviations {
                    li {
                        strong { (d.kind.label()) }
                        @if let Some(t) = d.t_seconds { " (t+" (human_seconds(t)) ")" }
                        ": " (d.what)
                    }
                }
            }
        }
        section id="action-items" {
            h2 { "Action items" }
            @if report.action_items.is_empty() { p { "None: every objective was met and preflight raised nothing." } }
            @else {
                table {
                    thead { tr { th { "Objective" } th { "Measured" } th { "Likely cause" } th { "Owner" } } }
                    tbody {
                        @for a in &report.action_items {
                            tr { td { (a.objective) } td { (a.measured) } td { (a.cause) } td { (a.owner) } }
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn restore_and_warnings(report: &Report) -> Markup {
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
        @if !report.blast_radius.is_empty() || !report.collateral.is_empty() || !report.leftovers.is_empty() {
            section {
                h2 { "Collateral and leftovers" }
                ul {
                    @for g in &report.blast_radius { li { "blast radius: " (g) } }
                    @for b in &report.collateral { li { "displaced besides the drilled workload: " (b) } }
                    @for l in &report.leftovers {
                        li class=(if l.expected { "" } else { "missed" }) { strong { (l.line()) } }
                    }
                }
            }
        }
        @if !report.reclaim_blockers.is_empty() {
            section {
                h2 { "Reclaim blockers" }
                ul {
                    @for b in &report.reclaim_blockers {
                        li {
                            "t=" (format!("{:.0}s", b.t_seconds)) " " (b.cause)
                            @if let Some(node) = &b.node { " on " (node) }
                            ": " (b.object) ": " (b.message)
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn events(report: &Report) -> Markup {
    html! {
        section {
            h2 { "Notable events" }
            table {
                thead { tr { th class="num" { "t" } th { "Kind" } th { "Event" } th { "Server time" } } }
                tbody {
                    @for n in crate::report::fold::fold(&report.notable_events) {
                        tr {
                            td class="num" { "+" (human_seconds(n.t_seconds)) }
                            td {
                                span class="swatch" style={ "background:" (marker_color(n.kind)) } {}
                                (n.kind.label())
                            }
                            td { (n.text()) }
                            td { (time_or_dash(n.server_time.as_ref())) }
                        }
                    }
                }
            }
        }
    }
}
