//! What qualifies a run's verdict, said beside it in every format: a crash, a stop, last-resort actions, what was
//! left in the cluster, each missed objective by name with its figures, the service level, and the warnings.

use super::model::Report;
pub use super::model::{Crashed, LastResortRun, Qualifier, QualifierKind};
use super::{human_seconds, service};
use crate::drill::{Action, Drill};
use crate::timeline::{Event, Observation};

/// The verdict in words: `passed`, `objective missed`, ... or, for a run that crashed, whether `recover` restored
/// it (`crashed; restored by recover at T`, `crashed; not yet recovered`).
pub fn verdict(report: &Report) -> String {
    match &report.crashed {
        Some(c) => super::model::crashed_verdict(c.recovered.as_ref()),
        None => report.outcome.as_str().into(),
    }
}

/// The lastResort hooks a run's cut steps ran, from the timeline: each cut step's hook, its `{node}` read back from
/// the command as it ran.
pub fn last_resorts(drill: &Drill, observations: &[Observation]) -> Vec<LastResortRun> {
    let hooks: Vec<(&str, String)> = drill
        .spec
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::Cut(cut) => cut.last_resort.as_ref().map(|h| (s.id.as_str(), h.command.join(" "))),
            _ => None,
        })
        .collect();
    observations
        .iter()
        .filter_map(|o| match &o.event {
            Event::HookRan { step, command, exit_code } => {
                let (_, template) = hooks.iter().find(|(id, _)| id == step)?;
                Some(LastResortRun {
                    step: step.clone(),
                    node: node_of(template, command),
                    command: command.clone(),
                    exit_code: *exit_code,
                    t_seconds: o.t_ms as f64 / 1000.0,
                })
            }
            _ => None,
        })
        .collect()
}

/// The node a hook ran for: what `{node}` stands for in the command as it ran.
fn node_of(template: &str, command: &str) -> Option<String> {
    let (before, after) = template.split_once("{node}")?;
    let node = command.strip_prefix(before)?.strip_suffix(after)?;
    (!node.is_empty() && !node.contains(' ')).then(|| node.to_string())
}

/// The on-prem nodes the drill started with, from its baseline.
pub fn on_prem_nodes(observations: &[Observation]) -> Option<usize> {
    observations.iter().find_map(|o| match &o.event {
        Event::Baseline { on_prem_nodes, .. } => Some(*on_prem_nodes),
        _ => None,
    })
}

/// Everything that qualifies the verdict, the most serious first.
pub fn qualifiers(report: &Report, on_prem_nodes: Option<usize>) -> Vec<Qualifier> {
    let mut out = Vec::new();
    let mut add = |kind, text: String| out.push(Qualifier { kind, text });
    if let Some(c) = &report.crashed {
        for (kind, text) in crash_qualifiers(c) {
            add(kind, text);
        }
    }
    if let Some(reason) = &report.abort_reason {
        add(QualifierKind::Stopped, reason.clone());
    }
    if let Some(text) = last_resort_sentence(&report.last_resort, on_prem_nodes) {
        add(QualifierKind::LastResort, text);
    }
    if let Some(rb) = &report.rollback {
        for f in &rb.failed {
            add(QualifierKind::Leftover, format!("not restored: {f}"));
        }
    }
    for text in leftovers(report) {
        add(QualifierKind::Leftover, text);
    }
    for p in report.phases.iter().filter(|p| p.misses_objective()) {
        let objective = human_seconds(p.objective_seconds.unwrap_or_default());
        let text = match p.seconds {
            Some(s) => format!("{}: {} against its objective of {objective}", p.name.title(), human_seconds(s)),
            None => {
                format!("{}: not measured (the phase never ended) against its objective of {objective}", p.name.title())
            }
        };
        add(QualifierKind::MissedObjective, text);
    }
    for line in report.service_level.iter().flat_map(service::sentences) {
        add(QualifierKind::Service, line);
    }
    for line in super::impact::headline(report) {
        add(QualifierKind::Service, line);
    }
    for line in fallback_warnings(&report.fallback) {
        add(QualifierKind::Warning, line);
    }
    for g in &report.gates_overridden {
        let text =
            format!("started with start gate `{}` overridden by {}: {} (closed: {})", g.gate, g.by, g.reason, g.closed);
        add(QualifierKind::Warning, text);
    }
    for w in &report.warnings {
        add(QualifierKind::Warning, w.clone());
    }
    out
}

/// `all 4 on-prem nodes needed the cut's lastResort hook (lab/node-reboot {node}): h1, h2, h3, h4`.
fn last_resort_sentence(runs: &[LastResortRun], on_prem_nodes: Option<usize>) -> Option<String> {
    let first = runs.first()?;
    let mut nodes: Vec<&str> = runs.iter().filter_map(|r| r.node.as_deref()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let count = if nodes.is_empty() { runs.len() } else { nodes.len() };
    let how_many = match on_prem_nodes {
        Some(n) if n == count && n > 1 => format!("all {n} on-prem nodes"),
        Some(n) if n > count => format!("{count} of {n} on-prem nodes"),
        _ if count == 1 => "1 on-prem node".into(),
        _ => format!("{count} on-prem nodes"),
    };
    let failed: Vec<&LastResortRun> = runs.iter().filter(|r| r.exit_code != Some(0)).collect();
    let outcome = if failed.is_empty() {
        String::new()
    } else {
        format!("; it FAILED for {}", failed.iter().map(|r| r.command.as_str()).collect::<Vec<_>>().join(", "))
    };
    let which = if nodes.is_empty() { String::new() } else { format!(": {}", nodes.join(", ")) };
    Some(format!(
        "{how_many} did not come back once the cut was lifted and needed the `lastResort` hook (`{}` for the first){which}{outcome}",
        first.command
    ))
}

/// The fallback above its NodePool's limit or the drill's ceiling.
fn fallback_warnings(f: &crate::phases::FallbackUsage) -> Vec<String> {
    let mut out = Vec::new();
    if f.overrun {
        out.push(format!(
            "the fallback peaked at {} GPUs, above its NodePool limit of {} (Karpenter's limits are eventually \
             consistent: a burst can exceed them)",
            f.max_gpus,
            f.gpu_limit.unwrap_or_default()
        ));
    }
    if f.over_ceiling {
        out.push(format!(
            "the fallback peaked at {} GPUs, above the drill's ceiling of {} (guards.maxFallbackGpus)",
            f.max_gpus,
            f.ceiling.unwrap_or_default()
        ));
    }
    out
}

/// What the run left running: a fallback never reclaimed, on-prem pods never confirmed gone.
fn leftovers(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let reclaim = report.phase(crate::phases::PhaseId::Reclaim);
    if reclaim.is_some_and(|p| p.from.is_some() && p.to.is_none()) && report.fallback.nodes > 0 {
        out.push(
            "the fallback was not reclaimed to 0 by the end of the run: its nodes may still run, and bill".to_string(),
        );
    }
    if let Some(o) = report.overlap.as_ref().filter(|o| !o.unconfirmed_pods.is_empty()) {
        out.push(format!("on-prem pods never confirmed gone: {}", o.unconfirmed_pods.join(", ")));
    }
    out.extend(report.leftovers.iter().filter(|l| !l.expected).map(|l| format!("{}: {}", l.object, l.message)));
    out
}

/// What qualifies a crashed run's verdict: that it crashed, whether `recover` restored it, and what is left to undo.
fn crash_qualifiers(c: &Crashed) -> Vec<(QualifierKind, String)> {
    let mut out = Vec::new();
    let mut add = |kind, text: String| out.push((kind, text));
    add(
        QualifierKind::Crashed,
        format!(
            "the run stopped without finishing: no report.json was written. This report is rebuilt from its \
             timeline, journal and provenance; the last thing recorded: {}",
            c.last_seen
        ),
    );
    match &c.recovered {
        Some(r) => {
            let undone = if r.undone.is_empty() { "nothing left to undo".into() } else { r.undone.join(", ") };
            add(
                QualifierKind::Crashed,
                format!(
                    "{}: run by {} on {}, undid: {undone}; the restore was verified, and the run directory \
                     sealed as it then stood",
                    super::model::crashed_verdict(Some(r)),
                    r.by,
                    r.host
                ),
            );
        }
        None => add(
            QualifierKind::Crashed,
            format!(
                "{}: nothing says the cluster was restored, and the run directory has no manifest \
                 (`hybrid-drill recover RUN_DIR` restores and seals it)",
                super::model::NOT_RECOVERED
            ),
        ),
    }
    for o in &c.outstanding {
        add(QualifierKind::Leftover, format!("journalled and never undone: {o} (`hybrid-drill recover` undoes it)"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_read_back_from_the_command_as_it_ran() {
        assert_eq!(node_of("lab/node-reboot {node}", "lab/node-reboot h1").as_deref(), Some("h1"));
        assert_eq!(node_of("ipmi --host {node}.bmc on", "ipmi --host h2.bmc on").as_deref(), Some("h2"));
        assert_eq!(node_of("reboot-all", "reboot-all"), None);
    }

    #[test]
    fn every_node_needing_the_last_resort_is_said_as_all_of_them() {
        let run = |node: &str| LastResortRun {
            step: "cut".into(),
            node: Some(node.into()),
            command: format!("lab/node-reboot {node}"),
            exit_code: Some(0),
            t_seconds: 30.0,
        };
        let runs: Vec<LastResortRun> = ["h1", "h2", "h3", "h4"].map(run).to_vec();
        let text = last_resort_sentence(&runs, Some(4)).unwrap();
        assert!(text.starts_with("all 4 on-prem nodes did not come back"), "{text}");
        assert!(text.ends_with(": h1, h2, h3, h4"), "{text}");
        let text = last_resort_sentence(&runs[..1], Some(4)).unwrap();
        assert!(text.starts_with("1 of 4 on-prem nodes"), "{text}");
    }
}
