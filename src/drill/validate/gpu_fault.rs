//! `gpuFault`: the hooks checked as a node failure's (a later `restore: gpu-fault` ends it) and the quarantine bound.

use std::time::Duration;

use super::Validator;
use crate::domain::RestoreTarget;
use crate::drill::model::GpuFaultAction;
use crate::drill::parse::join;
use crate::drill::raw::{self, NodeFailureAction};
use crate::drill::raw_gpu_fault::GpuFaultAction as RawGpuFault;

/// How long a remediation may take to quarantine a node when the drill says nothing: NVSentinel and
/// node-problem-detector act within a minute or two; ten minutes of degraded service is already the finding.
pub const DEFAULT_QUARANTINE_WITHIN: Duration = Duration::from_secs(600);

impl Validator<'_> {
    pub(super) fn gpu_fault(
        &mut self,
        steps: &[raw::Step],
        i: usize,
        at: &str,
        fault: &RawGpuFault,
    ) -> Option<GpuFaultAction> {
        let as_failure = NodeFailureAction {
            fail: fault.fail.clone(),
            recover: fault.recover.clone(),
            count: fault.count,
            fraction: fault.fraction.clone(),
            hook_timeout: fault.hook_timeout.unwrap_or_else(raw::default_hook_timeout),
            env: fault.env.clone(),
        };
        let quarantine_within = fault.quarantine_within.map_or(DEFAULT_QUARANTINE_WITHIN, |d| d.0);
        let bound_valid = !quarantine_within.is_zero();
        if !bound_valid {
            self.problem(&join(at, "quarantineWithin"), "quarantineWithin must be longer than zero");
        }
        let hooks = self.fault_hooks(steps, i, at, &as_failure, RestoreTarget::GpuFault)?;
        bound_valid.then_some(GpuFaultAction { hooks, quarantine_within, detected_by: fault.detected_by.clone() })
    }

    /// A `detectedBy` query is asked of the drill's Prometheus: without `spec.slo` there is none to ask.
    pub(super) fn gpu_detection_source(&mut self, spec: &raw::DrillSpec) {
        if spec.slo.is_some() {
            return;
        }
        for (i, step) in spec.steps.iter().enumerate() {
            if step.gpu_fault.as_ref().is_some_and(|g| g.detected_by.is_some()) {
                self.problem(
                    &format!("spec.steps[{i}].gpuFault.detectedBy"),
                    "detectedBy is asked of the Prometheus in spec.slo.prometheus: add that section (its url and \
                     credentials, and at least one SLI)",
                );
            }
        }
    }
}
