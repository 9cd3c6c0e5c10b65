//! `gpuFault` as written: a GPU that fails while its node stays Ready, injected by the drill's own hooks. Private to
//! `drill`, like the rest of the raw drill file.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::HumanDuration;

/// A failed GPU on the on-prem nodes (an Xid 79, an uncorrectable ECC error) while the nodes stay Ready: the device
/// plugin marks it unhealthy, allocatable `nvidia.com/gpu` drops, the pod on it stops serving and restarts in place.
/// Nothing evicts it unless a remediation (NVSentinel, node-problem-detector with a drainer) quarantines the node:
/// the step waits `quarantineWithin` for that, and when none comes the drill ends, restored, with the finding that
/// the fallback never triggered. No shell unless you name one (`[sh, -c, "..."]`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuFaultAction {
    /// Fails the GPUs (`dcgmi test --inject` of an Xid, a device-plugin health signal; see runbooks/gpu-fault.md).
    /// With `{node}` in an argument it runs once per on-prem node, all at once; otherwise once. A non-zero exit fails
    /// the step.
    pub fail: Vec<String>,
    /// Makes the GPUs healthy again and lifts what the remediation left (cordon, taint). Run by `restore: gpu-fault`,
    /// or by the abort (or `hybrid-drill recover`) of a drill stopped before it. Must be safe to run twice.
    pub recover: Vec<String>,
    /// How long a remediation may take to quarantine a faulty node (cordon or taint it) before the drill calls the
    /// fallback never triggered, ends the fault and reports the degraded time. Default 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine_within: Option<HumanDuration>,
    /// A PromQL query, read from `spec.slo.prometheus`, that returns a series while the faulty GPUs report errors:
    /// DCGM's Xid counter, e.g. `max by (Hostname) (DCGM_FI_DEV_XID_ERRORS{Hostname=~"{nodes}"}) > 0` (`{nodes}` is
    /// the faulty nodes' names as a regular expression). Its first answer with a series after the fault is a
    /// detection, as the allocatable `nvidia.com/gpu` dropping is: the earlier of the two ends `gpu-detection`. On a
    /// real cluster, where DCGM error injection reaches DCGM but not the device plugin, it is the only detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_by: Option<String>,
    /// Fail the GPUs of only this many of the on-prem nodes (the first by name). Needs `{node}` in the hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Fail the GPUs of only this share of the on-prem nodes, as a percentage (`50%`), rounded up, at least one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<String>,
    /// Bound on each run of a hook. Default 2m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_timeout: Option<HumanDuration>,
    /// The environment variables the hook is given from the tool's own, by name; the hook gets these, `PATH` and
    /// `HOME`, nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}
