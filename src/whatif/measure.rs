//! What a recorded run measured of its critical path: each replacement pod's way from creation to Ready, split at
//! its milestones, the PodDisruptionBudget's waves and hand-offs, the lost nodes' delays and the reclaim.

use std::collections::HashMap;

use crate::domain::{ConditionStatus, FaultKind};
use crate::timeline::{Event, NodeRole, Observation};

/// One replacement pod on the fallback, its milestones in seconds after t0 on the tool's clock, each clamped to be
/// no earlier than the one before (a milestone not seen takes the one before it).
#[derive(Debug, Clone, PartialEq)]
pub struct PodPath {
    pub pod: String,
    pub node: String,
    /// When the on-prem copy it replaces was lost (evicted, or deleted by the taint manager).
    pub lost: f64,
    pub created: f64,
    pub claim_created: f64,
    pub node_ready: f64,
    pub scheduled: f64,
    pub pulled: f64,
    /// The init container (the model's download) done: the kubelet's `Created` for the server.
    pub initialized: f64,
    pub started: f64,
    pub ready: f64,
    /// Its image was already on the node (`Pulled` "already present").
    pub cached: bool,
    /// Its node's NodeClaim was created after the pod: the pod waited for new capacity.
    pub new_node: bool,
}

impl PodPath {
    pub fn path(&self) -> f64 {
        self.ready - self.created
    }
}

/// Everything the model takes from one run's timeline.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub fault: Option<FaultKind>,
    /// Seconds after t0 of each on-prem workload pod lost, in order.
    pub losses: Vec<f64>,
    pub pods: Vec<PodPath>,
    /// The first wave: the pods lost within [`WAVE_GAP`] of the first.
    pub first_wave: usize,
    /// Each later loss after the Ready replacement that freed its budget slot.
    pub handoffs: Vec<f64>,
    pub failed_launches: usize,
    /// The image's size from the kubelet's `Pulled` message, in bytes.
    pub image_bytes: Option<f64>,
    pub instance_types: Vec<String>,
    pub fallback_nodes: usize,
    /// The configured toleration of the lost node's NoExecute taint, as the run read it.
    pub toleration_seconds: Option<f64>,
    /// Return started to the last workload pod gone from the fallback.
    pub return_seconds: Option<f64>,
}

/// Losses this close to the previous one belong to the same wave.
pub const WAVE_GAP: f64 = 2.0;

fn secs(o: &Observation, t0: u64) -> f64 {
    (o.t_ms as f64 - t0 as f64) / 1000.0
}

/// The pod's name without its namespace (`Evicted` names `ns/pod`, pod observations the bare name).
fn bare(pod: &str) -> &str {
    pod.rsplit('/').next().unwrap_or(pod)
}

/// Reads a run's timeline. `None` when it has no fault (nothing to model).
pub fn measure(obs: &[Observation]) -> Option<Measured> {
    let (t0, fault) = obs.iter().find_map(|o| match &o.event {
        Event::FaultInjected { kind, .. } => Some((o.t_ms, *kind)),
        _ => None,
    })?;
    let end = obs.iter().find(|o| matches!(o.event, Event::ReturnStarted { .. } | Event::RestoreStarted { .. }));
    let end_ms = end.map_or(u64::MAX, |o| o.t_ms);
    let window: Vec<&Observation> = obs.iter().filter(|o| o.t_ms >= t0 && o.t_ms <= end_ms).collect();
    let losses = losses(obs, &window, t0, fault);
    let pods = pod_paths(&window, t0, &losses);
    let first_wave = losses.iter().take_while(|t| **t - losses[0] <= WAVE_GAP).count();
    let mut readies: Vec<f64> = pods.iter().map(|p| p.ready).collect();
    readies.sort_by(f64::total_cmp);
    let handoffs = losses.iter().skip(first_wave).zip(&readies).map(|(lost, ready)| (lost - ready).max(0.0)).collect();
    let mut m = Measured { fault: Some(fault), losses, pods, first_wave, handoffs, ..Measured::default() };
    fill_fallback(&mut m, &window);
    m.toleration_seconds = obs
        .iter()
        .find_map(|o| match &o.event {
            Event::TolerationsRead { tolerations } => tolerations.iter().filter_map(|t| t.max_seconds).max(),
            _ => None,
        })
        .map(|s| s as f64);
    m.return_seconds = end.filter(|o| matches!(o.event, Event::ReturnStarted { .. })).and_then(|r| {
        obs.iter()
            .filter(|o| o.t_ms >= r.t_ms)
            .filter(|o| matches!(o.event, Event::PodDeleted { role: NodeRole::Fallback, .. }))
            .map(|o| secs(o, r.t_ms))
            .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.max(t))))
    });
    Some(m)
}

/// Each on-prem workload pod lost after t0: evicted by the drain, or taken by the taint manager on a lost node. The
/// drain evicts every pod of the nodes; only the workload's (the baseline's on-prem pods) count.
fn losses(obs: &[Observation], window: &[&Observation], t0: u64, fault: FaultKind) -> Vec<f64> {
    let workload: std::collections::BTreeSet<&str> = obs
        .iter()
        .find_map(|o| match &o.event {
            Event::Baseline { on_prem_pods, .. } => Some(on_prem_pods.iter().map(String::as_str).collect()),
            _ => None,
        })
        .unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for o in window {
        let pod = match (&o.event, fault) {
            (Event::Evicted { pod, .. }, FaultKind::Drain) => bare(pod),
            (Event::PodTerminating { pod, role: NodeRole::OnPrem, .. }, f) if f.loses_nodes() => pod.as_str(),
            _ => continue,
        };
        if !workload.is_empty() && !workload.contains(pod) {
            continue;
        }
        if seen.insert(pod.to_string()) {
            out.push(secs(o, t0));
        }
    }
    out
}

/// Where each replacement's milestones are found: one pass over the window.
#[derive(Default)]
struct Index {
    created: HashMap<String, f64>,
    scheduled: HashMap<String, f64>,
    claim_of_node: HashMap<String, String>,
    claim_created: HashMap<String, f64>,
    node_ready: HashMap<String, f64>,
    /// Per pod and kubelet reason (`Pulled`, `Created`, `Started`): the first time, and whether the image was cached.
    kubelet: HashMap<(String, &'static str), (f64, bool)>,
}

impl Index {
    fn of(window: &[&Observation], t0: u64) -> Index {
        let mut ix = Index::default();
        for o in window {
            let t = secs(o, t0);
            match &o.event {
                Event::PodCreated { pod } => _ = ix.created.entry(pod.clone()).or_insert(t),
                Event::PodScheduled { pod, .. } => _ = ix.scheduled.entry(pod.clone()).or_insert(t),
                Event::NodeClaimNode { nodeclaim, node } => {
                    _ = ix.claim_of_node.insert(node.clone(), nodeclaim.clone())
                }
                Event::NodeClaimCreated { nodeclaim } => _ = ix.claim_created.entry(nodeclaim.clone()).or_insert(t),
                Event::NodeReady { node, status: ConditionStatus::True, .. } => {
                    _ = ix.node_ready.entry(node.clone()).or_insert(t)
                }
                Event::KubeEvent { object, reason, message } => {
                    let Some(pod) = object.strip_prefix("Pod/") else { continue };
                    let reason: &'static str = match reason.as_str() {
                        "Pulled" => "Pulled",
                        "Created" => "Created",
                        "Started" => "Started",
                        _ => continue,
                    };
                    let cached = message.contains("already present");
                    _ = ix.kubelet.entry((pod.to_string(), reason)).or_insert((t, cached));
                }
                _ => {}
            }
        }
        ix
    }
}

/// Every pod that became Ready on a fallback node in the window, with its milestones.
fn pod_paths(window: &[&Observation], t0: u64, losses: &[f64]) -> Vec<PodPath> {
    let ix = Index::of(window, t0);
    let mut pods = Vec::new();
    for o in window {
        let Event::PodReady { pod, node, role: NodeRole::Fallback, .. } = &o.event else { continue };
        let ready = secs(o, t0);
        let Some(&created) = ix.created.get(pod) else { continue };
        let lost = losses.iter().copied().filter(|l| *l <= created + 0.001).fold(0.0, f64::max);
        let claim = ix.claim_of_node.get(node).and_then(|c| ix.claim_created.get(c)).copied();
        let new_node = claim.is_some_and(|c| c >= created);
        let mut at = created;
        let mut next = |t: Option<f64>| {
            at = t.unwrap_or(at).clamp(at, ready);
            at
        };
        let kubelet = |reason| ix.kubelet.get(&(pod.clone(), reason)).copied();
        let claim_created = next(claim.filter(|_| new_node));
        let node_ready = next(ix.node_ready.get(node).copied());
        let scheduled = next(ix.scheduled.get(pod).copied());
        let pulled = next(kubelet("Pulled").map(|k| k.0));
        let initialized = next(kubelet("Created").map(|k| k.0));
        let started = next(kubelet("Started").map(|k| k.0));
        let cached = kubelet("Pulled").is_some_and(|k| k.1);
        pods.push(PodPath {
            pod: pod.clone(),
            node: node.clone(),
            lost,
            created,
            claim_created,
            node_ready,
            scheduled,
            pulled,
            initialized,
            started,
            ready,
            cached,
            new_node,
        });
    }
    pods
}

/// The fallback's instance types, nodes, failed launches and the image's size.
fn fill_fallback(m: &mut Measured, window: &[&Observation]) {
    let mut nodes = std::collections::BTreeSet::new();
    for o in window {
        match &o.event {
            Event::NodeAdded { node, role: NodeRole::Fallback, instance_type, .. } => {
                nodes.insert(node.clone());
                if let Some(t) = instance_type.as_ref().filter(|t| !m.instance_types.contains(t)) {
                    m.instance_types.push(t.clone());
                }
            }
            Event::NodeClaimCondition {
                condition: crate::cluster::karpenter::ClaimCondition::Launched,
                status: ConditionStatus::False,
                ..
            } => m.failed_launches += 1,
            Event::KubeEvent { reason, message, .. } if reason == "Pulled" && m.image_bytes.is_none() => {
                m.image_bytes = image_size(message);
            }
            _ => {}
        }
    }
    m.fallback_nodes = nodes.len();
}

/// `... Image size: 21474836480 bytes.` in the kubelet's `Pulled` message.
fn image_size(message: &str) -> Option<f64> {
    let rest = message.split("Image size: ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn fixture() -> (crate::drill::Drill, Vec<Observation>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-drain");
        let source = std::fs::read_to_string(dir.join("drill.yaml")).unwrap();
        let drill = crate::drill::from_source(&dir.join("drill.yaml"), source).unwrap().drill;
        (drill, crate::timeline::read(&dir.join("timeline.jsonl")).unwrap())
    }

    /// The realistic drain: two waves of two, each pod 90 s of launch, 150 s of pull, 45 s of download and 90 to
    /// 240 s of load.
    #[test]
    fn the_realistic_drain_measures_two_waves_and_each_pods_milestones() {
        let (_, obs) = fixture();
        let m = measure(&obs).unwrap();
        assert_eq!((m.losses.len(), m.first_wave, m.pods.len()), (4, 2, 4));
        assert_eq!(m.handoffs.len(), 2);
        assert!(m.handoffs.iter().all(|h| (5.0..10.0).contains(h)), "{:?}", m.handoffs);
        for p in &m.pods {
            assert!(p.new_node && !p.cached, "{p:?}");
            assert!((89.0..92.0).contains(&(p.node_ready - p.claim_created)), "{p:?}");
            assert!((149.0..151.0).contains(&(p.pulled - p.scheduled)), "{p:?}");
            assert!((44.0..46.0).contains(&(p.initialized - p.pulled)), "{p:?}");
        }
        assert_eq!(m.image_bytes, Some(21474836480.0));
        assert_eq!((m.instance_types.as_slice(), m.fallback_nodes), (["g6.12xlarge".to_string()].as_slice(), 4));
        assert!(m.return_seconds.unwrap() > 0.0);
    }
}
