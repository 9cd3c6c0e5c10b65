//! A drill that fails the fallback too (a capacity shortage, a lost fallback node, a partial loss) set against the
//! plain drain drill of the same cluster: their latest RTOs side by side, in `history`.

use serde::Serialize;

use crate::report::{Report, human_seconds};

/// The plain drill a drill is compared with, and both latest RTOs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    pub drill: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub this_rto_seconds: Option<f64>,
}

fn rto(report: &Report) -> Option<f64> {
    report.phase(crate::phases::PhaseId::Rto).and_then(|p| p.seconds)
}

/// A drain of every on-prem node with nothing else failed: the fault the others add to.
fn is_plain_drain(report: &Report) -> bool {
    report.fallback_faults.is_empty() && report.steps.iter().any(|s| s.action.starts_with("drain onPrem"))
}

/// For the latest run of a drill that failed the fallback, the plain drain drill of the same cluster (its latest run).
pub fn baseline(latest: &Report, others: &[&Report]) -> Option<Baseline> {
    if latest.fallback_faults.is_empty() {
        return None;
    }
    let same_cluster =
        |r: &&&Report| r.cluster.context == latest.cluster.context && r.cluster.server == latest.cluster.server;
    let plain = others.iter().filter(same_cluster).filter(|r| is_plain_drain(r)).max_by_key(|r| r.started)?;
    Some(Baseline { drill: plain.drill.name.clone(), rto_seconds: rto(plain), this_rto_seconds: rto(latest) })
}

impl Baseline {
    pub fn sentence(&self) -> String {
        let figure = |s: Option<f64>| s.map_or_else(|| "not measured".into(), human_seconds);
        let delta = match (self.this_rto_seconds, self.rto_seconds) {
            (Some(a), Some(b)) => format!(" ({}{})", if a >= b { "+" } else { "-" }, human_seconds((a - b).abs())),
            _ => String::new(),
        };
        format!(
            "against {} (the plain drain of the same cluster, latest runs): RTO {} vs {}{delta}",
            self.drill,
            figure(self.this_rto_seconds),
            figure(self.rto_seconds)
        )
    }
}
