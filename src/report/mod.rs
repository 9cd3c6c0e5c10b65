//! Reports of a run: the versioned `report.json` model, and one renderer per format, each a pure function of it.

pub mod fidelity;
pub mod history;
pub mod html;
pub mod junit;
pub mod markdown;
mod page;
pub mod prometheus;
#[cfg(test)]
pub(crate) mod sample;
pub mod terminal;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::phases::{Boundary, FallbackUsage, Phase, Verdict};
use crate::timeline::{Event, NodeRole, Observation};

/// Bumped on any change a consumer of `report.json` could notice.
pub const REPORT_SCHEMA: &str = "hybrid-drill.io/report/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every step ran and every objective was met.
    Passed,
    /// Every step ran; at least one objective was missed.
    ObjectiveMissed,
    /// A step failed, a guard tripped, or the drill was interrupted; the cluster was restored.
    Aborted,
    /// The drill stopped and restoring the cluster failed: a human must finish it.
    RestoreFailed,
    /// A preflight check failed before anything was touched: the drill did not start.
    Refused,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::ObjectiveMissed => "objective missed",
            Outcome::Aborted => "aborted, cluster restored",
            Outcome::RestoreFailed => "aborted, RESTORE FAILED",
            Outcome::Refused => "refused, nothing touched",
        }
    }

    /// The serde name (`objective-missed`...), for CSS classes, metric labels and machine-readable fields.
    pub fn slug(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::ObjectiveMissed => "objective-missed",
            Outcome::Aborted => "aborted",
            Outcome::RestoreFailed => "restore-failed",
            Outcome::Refused => "refused",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub id: String,
    pub action: String,
    /// `passed`, `warned`, `failed`, `aborted` or `skipped`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rollback {
    pub undone: Vec<String>,
    pub failed: Vec<String>,
}

/// What a notable event is about: the HTML timeline draws one lane of markers per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Marker {
    /// The fault and whatever stops the drill: drain, cut, hooks, guards, aborts.
    Fault,
    Eviction,
    #[serde(rename = "nodeclaim")]
    NodeClaim,
    /// Nodes added, Ready or not, deleted, cordoned, uncordoned.
    Node,
    Taint,
    /// The service and the fallback as a whole: lost, restored, fallback ready or empty, back on-prem.
    Service,
    /// The return to on-prem and the undo of the drill's changes.
    Restore,
    /// Reports written before markers existed have none.
    #[default]
    #[serde(other)]
    Other,
}

impl Marker {
    pub fn label(self) -> &'static str {
        match self {
            Marker::Fault => "fault / abort",
            Marker::Eviction => "evictions",
            Marker::NodeClaim => "NodeClaims",
            Marker::Node => "nodes",
            Marker::Taint => "taints",
            Marker::Service => "service",
            Marker::Restore => "return / restore",
            Marker::Other => "other",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Notable {
    pub t_seconds: f64,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<DateTime<Utc>>,
    pub what: String,
    #[serde(default)]
    pub kind: Marker,
}

/// While the on-prem copies of the workload are not known to be gone, their replacements already serve from the
/// cloud: both may run at once (split brain). Stateful workloads need fencing for this window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverlapWindow {
    /// The first replacement pod Ready on a fallback node.
    pub from: Boundary,
    /// The last on-prem pod of the workload confirmed gone; `None` if that was never observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Boundary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// On-prem pods not confirmed gone by the end of the drill.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconfirmed_pods: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool_version: String,
    pub run_id: String,
    pub drill: DrillIdentity,
    pub cluster: ClusterIdentity,
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    pub outcome: Outcome,
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_reason: Option<String>,
    /// What the drill simulated, and what it does not reproduce.
    pub fidelity: String,
    pub steps: Vec<StepRecord>,
    pub phases: Vec<Phase>,
    pub milestones: Vec<Boundary>,
    pub objectives_missed: Vec<String>,
    pub fallback: FallbackUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
    pub notable_events: Vec<Notable>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<OverlapWindow>,
    pub watch_gaps: usize,
    pub api_requests: u64,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrillIdentity {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub file: String,
    /// The drill file exactly as it ran.
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterIdentity {
    pub context: String,
    pub server: String,
    pub version: String,
}

/// The drain drill's fidelity statement.
pub const DRAIN_FIDELITY: &str = "drain: the on-prem nodes were cordoned and their pods evicted through the Eviction API \
(PodDisruptionBudgets honoured). The nodes stayed Ready: this measures the fallback path of a planned evacuation, not \
the node-failure detection delay or the not-ready/unreachable toleration wait of a real outage.";

/// Which marker lane an observation belongs to; `None` for observations not worth a line in a report (the full
/// timeline stays in `timeline.jsonl`).
fn marker(event: &Event) -> Option<Marker> {
    let drilled = |role: &NodeRole| *role != NodeRole::Other;
    Some(match event {
        Event::FaultInjected { .. }
        | Event::GuardTripped { .. }
        | Event::Aborted { .. }
        | Event::HookRan { .. }
        | Event::PolicyApplied { .. } => Marker::Fault,
        Event::EvictionBlocked { .. } | Event::Evicted { .. } => Marker::Eviction,
        Event::NodeClaimCreated { .. } | Event::NodeClaimCondition { .. } | Event::NodeClaimDeleted { .. } => {
            Marker::NodeClaim
        }
        Event::NodeAdded { .. }
        | Event::NodeDeleted { .. }
        | Event::Cordoned { .. }
        | Event::Uncordoned { .. }
        | Event::OnPremReady { .. } => Marker::Node,
        Event::NodeReady { role, .. } if drilled(role) => Marker::Node,
        Event::NodeTaint { role, .. } if drilled(role) => Marker::Taint,
        Event::ServiceLost { .. }
        | Event::ServiceRestored { .. }
        | Event::FallbackReady { .. }
        | Event::BackOnPrem { .. }
        | Event::FallbackEmpty => Marker::Service,
        Event::ReturnStarted { .. }
        | Event::RestoreStarted { .. }
        | Event::FaultRemoved { .. }
        | Event::RestartTriggered { .. }
        | Event::UndoDone { .. }
        | Event::UndoFailed { .. } => Marker::Restore,
        Event::WatchGap { .. } | Event::WatchResumed { .. } => Marker::Other,
        Event::StepFinished { outcome, .. } if outcome != "passed" => Marker::Fault,
        _ => return None,
    })
}

/// Observations worth a line in a report, each with its marker lane.
pub fn notable(observations: &[Observation]) -> Vec<Notable> {
    observations
        .iter()
        .filter_map(|o| {
            marker(&o.event).map(|kind| Notable {
                t_seconds: o.t_ms as f64 / 1000.0,
                at: o.received,
                server_time: o.server_time,
                what: o.event.describe(),
                kind,
            })
        })
        .collect()
}

/// The split-brain window of a drill: from the first replacement Ready on a fallback node until every workload pod
/// that was on-prem at the fault is confirmed gone (deleted: the node back and the pod terminated, or removed by
/// hand). Only when the API server lost sight of an on-prem node: an evicted pod on a node it still sees is confirmed
/// gone by its kubelet. `None` when no on-prem node was lost, when the old pods were gone before any replacement
/// was Ready, or when no replacement became Ready.
pub fn overlap(observations: &[Observation]) -> Option<OverlapWindow> {
    let t0 = observations.iter().find(|o| matches!(o.event, Event::FaultInjected { .. }))?;
    let before_return = |o: &&Observation| !matches!(o.event, Event::ReturnStarted { .. });
    let mut on_prem: Vec<&str> = Vec::new();
    for o in observations.iter().take_while(|o| o.seq < t0.seq) {
        match &o.event {
            // The pods already there when the drill started have no PodScheduled of their own.
            Event::Baseline { on_prem_pods, .. } => {
                for pod in on_prem_pods {
                    if !on_prem.contains(&pod.as_str()) {
                        on_prem.push(pod);
                    }
                }
            }
            Event::PodScheduled { pod, role: NodeRole::OnPrem, .. } if !on_prem.contains(&pod.as_str()) => {
                on_prem.push(pod)
            }
            Event::PodDeleted { pod, .. } => on_prem.retain(|p| p != pod),
            _ => {}
        }
    }
    let after: Vec<&Observation> = observations.iter().filter(|o| o.seq > t0.seq).take_while(before_return).collect();
    let lost = after
        .iter()
        .any(|o| matches!(&o.event, Event::NodeReady { role: NodeRole::OnPrem, status, .. } if status != "True"));
    if !lost {
        return None;
    }
    let first_ready = after.iter().find(|o| matches!(o.event, Event::PodReady { role: NodeRole::Fallback, .. }))?;
    let mut gone = None;
    let mut unconfirmed = on_prem.clone();
    // Confirmations count until the end: a node back just before the return finishes its old pods just after it.
    for o in observations.iter().filter(|o| o.seq > t0.seq) {
        if let Event::PodDeleted { pod, .. } = &o.event
            && on_prem.contains(&pod.as_str())
        {
            unconfirmed.retain(|p| p != pod);
            gone = Some(o);
        }
    }
    let boundary = |label: &str, o: &Observation| Boundary {
        label: label.into(),
        seq: o.seq,
        t_ms: o.t_ms,
        received: o.received,
        server_time: o.server_time,
    };
    let from = boundary("first replacement Ready on a fallback node", first_ready);
    if unconfirmed.is_empty() {
        let gone = gone?;
        if gone.seq < first_ready.seq {
            return None;
        }
        return Some(OverlapWindow {
            seconds: Some(gone.t_ms.saturating_sub(first_ready.t_ms) as f64 / 1000.0),
            from,
            to: Some(boundary("last on-prem pod confirmed gone", gone)),
            unconfirmed_pods: Vec::new(),
        });
    }
    Some(OverlapWindow {
        from,
        to: None,
        seconds: None,
        unconfirmed_pods: unconfirmed.into_iter().map(str::to_string).collect(),
    })
}

/// The overlap window in one sentence, for the text reports.
pub fn overlap_sentence(o: &OverlapWindow) -> String {
    let at = |b: &Boundary| format!("+{} ({})", human_seconds(b.t_ms as f64 / 1000.0), b.label);
    match (&o.to, o.seconds) {
        (Some(to), Some(s)) => format!(
            "for {} from {} to {}, the old on-prem pods were not known to be gone while replacements were Ready in the \
cloud: both copies may have run at once. Stateful or single-writer workloads need fencing for this window.",
            human_seconds(s),
            at(&o.from),
            at(to)
        ),
        _ => format!(
            "from {}, replacements were Ready in the cloud while these on-prem pods were never confirmed gone: {}. \
Stateful or single-writer workloads need fencing for this window.",
            at(&o.from),
            o.unconfirmed_pods.join(", ")
        ),
    }
}

/// A run directory could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{path} is not a hybrid-drill report: {cause}")]
    Parse { path: String, cause: serde_json::Error },
    #[error("{path} has schema `{found}`; this hybrid-drill reads `{REPORT_SCHEMA}`")]
    Schema { path: String, found: String },
}

/// Reads a run directory's `report.json`. Markers and the overlap window are derived again from its
/// `timeline.jsonl` when that is there, so runs recorded by an older hybrid-drill get them too; the phases,
/// verdicts and figures stay as the run recorded them.
pub fn load(run_dir: &Path) -> Result<Report, LoadError> {
    let path = if run_dir.is_file() { run_dir.to_path_buf() } else { run_dir.join("report.json") };
    let text =
        std::fs::read_to_string(&path).map_err(|cause| LoadError::Read { path: path.display().to_string(), cause })?;
    let mut report: Report =
        serde_json::from_str(&text).map_err(|cause| LoadError::Parse { path: path.display().to_string(), cause })?;
    if report.schema != REPORT_SCHEMA {
        return Err(LoadError::Schema { path: path.display().to_string(), found: report.schema });
    }
    let timeline = path.with_file_name("timeline.jsonl");
    if let Ok(observations) = crate::timeline::read(&timeline)
        && !observations.is_empty()
    {
        report.notable_events = notable(&observations);
        report.overlap = overlap(&observations);
    }
    Ok(report)
}

/// The formats a run's report is written in; every run writes each one to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Md,
    Html,
    Json,
    Junit,
    Prometheus,
}

impl Format {
    pub const ALL: [Format; 5] = [Format::Json, Format::Md, Format::Html, Format::Junit, Format::Prometheus];

    pub fn file_name(self) -> &'static str {
        match self {
            Format::Md => "report.md",
            Format::Html => "report.html",
            Format::Json => "report.json",
            Format::Junit => "junit.xml",
            Format::Prometheus => "metrics.prom",
        }
    }

    pub fn render(self, report: &Report) -> Result<String, RenderError> {
        Ok(match self {
            Format::Md => markdown::render(report),
            Format::Html => html::render(report),
            Format::Json => serde_json::to_string_pretty(report).map_err(RenderError::Json)? + "\n",
            Format::Junit => junit::render(report).map_err(RenderError::Junit)?,
            Format::Prometheus => prometheus::render(report).map_err(RenderError::Metrics)?,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot serialize the report: {0}")]
    Json(serde_json::Error),
    #[error("cannot write the JUnit XML: {0}")]
    Junit(quick_junit::SerializeError),
    #[error("cannot encode the metrics: {0}")]
    Metrics(std::fmt::Error),
}

/// Writes every format of the report into the run directory.
pub fn write_all(dir: &Path, report: &Report) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for format in Format::ALL {
        let text = format.render(report).map_err(std::io::Error::other)?;
        let path = dir.join(format.file_name());
        std::fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

/// Formats seconds the way ops read them: `4m 05.2s`, `38.1s`.
pub fn human_seconds(s: f64) -> String {
    if s >= 3600.0 {
        format!("{}h {:02}m", (s / 3600.0) as u64, ((s % 3600.0) / 60.0) as u64)
    } else if s >= 60.0 {
        format!("{}m {:04.1}s", (s / 60.0) as u64, s % 60.0)
    } else {
        format!("{s:.1}s")
    }
}

pub fn verdict_word(p: &Phase) -> &'static str {
    match p.verdict {
        Verdict::Met => "met",
        Verdict::Missed => "MISSED",
        Verdict::NoObjective => "-",
        Verdict::Incomplete if p.objective_seconds.is_some() => "NOT MEASURED",
        Verdict::Incomplete => "incomplete",
    }
}

pub fn phase_label(p: &Phase) -> String {
    match &p.parent {
        Some(_) => format!("  └ {}", p.name),
        None if p.name == "rto" => "RTO".into(),
        None => p.name.clone(),
    }
}

pub fn seconds_cell(v: Option<f64>) -> String {
    v.map(human_seconds).unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Event as E;

    /// Observations from (seconds, event) pairs, without server times.
    fn observations(events: Vec<(f64, E)>) -> Vec<Observation> {
        crate::timeline::observations_from(sample::base(), events.into_iter().map(|(t, e)| (t, None, e)).collect())
    }

    fn cut(old_pods_gone_at: Option<f64>, after_return: bool) -> Vec<Observation> {
        let (on, fb) = (NodeRole::OnPrem, NodeRole::Fallback);
        let mut events = vec![
            (
                0.0,
                E::Baseline {
                    on_prem_nodes: 1,
                    workload_pods: 1,
                    ready_pods: 1,
                    fallback_nodeclaims: 0,
                    fallback_nodes: 0,
                    fallback_gpu_limit: None,
                    on_prem_pods: vec!["old-1".into()],
                },
            ),
            (0.1, E::PodScheduled { pod: "old-2".into(), node: "h1".into(), role: on }),
            (1.0, E::FaultInjected { step: "cut".into(), kind: "cut (host)".into() }),
            (21.0, E::NodeReady { node: "h1".into(), role: on, status: "Unknown".into(), gpus: 8 }),
            (300.0, E::PodCreated { pod: "new-1".into() }),
            (360.0, E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb }),
            (361.0, E::PodDeleted { pod: "old-1".into(), node: "h1".into(), role: on }),
        ];
        if let Some(t) = old_pods_gone_at {
            events.push((t, E::PodDeleted { pod: "old-2".into(), node: "h1".into(), role: on }));
        }
        events.push((600.0, E::ReturnStarted { step: "return".into() }));
        if after_return {
            events.push((601.0, E::PodDeleted { pod: "old-2".into(), node: "h1".into(), role: on }));
        }
        observations(events)
    }

    #[test]
    fn overlap_runs_from_the_first_cloud_replacement_ready_until_the_old_pods_are_gone() {
        let o = overlap(&cut(Some(420.0), false)).unwrap();
        assert_eq!(o.seconds, Some(60.0));
        assert_eq!(o.from.t_ms, 360_000);
        assert_eq!(o.to.unwrap().label, "last on-prem pod confirmed gone");
        // confirmed gone only after the return started: the window still ends there
        assert_eq!(overlap(&cut(None, true)).unwrap().seconds, Some(241.0));
        // never confirmed by the end of the drill: the window is open-ended and names the pod
        let open = overlap(&cut(None, false)).unwrap();
        assert_eq!((open.seconds, open.unconfirmed_pods), (None, vec!["old-2".to_string()]));
        // a drain evicts the old pods before any replacement is Ready: no overlap
        assert_eq!(overlap(&sample::timeline()), None);
        // nor is there one while the API server sees the on-prem nodes: their kubelets confirm what stops
        let seen: Vec<Observation> =
            cut(None, true).into_iter().filter(|o| !matches!(o.event, E::NodeReady { .. })).collect();
        assert_eq!(overlap(&seen), None);
    }

    #[test]
    fn every_notable_event_has_a_marker_lane() {
        let notables = notable(&sample::timeline());
        let kinds: Vec<Marker> = notables.iter().map(|n| n.kind).collect();
        for kind in [Marker::Fault, Marker::Eviction, Marker::NodeClaim, Marker::Node, Marker::Taint, Marker::Service] {
            assert!(kinds.contains(&kind), "{kind:?} missing");
        }
        assert!(!kinds.contains(&Marker::Other));
        // a report.json written before markers existed still reads, its events in the `other` lane
        let old: Notable = serde_json::from_str(r#"{"t_seconds":1.0,"at":"2026-01-05T09:30:00Z","what":"x"}"#).unwrap();
        assert_eq!(old.kind, Marker::Other);
    }

    #[test]
    fn load_reads_a_run_directory_and_refuses_other_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let mut report = sample::report();
        report.notable_events.clear();
        std::fs::write(dir.path().join("report.json"), serde_json::to_string(&report).unwrap()).unwrap();
        assert!(load(dir.path()).unwrap().notable_events.is_empty());
        // with its timeline beside it, the markers are derived again
        let timeline: Vec<String> = sample::timeline().iter().map(|o| serde_json::to_string(o).unwrap()).collect();
        std::fs::write(dir.path().join("timeline.jsonl"), timeline.join("\n")).unwrap();
        assert_eq!(load(dir.path()).unwrap().notable_events.len(), notable(&sample::timeline()).len());
        report.schema = "hybrid-drill.io/report/v0".into();
        std::fs::write(dir.path().join("report.json"), serde_json::to_string(&report).unwrap()).unwrap();
        let e = load(dir.path()).unwrap_err().to_string();
        assert!(
            e.ends_with("has schema `hybrid-drill.io/report/v0`; this hybrid-drill reads `hybrid-drill.io/report/v1`"),
            "{e}"
        );
        let e = load(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(e.starts_with("cannot read ") && e.contains("No such file"), "{e}");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_seconds(38.14), "38.1s");
        assert_eq!(human_seconds(245.2), "4m 05.2s");
        assert_eq!(human_seconds(3720.0), "1h 02m");
    }
}
