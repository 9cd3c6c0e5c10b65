//! What the workload's autoscaler did during the run, from the timeline: its bounds, the desired replicas when the
//! fault began (what `readyPods` was judged against), and every change of its bounds or desired replicas after.

use serde::{Deserialize, Serialize};

use crate::domain::Autoscaler;
use crate::timeline::{Event, Observation};

/// The autoscaler's part in a run, in `report.json` as `autoscaler`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoscalerReport {
    /// As read before the fault.
    pub autoscaler: Autoscaler,
    /// The desired replicas when the fault began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_at_fault: Option<u32>,
    /// The Ready pods that restored the service from the fault on, as first set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_pods_needed: Option<u32>,
    /// Each change of its bounds or desired replicas seen during the run.
    pub changes: Vec<AutoscalerChange>,
}

/// One change: of the autoscaler's bounds, or of the replicas it set on the workload's controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoscalerChange {
    /// Seconds since the run started (the tool's clock).
    pub t_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<u32>,
    /// The Ready pods that restore the service after this change, when it moved them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_pods_needed: Option<u32>,
}

/// The autoscaler's part, if one scaled the workload.
pub fn autoscaling(observations: &[Observation]) -> Option<AutoscalerReport> {
    let autoscaler = observations.iter().find_map(|o| match &o.event {
        Event::AutoscalerFound { autoscaler } => Some(autoscaler.clone()),
        _ => None,
    })?;
    let mut report = AutoscalerReport { autoscaler, desired_at_fault: None, ready_pods_needed: None, changes: vec![] };
    for o in observations {
        match &o.event {
            Event::ReplicasAtFault { desired_replicas, ready_pods_needed } => {
                report.desired_at_fault = *desired_replicas;
                report.ready_pods_needed = Some(*ready_pods_needed);
            }
            Event::AutoscalerChanged { min_replicas, max_replicas, .. } => {
                report.changes.push(AutoscalerChange {
                    t_seconds: o.t_ms as f64 / 1000.0,
                    min_replicas: Some(*min_replicas),
                    max_replicas: Some(*max_replicas),
                    desired_replicas: None,
                    ready_pods_needed: None,
                });
            }
            Event::ReplicasChanged { replicas, .. } => {
                report.changes.push(AutoscalerChange {
                    t_seconds: o.t_ms as f64 / 1000.0,
                    min_replicas: None,
                    max_replicas: None,
                    desired_replicas: Some(*replicas),
                    ready_pods_needed: None,
                });
            }
            // The monitor records the new target right after the change that moved it.
            Event::ReadyPodsNeeded { needed } => {
                if let Some(last) = report.changes.last_mut() {
                    last.ready_pods_needed = Some(*needed);
                }
            }
            _ => {}
        }
    }
    Some(report)
}

/// The autoscaler's part in sentences, for the Markdown and HTML pages.
pub fn autoscaling_sentences(a: &AutoscalerReport) -> Vec<String> {
    let unknown = |d: Option<u32>| d.map_or("unknown".to_string(), |d| d.to_string());
    let mut out = vec![format!(
        "The workload is scaled by {}. Desired replicas when the fault began: {}; the service counted as restored \
         with {} pods Ready (a scale-in during the run lowers that, a scale-out does not raise it).",
        a.autoscaler.describe(),
        unknown(a.desired_at_fault),
        unknown(a.ready_pods_needed)
    )];
    if a.changes.is_empty() {
        out.push("It changed neither its bounds nor its desired replicas during the run.".into());
    }
    for c in &a.changes {
        let what = match (c.min_replicas.zip(c.max_replicas), c.desired_replicas) {
            (Some((min, max)), _) => format!("bounds set to {min}-{max} replicas"),
            (None, Some(d)) => format!("{} scaled to {d} replicas", a.autoscaler.target),
            (None, None) => "changed".into(),
        };
        let target =
            c.ready_pods_needed.map(|n| format!("; restored from then on with {n} pods Ready")).unwrap_or_default();
        out.push(format!("+{:.1} s: {what}{target}", c.t_seconds));
    }
    out
}
