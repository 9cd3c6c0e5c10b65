//! The report's `reclaim_blockers`: each reason the fallback was not reclaimed, first seen when, from the reclaim
//! wait's own readings and from Karpenter's `DisruptionBlocked` events the drill's watches recorded once the reclaim
//! began (before it, Karpenter refusing to disrupt a node the workload needs is the fallback working).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::BlockerCause;
use crate::timeline::{Event, Observation};

/// One reason a fallback node stayed, as first seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimBlocker {
    pub t_seconds: f64,
    pub at: DateTime<Utc>,
    /// Absent for a NodePool's budget, which holds every node of its pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub cause: BlockerCause,
    pub object: String,
    pub message: String,
}

/// Every blocker of the reclaim once, in the order first seen; `reclaim_from_ms` is when the reclaim phase began
/// (none: it never did, and only the reclaim wait's own readings count).
pub fn reclaim_blockers(observations: &[Observation], reclaim_from_ms: Option<u64>) -> Vec<ReclaimBlocker> {
    let mut out: Vec<ReclaimBlocker> = Vec::new();
    for o in observations {
        let (node, cause, object, message) = match &o.event {
            Event::ReclaimBlocked { node, cause, object, message } => (node.clone(), *cause, object, message),
            Event::KubeEvent { object, reason, message }
                if reason == "DisruptionBlocked" && reclaim_from_ms.is_some_and(|from| o.t_ms >= from) =>
            {
                (None, BlockerCause::KarpenterEvent, object, message)
            }
            _ => continue,
        };
        if out.iter().any(|b| b.cause == cause && b.object == *object && b.message == *message) {
            continue;
        }
        out.push(ReclaimBlocker {
            t_seconds: o.t_ms as f64 / 1000.0,
            at: o.received,
            node,
            cause,
            object: object.clone(),
            message: message.clone(),
        });
    }
    out
}
