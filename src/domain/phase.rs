//! The names of the phases a drill is cut into: one type, one spelling, used by objectives, analysis and reports.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Every phase and sub-phase a report can show. The serde name is the one drill files, `report.json` and metrics use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseId {
    /// Fault injected (t0) to the last workload pod gone from on-prem.
    Eviction,
    /// Fault to an on-prem node NotReady or Unknown (a cut or a node failure).
    Detection,
    /// Node not Ready to its NoExecute taint.
    Taint,
    /// The taint to the first pod evicted: the pods' tolerationSeconds.
    Toleration,
    /// A GPU fault (t0) to a faulty node reporting fewer GPUs allocatable: the device plugin's detection.
    GpuDetection,
    /// A GPU fault (t0) to a faulty node quarantined (cordoned or tainted) by a remediation.
    Quarantine,
    /// The first workload pod not Ready on a faulty node to the quarantine (or the fault's end): users served by a
    /// degraded set of pods.
    Degraded,
    /// From here to startup, the path of the last pod to become Ready on the fallback (the one the restore waited
    /// for): its creation (Pending) to its node's NodeClaim created.
    Pending,
    /// That NodeClaim created to Initialized.
    Provisioning,
    Launched,
    Registered,
    Initialized,
    /// That pod's node Ready with GPUs to the pod bound.
    Scheduling,
    /// That pod bound to Ready.
    Startup,
    ImagePull,
    Load,
    /// Fault injected (t0) to service restored.
    Rto,
    /// Restore started to every on-prem node Ready again.
    Restore,
    Revert,
    Rejoin,
    /// Return started to the workload back on-prem and Ready.
    Return,
    /// Return started to the fallback reclaimed to 0.
    Reclaim,
}

impl PhaseId {
    pub const ALL: &'static [PhaseId] = &[
        PhaseId::Eviction,
        PhaseId::Detection,
        PhaseId::Taint,
        PhaseId::Toleration,
        PhaseId::GpuDetection,
        PhaseId::Quarantine,
        PhaseId::Degraded,
        PhaseId::Pending,
        PhaseId::Provisioning,
        PhaseId::Launched,
        PhaseId::Registered,
        PhaseId::Initialized,
        PhaseId::Scheduling,
        PhaseId::Startup,
        PhaseId::ImagePull,
        PhaseId::Load,
        PhaseId::Rto,
        PhaseId::Restore,
        PhaseId::Revert,
        PhaseId::Rejoin,
        PhaseId::Return,
        PhaseId::Reclaim,
    ];

    /// The name as drill files and `report.json` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseId::Eviction => "eviction",
            PhaseId::Detection => "detection",
            PhaseId::Taint => "taint",
            PhaseId::Toleration => "toleration",
            PhaseId::GpuDetection => "gpu-detection",
            PhaseId::Quarantine => "quarantine",
            PhaseId::Degraded => "degraded",
            PhaseId::Pending => "pending",
            PhaseId::Provisioning => "provisioning",
            PhaseId::Launched => "launched",
            PhaseId::Registered => "registered",
            PhaseId::Initialized => "initialized",
            PhaseId::Scheduling => "scheduling",
            PhaseId::Startup => "startup",
            PhaseId::ImagePull => "image-pull",
            PhaseId::Load => "load",
            PhaseId::Rto => "rto",
            PhaseId::Restore => "restore",
            PhaseId::Revert => "revert",
            PhaseId::Rejoin => "rejoin",
            PhaseId::Return => "return",
            PhaseId::Reclaim => "reclaim",
        }
    }

    /// The name people read in reports: the RTO is an acronym, every other phase its own name.
    pub fn title(self) -> &'static str {
        match self {
            PhaseId::Rto => "RTO",
            PhaseId::GpuDetection => "GPU detection",
            other => other.as_str(),
        }
    }

    /// The phase this one is a part of, for sub-phases.
    pub fn parent(self) -> Option<PhaseId> {
        match self {
            PhaseId::Detection | PhaseId::Taint | PhaseId::Toleration => Some(PhaseId::Eviction),
            PhaseId::GpuDetection | PhaseId::Quarantine => Some(PhaseId::Eviction),
            PhaseId::Launched | PhaseId::Registered | PhaseId::Initialized => Some(PhaseId::Provisioning),
            PhaseId::ImagePull | PhaseId::Load => Some(PhaseId::Startup),
            PhaseId::Revert | PhaseId::Rejoin => Some(PhaseId::Restore),
            _ => None,
        }
    }
}

impl fmt::Display for PhaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no phase is called `{0}`")]
pub struct UnknownPhase(pub String);

impl FromStr for PhaseId {
    type Err = UnknownPhase;
    fn from_str(s: &str) -> Result<PhaseId, UnknownPhase> {
        PhaseId::ALL.iter().copied().find(|p| p.as_str() == s).ok_or_else(|| UnknownPhase(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_round_trips_through_its_name_and_serde() {
        for &p in PhaseId::ALL {
            assert_eq!(p.as_str().parse::<PhaseId>(), Ok(p));
            assert_eq!(serde_json::to_value(p).unwrap(), serde_json::json!(p.as_str()));
            assert!(p.parent().is_none_or(|parent| parent.parent().is_none()), "{p} nests too deep");
        }
        assert_eq!(PhaseId::Rto.title(), "RTO");
        assert!("nope".parse::<PhaseId>().is_err());
    }
}
