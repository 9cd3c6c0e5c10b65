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
        bound_valid.then_some(GpuFaultAction { hooks, quarantine_within })
    }
}
