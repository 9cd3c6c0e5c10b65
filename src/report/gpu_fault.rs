//! The GPU fault in words: the fidelity statement of a `gpuFault` drill, and the finding of its path: quarantined and
//! fallen back, or "fallback never triggered" with the degraded time, the nodes and the remediation missing.

use super::words::human_seconds;
use crate::phases::gpu_fault::{GpuFaultOutcome, REMEDIATIONS};

pub const FIDELITY: &str = "GPU fault: the drill's own hooks (`{fail}`) failed GPUs of on-prem nodes that stayed \
Ready, and its recovery hooks (`{recover}`) made them healthy again. Reproduced: what the hook does; with DCGM error \
injection or a device-plugin health signal, allocatable nvidia.com/gpu drops and the pods on the GPUs stop serving \
while the node stays Ready, so the node lifecycle controller evicts nothing. Only a remediation's quarantine (cordon, \
taint, drain) starts the fallback. Not reproduced: a node failure or a link cut (see those drills).";

/// What shortens the quarantine, for the action item.
pub const QUARANTINE_ADVICE: &str = "nothing quarantined the faulty node soon enough: install or tune a remediation \
that covers hybrid nodes (NVIDIA NVSentinel, node-problem-detector with a DCGM/Xid check and a drainer)";

impl GpuFaultOutcome {
    /// The finding, one sentence a line: the first says whether the fallback triggered.
    pub fn lines(&self) -> Vec<String> {
        let nodes = self.nodes.join(", ");
        let degraded_on =
            if self.degraded_nodes.is_empty() { "no pod seen".into() } else { self.degraded_nodes.join(", ") };
        let degraded = match self.degraded_seconds {
            Some(s) => format!("{} served by a degraded set of pods (not Ready on {degraded_on})", human_seconds(s)),
            None => format!("degraded time not measured (no workload pod seen not Ready on {nodes})"),
        };
        let mut out = Vec::new();
        if self.fallback_triggered {
            out.push(format!(
                "GPUs failed on {nodes}; quarantined ({}), which started the fallback",
                self.quarantined_by.as_deref().unwrap_or("by a remediation")
            ));
            out.push(format!("{degraded} before the quarantine"));
        } else {
            out.push(format!(
                "fallback never triggered: GPUs failed on {nodes} and nothing quarantined them within {}",
                human_seconds(self.quarantine_within_seconds)
            ));
            out.push(format!("{degraded} until the drill ended the fault"));
            out.push(format!("the cluster lacks {REMEDIATIONS}"));
        }
        if !self.degraded_pods.is_empty() {
            out.push(format!("pods on the failed GPUs: {}", self.degraded_pods.join(", ")));
        }
        out.push(self.detection());
        out
    }

    /// Which signal saw the fault first, and the GPUs' errors as Prometheus had them.
    fn detection(&self) -> String {
        let errors = self.gpu_errors.as_ref().map(|e| {
            let on = if e.nodes.is_empty() { String::new() } else { format!(" on {}", e.nodes.join(", ")) };
            format!("the detectedBy query answered {}{on} {} after t0", e.value, human_seconds(e.seconds))
        });
        match (self.detected_by.as_deref(), errors) {
            (Some("detectedBy"), Some(errors)) => format!("detected first by the GPUs' errors: {errors}"),
            (Some(_), Some(errors)) => {
                format!("detected first by allocatable nvidia.com/gpu dropping (the device plugin); {errors}")
            }
            (Some(_), None) => "detected by allocatable nvidia.com/gpu dropping (the device plugin); no GPU error \
                                query answered (detectedBy)"
                .into(),
            (None, _) => "the fault was not detected: neither allocatable nvidia.com/gpu dropped nor a detectedBy \
                          query answered"
                .into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_nothing_remediated_says_the_fallback_never_triggered_how_long_and_where() {
        let o = GpuFaultOutcome {
            nodes: vec!["hybrid-gpu-1".into()],
            fallback_triggered: false,
            quarantine_within_seconds: 30.0,
            quarantined_by: None,
            degraded_seconds: Some(31.5),
            degraded_nodes: vec!["hybrid-gpu-1".into()],
            degraded_pods: vec!["llm-0".into()],
            detected_by: Some("detectedBy".into()),
            gpu_errors: Some(crate::phases::gpu_fault::GpuErrors {
                value: 79.0,
                nodes: vec!["hybrid-gpu-1".into()],
                seconds: 2.5,
            }),
        };
        let lines = o.lines();
        assert!(lines[0].starts_with("fallback never triggered: GPUs failed on hybrid-gpu-1"), "{lines:?}");
        assert!(lines[1].contains("served by a degraded set of pods (not Ready on hybrid-gpu-1)"), "{lines:?}");
        assert!(lines[2].contains("NVSentinel") && lines[2].contains("not hybrid nodes"), "{lines:?}");
        assert_eq!(
            lines[4],
            "detected first by the GPUs' errors: the detectedBy query answered 79 on hybrid-gpu-1 2.5s after t0"
        );
    }
}
