//! `report.md`: the page an ops lead reads and files with the change record.

use std::fmt::{self, Write};

use super::legend;
use super::{Report, human_seconds, overlap_sentence, phase_label, seconds_cell, verdict_word};
use crate::phases::PhaseId;
use crate::timeline::rfc3339;

/// One section of the page, appended to it.
type Section = fn(&mut String, &Report) -> fmt::Result;

pub fn render(report: &Report) -> String {
    let mut md = String::new();
    // Writing to a String cannot fail: each section returns fmt::Result only so that `?` can carry its writes.
    let sections: [Section; 21] = [
        head,
        plain_legend,
        phases,
        super::forecast::markdown,
        super::impact::markdown,
        startup,
        fallback,
        fallback_faults,
        gpu_fault,
        last_tier,
        super::nets::markdown,
        overlap,
        autoscaler,
        steps,
        deviations,
        action_items,
        restore,
        collateral,
        milestones,
        events,
        measured,
    ];
    let _ = sections.iter().try_for_each(|section| section(&mut md, report));
    md
}

/// The title, verdict, RTO and the run's facts, then the fidelity statement.
fn head(md: &mut String, report: &Report) -> fmt::Result {
    writeln!(md, "# {}: {}\n", report.kind.heading(), report.drill.name)?;
    if let Some(d) = &report.drill.description {
        writeln!(md, "{d}\n")?;
    }
    writeln!(md, "**Verdict: {}**\n", super::headline::verdict(report))?;
    if let Some(rto) = report.phase(PhaseId::Rto) {
        let objective = rto.objective_seconds.map(|o| format!(" (objective {})", human_seconds(o))).unwrap_or_default();
        writeln!(md, "RTO: **{}**{objective}: {}\n", seconds_cell(rto.seconds), verdict_word(rto))?;
    }
    for q in &report.headline {
        let tag = if q.kind.is_serious() { format!("**{}**", q.kind.tag()) } else { q.kind.tag().to_string() };
        writeln!(md, "- {tag}: {}", q.text)?;
    }
    if !report.headline.is_empty() {
        writeln!(md)?;
    }
    writeln!(md, "| | |\n|---|---|")?;
    writeln!(md, "| Run | `{}` |", report.run_id)?;
    writeln!(md, "| Started | {} |", rfc3339(&report.started))?;
    writeln!(md, "| Finished | {} |", rfc3339(&report.finished))?;
    writeln!(
        md,
        "| Cluster | context `{}`, {} (Kubernetes {}) |",
        report.cluster.context, report.cluster.server, report.cluster.version
    )?;
    writeln!(md, "| Drill file | `{}` |", report.drill.file)?;
    match &report.provenance {
        Some(p) => {
            for (label, value) in p.rows() {
                writeln!(md, "| {label} | {} |", cell(&value))?;
            }
        }
        None => writeln!(md, "| Tool | hybrid-drill {} |", report.tool_version)?,
    }
    writeln!(md, "| API requests | {} |", super::requests_in_words(report))?;
    writeln!(md, "\n## Fidelity\n\n{}\n", report.fidelity)?;
    Ok(())
}

/// Every departure from the plan, or a line saying there was none.
fn deviations(md: &mut String, report: &Report) -> fmt::Result {
    writeln!(md, "## Deviations from the plan\n")?;
    if report.deviations.is_empty() {
        return writeln!(md, "None: every step ran as planned, with no retry, warning or override.\n");
    }
    for d in &report.deviations {
        let at = d.t_seconds.map(|t| format!(" (t+{})", human_seconds(t))).unwrap_or_default();
        writeln!(md, "- **{}**{at}: {}", d.kind.label(), d.what)?;
    }
    writeln!(md)
}

/// What the words of the report mean, in a few plain lines.
fn plain_legend(md: &mut String, _: &Report) -> fmt::Result {
    writeln!(md, "## Legend\n")?;
    for line in legend::PLAIN {
        writeln!(md, "- {line}")?;
    }
    writeln!(md)
}

/// One row per missed objective and preflight finding: what to fix, why, and who owns it.
fn action_items(md: &mut String, report: &Report) -> fmt::Result {
    writeln!(md, "## Action items\n")?;
    if report.action_items.is_empty() {
        return writeln!(md, "None: every objective was met and preflight raised nothing.\n");
    }
    writeln!(md, "| Objective | Measured | Likely cause | Owner |\n|---|---|---|---|")?;
    for a in &report.action_items {
        writeln!(md, "| {} | {} | {} | {} |", cell(&a.objective), cell(&a.measured), cell(&a.cause), cell(&a.owner))?;
    }
    writeln!(md)
}

/// Every figure's clock and bound, at the end where the reader who checks them looks.
fn measured(md: &mut String, report: &Report) -> fmt::Result {
    writeln!(md, "\n## How each figure is measured\n")?;
    for line in legend::measured(report) {
        writeln!(md, "- {line}")?;
    }
    writeln!(md, "\n## Drill file as run\n\n```yaml\n{}\n```", report.drill.source.trim_end())
}

/// Text for a table cell: a pipe or a line break would end the cell, or the row, mid-sentence.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace("\r\n", "<br>").replace('\n', "<br>")
}

/// The phase table and its clocks.
fn phases(md: &mut String, report: &Report) -> fmt::Result {
    writeln!(md, "## Phases\n")?;
    writeln!(
        md,
        "Durations are on the tool's clock (sub-second); the server column gives the same phase from the objects' own timestamps (whole seconds) where both ends have one.\n"
    )?;
    writeln!(
        md,
        "| Phase | From | To | Duration | Server clock | Objective | Verdict |\n|---|---|---|---|---|---|---|"
    )?;
    for p in &report.phases {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            phase_label(p).trim(),
            cell(p.from.as_ref().map(|b| b.label.as_str()).unwrap_or("-")),
            cell(p.to.as_ref().map(|b| b.label.as_str()).unwrap_or("-")),
            seconds_cell(p.seconds),
            p.server_seconds.map(|s| format!("{s}s")).unwrap_or_else(|| "-".into()),
            seconds_cell(p.objective_seconds),
            verdict_word(p),
        )?;
    }
    if let Some(note) = super::figures::rto_breakdown(report) {
        writeln!(md, "\n{note}")?;
    }
    Ok(())
}

/// Each fallback pod's startup, when any started.
fn startup(md: &mut String, report: &Report) -> fmt::Result {
    if !report.startup.pods.is_empty() {
        let s = &report.startup;
        writeln!(md, "\n## Startup per pod (server clock)\n")?;
        writeln!(md, "| Pod | Node | Startup | Parts |\n|---|---|---|---|")?;
        for p in &s.pods {
            let parts: Vec<String> =
                p.parts.iter().map(|part| format!("{} {}", part.name, human_seconds(part.seconds))).collect();
            let total = p.seconds.map(human_seconds).unwrap_or_else(|| "-".into());
            writeln!(md, "| {} | {} | {total} | {} |", p.pod, p.node, parts.join(" · "))?;
        }
        if let (Some(slowest), Some(spread)) = (&s.slowest, s.spread_seconds) {
            writeln!(md, "\nSlowest: {slowest}, {} more than the quickest.", human_seconds(spread))?;
        }
        if let Some(note) = super::figures::startup_note(report) {
            writeln!(md, "\n{note}")?;
        }
    }
    Ok(())
}

/// What the fallback used and cost.
fn fallback(md: &mut String, report: &Report) -> fmt::Result {
    let f = &report.fallback;
    writeln!(md, "\n## Fallback\n")?;
    writeln!(
        md,
        "- Nodes: {}, node-hours {:.3}, GPU-hours {:.3}, peak {} GPUs",
        f.nodes, f.node_hours, f.gpu_hours, f.max_gpus
    )?;
    for line in super::billing_in_words(f) {
        writeln!(md, "- Hours {line}")?;
    }
    if let Some(pools) = super::by_node_pool(f) {
        writeln!(md, "- By NodePool: {pools}")?;
    }
    if let Some(limit) = f.gpu_limit {
        let over = if f.overrun { " — **OVERRUN**: Karpenter's limits are eventually consistent" } else { "" };
        writeln!(md, "- NodePool GPU limit: {limit}{over}")?;
    }
    if let Some(ceiling) = f.ceiling {
        let over = if f.over_ceiling {
            format!(" — **EXCEEDED**: the fallback peaked at {} GPUs, and the guard stopped the drill", f.max_gpus)
        } else {
            String::new()
        };
        writeln!(md, "- Drill ceiling (guards.maxFallbackGpus): {ceiling}{over}")?;
    }
    match f.estimated_cost {
        Some(c) => {
            writeln!(md, "- Estimated cost: ${c:.2}")?;
        }
        None => {
            writeln!(md, "- Estimated cost: not computed (add `spec.pricing` to the drill)")?;
        }
    }
    if !f.unpriced_instance_types.is_empty() {
        writeln!(md, "- No price given for: {}", f.unpriced_instance_types.join(", "))?;
    }
    Ok(())
}

/// The fallback's own failures and the partial loss, when the drill caused any.
fn fallback_faults(md: &mut String, report: &Report) -> fmt::Result {
    if report.fallback_faults.is_empty() {
        return Ok(());
    }
    writeln!(md, "\n## Fallback under failure\n")?;
    for line in report.fallback_faults.lines() {
        writeln!(md, "- {line}")?;
    }
    Ok(())
}

/// The GPU fault's finding, when the drill injected one.
fn gpu_fault(md: &mut String, report: &Report) -> fmt::Result {
    let Some(fault) = &report.gpu_fault else {
        return Ok(());
    };
    writeln!(md, "\n## GPU fault\n")?;
    for line in fault.lines() {
        writeln!(md, "- {line}")?;
    }
    Ok(())
}

/// The service's last tier, when the drill declares one.
fn last_tier(md: &mut String, report: &Report) -> fmt::Result {
    let Some(tier) = &report.last_tier else {
        return Ok(());
    };
    writeln!(md, "\n## Last tier\n")?;
    for line in tier.lines() {
        writeln!(md, "- {line}")?;
    }
    Ok(())
}

/// What the workload's autoscaler did, if one scales it.
fn autoscaler(md: &mut String, report: &Report) -> fmt::Result {
    if let Some(a) = &report.autoscaler {
        let mut lines = super::autoscaling::autoscaling_sentences(a).into_iter();
        writeln!(md, "\n## Autoscaler\n\n{}\n", lines.next().unwrap_or_default())?;
        for line in lines {
            writeln!(md, "- {line}")?;
        }
    }
    Ok(())
}

/// The window both copies of the workload ran, if any.
fn overlap(md: &mut String, report: &Report) -> fmt::Result {
    if let Some(o) = &report.overlap {
        writeln!(md, "\n## Overlap window (split brain)\n\n{}", overlap_sentence(o))?;
    }
    Ok(())
}

/// The steps and their outcomes.
fn steps(md: &mut String, report: &Report) -> fmt::Result {
    writeln!(md, "\n## Steps\n\n| Step | Action | Outcome | Duration | Detail |\n|---|---|---|---|---|")?;
    for s in &report.steps {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            s.id,
            s.action,
            s.outcome,
            seconds_cell(s.seconds),
            cell(&s.message)
        )?;
    }
    Ok(())
}

/// What was restored and verified, and the warnings.
fn restore(md: &mut String, report: &Report) -> fmt::Result {
    if let Some(rb) = &report.rollback {
        writeln!(md, "\n## Restore\n")?;
        for u in &rb.undone {
            writeln!(md, "- restored: {u}")?;
        }
        for u in &rb.failed {
            writeln!(md, "- **NOT RESTORED**: {u}")?;
        }
        for v in &rb.verified {
            writeln!(md, "- verified: {v}")?;
        }
        if rb.undone.is_empty() && rb.failed.is_empty() {
            writeln!(md, "- nothing needed undoing")?;
        }
    }
    if !report.reclaim_blockers.is_empty() {
        writeln!(md, "\n## Reclaim blockers\n")?;
        for b in &report.reclaim_blockers {
            let node = b.node.as_ref().map(|n| format!(" on {n}")).unwrap_or_default();
            writeln!(md, "- t={:.0}s {}{node}: {}: {}", b.t_seconds, b.cause, b.object, b.message)?;
        }
    }
    Ok(())
}

/// The other workloads the fault displaced, and what was still different from before it at the end.
fn collateral(md: &mut String, report: &Report) -> fmt::Result {
    if report.blast_radius.is_empty() && report.collateral.is_empty() && report.leftovers.is_empty() {
        return Ok(());
    }
    writeln!(md, "\n## Collateral and leftovers\n")?;
    for g in &report.blast_radius {
        writeln!(md, "- blast radius: {g}")?;
    }
    for b in &report.collateral {
        writeln!(md, "- displaced besides the drilled workload: {b}")?;
    }
    if report.leftovers.is_empty() {
        writeln!(md, "- left behind: nothing; every NodeClaim the drill caused is gone and every workload is back")?;
    }
    for l in &report.leftovers {
        writeln!(md, "- **{}**", l.line())?;
    }
    Ok(())
}

/// The milestones on both clocks.
fn milestones(md: &mut String, report: &Report) -> fmt::Result {
    writeln!(md, "\n## Milestones\n\n| t | Received | Server time | Milestone |\n|---|---|---|---|")?;
    for m in &report.milestones {
        writeln!(
            md,
            "| +{} | {} | {} | {} |",
            human_seconds(m.t_ms as f64 / 1000.0),
            rfc3339(&m.received),
            m.server_time.as_ref().map(rfc3339).unwrap_or_else(|| "-".into()),
            cell(&m.label)
        )?;
    }
    Ok(())
}

/// The notable events, repeats folded.
fn events(md: &mut String, report: &Report) -> fmt::Result {
    writeln!(md, "\n## Notable events\n\n| t | Event |\n|---|---|")?;
    for n in super::fold::fold(&report.notable_events) {
        writeln!(md, "| +{} | {} |", human_seconds(n.t_seconds), cell(&n.text()))?;
    }
    Ok(())
}
