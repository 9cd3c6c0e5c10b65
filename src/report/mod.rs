//! Reports of a run: the versioned `report.json` model, and one renderer per format, each a pure function of it.

pub mod fidelity;
pub mod history;
pub mod html;
pub mod junit;
pub mod legend;
pub mod markdown;
mod page;
pub mod prometheus;
#[cfg(test)]
pub(crate) mod sample;
pub mod terminal;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::RequestsByVerb;
use crate::drill::Drill;
use crate::phases::{BillingBasis, Boundary, FallbackUsage, Phase, PhaseId, Startup, Verdict};
pub use crate::timeline::Outcome;
use crate::timeline::{Event, NodeRole, Observation, StepOutcome};

/// Bumped on any change a consumer of `report.json` could notice.
pub const REPORT_SCHEMA: &str = "hybrid-drill.io/report/v1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub id: String,
    pub action: String,
    pub outcome: StepOutcome,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rollback {
    pub undone: Vec<String>,
    pub failed: Vec<String>,
    /// What the restored-state check read back: each on-prem node Ready, schedulable and unmarked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verified: Vec<String>,
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
    /// A drill the tool ran, or a real incident `hybrid-drill watch` measured with the same phases.
    #[serde(default)]
    pub kind: RunKind,
    /// What started the incident and what shows it; only for `kind: incident`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<IncidentFacts>,
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
    pub objectives_missed: Vec<PhaseId>,
    pub fallback: FallbackUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
    pub notable_events: Vec<Notable>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<OverlapWindow>,
    pub watch_gaps: usize,
    /// The workload's pods on the fallback, pod by pod: image pull (or cached), init containers, start, model load.
    #[serde(default, skip_serializing_if = "crate::report::no_pods")]
    pub startup: Startup,
    pub api_requests: u64,
    /// The same requests by verb, then resource: what grows with the watches held, not with time waited.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub api_requests_by_verb: RequestsByVerb,
    pub warnings: Vec<String>,
}

/// Whether a report measures a drill or a real incident.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    #[default]
    Drill,
    Incident,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Drill => "drill",
            RunKind::Incident => "incident",
        }
    }

    /// The heading of every human format: `Drill report`, `Incident report`.
    pub fn heading(self) -> &'static str {
        match self {
            RunKind::Drill => "Drill report",
            RunKind::Incident => "Incident report",
        }
    }
}

/// An incident's cause as the on-prem nodes showed it, and what the watch did not see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentFacts {
    pub cause: crate::domain::IncidentCause,
    pub nodes: Vec<String>,
    pub evidence: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// Why the episode closed; `None` while it is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<String>,
}

impl IncidentFacts {
    /// The facts an incident's timeline holds; `None` for a drill's.
    pub fn of(observations: &[Observation]) -> Option<IncidentFacts> {
        let mut facts = observations.iter().find_map(|o| match &o.event {
            Event::IncidentOpened { cause, nodes, evidence, unknown } => Some(IncidentFacts {
                cause: *cause,
                nodes: nodes.clone(),
                evidence: evidence.clone(),
                unknown: unknown.clone(),
                closed: None,
            }),
            _ => None,
        })?;
        for o in observations {
            match &o.event {
                Event::IncidentResumed { last_seen } => facts.unknown.push(format!(
                    "the watch was not running from {} to {}: what changed meanwhile was not observed",
                    crate::timeline::rfc3339(last_seen),
                    crate::timeline::rfc3339(&o.received)
                )),
                Event::IncidentClosed { reason } => facts.closed = Some(reason.clone()),
                Event::IncidentSpread { nodes, evidence } => {
                    facts.nodes.extend(nodes.iter().cloned());
                    facts.nodes.sort();
                    facts.nodes.dedup();
                    facts.evidence.extend(evidence.iter().cloned());
                }
                _ => {}
            }
        }
        Some(facts)
    }

    /// The report's fidelity statement for an incident: nothing was simulated.
    fn statement(&self) -> String {
        format!(
            "a real incident, not a drill: observed read-only by hybrid-drill watch, nothing injected or changed. \
             Cause: {} ({}). Evidence: {}.{}",
            self.cause,
            if self.nodes.is_empty() { "no on-prem node involved".into() } else { self.nodes.join(", ") },
            if self.evidence.is_empty() { "none".into() } else { self.evidence.join("; ") },
            if self.unknown.is_empty() { String::new() } else { format!(" Unknown: {}.", self.unknown.join("; ")) }
        )
    }
}

impl Report {
    pub fn phase(&self, id: PhaseId) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == id)
    }

    /// The missed objectives as a list for a sentence: `provisioning, reclaim`.
    pub fn missed_list(&self) -> String {
        self.objectives_missed.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
    }
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
        | Event::IncidentOpened { .. }
        | Event::IncidentSpread { .. }
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
        Event::WatchGap { .. }
        | Event::WatchResumed { .. }
        | Event::IncidentResumed { .. }
        | Event::IncidentClosed { .. } => Marker::Other,
        Event::StepFinished { outcome, .. } if *outcome != StepOutcome::Passed => Marker::Fault,
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
        .any(|o| matches!(&o.event, Event::NodeReady { role: NodeRole::OnPrem, status, .. } if !status.is_true()));
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
    let boundary = Boundary::of;
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

/// What a report holds that the timeline cannot: the tool, the drill file as it ran, the API server it ran against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMeta {
    pub tool_version: String,
    pub drill_file: String,
    pub drill_source: String,
    pub cluster_server: String,
    pub cluster_version: String,
}

impl RunMeta {
    /// The meta a recorded report kept.
    fn recorded(report: &Report) -> RunMeta {
        RunMeta {
            tool_version: report.tool_version.clone(),
            drill_file: report.drill.file.clone(),
            drill_source: report.drill.source.clone(),
            cluster_server: report.cluster.server.clone(),
            cluster_version: report.cluster.version.clone(),
        }
    }
}

/// The report of a run: a pure function of the drill, what the run observed and the meta the timeline cannot hold.
/// `started` is the timeline's origin, `finished` the drill's end (or the last observation of a run that never
/// recorded one).
/// The run's request count, recorded once at its end.
fn requests_sent(observations: &[Observation]) -> Option<(u64, &RequestsByVerb)> {
    observations.iter().rev().find_map(|o| match &o.event {
        Event::RequestsSent { total, by_verb } => Some((*total, by_verb)),
        _ => None,
    })
}

fn no_pods(startup: &Startup) -> bool {
    startup.pods.is_empty()
}

/// The fallback's nodes per NodePool, when it came from more than one or a run recorded its pools:
/// `gpu-fallback 4 nodes (0.021 node-hours), gpu-spot 1 node (0.005 node-hours)`.
pub fn by_node_pool(f: &FallbackUsage) -> Option<String> {
    if f.by_node_pool.is_empty() {
        return None;
    }
    let parts: Vec<String> = f
        .by_node_pool
        .iter()
        .map(|(pool, share)| {
            let plural = if share.nodes == 1 { "" } else { "s" };
            format!("{pool} {} node{plural} ({:.3} node-hours)", share.nodes, share.node_hours)
        })
        .collect();
    Some(parts.join(", "))
}

/// How the fallback's hours were counted, and what was still billing when the run ended, for people.
pub fn billing_in_words(f: &FallbackUsage) -> Vec<String> {
    let mut lines = Vec::new();
    match f.billed_from {
        Some(BillingBasis::NodeClaim) => lines.push(
            "counted per NodeClaim, from its creation (instance asked for) to its deletion (instance terminated)"
                .to_string(),
        ),
        Some(BillingBasis::Node) => {
            lines.push("counted per Node object, from its creation to its deletion".to_string())
        }
        None => {}
    }
    for failed in &f.failed_launches {
        let said = match (&failed.reason, &failed.message) {
            (Some(reason), Some(message)) => format!("{reason}: {message}"),
            (Some(reason), None) => reason.clone(),
            _ => "no reason recorded".to_string(),
        };
        lines.push(format!(
            "launch failed: NodeClaim {} gone at {} without an instance ({said}); not billed, its time counts in provisioning",
            failed.nodeclaim,
            crate::timeline::rfc3339(&failed.at)
        ));
    }
    if let Some(at) = f.still_running_at.filter(|_| !f.still_running.is_empty()) {
        lines.push(format!(
            "STILL RUNNING at {}: {} (counted up to then; they bill until consolidation reclaims them)",
            crate::timeline::rfc3339(&at),
            f.still_running.join(", ")
        ));
    }
    lines
}

/// One line for people: the total, then the count of each verb.
pub fn requests_in_words(report: &Report) -> String {
    let verbs: Vec<String> = report
        .api_requests_by_verb
        .iter()
        .map(|(verb, resources)| format!("{verb} {}", resources.values().sum::<u64>()))
        .collect();
    if verbs.is_empty() {
        report.api_requests.to_string()
    } else {
        format!("{} ({})", report.api_requests, verbs.join(", "))
    }
}

pub fn build(drill: &Drill, observations: &[Observation], meta: &RunMeta) -> Report {
    let incident = IncidentFacts::of(observations);
    // An incident is measured against the drill's targets and objectives; its steps never ran.
    let stepless;
    let drill = match incident {
        Some(_) => {
            let mut d = drill.clone();
            d.spec.steps.clear();
            stepless = d;
            &stepless
        }
        None => drill,
    };
    let mut analysis = crate::phases::analyse(drill, observations);
    if incident.is_some() {
        for p in analysis.phases.iter_mut() {
            if let Some(note) = p.note.as_mut() {
                *note = note.replace(" not observed", " unknown: not observed by the watch");
            }
        }
    }
    let (run_id, context) = observations
        .iter()
        .find_map(|o| match &o.event {
            Event::DrillStarted { run_id, context, .. } => Some((run_id.clone(), context.clone())),
            _ => None,
        })
        .unwrap_or_default();
    let started =
        observations.first().map(|o| o.received - chrono::Duration::milliseconds(o.t_ms as i64)).unwrap_or_default();
    let finished = observations
        .iter()
        .rev()
        .find(|o| matches!(o.event, Event::DrillFinished { .. }))
        .or(observations.last())
        .map_or(started, |o| o.received);
    let abort_reason = observations.iter().find_map(|o| match &o.event {
        Event::Aborted { reason } => Some(reason.clone()),
        _ => None,
    });
    let rollback = observations.iter().rev().find_map(|o| match &o.event {
        Event::RollbackFinished { undone, failed, verified } => {
            Some(Rollback { undone: undone.clone(), failed: failed.clone(), verified: verified.clone() })
        }
        _ => None,
    });
    let judged = if analysis.objectives_missed.is_empty() { Outcome::Passed } else { Outcome::ObjectiveMissed };
    let outcome = match recorded_outcome(observations) {
        // Both say every step ran; which of the two is the phases' verdict, so a report rendered again with phases
        // measured anew judges them anew rather than repeat a verdict its own table contradicts.
        Some(Outcome::Passed | Outcome::ObjectiveMissed) => judged,
        Some(recorded) => recorded,
        None => match (&rollback, &abort_reason) {
            (Some(r), _) if !r.failed.is_empty() => Outcome::RestoreFailed,
            (_, Some(_)) => Outcome::Aborted,
            _ => judged,
        },
    };
    Report {
        schema: REPORT_SCHEMA.into(),
        tool_version: meta.tool_version.clone(),
        run_id,
        drill: DrillIdentity {
            name: drill.metadata.name.clone(),
            description: drill.metadata.description.clone(),
            file: meta.drill_file.clone(),
            source: meta.drill_source.clone(),
        },
        cluster: ClusterIdentity {
            context,
            server: meta.cluster_server.clone(),
            version: meta.cluster_version.clone(),
        },
        started,
        finished,
        outcome,
        exit_code: crate::exit::exit_code(outcome),
        abort_reason,
        fidelity: incident.as_ref().map_or_else(|| fidelity::statement(drill, observations), IncidentFacts::statement),
        kind: if incident.is_some() { RunKind::Incident } else { RunKind::Drill },
        incident,
        steps: step_records(drill, observations),
        phases: analysis.phases,
        milestones: analysis.milestones,
        objectives_missed: analysis.objectives_missed,
        fallback: analysis.fallback,
        startup: analysis.startup,
        rollback,
        notable_events: notable(observations),
        overlap: overlap(observations),
        watch_gaps: observations.iter().filter(|o| matches!(o.event, Event::WatchGap { .. })).count(),
        api_requests: requests_sent(observations).map_or(0, |(total, _)| total),
        api_requests_by_verb: requests_sent(observations).map(|(_, by_verb)| by_verb.clone()).unwrap_or_default(),
        warnings: observations
            .iter()
            .filter_map(|o| match &o.event {
                Event::Warning { message } => Some(message.clone()),
                _ => None,
            })
            .collect(),
    }
}

/// The outcome the run recorded when the drill finished.
fn recorded_outcome(observations: &[Observation]) -> Option<Outcome> {
    observations.iter().rev().find_map(|o| match &o.event {
        Event::DrillFinished { outcome } => Some(*outcome),
        _ => None,
    })
}

/// One record per step of the drill, in its order: never started is skipped, started and never finished is
/// aborted (a signal, a guard or the deadline stopped it), finished says how and took the time between the two.
fn step_records(drill: &Drill, observations: &[Observation]) -> Vec<StepRecord> {
    drill
        .spec
        .steps
        .iter()
        .map(|step| {
            let started =
                observations.iter().find(|o| matches!(&o.event, Event::StepStarted { step: id, .. } if *id == step.id));
            let finished = started.and_then(|s| {
                observations.iter().find_map(|o| match &o.event {
                    Event::StepFinished { step: id, outcome, message } if o.seq > s.seq && *id == step.id => {
                        Some((o.t_ms.saturating_sub(s.t_ms), *outcome, message.clone()))
                    }
                    _ => None,
                })
            });
            let (outcome, message, seconds) = match (started, finished) {
                (_, Some((ms, outcome, message))) => (outcome, message, Some(ms as f64 / 1000.0)),
                (Some(_), None) => (StepOutcome::Aborted, String::new(), None),
                (None, None) => (StepOutcome::Skipped, String::new(), None),
            };
            StepRecord { id: step.id.clone(), action: step.action.name(), outcome, message, seconds }
        })
        .collect()
}

/// Whether a timeline holds every fact a report needs: runs recorded before the report's facts were timeline
/// events lack the request count, written once at the end of every run since.
fn holds_the_report(observations: &[Observation]) -> bool {
    let has = |f: fn(&Event) -> bool| observations.iter().any(|o| f(&o.event));
    has(|e| matches!(e, Event::DrillStarted { .. }))
        && has(|e| matches!(e, Event::DrillFinished { .. }))
        && has(|e| matches!(e, Event::RequestsSent { .. }))
}

/// Reads a run directory. The report is computed again from its `drill.yaml` and `timeline.jsonl`, with the meta
/// `report.json` kept, so an old run re-renders with today's logic. A run whose timeline lacks what [`build`] needs
/// (recorded by an older hybrid-drill) keeps its recorded report, with markers and the overlap window derived again
/// where its timeline is there.
pub fn load(run_dir: &Path) -> Result<Report, LoadError> {
    let path = if run_dir.is_file() { run_dir.to_path_buf() } else { run_dir.join("report.json") };
    let text =
        std::fs::read_to_string(&path).map_err(|cause| LoadError::Read { path: path.display().to_string(), cause })?;
    let mut report: Report =
        serde_json::from_str(&text).map_err(|cause| LoadError::Parse { path: path.display().to_string(), cause })?;
    if report.schema != REPORT_SCHEMA {
        return Err(LoadError::Schema { path: path.display().to_string(), found: report.schema });
    }
    let observations = crate::timeline::read(&path.with_file_name("timeline.jsonl")).unwrap_or_default();
    if observations.is_empty() {
        return Ok(report);
    }
    let drill_file = path.with_file_name("drill.yaml");
    let source = std::fs::read_to_string(&drill_file).unwrap_or_else(|_| report.drill.source.clone());
    match crate::drill::from_source(&drill_file, source) {
        Ok(loaded) if holds_the_report(&observations) => {
            Ok(build(&loaded.drill, &observations, &RunMeta::recorded(&report)))
        }
        _ => {
            report.notable_events = notable(&observations);
            report.overlap = overlap(&observations);
            Ok(report)
        }
    }
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
        Verdict::Inconsistent if p.objective_seconds.is_some() => "INCONSISTENT",
        Verdict::Inconsistent => "inconsistent",
    }
}

pub fn phase_label(p: &Phase) -> String {
    match &p.parent {
        Some(_) => format!("  └ {}", p.name),
        None => p.name.title().into(),
    }
}

pub fn seconds_cell(v: Option<f64>) -> String {
    v.map(human_seconds).unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::CutFidelity;
    use crate::timeline::{ConditionStatus, Event as E, FaultKind};

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
            (1.0, E::FaultInjected { step: "cut".into(), kind: FaultKind::Cut(CutFidelity::Host) }),
            (21.0, E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 }),
            (300.0, E::PodCreated { pod: "new-1".into() }),
            (360.0, E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb, containers: vec![] }),
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

    fn json(report: &Report) -> String {
        Format::Json.render(report).unwrap()
    }

    fn jsonl(observations: &[Observation]) -> String {
        observations.iter().map(|o| serde_json::to_string(o).unwrap() + "\n").collect()
    }

    /// The files a run leaves for its report: the drill file, the timeline, and report.json from `build`.
    fn run_files(observations: &[Observation]) -> [(&'static str, String); 3] {
        [
            ("drill.yaml", sample::DRILL.to_string()),
            ("timeline.jsonl", jsonl(observations)),
            ("report.json", json(&build(&sample::drill(), observations, &sample::meta()))),
        ]
    }

    /// Writes a run directory as a run leaves it; returns it and its report.json.
    fn run_dir(observations: &[Observation]) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let files = run_files(observations);
        for (name, content) in &files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let [.., (_, recorded)] = files;
        (dir, recorded)
    }

    /// `tests/reports.rs` re-renders this run through the binary; it must stay the sample run. `BLESS=1` rewrites it.
    #[test]
    fn the_run_fixture_is_the_sample_run() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run");
        for (name, content) in run_files(&sample::timeline()) {
            if std::env::var_os("BLESS").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join(name), &content).unwrap();
            }
            let fixture = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            assert!(fixture == content, "tests/fixtures/run/{name} is not the sample run; rewrite it with BLESS=1");
        }
    }

    /// A small xorshift generator: reproducible cases without a property-testing crate for one test.
    struct Cases(u64);

    impl Cases {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        /// The sample timeline cut short at a random point, some of its observations swapped out of order.
        fn timeline(&mut self) -> Vec<Observation> {
            let mut obs = sample::timeline();
            obs.truncate(1 + self.below(obs.len()));
            for _ in 0..self.below(4) {
                let (i, j) = (self.below(obs.len()), self.below(obs.len()));
                obs.swap(i, j);
            }
            obs
        }
    }

    #[test]
    fn build_is_deterministic_and_a_run_directory_re_renders_byte_for_byte() {
        let mut cases = Cases(0x9e37_79b9_7f4a_7c15);
        for case in 0..200 {
            let obs = cases.timeline();
            let once = json(&build(&sample::drill(), &obs, &sample::meta()));
            let again = json(&build(&sample::drill(), &obs, &sample::meta()));
            assert_eq!(once, again, "case {case}: build differs between two calls");
            let (dir, recorded) = run_dir(&obs);
            assert_eq!(json(&load(dir.path()).unwrap()), recorded, "case {case}: load does not reproduce report.json");
        }
    }

    #[test]
    fn the_sample_run_re_renders_byte_for_byte_with_todays_logic() {
        let (dir, recorded) = run_dir(&sample::timeline());
        assert_eq!(json(&load(dir.path()).unwrap()), recorded);
        // a report.json whose figures an older logic computed is recomputed from the timeline
        let mut stale = sample::report();
        stale.phases.retain(|p| p.name != PhaseId::Rto);
        std::fs::write(dir.path().join("report.json"), json(&stale)).unwrap();
        assert_eq!(json(&load(dir.path()).unwrap()), recorded);
        // a run recorded before the report's facts were events keeps its recorded report
        let old: Vec<Observation> =
            sample::timeline().into_iter().filter(|o| !matches!(o.event, E::RequestsSent { .. })).collect();
        std::fs::write(dir.path().join("timeline.jsonl"), jsonl(&old)).unwrap();
        assert!(load(dir.path()).unwrap().phase(PhaseId::Rto).is_none());
    }

    #[test]
    fn the_sample_report_reads_its_facts_from_the_timeline() {
        let r = sample::report();
        assert_eq!((r.outcome, r.exit_code, r.api_requests), (Outcome::ObjectiveMissed, 1, 42));
        assert_eq!(r.run_id, "onprem-gpu-drain-20260105t093000z");
        assert_eq!(r.cluster.context, "hybrid-lab");
        assert_eq!((r.started, r.finished), (sample::base(), sample::base() + chrono::Duration::seconds(39)));
        assert_eq!(r.warnings, ["this ran against the lab: <timings shortened>"]);
        assert_eq!(r.objectives_missed, [PhaseId::Provisioning, PhaseId::Reclaim]);
        let steps: Vec<(&str, &str, StepOutcome, Option<f64>)> =
            r.steps.iter().map(|s| (s.id.as_str(), s.action.as_str(), s.outcome, s.seconds)).collect();
        assert_eq!(
            steps,
            [
                ("drain", "drain onPrem", StepOutcome::Passed, Some(1.8)),
                ("fallback", "waitFor fallback-ready", StepOutcome::Passed, Some(6.9)),
                ("return", "return", StepOutcome::Passed, Some(0.3)),
                ("reclaim", "waitFor fallback-empty", StepOutcome::Passed, Some(18.2)),
            ]
        );
    }

    #[test]
    fn steps_never_reached_are_skipped_and_steps_cut_short_aborted() {
        let finished = |step: &str, outcome, message: &str| E::StepFinished {
            step: step.into(),
            outcome,
            message: message.into(),
        };
        let started = |step: &str| E::StepStarted { step: step.into(), action: "ignored".into() };
        let records = |events: Vec<(f64, E)>| step_records(&sample::drill(), &observations(events));
        // stopped by a signal while `fallback` waited: it is aborted, unmeasured; the rest never ran
        let stopped = records(vec![
            (0.0, started("drain")),
            (1.5, finished("drain", StepOutcome::Warned, "1 pod left")),
            (1.5, started("fallback")),
            (3.0, E::Aborted { reason: "interrupted by SIGINT".into() }),
        ]);
        let got: Vec<(StepOutcome, &str, Option<f64>)> =
            stopped.iter().map(|s| (s.outcome, s.message.as_str(), s.seconds)).collect();
        assert_eq!(
            got,
            [
                (StepOutcome::Warned, "1 pod left", Some(1.5)),
                (StepOutcome::Aborted, "", None),
                (StepOutcome::Skipped, "", None),
                (StepOutcome::Skipped, "", None),
            ]
        );
        // the action is the drill's, whatever an older run wrote
        assert_eq!(stopped[0].action, "drain onPrem");
        // a failed step keeps its message; a StepFinished of another step does not end it
        let failed = records(vec![
            (0.0, started("drain")),
            (0.5, finished("fallback", StepOutcome::Passed, "")),
            (2.0, finished("drain", StepOutcome::Failed, "eviction blocked")),
        ]);
        assert_eq!((failed[0].outcome, failed[0].message.as_str()), (StepOutcome::Failed, "eviction blocked"));
        assert_eq!(failed[0].seconds, Some(2.0));
        assert_eq!(failed[1].outcome, StepOutcome::Skipped);
    }

    /// The realistic-profile drain recorded "objective missed" with the phases of its day (provisioning cut across
    /// the budget's waves); rendered again, its phases meet every objective and so does its verdict.
    #[test]
    fn a_report_rendered_again_judges_the_phases_it_shows_not_the_verdict_it_recorded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-drain");
        let source = std::fs::read_to_string(dir.join("drill.yaml")).unwrap();
        let drill = crate::drill::from_source(&dir.join("drill.yaml"), source).unwrap().drill;
        let obs = crate::timeline::read(&dir.join("timeline.jsonl")).unwrap();
        assert_eq!(recorded_outcome(&obs), Some(Outcome::ObjectiveMissed));
        let r = build(&drill, &obs, &sample::meta());
        assert!(r.objectives_missed.is_empty(), "{:?}", r.objectives_missed);
        assert_eq!((r.outcome, r.exit_code), (Outcome::Passed, 0));
    }

    #[test]
    fn an_aborted_run_reads_its_reason_rollback_and_outcome_from_the_timeline() {
        let events = vec![
            (0.0, E::DrillStarted { drill: "d".into(), run_id: "r".into(), context: "c".into() }),
            (1.0, E::Aborted { reason: "guard tripped".into() }),
            (
                2.0,
                E::RollbackFinished {
                    undone: vec!["uncordon h1".into()],
                    failed: vec!["delete p: 500".into()],
                    verified: vec![],
                },
            ),
            (3.0, E::DrillFinished { outcome: Outcome::RestoreFailed }),
        ];
        let r = build(&sample::drill(), &observations(events.clone()), &sample::meta());
        assert_eq!((r.outcome, r.exit_code), (Outcome::RestoreFailed, crate::exit::exit_code(Outcome::RestoreFailed)));
        assert_eq!(r.abort_reason.as_deref(), Some("guard tripped"));
        assert_eq!(r.rollback.unwrap().failed, ["delete p: 500"]);
        // without the recorded outcome (a crash before the end), the rollback's failure still says it
        let crashed = build(&sample::drill(), &observations(events[..3].to_vec()), &sample::meta());
        assert_eq!(
            (crashed.outcome, crashed.finished),
            (Outcome::RestoreFailed, sample::base() + chrono::Duration::seconds(2))
        );
    }

    #[test]
    fn timelines_written_as_text_read_as_types() {
        let lines = [
            r#"{"seq":0,"t_ms":0,"received":"2026-01-05T09:30:00Z","type":"fault-injected","step":"c","kind":"cut (host)"}"#,
            r#"{"seq":1,"t_ms":1,"received":"2026-01-05T09:30:00Z","type":"node-ready","node":"h","role":"on-prem","status":"Unknown","gpus":8}"#,
            r#"{"seq":2,"t_ms":2,"received":"2026-01-05T09:30:00Z","type":"node-claim-condition","nodeclaim":"c","condition":"Initialized","status":"True"}"#,
            r#"{"seq":3,"t_ms":3,"received":"2026-01-05T09:30:00Z","type":"step-finished","step":"c","outcome":"warned"}"#,
            r#"{"seq":4,"t_ms":4,"received":"2026-01-05T09:30:00Z","type":"restore-started","step":"r","what":"node-failure"}"#,
        ];
        for line in lines {
            let o: Observation = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(serde_json::to_string(&o).unwrap(), line, "written back as it was read");
        }
    }
}
