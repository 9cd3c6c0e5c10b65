//! The forecast before a drill: the model of the drill's latest run on this cluster with today's objects, an interval
//! widened by how far the model missed each earlier run, recorded in the run directory (forecast.json) and checked
//! against what the run measured.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::model::{Model, Param};
use super::{Objects, RunModel};
use crate::cluster::ObservedCluster;
use crate::drill::Drill;

pub const FILE: &str = "forecast.json";
pub const SCHEMA: &str = "hybrid-drill.io/forecast/v1";

/// Timing noise no single run shows (Karpenter's batching window, the watches' latency): the interval is at least
/// this wide on each side, in seconds plus a share of the forecast.
pub const FLOOR_SECONDS: f64 = 2.0;
pub const FLOOR_SHARE: f64 = 0.10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub seconds: f64,
    pub low_seconds: f64,
    pub high_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseForecast {
    pub phase: String,
    #[serde(flatten)]
    pub interval: Interval,
}

/// forecast.json, and `hybrid-drill predict -o json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forecast {
    pub schema: String,
    pub drill: String,
    pub made_at: DateTime<Utc>,
    /// The cluster's objects as read before the drill.
    pub objects: Objects,
    /// The earlier runs the forecast rests on, oldest first; the model is the last one's.
    #[serde(default)]
    pub based_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto: Option<Interval>,
    #[serde(default)]
    pub phases: Vec<PhaseForecast>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_seconds: Option<f64>,
    /// How far the model missed each earlier run predicted from the one before it (measured over predicted, less 1).
    #[serde(default)]
    pub history_errors: Vec<f64>,
    /// Why there is no RTO forecast, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// What the model took from where (the latest run's parameters, with today's objects applied).
    #[serde(default)]
    pub parameters: Vec<serde_json::Value>,
}

pub fn read(dir: &Path) -> Option<Forecast> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(FILE)).ok()?).ok()
}

pub fn write(dir: &Path, forecast: &Forecast) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(forecast).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(FILE), json + "\n")
}

/// The model with today's objects: the budget's wave, the tolerations, consolidateAfter and the replicas.
pub fn with_objects(model: &Model, before: &Objects, now: &Objects) -> Model {
    let mut m = model.clone();
    if let Some((old, new)) = before.replicas.zip(now.replicas).filter(|(o, n)| o != n && *o > 0) {
        let pods = (m.pods.value * f64::from(new) / f64::from(old)).round();
        m.pods = Param::object(pods, format!("replicas {new} now, {old} in the run"));
    }
    if let Some(w) = now.wave_size(m.pods.value.round() as u32) {
        m.wave_size = Param::object(f64::from(w), "the workload's PodDisruptionBudget now");
    }
    if let Some(t) = now.toleration_seconds {
        m.toleration = Param::object(f64::from(t), "the Deployment's tolerationSeconds now");
    }
    if let Some(c) = now.consolidate_after_seconds {
        m.consolidate_after = Param::object(c, "the NodePool's consolidateAfter now");
    }
    m
}

/// Earlier runs of the drill under `reports_dir` with a measured RTO, on the same cluster and profile when both are
/// known, oldest first.
pub fn history(reports_dir: &Path, drill: &str, cluster: Option<&ObservedCluster>) -> Vec<RunModel> {
    let Ok(entries) = std::fs::read_dir(reports_dir.join(drill)) else { return Vec::new() };
    let mut dirs: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs.iter()
        .filter_map(|d| super::load_run(d).ok())
        .filter(|r| r.measured_rto.is_some())
        .filter(|r| match (cluster, &r.cluster) {
            (Some(now), Some(then)) => now.kube_system_uid == then.kube_system_uid && now.profile == then.profile,
            _ => true,
        })
        .collect()
}

/// The forecast from the cluster's objects and the drill's earlier runs.
pub fn forecast(drill: &Drill, objects: Objects, runs: &[RunModel]) -> Forecast {
    let mut f = Forecast {
        schema: SCHEMA.into(),
        drill: drill.metadata.name.clone(),
        made_at: Utc::now(),
        objects,
        based_on: runs.iter().map(|r| r.dir.display().to_string()).collect(),
        rto: None,
        phases: Vec::new(),
        reclaim_seconds: None,
        history_errors: Vec::new(),
        unavailable: None,
        parameters: Vec::new(),
    };
    let Some(latest) = runs.last() else {
        f.unavailable = Some("no earlier run of this drill on this cluster with a measured RTO".into());
        return f;
    };
    f.history_errors = runs
        .windows(2)
        .filter_map(|w| {
            let predicted = with_objects(&w[0].model, &w[0].objects, &w[1].objects).predict().rto_seconds;
            Some(w[1].measured_rto? / predicted.max(1e-3) - 1.0)
        })
        .collect();
    let model = with_objects(&latest.model, &latest.objects, &f.objects);
    let p = model.predict();
    let point = p.rto_seconds;
    let floor = FLOOR_SECONDS + FLOOR_SHARE * point;
    let worst_under = f.history_errors.iter().copied().fold(0.0, f64::min);
    let worst_over = f.history_errors.iter().copied().fold(0.0, f64::max);
    let low = p.low_seconds.min(point * (1.0 + worst_under)).min(point - floor).max(0.0);
    let high = p.high_seconds.max(point * (1.0 + worst_over)).max(point + floor);
    let (lo_ratio, hi_ratio) = if point > 0.0 { (low / point, high / point) } else { (1.0, 1.0) };
    f.phases = p
        .phases
        .iter()
        .map(|ph| PhaseForecast {
            phase: ph.phase.clone(),
            interval: Interval {
                seconds: ph.seconds,
                low_seconds: ph.seconds * lo_ratio.min(1.0),
                high_seconds: ph.seconds * hi_ratio.max(1.0),
            },
        })
        .collect();
    f.rto = Some(Interval { seconds: point, low_seconds: low, high_seconds: high });
    f.reclaim_seconds = p.reclaim_seconds;
    f.parameters = model
        .params()
        .into_iter()
        .filter_map(|(name, p)| serde_json::to_value(super::NamedParam { name, param: p.clone() }).ok())
        .collect();
    f
}

/// `hybrid-drill predict`: the objects read now, the earlier runs under `reports_dir`.
pub async fn predict(cluster: &crate::cluster::Cluster, drill: &Drill, reports_dir: &Path) -> Forecast {
    let objects = super::objects::read(cluster, drill).await;
    let identity = cluster.observe().await.ok();
    let runs = history(reports_dir, &drill.metadata.name, identity.as_ref());
    forecast(drill, objects, &runs)
}

/// Records the forecast in a new run directory before its fault: the objects always, the RTO when there is history.
pub async fn record(cluster: &crate::cluster::Cluster, drill: &Drill, reports_dir: &Path, run_dir: &Path) {
    let forecast = predict(cluster, drill, reports_dir).await;
    if let Err(e) = write(run_dir, &forecast) {
        tracing::warn!("cannot write the forecast into {}: {e}", run_dir.display());
    }
}

/// One phase, predicted against measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseCheck {
    pub phase: String,
    pub predicted_seconds: f64,
    pub low_seconds: f64,
    pub high_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_seconds: Option<f64>,
    pub inside: bool,
}

/// The forecast recorded before the run against what it measured: in report.json as `forecast`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForecastCheck {
    pub rto: PhaseCheck,
    pub phases: Vec<PhaseCheck>,
    /// Set when the measured RTO lies outside the interval: which phase is furthest off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<String>,
    pub based_on: Vec<String>,
}

/// Compares a forecast with the measured phases (by the report's phase names).
pub fn check(forecast: &Forecast, measured: impl Fn(&str) -> Option<f64>) -> Option<ForecastCheck> {
    let rto = forecast.rto.as_ref()?;
    let one = |phase: &str, i: &Interval| {
        let m = measured(phase);
        PhaseCheck {
            phase: phase.into(),
            predicted_seconds: i.seconds,
            low_seconds: i.low_seconds,
            high_seconds: i.high_seconds,
            measured_seconds: m,
            inside: m.is_some_and(|m| m >= i.low_seconds && m <= i.high_seconds),
        }
    };
    let phases: Vec<PhaseCheck> =
        forecast.phases.iter().filter(|p| p.phase != "rto").map(|p| one(&p.phase, &p.interval)).collect();
    let rto = one("rto", rto);
    let finding = (!rto.inside).then(|| {
        let off = phases
            .iter()
            .filter_map(|p| Some((p, p.measured_seconds? - p.predicted_seconds)))
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()));
        let measured = rto.measured_seconds.map_or("not measured".into(), |m| format!("{m:.1}s"));
        let mut text = format!(
            "the measured RTO ({measured}) lies outside the forecast {:.1}s to {:.1}s",
            rto.low_seconds, rto.high_seconds
        );
        if let Some((p, d)) = off {
            text.push_str(&format!(
                "; furthest off: {} ({:.1}s predicted, {:.1}s measured, {:+.1}s): the cluster changed there since the \
                 runs the forecast rests on, or the model is wrong about it",
                p.phase,
                p.predicted_seconds,
                p.measured_seconds.unwrap_or_default(),
                d
            ));
        }
        text
    });
    Some(ForecastCheck { rto, phases, finding, based_on: forecast.based_on.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two runs of the realistic drain: the second predicted from the first holds within the interval, and a
    /// budget widened since moves the forecast by a wave.
    #[test]
    fn a_forecast_rests_on_the_latest_run_and_today_s_objects() {
        let run = super::super::tests::realistic();
        let runs = vec![run.clone(), run.clone()];
        let f = forecast(&run.drill, Objects::default(), &runs);
        let rto = f.rto.clone().unwrap();
        let measured = run.measured_rto.unwrap();
        assert!(rto.low_seconds <= measured && measured <= rto.high_seconds, "{rto:?}");
        assert_eq!(f.history_errors.len(), 1);
        let wide = Objects { max_unavailable: Some("4".into()), ..Objects::default() };
        let f4 = forecast(&run.drill, wide, &runs);
        assert!(f4.rto.as_ref().unwrap().seconds < rto.seconds * 0.6);
        let check = check(&f4, |p| (p == "rto").then_some(measured)).unwrap();
        assert!(!check.rto.inside);
        assert!(check.finding.unwrap().contains("outside the forecast"));
    }

    #[test]
    fn no_history_says_so() {
        let run = super::super::tests::realistic();
        let f = forecast(&run.drill, Objects::default(), &[]);
        assert!(f.rto.is_none() && f.unavailable.is_some());
        assert!(check(&f, |_| Some(1.0)).is_none());
    }
}
