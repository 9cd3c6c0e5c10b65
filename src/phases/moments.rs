//! The moments of one drill, found once on its timeline, and where each `Bound` of the phase table lies: the
//! searches of each phase family are in its own file (`eviction`, `provisioning`, `startup`, `restore`, `reclaim`).

use super::definitions::{Bound, Shown};
use super::model::Boundary;
use crate::cluster::karpenter::ClaimCondition;
use crate::domain::PhaseId;
use crate::drill::{Drill, RestoreTarget};
use crate::timeline::{ConditionStatus, Event, NodeRole, Observation};

/// Searches over the observations by sequence number.
pub(super) struct Scan<'a> {
    pub(super) obs: &'a [Observation],
}

impl<'a> Scan<'a> {
    pub(super) fn first(&self, after: u64, f: impl Fn(&Event) -> bool) -> Option<&'a Observation> {
        self.obs.iter().find(|o| o.seq > after && f(&o.event))
    }

    pub(super) fn last_between(&self, after: u64, before: u64, f: impl Fn(&Event) -> bool) -> Option<&'a Observation> {
        self.obs.iter().rev().find(|o| o.seq > after && o.seq < before && f(&o.event))
    }

    /// Whether the restored criterion held at `seq`: the last availability change before it says so.
    pub(super) fn available_at(&self, seq: u64) -> bool {
        !self
            .obs
            .iter()
            .rev()
            .filter(|o| o.seq <= seq)
            .find_map(|o| match o.event {
                Event::ServiceLost { .. } => Some(true),
                Event::ServiceRestored { .. } => Some(false),
                _ => None,
            })
            .unwrap_or(false)
    }
}

/// Whether the event says the NodeClaim `claim` reached `condition`.
pub(super) fn claim_reached(e: &Event, claim: &str, condition: ClaimCondition) -> bool {
    matches!(e, Event::NodeClaimCondition { nodeclaim, condition: c, status: ConditionStatus::True }
        if nodeclaim == claim && *c == condition)
}

/// The moments of one drill, found once on its timeline; phases and milestones are read from them.
pub(super) struct Moments<'a> {
    pub(super) scan: Scan<'a>,
    pub(super) t0: Option<&'a Observation>,
    pub(super) t0_seq: u64,
    pub(super) ret: Option<&'a Observation>,
    pub(super) ret_seq: u64,
    /// Where the fault ended: the restore, else the return.
    pub(super) fault_end: u64,
    /// A cut or a node failure: the on-prem nodes may become unreachable, and a `restore` step ends the fault.
    pub(super) loses_nodes: bool,
    pub(super) evicted: Option<&'a Observation>,
    pub(super) restored: Option<&'a Observation>,
    pub(super) restored_seq: u64,
    pub(super) restore: Option<&'a Observation>,
}

impl<'a> Moments<'a> {
    pub(super) fn new(obs: &'a [Observation]) -> Moments<'a> {
        let scan = Scan { obs };
        let end = u64::MAX;
        let first_of = |f: fn(&Event) -> bool| scan.first(0, f).or_else(|| obs.first().filter(|o| f(&o.event)));
        let t0 = first_of(|e| matches!(e, Event::FaultInjected { .. }));
        // An incident whose start no object recorded has no t0: its phases are searched from when it was seen.
        let opened = first_of(|e| matches!(e, Event::IncidentOpened { .. }));
        let t0_seq = t0.or(opened).map_or(end, |o| o.seq);
        let ret = scan.first(t0_seq, |e| matches!(e, Event::ReturnStarted { .. }));
        let ret_seq = ret.map_or(end, |o| o.seq);
        let loses_nodes = t0.or(opened).is_some_and(|o| match &o.event {
            Event::FaultInjected { kind, .. } => kind.loses_nodes(),
            Event::IncidentOpened { cause, .. } => cause.fault_kind().is_some_and(|k| k.loses_nodes()),
            _ => false,
        });
        let restore = scan.first(t0_seq, |e| matches!(e, Event::RestoreStarted { .. })).filter(|o| o.seq < ret_seq);
        let fault_end = restore.map_or(ret_seq, |o| o.seq);
        // The fault has fully taken effect once the last workload pod left on-prem: a budget-paced drain restores
        // the service part-way (old and new pods together) before it takes the rest away again. A pod on an
        // unreachable node has left once the API server deleted it: it stays Terminating until the node is back,
        // nobody confirming it.
        let evicted = if loses_nodes {
            scan.last_between(t0_seq, fault_end, |e| {
                matches!(
                    e,
                    Event::PodTerminating { role: NodeRole::OnPrem, .. }
                        | Event::PodDeleted { role: NodeRole::OnPrem, .. }
                )
            })
        } else {
            scan.last_between(t0_seq, ret_seq, |e| matches!(e, Event::PodDeleted { role: NodeRole::OnPrem, .. }))
        };
        let settled = evicted.or(t0).or(opened);
        let resumed = obs.iter().any(|o| matches!(o.event, Event::IncidentResumed { .. }));
        let settled_seq = settled.map_or(end, |o| o.seq);
        let restored = scan
            .first(settled_seq, |e| matches!(e, Event::ServiceRestored { .. }))
            .filter(|o| o.seq < ret_seq)
            // That it held throughout is known only to a timeline without a gap: never for an incident a restarted
            // watch took up.
            .or_else(|| settled.filter(|s| scan.available_at(s.seq) && !resumed));
        let restored_seq = restored.map_or(ret_seq, |o| o.seq);
        Moments { scan, t0, t0_seq, ret, ret_seq, fault_end, loses_nodes, evicted, restored, restored_seq, restore }
    }

    /// Where the bound was observed, and how a report names it.
    // Long: one arm per Bound, mostly a line each delegating to the family files; the match is the index of them.
    pub(super) fn find(&self, bound: Bound) -> Option<Boundary> {
        let (scan, t0, ret, fault_end) = (&self.scan, self.t0_seq, self.ret_seq, self.fault_end);
        let before = |limit: u64| move |o: &&Observation| o.seq < limit;
        let (label, o): (&str, Option<&Observation>) = match bound {
            Bound::FaultInjected => ("fault injected (t0)", self.t0),
            Bound::WorkloadEvicted => ("workload evicted from on-prem", self.evicted),
            Bound::NodeLost => {
                let o = self.node_lost();
                let status = match o.map(|o| &o.event) {
                    Some(Event::NodeReady { status, .. }) => *status,
                    _ => ConditionStatus::Unknown,
                };
                return o.map(|o| Boundary::of(&format!("on-prem node {}", status.node_readiness()), o));
            }
            Bound::LostNodeTainted => {
                return self.lost_node_tainted().map(|o| match &o.event {
                    Event::NodeTaint { key, .. } => Boundary::of(&format!("{key}:NoExecute taint"), o),
                    _ => Boundary::of("NoExecute taint", o),
                });
            }
            Bound::GpusUnhealthy => {
                return self.gpu_detected().map(|o| match &o.event {
                    Event::GpuErrorsSeen { .. } => Boundary::of("GPU errors reported by Prometheus (detectedBy)", o),
                    _ => Boundary::of("GPUs unhealthy on a faulty node", o),
                });
            }
            Bound::NodeQuarantined => ("faulty node quarantined", self.node_quarantined()),
            Bound::FirstPodDegraded => ("first pod not Ready on a faulty node", self.first_pod_degraded()),
            Bound::DegradedEnded => ("degraded service ended", self.degraded_ended()),
            Bound::FirstPodEvicted => ("first workload pod evicted from on-prem", self.first_pod_evicted(fault_end)),
            Bound::FirstPodEvictedBeforeReturn => {
                ("first workload pod evicted from on-prem", self.first_pod_evicted(ret))
            }
            Bound::ReplacementPending => (
                "replacement pod created (Pending)",
                scan.first(t0, |e| matches!(e, Event::PodCreated { .. })).filter(before(ret)),
            ),
            Bound::FirstClaimCreated => (
                "first NodeClaim created",
                scan.first(t0, |e| matches!(e, Event::NodeClaimCreated { .. })).filter(before(ret)),
            ),
            Bound::FirstClaimReached(c) => {
                let o = scan.claims_reaching(t0, ret, c).into_iter().min_by_key(|o| o.seq);
                return o.map(|o| Boundary::of(&format!("first NodeClaim {c}"), o));
            }
            Bound::ClaimsReached(c) => {
                let o = scan.claims_reaching(t0, ret, c).into_iter().max_by_key(|o| o.seq);
                return o.map(|o| Boundary::of(&format!("NodeClaims {c}"), o));
            }
            Bound::FallbackNodeUsable => ("fallback node Ready with GPUs", scan.first_usable_fallback_node(t0, ret)),
            Bound::PodsScheduled => ("workload pods bound", self.pods_bound()),
            Bound::LastPodCreated => match self.last_pod_created() {
                Some(o) => ("last fallback pod created (Pending)", Some(o)),
                None => return self.find(Bound::ReplacementPending),
            },
            Bound::LastPodClaimCreated => {
                let Some((claim, created)) = self.last_pod_claim() else {
                    return self.find(Bound::FirstClaimCreated);
                };
                let claim_created =
                    scan.first(0, |e| matches!(e, Event::NodeClaimCreated { nodeclaim } if nodeclaim == claim));
                match claim_created {
                    // A launch refused for capacity is a NodeClaim of the pod's that never became its node: its
                    // time is provisioning, so the first claim created after the pod starts it.
                    Some(c) if c.seq > created.seq => {
                        let first = scan
                            .first(created.seq, |e| matches!(e, Event::NodeClaimCreated { .. }))
                            .filter(|f| f.seq <= c.seq);
                        ("first NodeClaim created after it", Some(first.unwrap_or(c)))
                    }
                    Some(_) => ("last fallback pod created (its NodeClaim was already)", Some(created)),
                    None => ("its NodeClaim created", None),
                }
            }
            Bound::LastPodClaimReached(c) => {
                let Some((claim, created)) = self.last_pod_claim() else {
                    return self.find(Bound::ClaimsReached(c));
                };
                let reached = scan.first(0, |e| claim_reached(e, claim, c));
                return reached.map(|r| match r.seq > created.seq {
                    true => Boundary::of(&format!("its NodeClaim {c}"), r),
                    false => {
                        Boundary::of(&format!("last fallback pod created (its NodeClaim was already {c})"), created)
                    }
                });
            }
            Bound::LastPodNodeUsable => match self.last_pod_node_usable() {
                Some(o) => ("its node Ready with GPUs", Some(o)),
                None => return self.find(Bound::FallbackNodeUsable),
            },
            Bound::LastPodScheduled => match self.last_pod_bound() {
                Some(o) => ("last fallback pod bound", Some(o)),
                None => return self.find(Bound::PodsScheduled),
            },
            Bound::PodsReady => ("workload pods Ready", self.pods_ready()),
            Bound::ImagePullStarted => ("image pull started", self.image_pull_started()),
            Bound::ImagePulled => ("image pulled", self.image_pulled()),
            Bound::ServiceRestored => return self.restored_boundary(),
            Bound::RestoreStarted => ("restore started", self.restore),
            Bound::FaultRemoved => {
                let label = match self.restore.map(|o| &o.event) {
                    Some(Event::RestoreStarted { what: RestoreTarget::Cut, .. }) => "link restored",
                    _ => "recovery hooks ran",
                };
                (label, self.restore.and_then(|r| scan.first(r.seq, |e| matches!(e, Event::FaultRemoved { .. }))))
            }
            Bound::RevertEnded => {
                let removed = self.find(Bound::FaultRemoved)?;
                return Some(match self.on_prem_ready() {
                    Some(ready) if ready.seq < removed.seq => {
                        Boundary::of("on-prem nodes Ready (before the revert returned)", ready)
                    }
                    _ => removed,
                });
            }
            Bound::OnPremNodesReady => ("on-prem nodes Ready", self.on_prem_ready()),
            Bound::ReturnStarted => ("return started", self.ret),
            Bound::ReturnStartedOrBack => match self.back_before_return() {
                Some(o) => ("workload back on-prem before the return", Some(o)),
                None => ("return started", self.ret),
            },
            Bound::ReturnStartedOrReclaimed => match self.reclaimed_before_return() {
                Some(o) => ("fallback reclaimed to 0 before the return", Some(o)),
                None => ("return started", self.ret),
            },
            Bound::BackOnPrem => (
                "workload back on-prem",
                self.back_before_return()
                    .or_else(|| self.ret.and_then(|_| scan.first(ret, |e| matches!(e, Event::BackOnPrem { .. })))),
            ),
            Bound::FallbackReclaimed => (
                "fallback reclaimed to 0",
                self.reclaimed_before_return()
                    .or_else(|| self.ret.and_then(|_| scan.first(ret, |e| matches!(e, Event::FallbackEmpty)))),
            ),
        };
        o.map(|o| Boundary::of(label, o))
    }

    pub(super) fn shows(&self, shown: Shown, drill: &Drill) -> bool {
        match shown {
            Shown::Always => true,
            Shown::NodeLost => self.loses_nodes || self.node_lost().is_some(),
            Shown::ImagePull => self.image_pull_started().is_some() || self.image_pulled().is_some(),
            Shown::GpuFault => self.gpu_fault(),
            Shown::Restore => drill.spec.steps.iter().any(|s| matches!(s.action, crate::drill::Action::Restore(_))),
        }
    }

    /// What a phase's figure alone does not say.
    pub(super) fn extra_note(&self, id: PhaseId, drill: &Drill) -> Option<String> {
        match id {
            PhaseId::Rto if let Some(note) = self.restored_note(drill) => Some(note),
            PhaseId::Toleration => self.expected_toleration(),
            PhaseId::Detection => self.hooks_ran(),
            // Not a slow fallback: the node lifecycle controller's zone rule kept the lost nodes untainted.
            PhaseId::Eviction => self.scan.first(0, |e| {
                matches!(e, Event::StepFinished { message, .. } if message.starts_with(crate::cluster::zones::HELD_BY_ZONE_DISRUPTION))
            }).map(|_| format!(
                "{}: a partial disruption of a zone of at most 50 nodes (more than 2 and at least 55% NotReady) sets \
                 the node lifecycle controller's eviction rate to 0; see the step's message",
                crate::cluster::zones::HELD_BY_ZONE_DISRUPTION
            )),
            PhaseId::Rto
                if self.restored.is_some()
                    && self
                        .scan
                        .first(self.t0_seq, |e| matches!(e, Event::ServiceLost { .. }))
                        .is_none_or(|o| o.seq >= self.ret_seq) =>
            {
                Some("the restored criterion held throughout".into())
            }
            _ => None,
        }
    }
}
