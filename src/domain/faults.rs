//! What a drill does to the cluster, named once: the fault it injects, how faithfully a cut reproduces a link loss,
//! whose host firewall enforces it, and which fault a restore ends.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a cut reproduces; every report states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CutFidelity {
    /// A host firewall policy on the on-prem nodes: they lose the control plane, go Unknown, get the unreachable
    /// taint and their pods are evicted after tolerationSeconds: the failure path of a real DX/VPN cut.
    Host,
    /// A NetworkPolicy around the workload's pods on the on-prem nodes: a data-plane partition. The nodes stay
    /// Ready, so it does not trigger the fallback by itself.
    PodNetwork,
}

impl fmt::Display for CutFidelity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CutFidelity::Host => "host",
            CutFidelity::PodNetwork => "pod-network",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Cni {
    Cilium,
    Calico,
}

impl fmt::Display for Cni {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cni::Cilium => "cilium",
            Cni::Calico => "calico",
        })
    }
}

/// Which fault a `restore` step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RestoreTarget {
    /// Remove the policies (and pod labels) the drill's `cut` created: the link is back.
    Cut,
    /// Run the recovery hooks of the drill's `nodeFailure`: the nodes are powered back on.
    NodeFailure,
    /// Run the recovery hooks of the drill's `gpuFault`: the GPUs are healthy again, the quarantine lifted.
    GpuFault,
    /// Run the `giveBack` hooks of the drill's `capacity` steps: the instance types have capacity again.
    Capacity,
}

impl fmt::Display for RestoreTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RestoreTarget::Cut => "cut",
            RestoreTarget::NodeFailure => "node-failure",
            RestoreTarget::GpuFault => "gpu-fault",
            RestoreTarget::Capacity => "capacity",
        })
    }
}

/// Which fault a drill injected at t0. Written to the timeline as text (`drain`, `cut (host)`, `cut (pod-network)`,
/// `node-failure`), as runs before this type wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum FaultKind {
    Drain,
    Cut(CutFidelity),
    NodeFailure,
    /// GPUs failed on nodes that stay Ready.
    GpuFault,
}

impl FaultKind {
    /// Whether the fault can leave the on-prem nodes unreachable: a cut or a node failure, not a drain or a GPU fault.
    pub fn loses_nodes(self) -> bool {
        !matches!(self, FaultKind::Drain | FaultKind::GpuFault)
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultKind::Drain => f.write_str("drain"),
            FaultKind::Cut(fidelity) => write!(f, "cut ({fidelity})"),
            FaultKind::NodeFailure => f.write_str("node-failure"),
            FaultKind::GpuFault => f.write_str("gpu-fault"),
        }
    }
}

impl From<FaultKind> for String {
    fn from(kind: FaultKind) -> String {
        kind.to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fault kind `{0}`")]
pub struct UnknownFault(pub String);

impl FromStr for FaultKind {
    type Err = UnknownFault;
    fn from_str(s: &str) -> Result<FaultKind, UnknownFault> {
        match s {
            "drain" => Ok(FaultKind::Drain),
            "node-failure" => Ok(FaultKind::NodeFailure),
            "gpu-fault" => Ok(FaultKind::GpuFault),
            "cut (host)" => Ok(FaultKind::Cut(CutFidelity::Host)),
            "cut (pod-network)" => Ok(FaultKind::Cut(CutFidelity::PodNetwork)),
            other => Err(UnknownFault(other.to_string())),
        }
    }
}

impl TryFrom<String> for FaultKind {
    type Error = UnknownFault;
    fn try_from(s: String) -> Result<FaultKind, UnknownFault> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_kinds_keep_the_spelling_older_timelines_have() {
        for kind in [
            FaultKind::Drain,
            FaultKind::NodeFailure,
            FaultKind::GpuFault,
            FaultKind::Cut(CutFidelity::Host),
            FaultKind::Cut(CutFidelity::PodNetwork),
        ] {
            let text = serde_json::to_string(&kind).unwrap();
            assert_eq!(serde_json::from_str::<FaultKind>(&text).unwrap(), kind);
        }
        assert_eq!(serde_json::to_string(&FaultKind::Cut(CutFidelity::Host)).unwrap(), r#""cut (host)""#);
        assert!(serde_json::from_str::<FaultKind>(r#""flood""#).is_err());
    }
}

/// What started a real incident, as `hybrid-drill watch` reads it from the on-prem nodes: their conditions, taints and
/// cordons. Never guessed beyond them: with none of the signs, it is `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IncidentCause {
    /// One on-prem node lost (NotReady or Unknown) on its own.
    NodeFailure,
    /// Several on-prem nodes lost together, or a node reporting `NetworkUnavailable`: the link to the VPC.
    LinkLoss,
    /// Someone cordoned on-prem nodes (the nodes stayed Ready) and their workload pods left.
    Drain,
    /// An on-prem node stayed Ready but reports fewer `nvidia.com/gpu` allocatable than its capacity: its GPUs
    /// failed (the device plugin marked them unhealthy).
    GpuFault,
    /// The workload went to the fallback with none of the signs above.
    Unknown,
}

impl IncidentCause {
    /// The fault of a drill that takes the same path, so the phases are cut alike.
    pub fn fault_kind(self) -> Option<FaultKind> {
        match self {
            IncidentCause::NodeFailure => Some(FaultKind::NodeFailure),
            IncidentCause::LinkLoss => Some(FaultKind::Cut(CutFidelity::Host)),
            IncidentCause::Drain => Some(FaultKind::Drain),
            IncidentCause::GpuFault => Some(FaultKind::GpuFault),
            IncidentCause::Unknown => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            IncidentCause::NodeFailure => "node-failure",
            IncidentCause::LinkLoss => "link-loss",
            IncidentCause::Drain => "drain",
            IncidentCause::GpuFault => "gpu-fault",
            IncidentCause::Unknown => "unknown",
        }
    }
}

impl fmt::Display for IncidentCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
