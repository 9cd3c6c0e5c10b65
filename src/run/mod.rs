//! Running a drill as a `Run` in four stages: set up (connect, plan, confirm, run directory, watches), execute (the
//! steps under signals, guards and the deadline), stop (restore after an abort, or a refusal), and finish (phases,
//! report, writing). Every warning, the rollback and the request count go to the timeline as they happen.

mod error;
mod plan_only;
mod stop;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use chrono::Utc;
use tokio::task::JoinHandle;

use crate::cluster::lease::{Claimant, Observer, this_host};
use crate::cluster::{self, Cluster, KubeContext, Reader};
use crate::drill::{Drill, LoadedDrill, ReplicaBasis, Webhook};
use crate::evidence::{Approval, SigningKey};
use crate::gates;
use crate::monitor::Monitor;
use crate::notify::{self, Notice, Notifier};
use crate::plan::{self, Plan};
use crate::progress::Progress;
use crate::record::{self, Closing, RecordError, late_warning, run_dir};
use crate::report::provenance::Provenance;
use crate::report::{Outcome, Report};
use crate::safety::Mutator;
use crate::safety::emergency::StopWatch;
use crate::safety::lock::{self, Claim, HeldLock};
use crate::safety::signals::interrupted;
use crate::steps::{self, StepContext, StepError};
use crate::timeline::view::{SharedView, baseline};
use crate::timeline::watch::Watches;
use crate::timeline::{Event, StepOutcome, Timeline};

pub use error::{RunError, SetupError};
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
pub async fn run(loaded: &LoadedDrill, opts: &RunOptions) -> Result<RunResult, RunError> {
    let key = refuse_untouched(loaded, opts)?;
    // Registered before anything is touched, so a signal never kills the process mid-change.
    let signals = tokio::spawn(interrupted());
    let mut run = Run::set_up(loaded, opts).await?;
    let stop = run.execute(signals).await;
    let stopped = run.stop(stop).await;
    Ok(run.finish(stopped, opts, key.as_ref()).await?)
}

/// Before the cluster is contacted: a run the drill file does not allow, or whose record could not be signed or
/// shipped, touches nothing. The key that signs the record, when one is given.
fn refuse_untouched(loaded: &LoadedDrill, opts: &RunOptions) -> Result<Option<SigningKey>, SetupError> {
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
    Ok(key)
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
    /// Alertmanager read for the drill's expected alerts, from set-up until the finish.
    expected_alerts: Option<JoinHandle<()>>,
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
        let (timeline, journal) = record::open_files(loaded, &dir, &run_id, &observed, &provenance)?;
        let mutator = Mutator::new(cluster.clone(), journal, timeline.clone(), run_id.clone())
            .with_on_prem_nodes(&plan.on_prem_nodes);
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
        let expected_alerts = drill.spec.expected_alerts.as_ref().map(|e| crate::nets::alerts::start(e, &timeline));
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
            expected_alerts,
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
            Err(reason) => return Stop::Refused(reason.to_string()),
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

    /// Stops watching, cuts the timeline into phases, judges the run, then writes (and maybe pushes) its report.
    async fn finish(
        mut self,
        stopped: Stopped,
        opts: &RunOptions,
        key: Option<&SigningKey>,
    ) -> Result<RunResult, RecordError> {
        let drill = &self.loaded.drill;
        // Nothing touches the cluster after the stop stage: the next drill may start.
        if let Err(e) = self.mutator.release_lock(self.lock).await {
            self.warnings.raise(format!("the drill lock was not released (it falls free after its duration): {e}"));
        }
        drop(self.monitor);
        drop(self.watches);
        if let Some(reading) = self.expected_alerts.take() {
            reading.abort();
        }
        let nets_missed = crate::nets::judge(drill, &self.timeline.observations()).is_some_and(|n| n.missed());
        let closing = Closing {
            timeline: &self.timeline,
            cluster: &self.cluster,
            loaded: self.loaded,
            version: &self.version,
            provenance: self.provenance.clone(),
        };
        let warnings = &mut self.warnings;
        let ended = closing.end(|analysis| {
            if analysis.fallback.overrun {
                warnings.raise(format!(
                    "the fallback peaked at {} GPUs, above its NodePool limit of {} (Karpenter's limits are eventually consistent)",
                    analysis.fallback.max_gpus,
                    analysis.fallback.gpu_limit.unwrap_or_default()
                ));
            }
            stopped.outcome(analysis.objectives_missed.is_empty() && !nets_missed)
        });
        if let Some(slo) = self.slo.take() {
            // The impact is read once the drill's span is known, then kept in the timeline so that the report (its
            // headline, deviations and action items) and any rebuild of it see the same figures.
            let impact = slo.finish(ended.span()).await;
            self.timeline.record(Event::SloImpact { impact: Box::new(impact) });
        }
        let mut report = ended.report();
        self.follow.abort();
        self.progress.finish();
        if let Some(url) = &opts.pushgateway
            && let Err(e) = crate::pushgateway::push(url, &report).await
        {
            // The drill's verdict stands; the report says the metrics did not leave.
            late_warning(&mut report, &self.timeline, format!("metrics not pushed: {e}"));
        }
        let report_path = self.dir.join("report.md").display().to_string();
        for notice in notify::end_notices(&report, &report_path) {
            for warning in self.notifier.send(&notice).await {
                late_warning(&mut report, &self.timeline, warning);
            }
        }
        let policy = opts.ship.policy(drill.spec.evidence.ship.as_ref());
        record::persist(&self.dir, &mut report, &self.timeline, policy.as_ref(), key).await?;
        Ok(RunResult { report, run_dir: self.dir })
    }
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
) -> Result<Option<tokio::sync::watch::Receiver<Option<String>>>, crate::slo::SteadyStateError> {
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
