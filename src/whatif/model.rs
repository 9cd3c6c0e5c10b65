//! The drill's critical path as a model: each parameter with where it came from (measured in a run, read from an
//! object, or a default), and the simulation that turns them into an RTO and its phases.

use serde::Serialize;

use super::measure::{Measured, PodPath};
use super::objects::Objects;
use crate::domain::FaultKind;

/// Where a parameter's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Measured in the recorded run.
    Measured,
    /// Read from a cluster object (the budget, the Deployment, the NodePool).
    Object,
    /// Neither: a stated default.
    Default,
    /// Set by a knob.
    Knob,
}

/// One parameter of the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Param {
    pub value: f64,
    pub source: Source,
    /// What exactly it rests on, in words.
    pub basis: String,
}

impl Param {
    fn new(value: f64, source: Source, basis: impl Into<String>) -> Param {
        Param { value, source, basis: basis.into() }
    }
    pub fn measured(value: f64, basis: impl Into<String>) -> Param {
        Param::new(value, Source::Measured, basis)
    }
    pub fn object(value: f64, basis: impl Into<String>) -> Param {
        Param::new(value, Source::Object, basis)
    }
    pub fn default(value: f64, basis: impl Into<String>) -> Param {
        Param::new(value, Source::Default, basis)
    }
    pub fn knob(value: f64, basis: impl Into<String>) -> Param {
        Param::new(value, Source::Knob, basis)
    }
}

/// The parameters of one drill's critical path. Times in seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model {
    pub fault: FaultKind,
    /// Workload pods the fault displaces to the fallback.
    pub pods: Param,
    /// Ready pods that restore the service.
    pub ready_needed: Param,
    /// Pods the PodDisruptionBudget lets go at once (a drain).
    pub wave_size: Param,
    /// t0 to the first pod lost: the drain's first eviction, or detection + taint + toleration on a lost node.
    pub first_loss: Param,
    /// For a lost node: the node lifecycle controller's detection (t0 to NotReady or Unknown, plus its taint).
    pub detection: Param,
    /// For a lost node: the pods' tolerationSeconds of the NoExecute taint.
    pub toleration: Param,
    /// A replacement Ready to the next eviction its budget slot allows.
    pub handoff: Param,
    /// A pod lost to its replacement created.
    pub replace: Param,
    /// Replacement created to its node's NodeClaim created (Karpenter's batching).
    pub pending: Param,
    /// NodeClaim created to the node Ready (launch, registration, initialization).
    pub provisioning: Param,
    /// Extra seconds of failed launches and their fall-through to another type or zone.
    pub failed_launch: Param,
    pub scheduling: Param,
    pub image_pull: Param,
    /// The model weights' download (the init container).
    pub weights: Param,
    pub start: Param,
    /// Container started to Ready: the model's load into GPU memory.
    pub load: Param,
    /// The slowest pod of a wave over the wave's mean path: what the last pod adds.
    pub spread: Param,
    /// The quickest and slowest pod path measured, as factors of the mean path: the interval.
    pub path_low: Param,
    pub path_high: Param,
    pub pods_per_node: Param,
    pub warm_nodes: Param,
    /// Return started to the last workload pod gone from the fallback.
    pub return_seconds: Param,
    pub consolidate_after: Param,
    /// Reclaim beyond the return and consolidateAfter: Karpenter's validation and the node's deletion.
    pub reclaim_rest: Param,
    pub instance_type: Option<String>,
    pub image_bytes: Option<f64>,
}

/// What the model predicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub rto_seconds: f64,
    pub low_seconds: f64,
    pub high_seconds: f64,
    pub waves: u32,
    /// The last restoring pod's path, phase by phase (the report's names).
    pub phases: Vec<PhaseSeconds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaim_seconds: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseSeconds {
    pub phase: String,
    pub seconds: f64,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// A mean over the pods measured, or the default.
fn per_pod(pods: &[PodPath], f: impl Fn(&PodPath) -> f64, what: &str, default: Param) -> Param {
    match mean(pods.iter().map(f)) {
        Some(v) => Param::measured(v, format!("mean {what} of {} replacement pods", pods.len())),
        None => default,
    }
}

/// Defaults when a run did not show a value: EKS and Karpenter's documented behaviour, stated as such.
mod defaults {
    use super::Param;
    pub fn handoff() -> Param {
        Param::default(1.0, "the budget's status update and the drain's watch of it: about a second")
    }
    pub fn toleration() -> Param {
        Param::default(300.0, "the DefaultTolerationSeconds admission default, 300 s")
    }
    pub fn consolidate_after() -> Param {
        Param::default(0.0, "not recorded by this run; Karpenter's default 0s")
    }
}

impl Model {
    /// The model of a run: what it measured, what the objects said, defaults for the rest.
    // Long: one line per parameter, each naming its source; split, the sources would scatter.
    pub fn from_run(m: &Measured, objects: &Objects, ready_needed: Option<u32>, reclaim: Option<f64>) -> Model {
        let fault = m.fault.unwrap_or(FaultKind::Drain);
        let pods = m.pods.as_slice();
        let lost = m.losses.len().max(pods.len()) as f64;
        let pods_param = Param::measured(lost, "workload pods lost from on-prem in the run");
        let wave_size = match objects.wave_size(lost as u32) {
            Some(w) => Param::object(f64::from(w), budget_basis(objects)),
            None => Param::measured(m.first_wave.max(1) as f64, "pods evicted in the run's first wave"),
        };
        let ready_needed = match ready_needed {
            Some(n) => Param::object(f64::from(n), "the drill's restoredWhen.readyPods"),
            None => Param::default(lost, "every displaced pod Ready"),
        };
        let first = m.losses.first().copied().unwrap_or(0.0);
        let toleration = match (objects.toleration_seconds, m.toleration_seconds) {
            (Some(s), _) => Param::object(f64::from(s), "the Deployment's tolerationSeconds"),
            (None, Some(s)) => Param::measured(s, "the pods' tolerationSeconds as the run read them"),
            _ => defaults::toleration(),
        };
        let detection = if fault.loses_nodes() {
            Param::measured((first - toleration.value).max(0.0), "t0 to the first pod lost, less tolerationSeconds")
        } else {
            Param::measured(0.0, "a drain evicts at once: no detection")
        };
        let p = |f: fn(&PodPath) -> f64, what: &str| per_pod(pods, f, what, Param::default(0.0, "not seen"));
        let new_nodes: Vec<PodPath> = pods.iter().filter(|p| p.new_node).cloned().collect();
        let pulled: Vec<PodPath> = pods.iter().filter(|p| !p.cached).cloned().collect();
        let paths: Vec<f64> = pods.iter().map(PodPath::path).collect();
        let nodes = m.fallback_nodes.max(1) as f64;
        Model {
            fault,
            pods: pods_param,
            ready_needed,
            wave_size,
            first_loss: Param::measured(first, "t0 to the first workload pod lost"),
            detection,
            toleration,
            handoff: match mean(m.handoffs.iter().copied()) {
                Some(h) => Param::measured(h, format!("mean of {} hand-offs between waves", m.handoffs.len())),
                None => defaults::handoff(),
            },
            replace: p(|p| p.created - p.lost, "loss to replacement created"),
            pending: per_pod(&new_nodes, |p| p.claim_created - p.created, "created to NodeClaim", {
                Param::measured(0.0, "no pod waited for a new node")
            }),
            provisioning: per_pod(&new_nodes, |p| p.node_ready - p.claim_created, "NodeClaim to node Ready", {
                Param::default(0.0, "no pod waited for a new node")
            }),
            failed_launch: Param::measured(0.0, format!("{} failed launches seen", m.failed_launches)),
            scheduling: p(|p| p.scheduled - p.node_ready, "node Ready to bound"),
            image_pull: per_pod(&pulled, |p| p.pulled - p.scheduled, "image pull", {
                Param::measured(0.0, "the image was already present on every node")
            }),
            weights: p(|p| p.initialized - p.pulled, "model download (init container)"),
            start: p(|p| p.started - p.initialized, "container start"),
            load: p(|p| p.ready - p.started, "model load to Ready"),
            spread: Param::measured(wave_spread(m), "mean over waves of the slowest pod's path over the wave's mean"),
            path_low: factor(&paths, f64::min, "the quickest pod's path over the mean path"),
            path_high: factor(&paths, f64::max, "the slowest pod's path over the mean path"),
            pods_per_node: Param::measured((pods.len() as f64 / nodes).max(1.0), "replacement pods per fallback node"),
            warm_nodes: Param::measured(0.0, "no fallback node before the fault"),
            return_seconds: match m.return_seconds {
                Some(s) => Param::measured(s, "return started to the last workload pod gone from the fallback"),
                None => Param::default(0.0, "the run did not return"),
            },
            consolidate_after: match objects.consolidate_after_seconds {
                Some(s) => Param::object(s, "the NodePool's consolidateAfter"),
                None => defaults::consolidate_after(),
            },
            reclaim_rest: Param::default(0.0, "not measured"),
            instance_type: m.instance_types.first().cloned(),
            image_bytes: m.image_bytes,
        }
        .with_failed_launches(m)
        .with_reclaim(reclaim)
    }

    /// Failed launches show as a longer pending for the pods that waited through them: the part over the quickest
    /// pod's pending is theirs.
    fn with_failed_launches(mut self, m: &Measured) -> Model {
        let pending: Vec<f64> = m.pods.iter().filter(|p| p.new_node).map(|p| p.claim_created - p.created).collect();
        let quickest = pending.iter().copied().reduce(f64::min);
        if let (true, Some(quickest)) = (m.failed_launches > 0, quickest) {
            let extra = self.pending.value - quickest;
            self.failed_launch = Param::measured(
                extra,
                format!("{} failed launches: the mean pending over the quickest", m.failed_launches),
            );
            self.pending = Param::measured(quickest, "the quickest pod's created to NodeClaim");
        }
        self
    }

    fn with_reclaim(mut self, reclaim: Option<f64>) -> Model {
        if let Some(r) = reclaim {
            let rest = r - self.return_seconds.value - self.consolidate_after.value;
            self.reclaim_rest = Param::measured(rest.max(0.0), "measured reclaim less the return and consolidateAfter");
        }
        self
    }

    /// Every parameter by name, for the table of where each came from.
    pub fn params(&self) -> Vec<(&'static str, &Param)> {
        vec![
            ("pods", &self.pods),
            ("ready-needed", &self.ready_needed),
            ("wave-size", &self.wave_size),
            ("first-loss", &self.first_loss),
            ("detection", &self.detection),
            ("toleration", &self.toleration),
            ("handoff", &self.handoff),
            ("replace", &self.replace),
            ("pending", &self.pending),
            ("provisioning", &self.provisioning),
            ("failed-launch", &self.failed_launch),
            ("scheduling", &self.scheduling),
            ("image-pull", &self.image_pull),
            ("weights", &self.weights),
            ("start", &self.start),
            ("load", &self.load),
            ("spread", &self.spread),
            ("path-low", &self.path_low),
            ("path-high", &self.path_high),
            ("pods-per-node", &self.pods_per_node),
            ("warm-nodes", &self.warm_nodes),
            ("return", &self.return_seconds),
            ("consolidate-after", &self.consolidate_after),
            ("reclaim-rest", &self.reclaim_rest),
        ]
    }

    /// The path of a pod that waits for a new node, and of one that lands on a warm node.
    fn paths(&self) -> (f64, f64) {
        let startup = self.image_pull.value + self.weights.value + self.start.value + self.load.value;
        let cold = self.pending.value + self.provisioning.value + self.failed_launch.value + self.scheduling.value;
        (self.replace.value + cold + startup, self.replace.value + self.scheduling.value + startup)
    }

    /// The RTO and the last pod's phases, by simulating the budget's slots pod by pod.
    pub fn predict(&self) -> Prediction {
        let (cold, warm) = self.paths();
        let rto = self.simulate(cold, warm, self.spread.value);
        let (low, high) = (self.path_low.value.min(1.0), self.path_high.value.max(1.0));
        let low = self.simulate(cold * low, warm * low, 0.0);
        let high = self.simulate(cold * high, warm * high, 0.0).max(rto);
        let pods = self.pods.value.round().max(1.0) as u32;
        let waves = if self.fault.loses_nodes() { 1 } else { pods.div_ceil(self.slots()) };
        let reclaim = (self.return_seconds.source != Source::Default || self.reclaim_rest.source == Source::Measured)
            .then_some(self.return_seconds.value + self.consolidate_after.value + self.reclaim_rest.value);
        Prediction {
            rto_seconds: rto,
            low_seconds: low.min(rto),
            high_seconds: high,
            waves,
            phases: self.phases(rto, cold, warm),
            reclaim_seconds: reclaim,
        }
    }

    fn slots(&self) -> u32 {
        if self.fault.loses_nodes() {
            return self.pods.value.round().max(1.0) as u32;
        }
        (self.wave_size.value.round() as u32).clamp(1, self.pods.value.round().max(1.0) as u32)
    }

    /// The first lost pod's time after t0: for a lost node from detection and toleration, so a knob on either moves it.
    fn first_loss(&self) -> f64 {
        if self.fault.loses_nodes() { self.detection.value + self.toleration.value } else { self.first_loss.value }
    }

    /// Pod by pod through the budget's slots: each slot's next pod goes a hand-off after its previous replacement
    /// is Ready. The service is restored when the Ready pods (on-prem ones not yet lost, replacements Ready) reach
    /// the count needed, for the last time. The last replacement's extra `spread` goes to the pods of the last wave.
    fn simulate(&self, cold: f64, warm: f64, spread: f64) -> f64 {
        let pods = self.pods.value.round().max(0.0) as usize;
        let slots = self.slots() as usize;
        let warm_capacity = (self.warm_nodes.value * self.pods_per_node.value).round() as usize;
        let last_wave_from = pods.saturating_sub(slots.min(pods).max(1));
        let mut slot_free = vec![self.first_loss(); slots.max(1)];
        let mut events: Vec<(f64, i32)> = Vec::with_capacity(pods * 2);
        for i in 0..pods {
            let slot = i % slots.max(1);
            let lost = slot_free[slot];
            let path = if i < warm_capacity { warm } else { cold };
            let ready = lost + path + if i >= last_wave_from { spread } else { 0.0 };
            slot_free[slot] = ready + self.handoff.value;
            events.push((lost, -1));
            events.push((ready, 1));
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let needed = self.ready_needed.value.round() as i64;
        // Replicas the fault did not displace count too; the run shows at least as many as it needs.
        let (mut ready, mut restored, mut lost) = ((pods as i64).max(needed), 0.0, false);
        for (t, change) in events {
            ready += i64::from(change);
            if ready < needed {
                lost = true;
            } else if lost {
                (restored, lost) = (t, false);
            }
        }
        restored
    }

    /// The last restoring pod's path as the report cuts it.
    fn phases(&self, rto: f64, cold: f64, warm: f64) -> Vec<PhaseSeconds> {
        let all_warm = (self.warm_nodes.value * self.pods_per_node.value).round() >= self.pods.value;
        let startup = self.image_pull.value + self.weights.value + self.start.value + self.load.value;
        let path = if all_warm { warm } else { cold };
        let eviction = (rto - path - self.spread.value).max(0.0) + self.replace.value;
        let mut out = vec![("eviction", eviction)];
        if !all_warm {
            out.push(("pending", self.pending.value));
            out.push(("provisioning", self.provisioning.value + self.failed_launch.value));
        }
        out.extend([
            ("scheduling", self.scheduling.value),
            ("startup", startup + self.spread.value),
            ("image-pull", self.image_pull.value),
            ("load", self.weights.value + self.start.value + self.load.value + self.spread.value),
            ("rto", rto),
        ]);
        if self.fault.loses_nodes() {
            out.insert(0, ("detection", self.detection.value));
            out.insert(1, ("toleration", self.toleration.value));
        }
        out.into_iter().map(|(phase, seconds)| PhaseSeconds { phase: phase.into(), seconds }).collect()
    }
}

/// The quickest (or slowest) path as a factor of the mean; 1 when nothing was measured.
fn factor(paths: &[f64], pick: fn(f64, f64) -> f64, basis: &str) -> Param {
    match mean(paths.iter().copied()).filter(|m| *m > 0.0) {
        Some(m) => Param::measured(paths.iter().copied().reduce(pick).unwrap_or(m) / m, basis),
        None => Param::default(1.0, "no pod path measured"),
    }
}

fn budget_basis(objects: &Objects) -> String {
    let name = objects.pdb.as_deref().unwrap_or("the workload's PodDisruptionBudget");
    match (&objects.max_unavailable, &objects.min_available) {
        (Some(m), _) => format!("{name} maxUnavailable {m}"),
        (None, Some(m)) => format!("{name} minAvailable {m}"),
        _ => format!("{name}: disruptionsAllowed"),
    }
}

/// The mean over waves (replacements created within [`super::measure::WAVE_GAP`] of each other) of the slowest
/// path over the wave's mean path.
fn wave_spread(m: &Measured) -> f64 {
    let mut pods: Vec<&PodPath> = m.pods.iter().collect();
    pods.sort_by(|a, b| a.created.total_cmp(&b.created));
    let mut waves: Vec<Vec<f64>> = Vec::new();
    let mut last = f64::MIN;
    for p in pods {
        if p.created - last > super::measure::WAVE_GAP || waves.is_empty() {
            waves.push(Vec::new());
        }
        last = p.created;
        waves.last_mut().map(|w| w.push(p.path())).unwrap_or_default();
    }
    mean(waves.iter().map(|w| {
        let avg = w.iter().sum::<f64>() / w.len() as f64;
        w.iter().copied().fold(f64::MIN, f64::max) - avg
    }))
    .unwrap_or(0.0)
}
