//! What an auditor asks of a test besides its verdict: every deviation from the plan (retries, failed or timed-out
//! steps, warnings, overridden gates, manual actions, what was left in place on purpose), and the action items each
//! missed objective and each preflight warning raise, with the likely cause read from the phase breakdown and the
//! owner the drill file names. Pure functions of the drill, the timeline and the report built from them.

use super::model::Report;
pub use super::model::{ActionItem, ActionSource, Deviation, DeviationKind, UNASSIGNED};
use super::words::human_seconds;
use crate::domain::{PhaseId, StepOutcome};
use crate::drill::{Action, Check, Drill, OnDeviation};
use crate::phases::Phase;
use crate::timeline::{Event, Observation};

/// Sets the report's deviations and action items, from the rest of it.
pub(super) fn fill(drill: &Drill, observations: &[Observation], report: &mut Report) {
    note_budget_waits(observations, report);
    report.deviations = deviations(drill, observations, report);
    report.deviations.extend(super::impact::deviations(report));
    report.action_items = action_items(drill, report);
    let owner = drill.spec.evidence.owner.clone().unwrap_or_else(|| UNASSIGNED.into());
    report.action_items.extend(super::impact::action_items(report, &owner));
    report.action_items.extend(super::nets::action_items(report, &owner));
}

/// Every deviation of the run, in the order of the timeline, then what the drill file overrides or keeps.
pub fn deviations(drill: &Drill, observations: &[Observation], report: &Report) -> Vec<Deviation> {
    let mut out: Vec<Deviation> = observations.iter().filter_map(timeline_deviation).collect();
    for step in &report.steps {
        let kind = match step.outcome {
            StepOutcome::Failed if timed_out(&step.message) => DeviationKind::StepTimedOut,
            StepOutcome::Failed => DeviationKind::StepFailed,
            StepOutcome::Aborted => DeviationKind::StepAborted,
            _ => continue,
        };
        let what = if step.message.is_empty() {
            format!("step `{}` ({}) never finished: the drill stopped during it", step.id, step.action)
        } else {
            format!("step `{}` ({}): {}", step.id, step.action, step.message)
        };
        out.push(Deviation { kind, t_seconds: None, what });
    }
    out.extend(report.warnings.iter().map(|w| Deviation {
        kind: DeviationKind::Warning,
        t_seconds: None,
        what: w.clone(),
    }));
    out.extend(overridden_gates(drill, report));
    if report.outcome == crate::domain::Outcome::RestoreFailed {
        out.push(manual(
            None,
            "the restore failed: the cluster needed a person (`hybrid-drill recover RUN_DIR`)".into(),
        ));
    }
    if drill.spec.keep_changes {
        out.extend(crate::drill::left_in_place::left_in_place(drill).iter().map(|l| Deviation {
            kind: DeviationKind::ExpectedLeftover,
            t_seconds: None,
            what: format!("{l}: kept on purpose (keepChanges); `hybrid-drill recover RUN_DIR` undoes it"),
        }));
    }
    out
}

fn manual(t_seconds: Option<f64>, what: String) -> Deviation {
    Deviation { kind: DeviationKind::ManualAction, t_seconds, what }
}

fn timed_out(message: &str) -> bool {
    let m = message.to_lowercase();
    m.contains("timed out") || m.contains("timeout")
}

/// The deviations one observation shows: retried requests, lost watches, guards, signals.
fn timeline_deviation(o: &Observation) -> Option<Deviation> {
    let at = Some(o.t_ms as f64 / 1000.0);
    let retry = |what: String| Some(Deviation { kind: DeviationKind::Retry, t_seconds: at, what });
    match &o.event {
        // A budget's refusal is the drain honouring it: the eviction phase's note counts them.
        Event::EvictionBlocked { pdb: Some(_), .. } => None,
        Event::EvictionBlocked { pod, pdb: None, message } => {
            retry(format!("eviction of {pod} refused and retried: {message}"))
        }
        Event::WatchGap { resource, error } => {
            retry(format!("the watch of {resource} was lost and restarted: {error}"))
        }
        Event::GuardTripped { guard, message } => Some(Deviation {
            kind: DeviationKind::StepAborted,
            t_seconds: at,
            what: format!("guard {guard}: {message}"),
        }),
        Event::Aborted { reason } if reason.starts_with("interrupted by") => {
            Some(manual(at, format!("emergency stop: {reason}; the cluster was restored")))
        }
        Event::UndoFailed { action, target, error } => {
            Some(manual(at, format!("the undo of {action} on {target} failed ({error}): left for `recover`")))
        }
        Event::GateOverridden { gate, closed, by, reason } => Some(Deviation {
            kind: DeviationKind::OverriddenGate,
            t_seconds: at,
            what: format!("start gate `{gate}` overridden by {by}: {reason} (it was closed: {closed})"),
        }),
        Event::EmergencyStop { reason, by, set_at } => Some(manual(
            at,
            format!(
                "emergency stop pulled by {}{}: {reason}; the drill aborted",
                by.as_deref().unwrap_or("someone (no hybrid-drill.io/stopped-by given)"),
                set_at.map(|t| format!(" at {}", t.format("%H:%M:%S UTC"))).unwrap_or_default()
            ),
        )),
        _ => None,
    }
}

/// Evictions a PodDisruptionBudget refused and the drain retried until the budget allowed them: the drain working as
/// designed, so a fact of the eviction phase (which budget, how many refusals, how many pods), told once in its note
/// rather than as a deviation per refusal.
fn note_budget_waits(observations: &[Observation], report: &mut Report) {
    let mut by_budget: std::collections::BTreeMap<&str, (usize, std::collections::BTreeSet<&str>)> =
        std::collections::BTreeMap::new();
    for o in observations {
        if let Event::EvictionBlocked { pod, pdb: Some(pdb), .. } = &o.event {
            let entry = by_budget.entry(pdb.as_str()).or_default();
            entry.0 += 1;
            entry.1.insert(pod.as_str());
        }
    }
    if by_budget.is_empty() {
        return;
    }
    let waits: Vec<String> = by_budget
        .iter()
        .map(|(pdb, (refusals, pods))| {
            let pods = pods.len();
            format!(
                "{refusals} eviction{} refused by PodDisruptionBudget {pdb} ({pods} pod{}) and retried until it \
                 allowed them",
                if *refusals == 1 { "" } else { "s" },
                if pods == 1 { "" } else { "s" }
            )
        })
        .collect();
    let said = format!("the drain waited on budgets as designed: {}", waits.join("; "));
    if let Some(phase) = report.phases.iter_mut().find(|p| p.name == PhaseId::Eviction) {
        phase.note = Some(match phase.note.take() {
            Some(note) if !note.is_empty() => format!("{note}; {said}"),
            _ => said,
        });
    }
}

/// The safety checks the drill file turned off or down, and whether the run met them.
fn overridden_gates(drill: &Drill, report: &Report) -> Vec<Deviation> {
    let gate = |what: String| Deviation { kind: DeviationKind::SafetyRelaxed, t_seconds: None, what };
    let mut out = Vec::new();
    for step in &drill.spec.steps {
        match &step.action {
            Action::Drain(d) if d.flags.force => out.push(gate(format!(
                "step `{}` drains with force: pods no controller re-creates may be deleted",
                step.id
            ))),
            Action::Drain(d) if d.flags.delete_empty_dir_data => {
                out.push(gate(format!("step `{}` drains with deleteEmptyDirData: emptyDir data may be lost", step.id)))
            }
            Action::Check(Check::Preflight, OnDeviation::Warn) => {
                let failed =
                    report.steps.iter().find(|s| s.id == step.id).is_some_and(|s| {
                        s.outcome == StepOutcome::Warned && !s.message.starts_with("preflight: 0 failed")
                    });
                if failed {
                    out.push(gate(format!(
                        "step `{}` let the drill go on although preflight checks failed (onDeviation: warn)",
                        step.id
                    )));
                }
            }
            _ => {}
        }
    }
    out
}

/// One action item per missed objective and per preflight finding, each with its likely cause and owner.
pub fn action_items(drill: &Drill, report: &Report) -> Vec<ActionItem> {
    let owner = drill.spec.evidence.owner.clone().unwrap_or_else(|| UNASSIGNED.into());
    let mut items: Vec<ActionItem> = report
        .phases
        .iter()
        .filter(|p| p.misses_objective())
        .map(|p| ActionItem {
            source: ActionSource::MissedObjective,
            objective: format!("{} <= {}", p.name.title(), human_seconds(p.objective_seconds.unwrap_or_default())),
            measured: p.seconds.map(human_seconds).unwrap_or_else(|| "not measured".into()),
            cause: likely_cause(p, &report.phases),
            owner: owner.clone(),
        })
        .collect();
    for finding in preflight_findings(drill, report) {
        items.push(ActionItem {
            source: ActionSource::PreflightWarning,
            objective: format!("preflight: {finding}"),
            measured: "warning".into(),
            cause: "the fallback design departs from the recommendations: see `hybrid-drill preflight`".into(),
            owner: owner.clone(),
        });
    }
    items
}

/// The findings the drill's preflight steps reported without refusing it: `preflight: N failed, N warnings, N
/// passed: finding | finding`.
fn preflight_findings(drill: &Drill, report: &Report) -> Vec<String> {
    let preflight_ids: Vec<&str> = drill
        .spec
        .steps
        .iter()
        .filter(|s| matches!(s.action, Action::Check(Check::Preflight, _)))
        .map(|s| s.id.as_str())
        .collect();
    report
        .steps
        .iter()
        .filter(|s| preflight_ids.contains(&s.id.as_str()) && s.outcome == StepOutcome::Warned)
        .filter_map(|s| s.message.splitn(3, ": ").nth(2))
        .flat_map(|findings| findings.split(" | ").map(str::to_string))
        .collect()
}

/// The phases the RTO is made of, in order: its own breakdown (it has no sub-phases of its own).
const RTO_PARTS: [PhaseId; 5] =
    [PhaseId::Eviction, PhaseId::Pending, PhaseId::Provisioning, PhaseId::Scheduling, PhaseId::Startup];

/// `startup 5m 38.0s, of which image-pull 2m 30.0s: pre-pull or lazy-load the image`: the phase, its largest part
/// (and that part's largest), and what addresses the deepest one.
pub fn likely_cause(phase: &Phase, phases: &[Phase]) -> String {
    let Some(seconds) = phase.seconds else {
        return format!(
            "{} was not measured: the timeline lacks one of its moments (a watch gap, or the drill stopped first)",
            phase.name.title()
        );
    };
    let mut text = format!("{} {}", phase.name.title(), human_seconds(seconds));
    let mut deepest = phase.name;
    for _ in 0..2 {
        let Some(part) = largest_part(deepest, phases) else { break };
        text.push_str(&format!(", of which {} {}", part.name.title(), human_seconds(part.seconds.unwrap_or_default())));
        deepest = part.name;
    }
    format!("{text}: {}", advice(deepest))
}

fn largest_part(of: PhaseId, phases: &[Phase]) -> Option<&Phase> {
    phases
        .iter()
        .filter(|p| if of == PhaseId::Rto { RTO_PARTS.contains(&p.name) } else { p.parent == Some(of) })
        .filter(|p| p.seconds.is_some())
        .max_by(|a, b| a.seconds.partial_cmp(&b.seconds).unwrap_or(std::cmp::Ordering::Equal))
}

/// What usually shortens a phase, for the action item.
fn advice(phase: PhaseId) -> &'static str {
    match phase {
        PhaseId::Eviction => "the pods left on-prem slowly: review the PodDisruptionBudgets and terminationGracePeriod",
        PhaseId::Detection => "the control plane saw the node lost late: review node-monitor-grace-period",
        PhaseId::Taint | PhaseId::Toleration => {
            "the pods waited out their tolerations: lower tolerationSeconds for not-ready and unreachable"
        }
        PhaseId::GpuDetection => {
            "the GPU was reported unhealthy late: check the device plugin's health checks and DCGM"
        }
        PhaseId::Quarantine | PhaseId::Degraded => crate::report::gpu_fault::QUARANTINE_ADVICE,
        PhaseId::Pending => "the NodeClaim came late: review Karpenter's batching and the fallback NodePool's limits",
        PhaseId::Provisioning | PhaseId::Launched => {
            "cloud capacity came slowly: widen the NodePool's instance types and zones, or keep warm capacity"
        }
        PhaseId::Registered | PhaseId::Initialized => {
            "the node joined slowly: slim its bootstrap, bake the GPU driver and device plugin into the image"
        }
        PhaseId::Scheduling => "the pod waited for a Ready node with GPUs: check the device plugin and taints",
        PhaseId::Startup => "the pod started slowly: see its startup parts in the report",
        PhaseId::ImagePull => "pre-pull or lazy-load the image (a pre-pull DaemonSet, a snapshotter, a cached AMI)",
        PhaseId::Load => "the model loaded slowly: cache the weights on the node or a faster volume",
        PhaseId::Rto => "no part of it stands out: review each phase against its own objective",
        PhaseId::Restore | PhaseId::Revert | PhaseId::Rejoin => {
            "the on-prem nodes rejoined slowly: check the kubelet's reconnection and the cut's revert"
        }
        PhaseId::Return => "the workload came home slowly: review the return's rollout and its readiness",
        PhaseId::Reclaim => {
            "the fallback was reclaimed slowly: lower the NodePool's consolidateAfter, see the reclaim blockers"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{RunMeta, build, sample};
    use crate::timeline::Observation;

    /// The drain drill recorded on the lab's realistic profile (tests/fixtures/realistic-drain), its drill file
    /// edited as `edit` says: minutes of image pull and model load, a budget that held two evictions.
    fn realistic(edit: impl Fn(String) -> String) -> (Drill, Vec<Observation>, Report) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-drain");
        let source = edit(std::fs::read_to_string(dir.join("drill.yaml")).unwrap());
        let drill = crate::drill::from_source(&dir.join("drill.yaml"), source).unwrap().drill;
        let observations = crate::timeline::read(&dir.join("timeline.jsonl")).unwrap();
        let report = build(&drill, &observations, &sample::meta());
        (drill, observations, report)
    }

    #[test]
    fn a_recorded_drain_counts_its_budget_refusals_in_the_eviction_phase_and_lists_its_warning() {
        let (_, _, report) = realistic(|s| s);
        let kinds: Vec<DeviationKind> = report.deviations.iter().map(|d| d.kind).collect();
        assert_eq!(kinds, [DeviationKind::Warning], "{:#?}", report.deviations);
        let eviction = report.phase(PhaseId::Eviction).unwrap();
        let note = eviction.note.as_deref().unwrap_or_default();
        assert!(
            note.contains("the drain waited on budgets as designed: 2 evictions refused by PodDisruptionBudget"),
            "{note}"
        );
        // Every objective met: nothing to act on.
        assert!(report.action_items.is_empty(), "{:#?}", report.action_items);
    }

    #[test]
    fn a_missed_rto_is_traced_down_the_phase_breakdown_to_its_owner() {
        let edit = |s: String| {
            s.replace("    rto: 15m", "    rto: 5m")
                .replace("  steps:\n", "  evidence: {owner: gpu-platform}\n  steps:\n")
        };
        let (_, _, report) = realistic(edit);
        let item = report.action_items.iter().find(|a| a.objective.starts_with("RTO")).expect("an item for the RTO");
        assert_eq!(item.source, ActionSource::MissedObjective);
        assert_eq!(item.objective, "RTO <= 5m 00.0s");
        assert_eq!(item.owner, "gpu-platform");
        // The RTO path's largest part is the eviction (about 6m 35s, the budget holding the second pair), larger
        // than the startup (about 5m 35s); a drain's eviction has no parts of its own.
        assert!(item.measured.starts_with("13m"), "{item:?}");
        assert!(item.cause.starts_with(&format!("RTO {}, of which eviction 6m", item.measured)), "{}", item.cause);
        assert!(item.cause.ends_with(advice(PhaseId::Eviction)), "{}", item.cause);
    }

    #[test]
    fn each_missed_objective_is_an_action_item_unassigned_without_an_owner() {
        let report = sample::report();
        let objectives: Vec<&str> = report.action_items.iter().map(|a| a.objective.as_str()).collect();
        assert_eq!(objectives, ["provisioning <= 5.0s", "reclaim <= 10.0s"]);
        let provisioning = &report.action_items[0];
        assert_eq!((provisioning.measured.as_str(), provisioning.owner.as_str()), ("6.0s", UNASSIGNED));
        assert!(
            provisioning.cause.starts_with("provisioning 6.0s, of which initialized 3.4s: the node joined slowly"),
            "{}",
            provisioning.cause
        );
    }

    /// An observation `seq` seconds into the run.
    fn at(seq: u64, event: Event) -> Observation {
        Observation {
            seq,
            t_ms: seq * 1000,
            received: sample::base() + chrono::Duration::seconds(seq as i64),
            server_time: None,
            event,
        }
    }

    /// A drill stopped by Ctrl-C in its wait, after a preflight let through with failures and a step that timed out.
    #[test]
    fn timeouts_overrides_and_an_emergency_stop_are_deviations_and_findings_action_items() {
        let source = sample::DRILL
            .replace(
                "    - {id: drain, drain: onPrem}",
                "    - {id: preflight, check: preflight, onDeviation: warn}\n    - {id: drain, drain: {nodes: onPrem, force: true}}",
            )
            .replace("{restart: deployment/llm}", "{restart: deployment/llm, uncordon: false}")
            .replace("  steps:\n", "  keepChanges: true\n  steps:\n");
        let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), source).unwrap().drill;
        let finished = |step: &str, outcome, message: &str| Event::StepFinished {
            step: step.into(),
            outcome,
            message: message.into(),
        };
        let started = |step: &str| Event::StepStarted { step: step.into(), action: String::new() };
        let observations = vec![
            at(0, Event::DrillStarted { drill: "d".into(), run_id: "r".into(), context: "c".into() }),
            at(1, started("preflight")),
            at(
                2,
                finished(
                    "preflight",
                    StepOutcome::Warned,
                    "preflight: 1 failed, 1 warnings, 9 passed: pdb: blocks | taint: missing",
                ),
            ),
            at(3, started("drain")),
            at(4, finished("drain", StepOutcome::Failed, "timed out after 10m waiting for 2 pods")),
            at(5, started("fallback")),
            at(6, Event::Aborted { reason: "interrupted by SIGINT".into() }),
        ];
        let report = build(&drill, &observations, &RunMeta { provenance: None, ..sample::meta() });
        let kinds: Vec<DeviationKind> = report.deviations.iter().map(|d| d.kind).collect();
        for kind in [
            DeviationKind::ManualAction,
            DeviationKind::StepTimedOut,
            DeviationKind::StepAborted,
            DeviationKind::SafetyRelaxed,
            DeviationKind::ExpectedLeftover,
        ] {
            assert!(kinds.contains(&kind), "no {kind:?} in {:#?}", report.deviations);
        }
        let gates: Vec<&str> = report
            .deviations
            .iter()
            .filter(|d| d.kind == DeviationKind::SafetyRelaxed)
            .map(|d| d.what.as_str())
            .collect();
        assert_eq!(gates.len(), 2, "the forced drain and the preflight let through: {gates:?}");
        assert!(!kinds.contains(&DeviationKind::OverriddenGate), "no start gate was overridden");
        let findings: Vec<&str> = report
            .action_items
            .iter()
            .filter(|a| a.source == ActionSource::PreflightWarning)
            .map(|a| a.objective.as_str())
            .collect();
        assert_eq!(findings, ["preflight: pdb: blocks", "preflight: taint: missing"]);
    }

    /// A start gate let through and the emergency stop pulled: each a deviation with who, when and why.
    #[test]
    fn an_overridden_start_gate_and_the_emergency_stop_are_deviations() {
        let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), sample::DRILL.into()).unwrap().drill;
        let set_at = sample::base() + chrono::Duration::seconds(4);
        let observations = vec![
            at(0, Event::DrillStarted { drill: "d".into(), run_id: "r".into(), context: "c".into() }),
            at(
                0,
                Event::GateOverridden {
                    gate: crate::domain::GateKind::Alert,
                    closed: "GPUNodeDown fires".into(),
                    by: "alice@laptop".into(),
                    reason: "the alert is the drill's own".into(),
                },
            ),
            at(
                5,
                Event::EmergencyStop {
                    reason: "checkout errors rising".into(),
                    by: Some("bob".into()),
                    set_at: Some(set_at),
                },
            ),
            at(5, Event::Aborted { reason: "emergency stop pulled by bob: checkout errors rising".into() }),
        ];
        let report = build(&drill, &observations, &RunMeta { provenance: None, ..sample::meta() });
        let gate = report.deviations.iter().find(|d| d.kind == DeviationKind::OverriddenGate).unwrap();
        assert_eq!(gate.t_seconds, Some(0.0));
        assert_eq!(
            gate.what,
            "start gate `alert` overridden by alice@laptop: the alert is the drill's own (it was closed: GPUNodeDown fires)"
        );
        let stop = report.deviations.iter().find(|d| d.kind == DeviationKind::ManualAction).unwrap();
        assert_eq!(
            (stop.t_seconds, stop.what.as_str()),
            (Some(5.0), "emergency stop pulled by bob at 09:30:04 UTC: checkout errors rising; the drill aborted")
        );
    }
}
