//! Why two figures of a report that a reader would add up or compare do not agree: the phases inside the RTO against
//! the RTO, and the startup phase against the slowest pod's startup.

use super::human_seconds;
use super::model::Report;
use crate::phases::{Phase, PhaseId};

/// When the top-level phases inside the RTO do not add up to it: by how much they overlap, and how much time fell
/// between them. `None` when they add up (within the tenth of a second the figures show).
pub fn rto_breakdown(report: &Report) -> Option<String> {
    let rto = report.phase(PhaseId::Rto)?;
    let (start, end) = (rto.from.as_ref()?.t_ms, rto.to.as_ref()?.t_ms);
    let mut inside: Vec<(&Phase, u64, u64)> = report
        .phases
        .iter()
        .filter(|p| p.parent.is_none() && p.name != PhaseId::Rto)
        .filter_map(|p| Some((p, p.from.as_ref()?.t_ms, p.to.as_ref()?.t_ms)))
        .filter(|(_, from, to)| *from >= start && *to <= end && to > from)
        .collect();
    if inside.is_empty() {
        return None;
    }
    inside.sort_by_key(|(_, from, _)| *from);
    let sum: u64 = inside.iter().map(|(_, from, to)| to - from).sum();
    // The union of the phases: what they cover at least once.
    let (mut covered, mut reach) = (0u64, start);
    let mut overlapping: Vec<String> = Vec::new();
    for (i, (p, from, to)) in inside.iter().enumerate() {
        if *from < reach && i > 0 {
            let before = inside[..i].iter().filter(|(_, _, t)| t > from).map(|(q, _, _)| q.name.as_str());
            overlapping.extend(before.map(|b| format!("{b} and {}", p.name)));
        }
        covered += to.saturating_sub((*from).max(reach));
        reach = reach.max(*to);
    }
    let overlap = sum.saturating_sub(covered);
    let between = (end - start).saturating_sub(covered);
    if overlap < 100 && between < 100 {
        return None;
    }
    let names: Vec<&str> = inside.iter().map(|(p, _, _)| p.name.as_str()).collect();
    let mut why = Vec::new();
    if overlap >= 100 {
        why.push(format!("{} ran at the same time for {}", overlapping.join(", "), seconds(overlap)));
    }
    if between >= 100 {
        why.push(format!("{} passed between them, in no phase", seconds(between)));
    }
    Some(format!(
        "The phases inside the RTO ({}) add up to {} against the RTO's {}: {}.",
        names.join(", "),
        seconds(sum),
        seconds(end - start),
        why.join("; ")
    ))
}

fn seconds(ms: u64) -> String {
    human_seconds(ms as f64 / 1000.0)
}

/// When the slowest pod took longer than the startup phase: the phase follows the pod the service waited for, from
/// the last pod's binding, while each pod's own startup runs from its own binding on the server's clock.
pub fn startup_note(report: &Report) -> Option<String> {
    let phase = report.phase(PhaseId::Startup)?.seconds?;
    let slowest = report.startup.slowest.as_ref()?;
    let pod = report.startup.pods.iter().find(|p| &p.pod == slowest)?;
    let own = pod.seconds?;
    if (own - phase).abs() < 1.0 {
        return None;
    }
    Some(format!(
        "The startup phase ({}) runs on the tool's clock from the last pod's binding to enough pods Ready; the \
         slowest pod, {slowest}, took {} from its own binding to its own Ready (server clock, whole seconds){}.",
        human_seconds(phase),
        human_seconds(own),
        if own > phase { ": it was bound earlier, or was not one of the pods the service waited for" } else { "" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn the_sample_phases_overlap_and_leave_gaps_and_say_so() {
        let report = sample::report();
        let text = rto_breakdown(&report).unwrap();
        assert!(text.starts_with("The phases inside the RTO (eviction, pending, provisioning, scheduling, startup)"));
        assert!(text.contains("add up to 12.2s against the RTO's 11.6s"), "{text}");
        assert!(text.contains("eviction and pending ran at the same time for 0.8s"), "{text}");
        assert!(text.contains("0.2s passed between them"), "{text}");
    }

    #[test]
    fn a_slowest_pod_longer_than_the_startup_phase_is_explained() {
        let mut report = sample::report();
        assert_eq!(startup_note(&report), None, "3.0s both ways");
        report.startup.pods[0].seconds = Some(345.0);
        let text = startup_note(&report).unwrap();
        assert!(text.contains("The startup phase (3.0s)") && text.contains("took 5m 45.0s"), "{text}");
    }
}
