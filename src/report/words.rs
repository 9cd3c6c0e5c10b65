//! The wording every human format shares: durations, verdicts, phase names, the overlap, the fallback's billing and
//! the request count, written once so the Markdown, HTML and terminal reports say the same thing.

use super::model::{OverlapWindow, Report};
use crate::phases::{BillingBasis, Boundary, FallbackUsage, Phase, Verdict};

/// `1 run`, `3 runs`: a count with its noun in the number it takes.
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// Formats seconds the way ops read them: `4m 05.2s`, `38.1s`.
pub fn human_seconds(s: f64) -> String {
    if s >= 3600.0 {
        format!("{}h {:02}m", (s / 3600.0) as u64, ((s % 3600.0) / 60.0) as u64)
    } else if s >= 60.0 {
        format!("{}m {:04.1}s", (s / 60.0) as u64, s % 60.0)
    } else {
        format!("{s:.1}s")
    }
}

pub fn seconds_cell(v: Option<f64>) -> String {
    v.map(human_seconds).unwrap_or_else(|| "-".into())
}

pub fn verdict_word(p: &Phase) -> &'static str {
    match p.verdict {
        Verdict::Met => "met",
        Verdict::Missed => "MISSED",
        Verdict::NoObjective => "-",
        Verdict::Incomplete if p.objective_seconds.is_some() => "NOT MEASURED",
        Verdict::Incomplete => "incomplete",
        Verdict::Inconsistent if p.objective_seconds.is_some() => "INCONSISTENT",
        Verdict::Inconsistent => "inconsistent",
    }
}

pub fn phase_label(p: &Phase) -> String {
    match &p.parent {
        Some(_) => format!("  └ {}", p.name),
        None => p.name.title().into(),
    }
}

/// The overlap window in one sentence, for the text reports.
pub fn overlap_sentence(o: &OverlapWindow) -> String {
    let at = |b: &Boundary| format!("+{} ({})", human_seconds(b.t_ms as f64 / 1000.0), b.label);
    match (&o.to, o.seconds) {
        (Some(to), Some(s)) => format!(
            "for {} from {} to {}, the old on-prem pods were not known to be gone while replacements were Ready in the \
cloud: both copies may have run at once. Stateful or single-writer workloads need fencing for this window.",
            human_seconds(s),
            at(&o.from),
            at(to)
        ),
        _ => format!(
            "from {}, replacements were Ready in the cloud while these on-prem pods were never confirmed gone: {}. \
Stateful or single-writer workloads need fencing for this window.",
            at(&o.from),
            o.unconfirmed_pods.join(", ")
        ),
    }
}

/// The fallback's nodes per NodePool, when it came from more than one or a run recorded its pools:
/// `gpu-fallback 4 nodes (0.021 node-hours), gpu-spot 1 node (0.005 node-hours)`.
pub fn by_node_pool(f: &FallbackUsage) -> Option<String> {
    if f.by_node_pool.is_empty() {
        return None;
    }
    let parts: Vec<String> = f
        .by_node_pool
        .iter()
        .map(|(pool, share)| {
            let plural = if share.nodes == 1 { "" } else { "s" };
            format!("{pool} {} node{plural} ({:.3} node-hours)", share.nodes, share.node_hours)
        })
        .collect();
    Some(parts.join(", "))
}

/// How the fallback's hours were counted, and what was still billing when the run ended, for people.
pub fn billing_in_words(f: &FallbackUsage) -> Vec<String> {
    let mut lines = Vec::new();
    match f.billed_from {
        Some(BillingBasis::NodeClaim) => lines.push(
            "counted per NodeClaim, from its creation (instance asked for) to its deletion (instance terminated)"
                .to_string(),
        ),
        Some(BillingBasis::Node) => {
            lines.push("counted per Node object, from its creation to its deletion".to_string())
        }
        None => {}
    }
    for failed in &f.failed_launches {
        let said = match (&failed.reason, &failed.message) {
            (Some(reason), Some(message)) => format!("{reason}: {message}"),
            (Some(reason), None) => reason.clone(),
            _ => "no reason recorded".to_string(),
        };
        lines.push(format!(
            "launch failed: NodeClaim {} gone at {} without an instance ({said}); not billed, its time counts in provisioning",
            failed.nodeclaim,
            crate::timeline::rfc3339(&failed.at)
        ));
    }
    if let Some(at) = f.still_running_at.filter(|_| !f.still_running.is_empty()) {
        lines.push(format!(
            "STILL RUNNING at {}: {} (counted up to then; they bill until consolidation reclaims them)",
            crate::timeline::rfc3339(&at),
            f.still_running.join(", ")
        ));
    }
    lines
}

/// One line for people: the total, then the count of each verb.
pub fn requests_in_words(report: &Report) -> String {
    let verbs: Vec<String> = report
        .api_requests_by_verb
        .iter()
        .map(|(verb, resources)| format!("{verb} {}", resources.values().sum::<u64>()))
        .collect();
    if verbs.is_empty() {
        report.api_requests.to_string()
    } else {
        format!("{} ({})", report.api_requests, verbs.join(", "))
    }
}
