//! Why consolidation does not reclaim a fallback node: the causes a drill names while it waits for the reclaim, and
//! in its report.

use serde::{Deserialize, Serialize};

/// What keeps Karpenter from taking an emptied (or emptying) fallback node away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockerCause {
    /// A NodePool disruption budget allows 0 nodes now.
    NodepoolBudget,
    /// A pod on the node carries `karpenter.sh/do-not-disrupt: "true"`.
    DoNotDisrupt,
    /// A PodDisruptionBudget covering a pod on the node allows 0 disruptions.
    PodDisruptionBudget,
    /// Karpenter's own `DisruptionBlocked` event on the node or its NodeClaim.
    KarpenterEvent,
}

impl BlockerCause {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockerCause::NodepoolBudget => "nodepool-budget",
            BlockerCause::DoNotDisrupt => "do-not-disrupt",
            BlockerCause::PodDisruptionBudget => "pod-disruption-budget",
            BlockerCause::KarpenterEvent => "karpenter-event",
        }
    }
}

impl std::fmt::Display for BlockerCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
