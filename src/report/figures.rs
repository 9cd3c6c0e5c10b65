//! Why two figures of a report that a reader would add up or compare do not agree: the phases on the RTO's path against
//! the RTO, and the startup phase against the slowest pod's startup.

use super::human_seconds;
use super::model::Report;
use crate::phases::{Phase, PhaseId};

/// Which top-level phases lie on the RTO's path (from t0 to the service restored) and which do not, and why: a phase
/// the service did not wait for to its end, one that began before t0, one with a boundary never seen; then, when the
/// ones on the path do not add up to the RTO, by how much they overlap and how much time fell between them. `None`
/// when every measured phase is on the path and they add up (within the tenth of a second the figures show).
pub fn rto_breakdown(report: &Report) -> Option<String> {
    let rto = report.phase(PhaseId::Rto)?;
    let (start, end) = (rto.from.as_ref()?.t_ms, rto.to.as_ref()?.t_ms);
    let top: Vec<&Phase> = report.phases.iter().filter(|p| p.parent.is_none() && p.name != PhaseId::Rto).collect();
    let mut inside: Vec<(&Phase, u64, u64)> = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    for p in &top {
        let (Some(from), Some(to)) = (p.from.as_ref().map(|b| b.t_ms), p.to.as_ref().map(|b| b.t_ms)) else {
            // A phase of the recovery the run never saw both ends of: say so, since its time is in no sum.
            if p.from.as_ref().is_some_and(|b| b.t_ms < end) {
                left_out.push(format!("{} (its end was never observed)", p.name.as_str()));
            }
            continue;
        };
        if from >= end || to <= from {
            // After the service was back (return, reclaim) or empty: not part of the RTO by definition.
            continue;
        }
        if to > end {
            left_out.push(format!(
                "{} (it ended {} after the service was restored: the service did not wait for all of it)",
                p.name.as_str(),
                seconds(to - end)
            ));
        } else if from < start {
            left_out.push(format!("{} (it began {} before t0)", p.name.as_str(), seconds(start - from)));
        } else {
            inside.push((p, from, to));
        }
    }
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
    if overlap < 100 && between < 100 && left_out.is_empty() {
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
    let mut text = format!(
        "The phases on the RTO's path, each within t0 to the service restored ({}), add up to {} against the RTO's {}",
        names.join(", "),
        seconds(sum),
        seconds(end - start),
    );
    if why.is_empty() {
        text.push('.');
    } else {
        text.push_str(&format!(": {}.", why.join("; ")));
    }
    if !left_out.is_empty() {
        text.push_str(&format!(" Not added: {}.", left_out.join("; ")));
    }
    Some(text)
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
        assert!(
            text.starts_with(
                "The phases on the RTO's path, each within t0 to the service restored (eviction, pending, provisioning, \
                 scheduling, startup)"
            ),
            "{text}"
        );
        assert!(text.contains("add up to 12.2s against the RTO's 11.6s"), "{text}");
        assert!(text.contains("eviction and pending ran at the same time for 0.8s"), "{text}");
        assert!(text.contains("0.2s passed between them"), "{text}");
    }

    #[test]
    fn a_phase_the_service_did_not_wait_for_is_named_with_why_it_is_not_added() {
        let mut report = sample::report();
        let end = report.phase(PhaseId::Rto).unwrap().to.as_ref().unwrap().t_ms;
        let provisioning = report.phases.iter_mut().find(|p| p.name == PhaseId::Provisioning).unwrap();
        provisioning.to.as_mut().unwrap().t_ms = end + 2100;
        let text = rto_breakdown(&report).unwrap();
        assert!(text.contains("(eviction, pending, scheduling, startup)"), "{text}");
        assert!(
            text.ends_with(
                "Not added: provisioning (it ended 2.1s after the service was restored: the service did not wait for \
                 all of it)."
            ),
            "{text}"
        );
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
