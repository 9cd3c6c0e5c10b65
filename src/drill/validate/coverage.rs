//! Checks across sections: each objective against the steps that would measure it, the deadline against the steps'
//! own bounds, and `spec.cluster` against the context the command was given.

use super::{Expected, Validator};
use crate::domain::PhaseId;
use crate::drill::diagnostics::Diagnostic;
use crate::drill::duration;
use crate::drill::model::WaitCondition;
use crate::drill::parse::{index, join};
use crate::drill::raw;

/// The sections these checks compare: a part of one taken out by the type check leaves them unjudged.
const COMPARED: &[&str] = &["spec.steps", "spec.objectives", "spec.guards", "spec.cluster"];

/// The step actions that inject the fault, t0 of every phase.
const FAULTS: &[&str] = &["drain", "cut", "nodeFailure", "gpuFault"];

/// Why an objective's phase would not be measured: never, or only if the run happens to last long enough.
enum Gap {
    Never(String),
    Unwaited { wait: WaitCondition, end: &'static str },
}

impl Validator<'_> {
    pub(super) fn coverage(&mut self, drill: &raw::Drill, expected: Expected) {
        if self.pruned.touches_any(COMPARED) {
            return;
        }
        self.objectives_measured(&drill.spec);
        self.deadline_outlasts_steps(&drill.spec);
        if let Some(context) = expected.context {
            self.context_matches(&drill.spec.cluster, context);
        }
    }

    /// An objective no step measures is reported NOT MEASURED after the whole run: say so before it.
    fn objectives_measured(&mut self, spec: &raw::DrillSpec) {
        let mut objectives: Vec<(PhaseId, String)> = Vec::new();
        if spec.objectives.rto.is_some() {
            objectives.push((PhaseId::Rto, "spec.objectives.rto".into()));
        }
        for (key, budget) in &spec.objectives.phases.0 {
            if let (Ok(phase), Some(_)) = (key.parse::<PhaseId>(), budget) {
                objectives.push((phase, join("spec.objectives.phases", key)));
            }
        }
        // A drill without a fault may only check (steady state, preflight): its objectives are idle, not wrong.
        let Some(fault) = spec.steps.iter().position(|s| s.action_keys().iter().any(|k| FAULTS.contains(k))) else {
            if !objectives.is_empty() {
                self.warn("spec.objectives", |at| {
                    Diagnostic::new(
                        "no step injects a fault (`drain`, `cut`, `nodeFailure` or `gpuFault`), the start of every phase: none of \
                         these objectives will be measured",
                        at,
                    )
                });
            }
            return;
        };
        for (phase, path) in objectives {
            match gap(&spec.steps[fault..], phase) {
                None => {}
                Some(Gap::Never(why)) => {
                    self.problem(&path, format!("the `{}` objective can never be measured: {why}", phase.title()))
                }
                Some(Gap::Unwaited { wait, end }) => self.warn(&path, |at| {
                    Diagnostic::new(
                        format!(
                            "the `{}` objective may not be measured: no step after the fault waits for {end}",
                            phase.title()
                        ),
                        at,
                    )
                    .with_label("the run may end before this phase does, and report it NOT MEASURED (exit 1)")
                    .with_help(format!("add a step `- {{id: {wait}, waitFor: {wait}}}` after the fault"))
                }),
            }
        }
    }

    /// A step bound the deadline always cuts short is a mistake in one of the two.
    fn deadline_outlasts_steps(&mut self, spec: &raw::DrillSpec) {
        let deadline = spec.guards.deadline.0;
        let bounds = spec.steps.iter().enumerate().flat_map(|(i, s)| {
            let at = index("spec.steps", i);
            let timeout = s.timeout.map(|t| (t.0, join(&at, "timeout"), "timeout"));
            let pause = s.pause.map(|p| (p.0, join(&at, "pause"), "pause"));
            timeout.into_iter().chain(pause).map(move |(d, path, what)| (d, path, what, s.id.clone()))
        });
        let Some((longest, path, what, id)) = bounds.max_by_key(|(d, ..)| *d).filter(|(d, ..)| *d > deadline) else {
            return;
        };
        let (deadline_text, longest_text) = (duration::format(deadline), duration::format(longest));
        let message = format!(
            "the drill's deadline ({deadline_text}) is shorter than step `{id}`'s {what} ({longest_text}): the \
             deadline would abort the drill first"
        );
        let help = format!("raise `guards.deadline` above {longest_text}, or shorten the step's {what}");
        if self.spans.has("spec.guards.deadline") {
            let at = self.spans.value("spec.guards.deadline");
            self.push("spec.guards.deadline", Diagnostic::new(message, at).with_help(help));
        } else {
            let at = self.spans.value(&path);
            let message = format!("{message} (the default deadline; `guards.deadline` sets it)");
            self.push(&path, Diagnostic::new(message, at).with_help(help));
        }
    }

    /// `validate --context X` answers whether the drill would run there, as `run --context X` would.
    fn context_matches(&mut self, cluster: &raw::ClusterSection, context: &str) {
        match &cluster.context {
            Some(own) if own != context => {
                let at = self.spans.value("spec.cluster.context");
                self.push(
                    "spec.cluster.context",
                    Diagnostic::new(format!("this drill is for context `{own}`, not `{context}` (--context)"), at)
                        .with_help(format!("run it with --context {own}, or point spec.cluster at `{context}`")),
                );
            }
            Some(_) => {}
            None => self.warn("spec.cluster", |at| {
                Diagnostic::new(
                    format!(
                        "the drill names its cluster by kubeSystemUID only: whether context `{context}` is that \
                         cluster is checked when it runs (validate contacts no cluster)"
                    ),
                    at,
                )
            }),
        }
    }
}

/// What keeps `phase` from being measured by the steps from the fault on, if anything.
fn gap(after: &[raw::Step], phase: PhaseId) -> Option<Gap> {
    let waits = |c: WaitCondition| after.iter().any(|s| s.wait_for == Some(c));
    let loses_nodes = after.iter().any(|s| {
        s.node_failure.is_some() || s.cut.as_ref().is_some_and(|c| c.fidelity == crate::domain::CutFidelity::Host)
    });
    let fallback = |end| {
        (!waits(WaitCondition::FallbackReady) && !waits(WaitCondition::WorkloadRestored))
            .then_some(Gap::Unwaited { wait: WaitCondition::FallbackReady, end })
    };
    match phase {
        PhaseId::Detection | PhaseId::Taint | PhaseId::Toleration if !loses_nodes => Some(Gap::Never(
            "it needs a fault that makes on-prem nodes NotReady (a `cut` with `fidelity: host`, or a `nodeFailure`); \
             a drain or a pod-network cut leaves them Ready"
                .into(),
        )),
        PhaseId::GpuDetection | PhaseId::Quarantine | PhaseId::Degraded
            if !after.iter().any(|s| s.gpu_fault.is_some()) =>
        {
            Some(Gap::Never("it needs a `gpuFault` step".into()))
        }
        PhaseId::Restore | PhaseId::Revert | PhaseId::Rejoin if !after.iter().any(|s| s.restore.is_some()) => {
            Some(Gap::Never("it starts at a `restore` step, and the drill has none".into()))
        }
        PhaseId::Rto if !waits(WaitCondition::WorkloadRestored) => {
            Some(Gap::Unwaited { wait: WaitCondition::WorkloadRestored, end: "the service restored" })
        }
        PhaseId::Pending
        | PhaseId::Provisioning
        | PhaseId::Launched
        | PhaseId::Registered
        | PhaseId::Initialized
        | PhaseId::Scheduling
        | PhaseId::Startup
        | PhaseId::ImagePull
        | PhaseId::Load => fallback("the workload Ready on the fallback"),
        PhaseId::Return if !waits(WaitCondition::WorkloadOnPrem) => {
            Some(Gap::Unwaited { wait: WaitCondition::WorkloadOnPrem, end: "the workload back on-prem" })
        }
        PhaseId::Reclaim if !waits(WaitCondition::FallbackEmpty) => {
            Some(Gap::Unwaited { wait: WaitCondition::FallbackEmpty, end: "the fallback reclaimed to 0" })
        }
        _ => None,
    }
}
