//! Building a report from a drill and its timeline: a pure function, so a run directory re-renders with today's
//! logic (`load` reads one back).

use chrono::{DateTime, Utc};

use super::fidelity;
use super::model::{
    ClusterRecord, DrillIdentity, EmergencyStop, IncidentFacts, Marker, Notable, OverlapWindow, OverriddenGate,
    REPORT_SCHEMA, Report, Rollback, RunKind, StepRecord,
};
use crate::domain::{Outcome, RequestsByVerb, StepOutcome};
use crate::drill::Drill;
use crate::phases::{Analysis, Boundary};
use crate::timeline::{Event, NodeRole, Observation};

/// What a report holds that the timeline cannot: the tool, the drill file as it ran, the API server it ran against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMeta {
    pub tool_version: String,
    pub drill_file: String,
    pub drill_source: String,
    pub cluster_server: String,
    pub cluster_version: String,
    pub provenance: Option<super::provenance::Provenance>,
}

impl RunMeta {
    /// The meta a recorded report kept.
    pub(super) fn recorded(report: &Report) -> RunMeta {
        RunMeta {
            tool_version: report.tool_version.clone(),
            drill_file: report.drill.file.clone(),
            drill_source: report.drill.source.clone(),
            cluster_server: report.cluster.server.clone(),
            cluster_version: report.cluster.version.clone(),
            provenance: report.provenance.clone(),
        }
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

/// The report of a run: a pure function of the drill, what the run observed and the meta the timeline cannot hold.
/// `started` is the timeline's origin, `finished` the drill's end (or the last observation of a run that never
/// recorded one).
pub fn build(drill: &Drill, observations: &[Observation], meta: &RunMeta) -> Report {
    build_analysed(drill, observations, analyse(drill, observations), meta)
}

/// The phases of a run, cut once from its timeline: a drill's against its steps, an incident's without them.
pub fn analyse(drill: &Drill, observations: &[Observation]) -> Analysis {
    let measured = measured_drill(drill, IncidentFacts::of(observations).is_some());
    crate::phases::analyse(&measured, observations)
}

/// The report of a run whose timeline was analysed already ([`analyse`] on the same observations): the run's own
/// finish analyses once, judges with it, and builds its report from the same analysis.
// Long: one line per field of the report, in its order; split, the struct literal would be split with it.
pub fn build_analysed(drill: &Drill, observations: &[Observation], analysis: Analysis, meta: &RunMeta) -> Report {
    #[cfg(test)]
    BUILT.with(|n| n.set(n.get() + 1));
    let incident = IncidentFacts::of(observations);
    let measured = measured_drill(drill, incident.is_some());
    let drill = &*measured;
    let (run_id, context) = observations
        .iter()
        .find_map(|o| match &o.event {
            Event::DrillStarted { run_id, context, .. } => Some((run_id.clone(), context.clone())),
            _ => None,
        })
        .unwrap_or_default();
    let (started, finished) = span(observations);
    let abort_reason = observations.iter().find_map(|o| match &o.event {
        Event::Aborted { reason } => Some(reason.clone()),
        _ => None,
    });
    let rollback = rollback(observations);
    // An incident injected no fault and read no alerts: its drill's safety nets are the drills' to prove.
    let safety_nets = crate::nets::judge(drill, observations).filter(|_| incident.is_none());
    let missed = !analysis.objectives_missed.is_empty() || safety_nets.as_ref().is_some_and(|n| n.missed());
    let outcome = outcome(observations, missed, &rollback, &abort_reason);
    let fallback_faults = crate::phases::fallback_faults::fallback_faults(observations, analysis_rto(&analysis.phases));
    let reclaim_from_ms = reclaim_from(&analysis.phases);
    let mut report = Report {
        schema: REPORT_SCHEMA.into(),
        tool_version: meta.tool_version.clone(),
        run_id,
        provenance: meta.provenance.clone(),
        drill: DrillIdentity {
            name: drill.metadata.name.clone(),
            description: drill.metadata.description.clone(),
            file: meta.drill_file.clone(),
            source: meta.drill_source.clone(),
        },
        cluster: ClusterRecord { context, server: meta.cluster_server.clone(), version: meta.cluster_version.clone() },
        started,
        finished,
        outcome,
        exit_code: crate::exit::exit_code(outcome),
        abort_reason,
        headline: Vec::new(),
        forecast: None,
        crashed: None,
        fidelity: incident.as_ref().map_or_else(|| fidelity::statement(drill, observations), IncidentFacts::statement),
        // A drill the watch saw is a drill, whoever recorded it: never an incident in history or alerts.
        kind: if incident.as_ref().is_some_and(|i| i.drill_run.is_none()) { RunKind::Incident } else { RunKind::Drill },
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
        autoscaler: super::autoscaling::autoscaling(observations),
        watch_gaps: observations.iter().filter(|o| matches!(o.event, Event::WatchGap { .. })).count(),
        api_requests: requests_sent(observations).map_or(0, |(total, _)| total),
        api_requests_by_verb: requests_sent(observations).map(|(_, by_verb)| by_verb.clone()).unwrap_or_default(),
        warnings: warnings(observations),
        reclaim_blockers: super::blockers::reclaim_blockers(observations, reclaim_from_ms),
        fallback_faults,
        last_tier: super::last_tier::last_tier(drill, observations),
        safety_nets,
        gpu_fault: crate::phases::gpu_fault::outcome(observations),
        gates_overridden: overridden_gates(observations),
        emergency_stop: emergency_stop(observations),
        last_resort: super::headline::last_resorts(drill, observations),
        service_level: super::service::service_level(drill, observations),
        blast_radius: super::leftovers::blast_radius(observations),
        collateral: super::leftovers::collateral(observations),
        leftovers: super::leftovers::leftovers(observations),
        impact: super::impact::recorded(observations),
        deviations: Vec::new(),
        action_items: Vec::new(),
    };
    report.headline = super::headline::qualifiers(&report, super::headline::on_prem_nodes(observations));
    super::deviations::fill(drill, observations, &mut report);
    report
}

#[cfg(test)]
thread_local! {
    /// How many reports this thread built: a run's finish builds one (`record::seal`'s test counts).
    pub(crate) static BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What the run's restore undid, could not undo and verified, when it ran.
fn rollback(observations: &[Observation]) -> Option<Rollback> {
    observations.iter().rev().find_map(|o| match &o.event {
        Event::RollbackFinished { undone, failed, verified } => {
            Some(Rollback { undone: undone.clone(), failed: failed.clone(), verified: verified.clone() })
        }
        _ => None,
    })
}

/// Every warning the run recorded, in order.
fn warnings(observations: &[Observation]) -> Vec<String> {
    observations
        .iter()
        .filter_map(|o| match &o.event {
            Event::Warning { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// The drill a run is measured against: an incident's without its steps, which never ran (its targets and
/// objectives stand).
fn measured_drill(drill: &Drill, incident: bool) -> std::borrow::Cow<'_, Drill> {
    if !incident {
        return std::borrow::Cow::Borrowed(drill);
    }
    let mut stepless = drill.clone();
    stepless.spec.steps.clear();
    std::borrow::Cow::Owned(stepless)
}

/// When the reclaim phase began, on the tool's clock.
pub(super) fn reclaim_from(phases: &[crate::phases::Phase]) -> Option<u64> {
    phases.iter().find(|p| p.name == crate::phases::PhaseId::Reclaim).and_then(|p| p.from.as_ref()).map(|b| b.t_ms)
}

fn analysis_rto(phases: &[crate::phases::Phase]) -> Option<f64> {
    phases.iter().find(|p| p.name == crate::phases::PhaseId::Rto).and_then(|p| p.seconds)
}

fn overridden_gates(observations: &[Observation]) -> Vec<OverriddenGate> {
    observations
        .iter()
        .filter_map(|o| match &o.event {
            Event::GateOverridden { gate, closed, by, reason } => Some(OverriddenGate {
                gate: *gate,
                closed: closed.clone(),
                by: by.clone(),
                reason: reason.clone(),
                at: o.received,
            }),
            _ => None,
        })
        .collect()
}

fn emergency_stop(observations: &[Observation]) -> Option<EmergencyStop> {
    observations.iter().find_map(|o| match &o.event {
        Event::EmergencyStop { reason, by, set_at } => {
            Some(EmergencyStop { reason: reason.clone(), by: by.clone(), set_at: *set_at, seen_at: o.received })
        }
        _ => None,
    })
}

impl IncidentFacts {
    /// The facts an incident's timeline holds; `None` for a drill's.
    pub fn of(observations: &[Observation]) -> Option<IncidentFacts> {
        let mut facts = observations.iter().find_map(|o| match &o.event {
            Event::IncidentOpened { cause, nodes, evidence, unknown, drill_run } => Some(IncidentFacts {
                cause: *cause,
                nodes: nodes.clone(),
                evidence: evidence.clone(),
                unknown: unknown.clone(),
                closed: None,
                drill_run: drill_run.clone(),
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
    pub(super) fn statement(&self) -> String {
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

/// The timeline's origin, and the drill's end (or the last observation of a run that never recorded one).
/// When a run started (its timeline's origin) and finished (its recorded end, else its last observation).
pub fn span(observations: &[Observation]) -> (DateTime<Utc>, DateTime<Utc>) {
    let started =
        observations.first().map(|o| o.received - chrono::Duration::milliseconds(o.t_ms as i64)).unwrap_or_default();
    let finished = observations
        .iter()
        .rev()
        .find(|o| matches!(o.event, Event::DrillFinished { .. }))
        .or(observations.last())
        .map_or(started, |o| o.received);
    (started, finished)
}

/// The run's outcome: the one it recorded, else what its rollback and abort say, else the phases' verdict.
fn outcome(
    observations: &[Observation],
    missed: bool,
    rollback: &Option<Rollback>,
    abort_reason: &Option<String>,
) -> Outcome {
    let judged = if missed { Outcome::ObjectiveMissed } else { Outcome::Passed };
    match recorded_outcome(observations) {
        // Both say every step ran; which of the two is the phases' verdict, so a report rendered again with phases
        // measured anew judges them anew rather than repeat a verdict its own table contradicts.
        Some(Outcome::Passed | Outcome::ObjectiveMissed) => judged,
        Some(recorded) => recorded,
        None => match (rollback, abort_reason) {
            (Some(r), _) if !r.failed.is_empty() => Outcome::RestoreFailed,
            (_, Some(_)) => Outcome::Aborted,
            _ => judged,
        },
    }
}

/// The outcome the run recorded when the drill finished.
pub(super) fn recorded_outcome(observations: &[Observation]) -> Option<Outcome> {
    observations.iter().rev().find_map(|o| match &o.event {
        Event::DrillFinished { outcome } => Some(*outcome),
        _ => None,
    })
}

/// One record per step of the drill, in its order: never started is skipped, started and never finished is
/// aborted (a signal, a guard or the deadline stopped it), finished says how and took the time between the two.
pub(super) fn step_records(drill: &Drill, observations: &[Observation]) -> Vec<StepRecord> {
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

/// The run's request count, recorded once at its end.
fn requests_sent(observations: &[Observation]) -> Option<(u64, &RequestsByVerb)> {
    observations.iter().rev().find_map(|o| match &o.event {
        Event::RequestsSent { total, by_verb } => Some((*total, by_verb)),
        _ => None,
    })
}

/// Which marker lane an observation belongs to; `None` for observations not worth a line in a report (the full
/// timeline stays in `timeline.jsonl`).
fn marker(event: &Event) -> Option<Marker> {
    let drilled = |role: &NodeRole| *role != NodeRole::Other;
    Some(match event {
        Event::FaultInjected { .. }
        | Event::IncidentOpened { .. }
        | Event::IncidentSpread { .. }
        | Event::GuardTripped { .. }
        | Event::EmergencyStop { .. }
        | Event::Aborted { .. }
        | Event::HookRan { .. }
        | Event::CapacityRemoved { .. }
        | Event::PartialLoss { .. }
        | Event::FallbackNodeLost { .. }
        | Event::PolicyApplied { .. } => Marker::Fault,
        Event::EvictionBlocked { .. } | Event::Evicted { .. } | Event::WorkloadsDisplaced { .. } => Marker::Eviction,
        Event::NodeClaimCreated { .. }
        | Event::NodeClaimCondition { .. }
        | Event::NodeClaimDeleted { .. }
        | Event::ReclaimBlocked { .. }
        | Event::CollateralNodeClaim { .. }
        | Event::Leftover { .. } => Marker::NodeClaim,
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
        | Event::CollateralReturned { .. }
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
    let mut needed = super::service::Needed::start(None, observations);
    observations
        .iter()
        .filter_map(|o| {
            let needed = needed.after(&o.event);
            marker(&o.event).map(|kind| Notable {
                t_seconds: o.t_ms as f64 / 1000.0,
                at: o.received,
                server_time: o.server_time,
                what: super::service::availability_words(&o.event, needed).unwrap_or_else(|| o.event.describe()),
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
