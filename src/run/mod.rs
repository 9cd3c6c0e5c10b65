//! Running a drill as a `Run` in four stages: set up (connect, plan, confirm, run directory, watches), execute (the
//! steps under signals, guards and the deadline), stop (restore after an abort, or a refusal), and finish (phases,
//! report, writing). Every warning, the rollback and the request count go to the timeline as they happen.

mod directory;
mod error;
mod plan_only;
mod shipping;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use chrono::Utc;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

use crate::cluster::collateral::LeftoverKind;
use crate::cluster::lease::{Claimant, Observer, this_host};
use crate::cluster::{self, Cluster, KubeContext, Reader};
use crate::drill::{Action, Drill, LoadedDrill, ReplicaBasis, ReturnAction, Webhook, WorkloadRef};
use crate::evidence::{Approval, SigningKey};
use crate::gates;
use crate::monitor::Monitor;
use crate::notify::{self, Notice, Notifier};
use crate::phases;
use crate::plan::{self, Plan};
use crate::progress::Progress;
use crate::report::deviations::{Deviation, DeviationKind};
use crate::report::provenance::Provenance;
use crate::report::{self, Outcome, Report, RunMeta};
use crate::safety::emergency::StopWatch;
use crate::safety::lock::{self, Claim, HeldLock};
use crate::safety::{self, Mutator, RollbackOutcome};
use crate::steps::{self, StepContext, StepError};
use crate::timeline::view::{ClusterView, SharedView};
use crate::timeline::watch::Watches;
use crate::timeline::{Event, NodeRole, StepOutcome, Timeline};

use directory::open_run_files;
pub(crate) use directory::run_dir;
pub use directory::write_reports;
pub use error::SetupError;
pub use plan_only::{Planned, plan_only};

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub target: KubeContext,
    pub yes: bool,
    pub dry_run: bool,
    pub json: bool,
    pub reports_dir: PathBuf,
    /// Push the run's metrics to this Pushgateway once the drill is over.
    pub pushgateway: Option<String>,
    /// Webhooks told of the run besides the drill's own `spec.notify`.
    pub notify: Vec<Webhook>,
    /// Closed start gates to let through (`--override-gate NAME --reason TEXT`).
    pub overrides: Vec<gates::Override>,
    /// The change record and approver the run is given; a drill may require both.
    pub approval: Approval,
    /// The key that signs the run directory's manifest: a file, or a secret reference.
    pub signing_key: Option<String>,
    /// The drill's commands (`exec` steps, hooks) may run: the operator read them (`plan` lists them).
    pub allow_commands: bool,
    /// Where the run directory is shipped besides, over the drill file's `spec.evidence.ship`.
    pub ship: crate::store::ShipOverrides,
}

/// What a finished (or stopped) run left behind.
pub struct RunResult {
    pub report: Report,
    pub run_dir: PathBuf,
}

/// Runs a drill through its four stages.
pub async fn run(loaded: &LoadedDrill, opts: &RunOptions) -> Result<RunResult, SetupError> {
    // Before the cluster is contacted: a run the drill file does not allow, or whose record could not be signed,
    // touches nothing.
    let missing = opts.approval.missing(loaded);
    if !missing.is_empty() {
        return Err(SetupError::Unapproved { missing: missing.join(" and ") });
    }
    let commands = crate::drill::commands::of(&loaded.drill);
    if !opts.allow_commands && !commands.is_empty() {
        return Err(SetupError::Commands { commands: commands.iter().map(ToString::to_string).collect() });
    }
    let key = opts.signing_key.as_deref().map(SigningKey::load).transpose()?;
    // Its credentials read now: a run whose record could not be shipped is refused before it starts.
    if let Some(policy) = opts.ship.policy(loaded.drill.spec.evidence.ship.as_ref()) {
        policy.connection.bucket(&policy.location.bucket)?;
    }
    // Registered before anything is touched, so a signal never kills the process mid-change.
    let signals = tokio::spawn(interrupted());
    let mut run = Run::set_up(loaded, opts).await?;
    let stop = run.execute(signals).await;
    let stopped = run.stop(stop).await;
    run.finish(stopped, opts, key.as_ref()).await
}

/// Why the steps stopped.
enum Stop {
    Completed,
    StepFailed(String),
    Aborted(String),
    /// A step refused the drill before anything was changed (a failed preflight).
    Refused(String),
}

/// How the stop stage left the cluster.
struct Stopped {
    stop: Stop,
    restore_failed: bool,
    /// Cloud capacity the drill caused was still running at the end (a leftover NodeClaim in any pool).
    left_behind: bool,
}

impl Stopped {
    fn outcome(&self, objectives_met: bool) -> Outcome {
        match (&self.stop, self.restore_failed) {
            (_, true) => Outcome::RestoreFailed,
            (Stop::Completed, _) if self.left_behind => Outcome::LeftBehind,
            (Stop::Completed, _) if objectives_met => Outcome::Passed,
            (Stop::Completed, _) => Outcome::ObjectiveMissed,
            (Stop::Refused(_), _) => Outcome::Refused,
            _ => Outcome::Aborted,
        }
    }
}

/// Warnings for the report: each is a timeline event, which `report::build` reads back.
struct Warnings {
    timeline: Timeline,
}

impl Warnings {
    fn raise(&mut self, message: String) {
        self.timeline.record(Event::Warning { message });
    }
}

/// A drill under way: what set-up connected, resolved and started, and what the steps have done so far.
struct Run<'a> {
    loaded: &'a LoadedDrill,
    cluster: Cluster,
    reader: Reader,
    version: String,
    plan: Plan,
    dir: PathBuf,
    timeline: Timeline,
    progress: Progress,
    follow: JoinHandle<()>,
    view: SharedView,
    watches: Watches,
    monitor: Monitor,
    mutator: Mutator,
    lock: HeldLock,
    emergency: StopWatch,
    warnings: Warnings,
    notifier: Notifier,
    /// The SLIs, once their steady state held: read until the report is written.
    slo: Option<crate::slo::Slo>,
    provenance: Provenance,
}

impl<'a> Run<'a> {
    /// Connects, resolves the plan, asks for confirmation, creates the run directory and starts the watches; fails
    /// with nothing touched.
    // Long: one ordered sequence (confirm, lock, watches, baseline, autoscaler, monitor) whose order is what keeps a
    // refused or failed set-up from touching anything; split, the order would be spread over several functions.
    async fn set_up(loaded: &'a LoadedDrill, opts: &RunOptions) -> Result<Run<'a>, SetupError> {
        let drill = &loaded.drill;
        let (cluster, version) = cluster::connect(&opts.target, &drill.spec.cluster).await?;
        let plan = plan::resolve(&cluster, drill).await?;
        let observed = cluster.observe().await?;
        let provenance = crate::evidence::provenance::gather(&cluster, loaded, &opts.approval).await;
        // Said before the confirmation: a drill that cannot start should not ask for one.
        let mut observer = Observer::default();
        let say = |text: &str| eprintln!("hybrid-drill: {text}");
        lock::check(&cluster, &drill.spec.lock, Claim::Run, &this_host(), &mut observer, &say).await?;
        let overridden = check_gates(&cluster, drill, opts).await?;
        confirm(&plan, loaded, &cluster.context, opts.yes)?;

        let (dir, run_id) = run_dir(&opts.reports_dir, &drill.metadata.name)?;
        let (timeline, mutator) = open_run_files(loaded, &dir, &run_id, &cluster, &observed, &plan, &provenance)?;
        // The lock before anything is touched; refused, the run leaves nothing, its fresh directory included.
        let lock = match mutator.take_lock(&drill.spec.lock, &Claimant::this_process(&run_id, &dir), observer).await {
            Ok(lock) => lock,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e.into());
            }
        };
        crate::whatif::forecast::record(&cluster, drill, &opts.reports_dir, &dir).await;
        let emergency = StopWatch::start(&cluster, &drill.spec.lock, &timeline);
        let progress = Progress::new(opts.json);
        let follow = progress.follow(&timeline);
        progress.line(&format!(
            "hybrid-drill: running {} against {} · run directory {}",
            drill.metadata.name,
            cluster.context,
            dir.display()
        ));
        timeline.record(Event::DrillStarted {
            drill: drill.metadata.name.clone(),
            run_id: run_id.clone(),
            context: cluster.context.clone(),
        });
        for o in &overridden {
            let (gate, closed, by, reason) = (o.gate, o.closed.clone(), o.by.clone(), o.reason.clone());
            timeline.record(Event::GateOverridden { gate, closed, by, reason });
        }

        let view = SharedView::default();
        let scale = &plan.scale;
        view.update(|v| {
            v.replicas = ReplicaBasis { autoscaled: scale.autoscaler.is_some(), at_t0: None, now: scale.desired() }
        });
        let mut watches = Watches::start(&cluster, drill, &view, &timeline);
        if scale.autoscaler.is_some()
            || drill.spec.targets.workload.restored_when.ready_pods.is_relative(&view.read(|v| v.replicas))
        {
            watches.follow_scale(&cluster, drill, scale, &view, &timeline);
        }
        if let Err(error) = watches.synced(Duration::from_secs(60)).await {
            // Journalled as undo-failed by the mutator; said with the error that stops the run.
            let unreleased = mutator.release_lock(lock).await.err().map(|e| e.to_string());
            return Err(SetupError::Watches { error, unreleased });
        }
        timeline.record(view.read(|v| baseline(v, plan.pool_gpu_limit)));
        record_collateral_before(&cluster.reader(), drill, &plan, &view, &timeline).await;
        if let Some(autoscaler) = &scale.autoscaler {
            timeline.record(Event::AutoscalerFound { autoscaler: autoscaler.clone() });
        }
        if !plan.tolerations.is_empty() {
            timeline.record(Event::TolerationsRead { tolerations: plan.tolerations.clone() });
        }
        if let Some(delay) = plan.eviction_delay() {
            progress.line(delay.trim_end());
        }
        let monitor = Monitor::start(drill, &view, &timeline);
        let hooks = drill.spec.notify.iter().chain(&opts.notify).cloned().collect();
        let notifier = Notifier::new(&drill.metadata.name, &run_id, hooks);
        let mut warnings = Warnings { timeline: timeline.clone() };
        let started = Notice::Started { context: cluster.context.clone(), run_dir: dir.display().to_string() };
        let unsent = notifier.send(&started).await;
        let fighting = (!plan.scale.others.is_empty()).then(|| {
            format!(
                "more than one autoscaler scales {}: {} besides {}; they fight over its replicas",
                plan.scale.target.clone().unwrap_or_default(),
                plan.scale.others.join(", "),
                plan.scale.autoscaler.as_ref().map(|a| a.describe()).unwrap_or_default()
            )
        });
        let found = lock
            .took_over
            .clone()
            .into_iter()
            .chain(plan.split_brain_warning())
            .chain(plan.gpu_ceiling_warning())
            .chain(fighting)
            .chain(overridden.iter().map(ToString::to_string));
        for warning in unsent.into_iter().chain(found) {
            progress.line(&format!("WARNING: {warning}"));
            warnings.raise(warning);
        }
        Ok(Run {
            loaded,
            reader: cluster.reader(),
            cluster,
            version,
            plan,
            dir,
            timeline,
            progress,
            follow,
            view,
            watches,
            monitor,
            mutator,
            lock,
            emergency,
            warnings,
            notifier,
            slo: None,
            provenance,
        })
    }

    /// Runs the steps in order until one fails or refuses, a signal arrives, a guard trips or the deadline passes.
    // Long: the step loop and every way it stops in one select; a GPU fault nothing remediated skips to its restore.
    async fn execute(&mut self, signals: JoinHandle<&'static str>) -> Stop {
        let Run {
            loaded,
            reader,
            plan,
            timeline,
            progress,
            view,
            monitor,
            mutator,
            lock,
            emergency,
            warnings,
            slo,
            cluster,
            ..
        } = self;
        let drill = &loaded.drill;
        // The users' steady state before anything is touched: a drill that would start on an unhealthy service is
        // refused.
        let slo_tripped = match users_steady_state(drill, reader, cluster, timeline, progress, slo).await {
            Ok(tripped) => tripped,
            Err(reason) => return Stop::Refused(reason),
        };
        let mut ctx = StepContext {
            reader,
            drill,
            view,
            timeline,
            mutator,
            derived: monitor.derived.clone(),
            progress,
            on_prem_nodes: &plan.on_prem_nodes,
        };
        let deadline = drill.spec.guards.deadline;
        let run_steps = async {
            let mut silenced = false;
            let mut skipping = false;
            for (i, step) in drill.spec.steps.iter().enumerate() {
                skipping &= !matches!(step.action, crate::drill::Action::Restore(_));
                if skipping {
                    continue;
                }
                if step.action.is_fault() && !silenced {
                    replicas_at_fault(drill, view, timeline);
                }
                if step.action.is_fault() && !silenced {
                    silenced = true;
                    if let Err(e) = silence(&ctx, deadline).await {
                        return Stop::StepFailed(format!("step {} not started: {e}", step.id));
                    }
                }
                progress.step(&format!("[{}/{}] {}", i + 1, drill.spec.steps.len(), step.id));
                timeline.record(Event::StepStarted { step: step.id.clone(), action: step.action.name() });
                let result = steps::run_step(&mut ctx, step).await;
                let (outcome, message) = match &result {
                    Ok(success) if success.warning => (StepOutcome::Warned, success.message.clone()),
                    Ok(success) => (StepOutcome::Passed, success.message.clone()),
                    Err(e) => (StepOutcome::Failed, e.to_string()),
                };
                if outcome == StepOutcome::Warned {
                    warnings.raise(format!("step {}: {message}", step.id));
                }
                skipping = matches!(&result, Ok(success) if success.skip_to_restore);
                timeline.record(Event::StepFinished { step: step.id.clone(), outcome, message: message.clone() });
                match result {
                    Ok(_) => {}
                    Err(StepError::Refused(_)) => {
                        return Stop::Refused(format!("step {} refused the drill: {message}", step.id));
                    }
                    Err(_) => return Stop::StepFailed(format!("step {} failed: {message}", step.id)),
                }
            }
            Stop::Completed
        };
        let stop = tokio::select! {
            stop = run_steps => stop,
            signal = signals => Stop::Aborted(format!("interrupted by {}", signal.unwrap_or("a signal"))),
            _ = tokio::time::sleep(deadline) => Stop::Aborted(format!("the drill's deadline of {} passed", humantime::format_duration(deadline))),
            message = guard_tripped(monitor.guard.clone()) => Stop::Aborted(message),
            message = guard_tripped(lock.lost()) => Stop::Aborted(message),
            pulled = emergency.pulled() => Stop::Aborted(pulled.abort_reason()),
            message = slo_stop(slo_tripped) => Stop::Aborted(message),
        };
        stop
    }

    /// After a failure or an abort, undoes every change the drill made, checks the restore and brings the workload
    /// home; after a completed run, undoes what the steps left in place (unless the drill keeps it); after a refusal
    /// there is nothing to undo.
    async fn stop(&mut self, stop: Stop) -> Stopped {
        let mut stopped = Stopped { stop, restore_failed: false, left_behind: false };
        let reason = match &stopped.stop {
            Stop::Completed => {
                // The silences outlive the restore check of what the steps left: its own alerts must not page.
                stopped.restore_failed = !self.leave_nothing_behind().await;
                self.expire_silences().await;
                stopped.left_behind = self.leftovers().await;
                return stopped;
            }
            Stop::Refused(reason) => {
                // Validation puts the refusing step before any change, so there is nothing to restore.
                self.timeline.record(Event::Aborted { reason: reason.clone() });
                self.progress.line(&format!("refusing the drill: {reason}; nothing was changed"));
                return stopped;
            }
            Stop::StepFailed(reason) | Stop::Aborted(reason) => reason.clone(),
        };
        self.timeline.record(Event::Aborted { reason: reason.clone() });
        self.progress.line(&format!("aborting: {reason}; restoring the cluster"));
        self.tell(&Notice::Aborted { reason: reason.clone() }).await;
        let notice = second_signal_notice(self.dir.clone(), self.progress.clone());
        let outcome = self.mutator.rollback_verified(safety::restore_wait(&self.cluster)).await;
        notice.abort();
        stopped.restore_failed = !self.record_restore(outcome);
        if !stopped.restore_failed {
            self.bring_workload_home().await;
        }
        if let Some(warning) = self.view.read(|v| displaced_workload_warning(&self.loaded.drill, v)) {
            self.warnings.raise(warning);
        }
        self.fallback_still_running();
        self.leftovers().await;
        stopped
    }

    /// Compares the cluster with the state before the fault and names each difference left, live and in the
    /// timeline; whether cloud capacity the drill caused is still running.
    async fn leftovers(&mut self) -> bool {
        let drill = &self.loaded.drill;
        match steps::collateral::account(&self.reader, drill, &self.timeline, &self.plan.on_prem_nodes).await {
            Ok(left) => {
                for leftover in &left {
                    self.progress.line(&leftover.line());
                }
                left.iter().any(|l| l.kind == LeftoverKind::NodeClaim)
            }
            Err(e) => {
                self.warnings.raise(format!("cannot compare the cluster with its state before the fault: {e}"));
                false
            }
        }
    }

    /// Sends a notice; a webhook that did not take it is a warning.
    async fn tell(&mut self, notice: &Notice) {
        for warning in self.notifier.send(notice).await {
            self.warnings.raise(warning);
        }
    }

    /// At the end of a completed run, the silences end with the drill, whatever else the drill keeps. One that cannot
    /// be expired stays outstanding (the rollback below or `recover` tries again) and ends by itself at its end time.
    async fn expire_silences(&mut self) {
        let outcome = self.mutator.expire_silences().await;
        for expired in &outcome.undone {
            self.progress.line(&format!("expired: {expired}"));
        }
        for (what, why) in outcome.failed {
            self.warnings.raise(format!(
                "{what} not expired: {why}; it ends by itself at its end time, or run `hybrid-drill recover {}`",
                self.dir.display()
            ));
        }
    }

    /// Records what a checked rollback undid, verified and left; whether the cluster is restored.
    fn record_restore(&mut self, outcome: RollbackOutcome) -> bool {
        let restored = outcome.restored();
        for checked in &outcome.verified {
            self.progress.line(&format!("verified: {checked}"));
        }
        if !restored {
            let left: Vec<String> = outcome.failed.iter().map(|(what, why)| format!("{what}: {why}")).collect();
            self.progress.line(&format!(
                "RESTORE INCOMPLETE: {}; the journal keeps it outstanding: finish with `hybrid-drill recover {}`",
                left.join("; "),
                self.dir.display()
            ));
        }
        self.timeline.record(Event::RollbackFinished {
            undone: outcome.undone,
            failed: outcome.failed.into_iter().map(|(what, why)| format!("{what}: {why}")).collect(),
            verified: outcome.verified,
        });
        restored
    }

    /// At the end of a completed run, undoes (and checks) what the steps left in place, or, when the drill keeps its
    /// changes, lists them in the report; whether the cluster is as the drill means to leave it.
    async fn leave_nothing_behind(&mut self) -> bool {
        let left = match self.mutator.outstanding().await {
            Ok(left) => left,
            Err(e) => {
                self.warnings.raise(format!("cannot read the journal to find what the steps left in place: {e}"));
                return false;
            }
        };
        if left.is_empty() {
            return true;
        }
        if self.loaded.drill.spec.keep_changes {
            self.warnings.raise(format!(
                "left in place at the end, as spec.keepChanges asks: {}; undo with `hybrid-drill recover {}`",
                left.join(", "),
                self.dir.display()
            ));
            return true;
        }
        self.progress.line(&format!("undoing what the steps left in place: {}", left.join(", ")));
        let outcome = self.mutator.undo_left_in_place(safety::restore_wait(&self.cluster)).await;
        if !outcome.undone.is_empty() {
            self.warnings.raise(format!(
                "the drill's steps left changes in place; undone at its end: {}",
                outcome.undone.join(", ")
            ));
        }
        self.record_restore(outcome)
    }

    /// After an abort whose restore held: the drill's own return restart, then a bounded wait for the workload's pods
    /// to be Ready on-prem with none on the fallback, so consolidation can reclaim the cloud nodes. A second signal
    /// ends the wait (the cluster is restored already).
    async fn bring_workload_home(&mut self) {
        let drill = &self.loaded.drill;
        let displaced = self
            .view
            .read(|v| v.live_pods().any(|p| p.node.as_deref().is_none_or(|n| v.role_of(n) != NodeRole::OnPrem)));
        let Some(target) = return_restart(drill) else { return };
        if !displaced {
            return;
        }
        let namespace = &drill.spec.targets.workload.namespace;
        self.progress.line(&format!("bringing the workload home: restarting {target}"));
        if let Err(e) = self.mutator.restart(namespace, target.kind, &target.name).await {
            self.warnings.raise(format!("the workload was not brought home: {e}"));
            return;
        }
        let wait = if self.cluster.is_lab() { Duration::from_secs(180) } else { Duration::from_secs(900) };
        let mut derived = self.monitor.derived.clone();
        let home = async {
            loop {
                if derived.borrow_and_update().back_on_prem {
                    return true;
                }
                if derived.changed().await.is_err() {
                    return false;
                }
            }
        };
        let waited = tokio::select! {
            home = tokio::time::timeout(wait, home) => home.unwrap_or(false),
            _ = interrupted() => false,
        };
        if waited {
            self.progress.line("the workload is back on-prem");
        } else {
            self.warnings.raise(format!(
                "the workload was restarted ({target}) but is not back on-prem yet: it was not Ready on-prem with no pod                  on the fallback within {}",
                humantime::format_duration(wait)
            ));
        }
    }

    /// Says plainly when fallback nodes outlive the run: they bill until consolidation reclaims them.
    fn fallback_still_running(&mut self) {
        let (nodes, gpus) =
            (self.view.read(|v| v.fallback_nodes().count()), self.monitor.derived.borrow().fallback_gpus);
        if nodes > 0 {
            self.warnings.raise(format!(
                "{nodes} fallback nodes ({gpus} GPUs) are still running at the end of the run: Karpenter's                  consolidation reclaims them once no workload pod is left on them (after the NodePool's                  consolidateAfter); the fallback cost in this report counts them up to the end of the rollback only"
            ));
        }
    }

    /// Stops watching, cuts the timeline into phases, judges the run, then writes (and maybe pushes) its report.
    async fn finish(
        mut self,
        stopped: Stopped,
        opts: &RunOptions,
        key: Option<&SigningKey>,
    ) -> Result<RunResult, SetupError> {
        let drill = &self.loaded.drill;
        // Nothing touches the cluster after the stop stage: the next drill may start.
        if let Err(e) = self.mutator.release_lock(self.lock).await {
            self.warnings.raise(format!("the drill lock was not released (it falls free after its duration): {e}"));
        }
        drop(self.monitor);
        drop(self.watches);
        let observations = self.timeline.observations();
        let analysis = phases::analyse(drill, &observations);
        let outcome = stopped.outcome(analysis.objectives_missed.is_empty());
        if analysis.fallback.overrun {
            self.warnings.raise(format!(
                "the fallback peaked at {} GPUs, above its NodePool limit of {} (Karpenter's limits are eventually consistent)",
                analysis.fallback.max_gpus,
                analysis.fallback.gpu_limit.unwrap_or_default()
            ));
        }
        let provenance = self.provenance.clone();
        let mut report = seal(&self.timeline, &self.cluster, self.loaded, &self.version, outcome, provenance.clone());
        if let Some(slo) = self.slo.take() {
            // The impact is read once the drill's span is known, then kept in the timeline so that the report (its
            // headline, deviations and action items) and any rebuild of it see the same figures.
            let observations = self.timeline.observations();
            let span = crate::slo::RunSpan::of(&report.started, &report.finished, &report.phases, &observations);
            let impact = slo.finish(span).await;
            self.timeline.record(Event::SloImpact { impact: Box::new(impact) });
            let meta = RunMeta { provenance: Some(provenance), ..run_meta(self.loaded, &self.cluster, &self.version) };
            report = report::build(drill, &self.timeline.observations(), &meta);
        }
        self.follow.abort();
        self.progress.finish();
        if let Some(url) = &opts.pushgateway
            && let Err(e) = crate::pushgateway::push(url, &report).await
        {
            // The drill's verdict stands; the report says the metrics did not leave.
            late_warning(&mut report, &self.warnings.timeline, format!("metrics not pushed: {e}"));
        }
        let report_path = self.dir.join("report.md").display().to_string();
        for notice in notify::end_notices(&report, &report_path) {
            for warning in self.notifier.send(&notice).await {
                late_warning(&mut report, &self.warnings.timeline, warning);
            }
        }
        let policy = opts.ship.policy(drill.spec.evidence.ship.as_ref());
        let shipping = shipping::prepare(policy.as_ref(), &mut report, &self.warnings.timeline).await;
        let io = |source| SetupError::RunDir { path: self.dir.display().to_string(), source };
        write_reports(&self.dir, &report).map_err(io)?;
        // Last: every file of the run is written, and none is written after (but what a failed shipment adds).
        crate::evidence::seal(&self.dir, &report.run_id, key).map_err(|e| io(std::io::Error::other(e)))?;
        shipping::ship(shipping, &self.dir, &mut report, &self.warnings.timeline, key).await.map_err(io)?;
        Ok(RunResult { report, run_dir: self.dir })
    }
}

/// A warning raised once the report is built (a push, a notification, a shipment that failed): said now, and kept in
/// the timeline, the report's warnings and its deviations, as a warning raised during the drill is.
fn late_warning(report: &mut Report, timeline: &Timeline, message: String) {
    eprintln!("hybrid-drill: warning: {message}");
    timeline.record(Event::Warning { message: message.clone() });
    report.warnings.push(message.clone());
    report.deviations.push(Deviation { kind: DeviationKind::Warning, t_seconds: None, what: message });
}

/// Reads the start gates before anything is touched: refused unless every closed one is overridden; the overridden
/// ones, with who let them through.
async fn check_gates(
    cluster: &Cluster,
    drill: &Drill,
    opts: &RunOptions,
) -> Result<Vec<gates::Overridden>, SetupError> {
    let readings = gates::read(cluster, drill, &opts.reports_dir, Utc::now()).await;
    let by = if opts.overrides.is_empty() { String::new() } else { gates::who(cluster).await };
    Ok(gates::judge(&readings, &opts.overrides, &by)?)
}

/// Ends a run's timeline (the lab's caveat, the request count, the outcome) and builds its report: the one ending a
/// drill and an incident's episode share.
pub(crate) fn seal(
    timeline: &Timeline,
    cluster: &Cluster,
    loaded: &LoadedDrill,
    version: &str,
    outcome: Outcome,
    provenance: Provenance,
) -> Report {
    if cluster.is_lab() {
        timeline.record(Event::Warning {
            message: "this ran against the lab: its timings are shortened (see lab/README.md) and are not a real \
                      cluster's"
                .into(),
        });
    }
    timeline.record(Event::RequestsSent { total: cluster.requests_sent(), by_verb: cluster.requests_by_verb() });
    timeline.record(Event::DrillFinished { outcome });
    let meta = RunMeta { provenance: Some(provenance), ..run_meta(loaded, cluster, version) };
    report::build(&loaded.drill, &timeline.observations(), &meta)
}

/// What a report keeps of the tool, the drill file and the API server.
pub(crate) fn run_meta(loaded: &LoadedDrill, cluster: &Cluster, version: &str) -> RunMeta {
    RunMeta {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        drill_file: loaded.path.display().to_string(),
        drill_source: crate::secrets::redact(&loaded.source).into_owned(),
        cluster_server: cluster.server.clone(),
        cluster_version: version.to_string(),
        provenance: None,
    }
}

/// Fixes the desired replicas `readyPods` is judged against from the fault on, and says so when they matter.
fn replicas_at_fault(drill: &Drill, view: &SharedView, timeline: &Timeline) {
    let ready_pods = drill.spec.targets.workload.restored_when.ready_pods;
    let (basis, needed) = view.update(|v| {
        v.replicas.at_t0 = v.replicas.now;
        (v.replicas, ready_pods.needed(&v.replicas))
    });
    if ready_pods.is_relative(&basis) {
        timeline.record(Event::ReplicasAtFault { desired_replicas: basis.at_t0, ready_pods_needed: needed });
    }
}

/// Creates the drill's silences, just before its fault: until the drill's deadline has passed (and a margin for the
/// restore) should no one expire them.
async fn silence(ctx: &StepContext<'_>, deadline: Duration) -> Result<(), crate::safety::MutationError> {
    let until = Utc::now() + chrono::Duration::from_std(deadline + SILENCE_MARGIN).unwrap_or(chrono::Duration::days(1));
    for spec in &ctx.drill.spec.silences {
        let id = ctx.mutator.silence(spec, until).await?;
        let matchers: Vec<String> = spec.matchers.iter().map(ToString::to_string).collect();
        ctx.progress.line(&format!(
            "silenced in {}: {{{}}} (silence {id}, ends by itself at {} unless expired first)",
            spec.alertmanager,
            matchers.join(", "),
            until.format("%H:%M UTC")
        ));
    }
    Ok(())
}

/// How long a silence outlives the drill's deadline: room for the restore after an abort.
const SILENCE_MARGIN: Duration = Duration::from_secs(15 * 60);

/// Records the state before the fault (every NodeClaim, every other workload on the on-prem nodes) for the return
/// and the leftovers; a failed read is a warning: the run goes on without that accounting.
async fn record_collateral_before(reader: &Reader, drill: &Drill, plan: &Plan, view: &SharedView, timeline: &Timeline) {
    let drilled = view.read(|v| v.pods.keys().cloned().collect());
    match steps::collateral::before(reader, drill, &plan.on_prem_nodes, &drilled, plan.blast_radius.clone()).await {
        Ok(event) => timeline.record(event),
        Err(e) => timeline.record(Event::Warning {
            message: format!("cannot read the state before the fault (NodeClaims, other workloads): {e}"),
        }),
    };
}

fn confirm(plan: &Plan, loaded: &LoadedDrill, context: &str, yes: bool) -> Result<(), SetupError> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(SetupError::NeedsYes);
    }
    eprint!("{}", plan.describe(&loaded.drill));
    eprint!("type the context name `{context}` to start the drill: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if answer.trim() == context { Ok(()) } else { Err(SetupError::Declined) }
}

/// The state of the drilled objects before anything is touched (or before an incident was seen).
pub(crate) fn baseline(v: &ClusterView, fallback_gpu_limit: Option<i64>) -> Event {
    Event::Baseline {
        on_prem_nodes: v.on_prem_nodes().count(),
        workload_pods: v.pods.len(),
        ready_pods: v.ready_pods(),
        fallback_nodeclaims: v.claims.len(),
        fallback_nodes: v.fallback_nodes().count(),
        fallback_gpu_limit,
        on_prem_pods: v
            .live_pods()
            .filter(|p| p.node.as_deref().is_some_and(|n| v.role_of(n) == NodeRole::OnPrem))
            .map(|p| p.name.clone())
            .collect(),
    }
}

pub(crate) async fn interrupted() -> &'static str {
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// Why the SLIs stop the drill, once they do; never without SLIs.
/// Starts reading the drill's SLIs, when it has some, and checks they are within their objectives: the stop
/// condition's signal, or why the drill is refused.
async fn users_steady_state(
    drill: &Drill,
    reader: &Reader,
    cluster: &Cluster,
    timeline: &Timeline,
    progress: &Progress,
    slo: &mut Option<crate::slo::Slo>,
) -> Result<Option<tokio::sync::watch::Receiver<Option<String>>>, String> {
    let Some(spec) = &drill.spec.slo else { return Ok(None) };
    let (started, tripped) = crate::slo::begin(spec, reader, cluster.is_lab(), timeline, progress).await?;
    *slo = Some(started);
    Ok(Some(tripped))
}

async fn slo_stop(tripped: Option<tokio::sync::watch::Receiver<Option<String>>>) -> String {
    match tripped {
        Some(tripped) => guard_tripped(tripped).await,
        None => std::future::pending().await,
    }
}

async fn guard_tripped(mut guard: tokio::sync::watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(message) = guard.borrow_and_update().clone() {
            return message;
        }
        if guard.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// After an abort, the restore has undone the drill's changes but moved no pod: pods evicted to the fallback stay
/// there, on cloud GPUs, until the workload is restarted. Says how many and the command that brings them back.
fn displaced_workload_warning(drill: &Drill, view: &ClusterView) -> Option<String> {
    let total = view.live_pods().count();
    let displaced =
        view.live_pods().filter(|p| p.node.as_deref().is_none_or(|n| view.role_of(n) != NodeRole::OnPrem)).count();
    if displaced == 0 {
        return None;
    }
    let workload = &drill.spec.targets.workload;
    let restart = return_restart(drill)
        .map(|target| format!("`kubectl rollout restart {target} -n {}`", workload.namespace))
        .unwrap_or_else(|| {
            format!("a rollout restart of the workload `{}` in `{}`", workload.selector, workload.namespace)
        });
    Some(format!(
        "{displaced} of {total} workload pods are not on the on-prem nodes: the restore undid the drill's changes but \
         moves no pod; once the on-prem nodes are Ready, {restart} brings them back and consolidation then reclaims \
         the fallback"
    ))
}

/// The workload the drill's return restarts, if it does.
fn return_restart(drill: &Drill) -> Option<&WorkloadRef> {
    drill.spec.steps.iter().find_map(|s| match &s.action {
        Action::Return(ReturnAction { restart: Some(target), .. }) => Some(target),
        _ => None,
    })
}

/// While restoring, a further Ctrl-C does not skip the restore: it says what remains and how to finish.
fn second_signal_notice(dir: PathBuf, progress: Progress) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let _ = interrupted().await;
            progress.line(&format!(
                "restore in progress and will not be skipped; if this process is killed, finish with: hybrid-drill recover {}",
                dir.display()
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped(stop: Stop, restore_failed: bool) -> Stopped {
        Stopped { stop, restore_failed, left_behind: false }
    }

    #[test]
    fn the_outcome_follows_the_stop_and_the_restore() {
        assert_eq!(stopped(Stop::Completed, false).outcome(true), Outcome::Passed);
        assert_eq!(stopped(Stop::Completed, false).outcome(false), Outcome::ObjectiveMissed);
        assert_eq!(stopped(Stop::Refused("r".into()), false).outcome(true), Outcome::Refused);
        assert_eq!(stopped(Stop::StepFailed("f".into()), false).outcome(true), Outcome::Aborted);
        assert_eq!(stopped(Stop::Aborted("a".into()), true).outcome(true), Outcome::RestoreFailed);
        // Cloud capacity left running fails a completed drill, whatever its objectives; an abort stays an abort.
        let left = |stop| Stopped { stop, restore_failed: false, left_behind: true };
        assert_eq!(left(Stop::Completed).outcome(true), Outcome::LeftBehind);
        assert_eq!(left(Stop::StepFailed("f".into())).outcome(true), Outcome::Aborted);
        assert_eq!(crate::exit::exit_code(Outcome::LeftBehind), i32::from(crate::exit::EXIT_RESTORE_FAILED));
        // The abort reason is the Aborted event's now: report::tests reads it back from the timeline.
        assert_eq!(crate::exit::exit_code(Outcome::Refused), i32::from(crate::exit::EXIT_REFUSED));
    }
}
