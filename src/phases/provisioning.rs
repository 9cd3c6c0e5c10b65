//! Provisioning: the fallback's NodeClaims created and launched, its first usable node, and the path the restore
//! waited on (the last workload pod Ready on the fallback, its NodeClaim and its node).

use super::moments::{Moments, Scan, claim_reached};
use crate::cluster::karpenter::ClaimCondition;
use crate::timeline::{ConditionStatus, Event, NodeRole, Observation};

impl<'a> Scan<'a> {
    /// When the first fallback node became usable: Ready with GPUs allocatable and its NodeClaim Initialized
    /// (Karpenter lifts its own taint only then), whichever came last.
    pub(super) fn first_usable_fallback_node(&self, after: u64, before: u64) -> Option<&'a Observation> {
        let ready_with_gpus = |node: &str| {
            self.first(after, |e| matches!(e, Event::NodeReady { node: n, role: NodeRole::Fallback, status: ConditionStatus::True, gpus } if n == node && *gpus > 0))
        };
        let claimed: Vec<(&str, &str)> = self
            .obs
            .iter()
            .filter(|o| o.seq > after && o.seq < before)
            .filter_map(|o| match &o.event {
                Event::NodeClaimNode { nodeclaim, node } => Some((nodeclaim.as_str(), node.as_str())),
                _ => None,
            })
            .collect();
        let usable = claimed
            .iter()
            .filter_map(|(claim, node)| {
                let initialized = self.first(after, |e| claim_reached(e, claim, ClaimCondition::Initialized))?;
                let ready = ready_with_gpus(node)?;
                Some(if ready.seq > initialized.seq { ready } else { initialized })
            })
            .min_by_key(|o| o.seq);
        usable
            .or_else(|| {
                // Without NodeClaim-to-node links (an older Karpenter), the first Ready fallback node stands in.
                self.first(after, |e| matches!(e, Event::NodeReady { role: NodeRole::Fallback, status: ConditionStatus::True, gpus, .. } if *gpus > 0))
            })
            .filter(|o| o.seq < before)
    }

    /// For each NodeClaim created after `after`, when it first reached `condition`.
    pub(super) fn claims_reaching(&self, after: u64, before: u64, condition: ClaimCondition) -> Vec<&'a Observation> {
        let created: Vec<&str> = self
            .obs
            .iter()
            .filter(|o| o.seq > after && o.seq < before)
            .filter_map(|o| match &o.event {
                Event::NodeClaimCreated { nodeclaim } => Some(nodeclaim.as_str()),
                _ => None,
            })
            .collect();
        created
            .iter()
            .filter_map(|claim| self.first(after, |e| claim_reached(e, claim, condition)))
            .filter(|o| o.seq < before)
            .collect()
    }
}

impl<'a> Moments<'a> {
    pub(super) fn pods_bound(&self) -> Option<&'a Observation> {
        self.scan.last_between(self.t0_seq, self.restored_seq.saturating_add(1), |e| {
            matches!(e, Event::PodScheduled { role: NodeRole::Fallback, .. })
        })
    }

    pub(super) fn pods_ready(&self) -> Option<&'a Observation> {
        self.scan
            .last_between(self.t0_seq, self.restored_seq.saturating_add(1), |e| {
                matches!(e, Event::PodReady { role: NodeRole::Fallback, .. })
            })
            .or(self.restored)
    }

    /// The pod the phases' image pull and load follow: the last of the workload to become Ready on the fallback.
    pub(super) fn last_ready_pod(&self) -> Option<&'a str> {
        self.scan
            .last_between(self.t0_seq, self.restored_seq.saturating_add(1), |e| {
                matches!(e, Event::PodReady { role: NodeRole::Fallback, .. })
            })
            .and_then(|o| match &o.event {
                Event::PodReady { pod, .. } => Some(pod.as_str()),
                _ => None,
            })
    }

    pub(super) fn last_pod_created(&self) -> Option<&'a Observation> {
        let pod = self.last_ready_pod()?;
        self.scan
            .first(self.t0_seq, |e| matches!(e, Event::PodCreated { pod: p } if p == pod))
            .filter(|o| o.seq < self.restored_seq)
    }

    pub(super) fn last_pod_bound(&self) -> Option<&'a Observation> {
        let pod = self.last_ready_pod()?;
        self.scan.last_between(
            self.t0_seq,
            self.restored_seq.saturating_add(1),
            |e| matches!(e, Event::PodScheduled { pod: p, role: NodeRole::Fallback, .. } if p == pod),
        )
    }

    pub(super) fn last_pod_node(&self) -> Option<&'a str> {
        match &self.last_pod_bound()?.event {
            Event::PodScheduled { node, .. } => Some(node.as_str()),
            _ => None,
        }
    }

    /// The NodeClaim of the last fallback pod's node, with the pod's creation: the path's phases start no earlier.
    pub(super) fn last_pod_claim(&self) -> Option<(&'a str, &'a Observation)> {
        let created = self.last_pod_created()?;
        let node = self.last_pod_node()?;
        let claim = self.scan.obs.iter().find_map(|o| match &o.event {
            Event::NodeClaimNode { nodeclaim, node: n } if n == node => Some(nodeclaim.as_str()),
            _ => None,
        })?;
        Some((claim, created))
    }

    /// When the last fallback pod's node could take it: Ready with GPUs, or the pod's creation if the node was
    /// before. Not its NodeClaim Initialized: the scheduler binds as soon as Karpenter lifts its taint at
    /// registration, and Initialized was seen a second after the binding on the lab's realistic profile.
    pub(super) fn last_pod_node_usable(&self) -> Option<&'a Observation> {
        let created = self.last_pod_created()?;
        let node = self.last_pod_node()?;
        let ready = self.scan.first(self.t0_seq, |e| {
            matches!(e, Event::NodeReady { node: n, role: NodeRole::Fallback, status: ConditionStatus::True, gpus } if n == node && *gpus > 0)
        })?;
        let usable = if ready.seq > created.seq { ready } else { created };
        // The node's and the pod's watches are separate streams: a binding that arrived first proves the node usable.
        Some(match self.last_pod_bound() {
            Some(bound) if bound.seq < usable.seq => bound,
            _ => usable,
        })
    }
}
