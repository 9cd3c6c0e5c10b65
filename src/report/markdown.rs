//! `report.md`: the page an ops lead reads and files with the change record.

use std::fmt::Write;

use super::legend::{self, Figure};
use super::{Report, human_seconds, overlap_sentence, phase_label, seconds_cell, verdict_word};
use crate::phases::PhaseId;
use crate::timeline::rfc3339;

pub fn render(report: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# {}: {}\n", report.kind.heading(), report.drill.name);
    if let Some(d) = &report.drill.description {
        let _ = writeln!(md, "{d}\n");
    }
    let _ = writeln!(md, "**Verdict: {}**\n", report.outcome.as_str());
    if let Some(reason) = &report.abort_reason {
        let _ = writeln!(md, "Stopped because: {reason}\n");
    }
    if let Some(rto) = report.phase(PhaseId::Rto) {
        let objective = rto.objective_seconds.map(|o| format!(" (objective {})", human_seconds(o))).unwrap_or_default();
        let _ = writeln!(md, "RTO: **{}**{objective}: {}\n", seconds_cell(rto.seconds), verdict_word(rto));
    }
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(md, "| Run | `{}` |", report.run_id);
    let _ = writeln!(md, "| Started | {} |", rfc3339(&report.started));
    let _ = writeln!(md, "| Finished | {} |", rfc3339(&report.finished));
    let _ = writeln!(
        md,
        "| Cluster | context `{}`, {} (Kubernetes {}) |",
        report.cluster.context, report.cluster.server, report.cluster.version
    );
    let _ = writeln!(md, "| Drill file | `{}` |", report.drill.file);
    let _ = writeln!(md, "| Tool | hybrid-drill {} |", report.tool_version);
    let _ = writeln!(md, "| API requests | {} |", super::requests_in_words(report));
    let _ = writeln!(md, "\n## Fidelity\n\n{}\n", report.fidelity);

    let _ = writeln!(md, "## Phases\n");
    let _ = writeln!(
        md,
        "Durations are on the tool's clock (sub-second); the server column gives the same phase from the objects' own timestamps (whole seconds) where both ends have one.\n"
    );
    let _ = writeln!(
        md,
        "| Phase | From | To | Duration | Server clock | Objective | Verdict |\n|---|---|---|---|---|---|---|"
    );
    for p in &report.phases {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            phase_label(p).trim(),
            p.from.as_ref().map(|b| b.label.as_str()).unwrap_or("-"),
            p.to.as_ref().map(|b| b.label.as_str()).unwrap_or("-"),
            seconds_cell(p.seconds),
            p.server_seconds.map(|s| format!("{s}s")).unwrap_or_else(|| "-".into()),
            seconds_cell(p.objective_seconds),
            verdict_word(p),
        );
    }

    legend_lines(&mut md, &legend::phases(report));

    if !report.startup.pods.is_empty() {
        let s = &report.startup;
        let _ = writeln!(md, "\n## Startup per pod (server clock)\n");
        let _ = writeln!(md, "| Pod | Node | Startup | Parts |\n|---|---|---|---|");
        for p in &s.pods {
            let parts: Vec<String> =
                p.parts.iter().map(|part| format!("{} {}", part.name, human_seconds(part.seconds))).collect();
            let total = p.seconds.map(human_seconds).unwrap_or_else(|| "-".into());
            let _ = writeln!(md, "| {} | {} | {total} | {} |", p.pod, p.node, parts.join(" · "));
        }
        if let (Some(slowest), Some(spread)) = (&s.slowest, s.spread_seconds) {
            let _ = writeln!(md, "\nSlowest: {slowest}, {} more than the quickest.", human_seconds(spread));
        }
        legend_lines(&mut md, &[legend::line(Figure::Startup)]);
    }

    let f = &report.fallback;
    let _ = writeln!(md, "\n## Fallback\n");
    let _ = writeln!(
        md,
        "- Nodes: {}, node-hours {:.3}, GPU-hours {:.3}, peak {} GPUs",
        f.nodes, f.node_hours, f.gpu_hours, f.max_gpus
    );
    for line in super::billing_in_words(f) {
        let _ = writeln!(md, "- Hours {line}");
    }
    if let Some(pools) = super::by_node_pool(f) {
        let _ = writeln!(md, "- By NodePool: {pools}");
    }
    if let Some(limit) = f.gpu_limit {
        let over = if f.overrun { " — **OVERRUN**: Karpenter's limits are eventually consistent" } else { "" };
        let _ = writeln!(md, "- NodePool GPU limit: {limit}{over}");
    }
    if let Some(ceiling) = f.ceiling {
        let over = if f.over_ceiling {
            format!(" — **EXCEEDED**: the fallback peaked at {} GPUs, and the guard stopped the drill", f.max_gpus)
        } else {
            String::new()
        };
        let _ = writeln!(md, "- Drill ceiling (guards.maxFallbackGpus): {ceiling}{over}");
    }
    match f.estimated_cost {
        Some(c) => {
            let _ = writeln!(md, "- Estimated cost: ${c:.2}");
        }
        None => {
            let _ = writeln!(md, "- Estimated cost: not computed (add `spec.pricing` to the drill)");
        }
    }
    if !f.unpriced_instance_types.is_empty() {
        let _ = writeln!(md, "- No price given for: {}", f.unpriced_instance_types.join(", "));
    }
    legend_lines(&mut md, &[Figure::FallbackHours, Figure::PeakGpus, Figure::Cost].map(legend::line));

    if let Some(o) = &report.overlap {
        let _ = writeln!(md, "\n## Overlap window (split brain)\n\n{}", overlap_sentence(o));
        legend_lines(&mut md, &[legend::line(Figure::Overlap)]);
    }

    let _ = writeln!(md, "\n## Steps\n\n| Step | Action | Outcome | Duration | Detail |\n|---|---|---|---|---|");
    for s in &report.steps {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            s.id,
            s.action,
            s.outcome,
            seconds_cell(s.seconds),
            s.message.replace('|', "\\|")
        );
    }
    legend_lines(&mut md, &[legend::line(Figure::Steps)]);
    if let Some(rb) = &report.rollback {
        let _ = writeln!(md, "\n## Restore\n");
        for u in &rb.undone {
            let _ = writeln!(md, "- restored: {u}");
        }
        for u in &rb.failed {
            let _ = writeln!(md, "- **NOT RESTORED**: {u}");
        }
        for v in &rb.verified {
            let _ = writeln!(md, "- verified: {v}");
        }
        if rb.undone.is_empty() && rb.failed.is_empty() {
            let _ = writeln!(md, "- nothing needed undoing");
        }
    }
    if !report.warnings.is_empty() {
        let _ = writeln!(md, "\n## Warnings\n");
        for w in &report.warnings {
            let _ = writeln!(md, "- {w}");
        }
    }
    let _ = writeln!(md, "\n## Milestones\n\n| t | Received | Server time | Milestone |\n|---|---|---|---|");
    for m in &report.milestones {
        let _ = writeln!(
            md,
            "| +{} | {} | {} | {} |",
            human_seconds(m.t_ms as f64 / 1000.0),
            rfc3339(&m.received),
            m.server_time.as_ref().map(rfc3339).unwrap_or_else(|| "-".into()),
            m.label
        );
    }
    legend_lines(&mut md, &[legend::line(Figure::Milestones)]);
    let _ = writeln!(md, "\n## Notable events\n\n| t | Event |\n|---|---|");
    for n in &report.notable_events {
        let _ = writeln!(md, "| +{} | {} |", human_seconds(n.t_seconds), n.what.replace('|', "\\|"));
    }
    let _ = writeln!(md, "\n## Drill file as run\n\n```yaml\n{}\n```", report.drill.source.trim_end());
    md
}

/// The clocks and bounds of the figures just shown: one legend line each.
fn legend_lines(md: &mut String, lines: &[String]) {
    let _ = writeln!(md, "\nClocks and bounds:\n");
    for line in lines {
        let _ = writeln!(md, "- _{line}_");
    }
}
