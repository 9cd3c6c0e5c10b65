//! One legend line per figure of a report: the clock it is read on and the bound it is true to, from one table of
//! definitions that every text format renders.

use super::Report;
use crate::phases::{SERVER_BOUND_S, TOOL_BOUND_MS};

/// A figure of a report other than the phases, whose legend the phase table gives (see [`phases`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Milestones,
    Startup,
    FallbackHours,
    PeakGpus,
    Cost,
    Overlap,
    Steps,
}

/// The legend line of a figure: what it is read from, on which clock, within what.
pub fn line(figure: Figure) -> String {
    let (ms, s) = (TOOL_BOUND_MS, SERVER_BOUND_S);
    match figure {
        Figure::Milestones => format!(
            "Milestones: received on the tool's clock (a watch event within {ms} ms of the API server's write, the \
             tool's own act as it sent its request); server time is the object's own stamp, whole seconds, within {s} s"
        ),
        Figure::Startup => format!(
            "Startup per pod: server clock only (PodScheduled and Ready lastTransitionTime, the kubelet's Pulling and \
             Pulled event times, containers' startedAt and init containers' finishedAt; whole seconds, each within \
             {s} s; a moment without a stamp is when the tool saw it); the parts add up to the pod's startup"
        ),
        Figure::FallbackHours => format!(
            "Node-hours and GPU-hours: tool's clock, each instance (its NodeClaim, or its Node where the hours say \
             so) from the watch event of its creation to that of its deletion (each within {ms} ms of the API \
             server's write), or to the run's last observation while still running, times the GPUs its node offered"
        ),
        Figure::PeakGpus => "Peak GPUs: the most the fallback held at once in the watched NodePool, nodes and \
            NodeClaims; no clock"
            .into(),
        Figure::Cost => "Estimated cost: the node-hours times the drill's own on-demand price per instance type; an \
            estimate, not the bill"
            .into(),
        Figure::Overlap => format!(
            "Overlap window: tool's clock, from the watch event of the first replacement Ready on a fallback node to \
             that of the last on-prem pod's deletion, each within {ms} ms of the API server's write"
        ),
        Figure::Steps => "Step durations: tool's clock, from the step's start to its end as the tool ran it".into(),
    }
}

/// The short legend a reader needs first, in plain words; the exact clocks and bounds of each figure follow at the
/// end of the report ([`measured`]).
pub const PLAIN: [&str; 5] = [
    "RTO: the time from the fault until enough pods of the workload were Ready again to serve.",
    "A phase is one stretch of the recovery (pods evicted, cloud node started, pod started...). MISSED: it took \
     longer than its objective; NOT MEASURED: it never finished.",
    "Fallback: the cloud GPU nodes Karpenter started while on-prem could not serve; reclaim: those nodes removed again.",
    "Times are as the tool saw them, to a tenth of a second; \"server clock\" is what Kubernetes stamped on its \
     objects, in whole seconds.",
    "×N after an event: the same event happened N times, shown once with its first and last time.",
];

/// Every figure's clock and bound, for the section at the end of a report: the phases, then the other figures.
pub fn measured(report: &Report) -> Vec<String> {
    let mut lines = phases(report);
    lines.extend(
        [
            Figure::Milestones,
            Figure::Startup,
            Figure::FallbackHours,
            Figure::PeakGpus,
            Figure::Cost,
            Figure::Overlap,
            Figure::Steps,
        ]
        .map(line),
    );
    lines
}

/// The legend line of each phase the report shows, in its order.
pub fn phases(report: &Report) -> Vec<String> {
    report.phases.iter().filter_map(|p| crate::phases::definition(p.name)).map(|d| d.legend()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn every_phase_shown_and_every_figure_has_one_line_naming_its_clock() {
        let report = sample::report();
        let lines = phases(&report);
        assert_eq!(lines.len(), report.phases.len());
        for (line, p) in lines.iter().zip(&report.phases) {
            assert!(line.starts_with(&format!("{}: tool's clock, ", p.name.title())), "{line}");
            assert!(!line.contains('\n'));
        }
        for f in [
            Figure::Milestones,
            Figure::Startup,
            Figure::FallbackHours,
            Figure::PeakGpus,
            Figure::Cost,
            Figure::Overlap,
            Figure::Steps,
        ] {
            let l = line(f);
            assert!(l.contains("clock") || l.contains("estimate"), "{l}");
        }
    }
}
