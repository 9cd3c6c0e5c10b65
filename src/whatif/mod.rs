//! What the RTO would be: a model of a drill's critical path built from a recorded run (`measure`, `model`), the
//! knobs that change it and what they cost (`knobs`), the forecast before a drill (`forecast`) from the cluster's
//! objects (`objects`) and the drill's earlier runs, and their tables (`render`).

pub mod forecast;
pub mod knobs;
pub mod measure;
pub mod model;
pub mod objects;
pub mod render;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::domain::PhaseId;
use crate::drill::{Drill, ReadyPods};
use crate::timeline::Observation;
pub use forecast::{Forecast, ForecastCheck};
pub use knobs::{KnobError, KnobResult, Prices, Setting};
pub use model::{Model, Param, Prediction, Source};
pub use objects::Objects;

/// Why a run could not be modelled.
#[derive(Debug, thiserror::Error)]
pub enum WhatifError {
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid drill (run `hybrid-drill validate` on it)")]
    Drill { path: String },
    #[error("{path}: the run injected no fault, so there is no critical path to model")]
    NoFault { path: String },
    #[error("no earlier run of drill `{drill}` under {dir} with a measured RTO: run the drill once, then predict")]
    NoHistory { drill: String, dir: String },
}

/// A recorded run, modelled.
#[derive(Debug, Clone)]
pub struct RunModel {
    pub dir: PathBuf,
    pub drill: Drill,
    pub model: Model,
    /// The objects the run recorded before its fault (its forecast.json), or none.
    pub objects: Objects,
    pub measured_rto: Option<f64>,
    pub measured_reclaim: Option<f64>,
    /// The profile the run's cluster carried (the lab's `fast` or `realistic`), and its identity.
    pub cluster: Option<crate::cluster::ObservedCluster>,
}

/// The Ready pods that restore the service, as a number out of `pods`.
fn ready_needed(drill: &Drill, pods: usize) -> Option<u32> {
    match drill.spec.targets.workload.restored_when.ready_pods {
        ReadyPods::Count(n) => Some(n),
        ReadyPods::Share(pct) => Some((pct / 100.0 * pods as f64).ceil() as u32),
    }
}

/// Reads a run directory (drill.yaml, timeline.jsonl, forecast.json if any) into its model.
pub fn load_run(dir: &Path) -> Result<RunModel, WhatifError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|source| WhatifError::Read { path: path.display().to_string(), source })
    };
    let drill_path = dir.join("drill.yaml");
    let drill = crate::drill::from_source(&drill_path, read("drill.yaml")?)
        .map_err(|_| WhatifError::Drill { path: drill_path.display().to_string() })?
        .drill;
    let timeline = dir.join("timeline.jsonl");
    let obs = crate::timeline::read(&timeline)
        .map_err(|source| WhatifError::Read { path: timeline.display().to_string(), source })?;
    let objects = forecast::read(dir).map(|f| f.objects).unwrap_or_default();
    model_of(dir, drill, &obs, objects)
}

/// The model of a run from its drill, its timeline and the objects it recorded.
pub fn model_of(dir: &Path, drill: Drill, obs: &[Observation], objects: Objects) -> Result<RunModel, WhatifError> {
    let measured = measure::measure(obs).ok_or_else(|| WhatifError::NoFault { path: dir.display().to_string() })?;
    let analysis = crate::phases::analyse(&drill, obs);
    let secs = |id: PhaseId| analysis.phase(id).and_then(|p| p.seconds);
    let pods = measured.losses.len().max(measured.pods.len());
    let model = Model::from_run(&measured, &objects, ready_needed(&drill, pods), secs(PhaseId::Reclaim));
    Ok(RunModel {
        dir: dir.to_path_buf(),
        model,
        objects,
        measured_rto: secs(PhaseId::Rto),
        measured_reclaim: secs(PhaseId::Reclaim),
        cluster: crate::cluster::ObservedCluster::read(dir),
        drill,
    })
}

/// `hybrid-drill whatif`'s answer: the run's model and each knob's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct WhatIf {
    pub run_dir: String,
    pub drill: String,
    pub measured_rto_seconds: Option<f64>,
    pub measured_reclaim_seconds: Option<f64>,
    /// The model of the run as it was, before any knob.
    pub baseline: Prediction,
    pub parameters: Vec<NamedParam>,
    /// Each knob on its own, ranked by RTO minutes saved per dollar.
    pub knobs: Vec<KnobResult>,
    /// The `--set` knobs together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub combination: Option<KnobResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NamedParam {
    pub name: &'static str,
    #[serde(flatten)]
    pub param: Param,
}

/// The drill's `pricing` for the run's instance type, with the storage prices given.
pub fn prices(run: &RunModel, storage_gb_month: Option<f64>, weights_gb: Option<f64>) -> Prices {
    let pricing = &run.drill.spec.pricing;
    let hourly = run.model.instance_type.as_ref().and_then(|t| pricing.get(t).copied());
    Prices { hourly: hourly.or_else(|| pricing.values().copied().reduce(f64::min)), storage_gb_month, weights_gb }
}

/// Every knob on its own, and the `--set` ones together.
pub fn what_if(run: &RunModel, set: &[Setting], prices: &Prices) -> WhatIf {
    let baseline = run.model.predict();
    let mut knobs: Vec<KnobResult> = knobs::candidates(&run.model)
        .into_iter()
        .map(|s| knobs::evaluate(&run.model, &[s], baseline.rto_seconds, prices))
        .collect();
    knobs::rank(&mut knobs);
    let combination = (!set.is_empty()).then(|| knobs::evaluate(&run.model, set, baseline.rto_seconds, prices));
    WhatIf {
        run_dir: run.dir.display().to_string(),
        drill: run.drill.metadata.name.clone(),
        measured_rto_seconds: run.measured_rto,
        measured_reclaim_seconds: run.measured_reclaim,
        parameters: run.model.params().into_iter().map(|(name, p)| NamedParam { name, param: p.clone() }).collect(),
        baseline,
        knobs,
        combination,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The drain drill recorded on the lab's realistic profile.
    pub(crate) fn realistic() -> RunModel {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-drain");
        load_run(&dir).unwrap()
    }

    /// The model holds the run it was built from: two waves of the budget's two, the RTO within 3%.
    #[test]
    fn the_model_of_the_realistic_drain_predicts_its_own_rto() {
        let run = realistic();
        let measured = run.measured_rto.unwrap();
        let p = run.model.predict();
        assert_eq!(p.waves, 2);
        assert!((p.rto_seconds - measured).abs() / measured < 0.03, "{} vs {measured}", p.rto_seconds);
        assert!(p.low_seconds <= measured && measured <= p.high_seconds, "{p:?}");
        assert_eq!(run.model.wave_size.source, Source::Measured);
        assert_eq!(run.model.ready_needed.source, Source::Object);
    }

    /// A budget allowing all four at once halves the RTO; pre-caching the image takes the pull off each wave.
    #[test]
    fn a_wider_budget_and_a_cached_image_cut_what_the_issue_says() {
        let run = realistic();
        let base = run.model.predict().rto_seconds;
        let p = |s: &str| knobs::evaluate(&run.model, &[Setting::parse(s).unwrap()], base, &prices(&run, None, None));
        let wide = p("pdb.max-unavailable=4");
        assert!((wide.rto_seconds - base / 2.0).abs() < 30.0, "{} vs {base}", wide.rto_seconds);
        let cached = p("image-cached=true");
        assert!((cached.delta_seconds + 300.0).abs() < 5.0, "two pulls of 150 s: {}", cached.delta_seconds);
        assert_eq!(cached.monthly_cost, None, "no storage price given");
        let warm = p("warm-nodes=2");
        assert!((warm.monthly_cost.unwrap() - 2.0 * 4.60 * 730.0).abs() < 0.01);
        assert!(warm.delta_seconds < -80.0, "{}", warm.delta_seconds);
        let tolerations = p("toleration-seconds=30");
        assert_eq!(tolerations.delta_seconds, 0.0, "a drain ignores tolerations");
        let faster_reclaim = p("consolidate-after=60s");
        assert_eq!(faster_reclaim.delta_seconds, 0.0);
    }

    #[test]
    fn knobs_rank_free_savings_first_then_minutes_per_dollar() {
        let run = realistic();
        let w = what_if(&run, &[], &prices(&run, Some(0.05), Some(140.0)));
        let names: Vec<&str> = w.knobs.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names[0], "pdb.max-unavailable", "{names:?}");
        let priced: Vec<f64> = w.knobs.iter().filter_map(|k| k.minutes_saved_per_dollar).collect();
        assert!(priced.windows(2).all(|w| w[0] >= w[1]), "{priced:?}");
        assert!(w.knobs.iter().all(|k| k.monthly_cost.is_some() || k.name == "replicas"));
    }

    #[test]
    fn a_set_is_read_or_refused_with_the_knobs_named() {
        assert_eq!(Setting::parse("toleration-seconds=30s").unwrap().value, 30.0);
        assert_eq!(Setting::parse("consolidate-after=5m").unwrap().value, 300.0);
        assert_eq!(Setting::parse("image-cached=true").unwrap().value, 1.0);
        let e = Setting::parse("pdb.max=2").unwrap_err().to_string();
        assert!(e.contains("pdb.max-unavailable"), "{e}");
        assert!(Setting::parse("replicas=two").is_err());
        assert!(Setting::parse("replicas").is_err());
    }
}
