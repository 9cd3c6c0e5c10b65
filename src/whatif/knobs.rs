//! The knobs an SRE can turn after a drill, what each does to the model, what it costs a month, and their ranking
//! by RTO minutes saved per dollar.

use serde::Serialize;

use super::model::{Model, Param, PhaseSeconds};

/// Hours in a month, as cloud price sheets count them.
pub const HOURS_PER_MONTH: f64 = 730.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    MaxUnavailable,
    MinAvailable,
    TolerationSeconds,
    WarmNodes,
    ImageCached,
    WeightsCached,
    InstanceTypes,
    ConsolidateAfter,
    Replicas,
}

impl Knob {
    pub const ALL: [Knob; 9] = [
        Knob::MaxUnavailable,
        Knob::MinAvailable,
        Knob::TolerationSeconds,
        Knob::WarmNodes,
        Knob::ImageCached,
        Knob::WeightsCached,
        Knob::InstanceTypes,
        Knob::ConsolidateAfter,
        Knob::Replicas,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Knob::MaxUnavailable => "pdb.max-unavailable",
            Knob::MinAvailable => "pdb.min-available",
            Knob::TolerationSeconds => "toleration-seconds",
            Knob::WarmNodes => "warm-nodes",
            Knob::ImageCached => "image-cached",
            Knob::WeightsCached => "weights-cached",
            Knob::InstanceTypes => "instance-types",
            Knob::ConsolidateAfter => "consolidate-after",
            Knob::Replicas => "replicas",
        }
    }

    fn is_flag(self) -> bool {
        matches!(self, Knob::ImageCached | Knob::WeightsCached)
    }

    fn is_duration(self) -> bool {
        matches!(self, Knob::TolerationSeconds | Knob::ConsolidateAfter)
    }
}

/// Why a `--set` was refused.
#[derive(Debug, thiserror::Error)]
pub enum KnobError {
    #[error("`{0}` is not KNOB=VALUE")]
    Shape(String),
    #[error("no knob `{name}`; the knobs are {known}")]
    Unknown { name: String, known: String },
    #[error("{knob}: `{value}` {expected}")]
    Value { knob: &'static str, value: String, expected: &'static str },
}

/// A knob at a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub knob: Knob,
    pub value: f64,
}

impl Setting {
    /// `pdb.max-unavailable=2`, `toleration-seconds=30s`, `image-cached=true`.
    pub fn parse(text: &str) -> Result<Setting, KnobError> {
        let (name, value) = text.split_once('=').ok_or_else(|| KnobError::Shape(text.into()))?;
        let knob = Knob::ALL
            .into_iter()
            .find(|k| k.name() == name.trim())
            .ok_or_else(|| KnobError::Unknown { name: name.into(), known: Knob::ALL.map(Knob::name).join(", ") })?;
        let value = value.trim();
        let bad = |expected| KnobError::Value { knob: knob.name(), value: value.into(), expected };
        let value = if knob.is_flag() {
            match value {
                "true" => 1.0,
                "false" => 0.0,
                _ => return Err(bad("is not true or false")),
            }
        } else if knob.is_duration() {
            match value.parse::<f64>() {
                Ok(s) if s >= 0.0 => s,
                _ => {
                    crate::drill::duration::parse(value).map_err(|_| bad("is not a duration (30s, 5m)"))?.as_secs_f64()
                }
            }
        } else {
            value.parse::<u32>().map_err(|_| bad("is not a whole number"))?.into()
        };
        Ok(Setting { knob, value })
    }

    pub fn value_text(&self) -> String {
        if self.knob.is_flag() {
            (self.value != 0.0).to_string()
        } else if self.knob.is_duration() {
            format!("{}s", self.value)
        } else {
            format!("{}", self.value)
        }
    }

    /// The model with this knob turned, and what the result assumes.
    pub fn apply(&self, model: &Model) -> (Model, Vec<String>) {
        let mut m = model.clone();
        let mut assume = Vec::new();
        let v = self.value;
        let basis = format!("{}={}", self.knob.name(), self.value_text());
        match self.knob {
            Knob::MaxUnavailable => {
                m.wave_size = Param::knob(v.max(1.0), &basis);
                assume.push("the budget's other pods stay healthy during the drain".into());
            }
            Knob::MinAvailable => {
                if v >= m.pods.value {
                    assume.push("minAvailable at the replicas blocks every eviction; counted as one at a time".into());
                }
                m.wave_size = Param::knob((m.pods.value - v).max(1.0), &basis);
            }
            Knob::TolerationSeconds => {
                if !m.fault.loses_nodes() {
                    assume.push(
                        "a drain evicts through the Eviction API: tolerations only delay a lost node's pods".into(),
                    );
                }
                m.toleration = Param::knob(v, &basis);
            }
            Knob::WarmNodes => {
                m.warm_nodes = Param::knob(v, &basis);
                assume.push(format!(
                    "each warm node holds {} pods and has not pulled the image unless image-cached is set too",
                    m.pods_per_node.value
                ));
            }
            Knob::ImageCached => {
                if v != 0.0 {
                    m.image_pull = Param::knob(0.0, &basis);
                    assume.push("the image is on every fallback node at boot (a snapshot or the node image)".into());
                }
            }
            Knob::WeightsCached => {
                if v != 0.0 {
                    m.weights = Param::knob(0.0, &basis);
                    assume.push("the download becomes a local read; the load into GPU memory stays".into());
                }
            }
            Knob::InstanceTypes => {
                assume.push(format!(
                    "another type or zone takes over at once when one has no capacity (the run: {})",
                    m.failed_launch.basis
                ));
                m.failed_launch = Param::knob(0.0, &basis);
            }
            Knob::ConsolidateAfter => {
                m.consolidate_after = Param::knob(v, &basis);
                assume.push("changes the reclaim and the fallback's GPU-hours, not the RTO".into());
            }
            Knob::Replicas => {
                m.pods = Param::knob(v.max(1.0), &basis);
                assume.push("every replica runs on-prem before the fault; readyPods stays as the drill says".into());
            }
        }
        (m, assume)
    }
}

/// What a month of a knob costs, from the drill's `pricing` and the storage price given.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    /// The fallback's instance type's $/hour (the drill's `pricing`).
    pub hourly: Option<f64>,
    /// $ per GB-month of a snapshot or cache volume (`--storage-price`).
    pub storage_gb_month: Option<f64>,
    /// The model weights' size in GB (`--weights-gb`).
    pub weights_gb: Option<f64>,
}

/// What the knob costs a month; `None` when the prices given cannot say.
pub fn monthly_cost(setting: &Setting, model: &Model, prices: &Prices) -> Option<f64> {
    let v = setting.value;
    match setting.knob {
        Knob::MaxUnavailable | Knob::MinAvailable | Knob::TolerationSeconds | Knob::ConsolidateAfter => Some(0.0),
        Knob::InstanceTypes => Some(0.0),
        Knob::WarmNodes => prices.hourly.map(|h| h * HOURS_PER_MONTH * v),
        Knob::ImageCached if v == 0.0 => Some(0.0),
        Knob::ImageCached => Some(model.image_bytes? / 1e9 * prices.storage_gb_month?),
        Knob::WeightsCached if v == 0.0 => Some(0.0),
        Knob::WeightsCached => Some(prices.weights_gb? * prices.storage_gb_month?),
        Knob::Replicas if v <= model.pods.value => Some(0.0),
        Knob::Replicas => None,
    }
}

/// One knob's outcome: the JSON `knobs[]` element.
#[derive(Debug, Clone, Serialize)]
pub struct KnobResult {
    pub name: String,
    pub value: String,
    pub rto_seconds: f64,
    pub delta_seconds: f64,
    pub monthly_cost: Option<f64>,
    /// RTO minutes saved per dollar a month; absent when free or unpriced.
    pub minutes_saved_per_dollar: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaim_seconds: Option<f64>,
    pub phases: Vec<PhaseSeconds>,
    pub assumptions: Vec<String>,
}

/// The model's prediction under some settings, against the baseline's RTO.
pub fn evaluate(model: &Model, settings: &[Setting], baseline: f64, prices: &Prices) -> KnobResult {
    let mut m = model.clone();
    let mut assumptions = Vec::new();
    let mut cost = Some(0.0);
    for s in settings {
        let (next, assume) = s.apply(&m);
        cost = cost.zip(monthly_cost(s, &m, prices)).map(|(a, b)| a + b);
        m = next;
        assumptions.extend(assume);
    }
    if cost.is_none() {
        assumptions.push("its monthly cost needs prices the drill's pricing and the flags do not give".into());
    }
    let p = m.predict();
    let delta = p.rto_seconds - baseline;
    let per_dollar = cost.filter(|c| *c > 0.0 && delta < 0.0).map(|c| -delta / 60.0 / c);
    KnobResult {
        name: settings.iter().map(|s| s.knob.name()).collect::<Vec<_>>().join("+"),
        value: settings.iter().map(Setting::value_text).collect::<Vec<_>>().join("+"),
        rto_seconds: p.rto_seconds,
        delta_seconds: delta,
        monthly_cost: cost,
        minutes_saved_per_dollar: per_dollar,
        reclaim_seconds: p.reclaim_seconds,
        phases: p.phases,
        assumptions,
    }
}

/// Each knob turned on its own, one step the way that shortens the RTO.
pub fn candidates(model: &Model) -> Vec<Setting> {
    let pods = model.pods.value.round().max(1.0);
    let wave = model.wave_size.value.round().max(1.0);
    // The smallest budget that saves a wave: one wave fewer, however many pods that lets go at once.
    let waves = (pods / wave).ceil();
    let next_wave = if waves > 1.0 { (pods / (waves - 1.0)).ceil() } else { pods };
    let toleration = if model.toleration.value > 60.0 { 60.0 } else { (model.toleration.value / 2.0).round() };
    let consolidate = if model.consolidate_after.value > 60.0 { 60.0 } else { model.consolidate_after.value / 2.0 };
    let s = |knob, value| Setting { knob, value };
    let mut all = vec![
        s(Knob::MaxUnavailable, next_wave),
        s(Knob::MinAvailable, pods - next_wave),
        s(Knob::TolerationSeconds, toleration),
        s(Knob::WarmNodes, (wave / model.pods_per_node.value).ceil().max(1.0)),
        s(Knob::ImageCached, 1.0),
        s(Knob::WeightsCached, 1.0),
        s(Knob::InstanceTypes, 2.0),
        s(Knob::ConsolidateAfter, consolidate),
        s(Knob::Replicas, pods + 1.0),
    ];
    // Nothing to shorten when the NodePool already reclaims at once (or its setting is not known).
    all.retain(|k| k.knob != Knob::ConsolidateAfter || model.consolidate_after.value > 0.0);
    all
}

/// Free savings first (largest first), then priced ones by minutes saved per dollar, then unpriced savings, then
/// what saves nothing.
pub fn rank(results: &mut [KnobResult]) {
    let class = |r: &KnobResult| match (r.delta_seconds < -0.05, r.monthly_cost) {
        (true, Some(c)) if c <= 0.0 => 0,
        (true, Some(_)) => 1,
        (true, None) => 2,
        (false, _) => 3,
    };
    results.sort_by(|a, b| {
        class(a).cmp(&class(b)).then_with(|| match class(a) {
            1 => b.minutes_saved_per_dollar.unwrap_or(0.0).total_cmp(&a.minutes_saved_per_dollar.unwrap_or(0.0)),
            _ => a.delta_seconds.total_cmp(&b.delta_seconds),
        })
    });
}
