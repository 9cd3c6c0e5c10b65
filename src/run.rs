//! Running a drill: set-up checks, confirmation, the steps under signals, guards and the deadline, restore on any
//! stop, then phases and reports.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use tokio::signal::unix::{SignalKind, signal};

use crate::cluster::{Cluster, ClusterError, Target};
use crate::drill::{Action, Drill, LoadedDrill, ReturnAction};
use crate::monitor::Monitor;
use crate::phases;
use crate::plan::{self, Plan, PlanError};
use crate::preflight;
use crate::progress::Progress;
use crate::report::{self, Outcome, Report, RunMeta};
use crate::safety::Mutator;
use crate::safety::journal::Journal;
use crate::steps::{self, StepContext, StepError};
use crate::timeline::view::{ClusterView, SharedView};
use crate::timeline::watch::Watches;
use crate::timeline::{Event, NodeRole, StepOutcome, Timeline};

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub target: Target,
    pub yes: bool,
    pub dry_run: bool,
    pub json: bool,
    pub reports_dir: PathBuf,
    /// Push the run's metrics to this Pushgateway once the drill is over.
    pub pushgateway: Option<String>,
}

/// Problems found before anything was touched.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("cannot create the run directory {path}: {source}")]
    RunDir { path: String, source: std::io::Error },
    #[error(
        "refusing to run without confirmation: stdin is not a terminal; review with `hybrid-drill plan FILE`, then pass --yes"
    )]
    NeedsYes,
    #[error("drill not started: confirmation declined")]
    Declined,
    #[error("the watches could not list the drilled objects: {0}")]
    Watches(String),
}

/// What a finished (or stopped) run left behind.
pub struct RunResult {
    pub report: Report,
    pub run_dir: PathBuf,
}

pub async fn connect(target: &Target, expected_context: &str) -> Result<(Cluster, String), ClusterError> {
    let cluster = Cluster::connect(target).await?;
    cluster.expect_context(expected_context)?;
    let version = cluster.ping().await?;
    Ok((cluster, version))
}

/// `hybrid-drill plan`: resolves everything read-only and says what a run would do.
pub async fn plan_only(loaded: &LoadedDrill, target: &Target) -> Result<String, SetupError> {
    let (cluster, version) = connect(target, &loaded.drill.spec.cluster.context).await?;
    let plan = plan::resolve(&cluster, &loaded.drill).await?;
    let drill = &loaded.drill;
    let verdict =
        match preflight::run(&cluster, &preflight::PreflightTargets::of(drill), &preflight::Expectations::of(drill))
            .await
        {
            Ok(report) => format!("{}{}\n", preflight::render::table(&report), preflight::plan_note(drill, &report)),
            Err(e) => format!("preflight could not run: {e}\n"),
        };
    Ok(format!(
        "context {} ({}, Kubernetes {version})\n{}\n{verdict}nothing was changed\n",
        cluster.context,
        cluster.server,
        plan.describe(drill)
    ))
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

fn run_dir(base: &Path, drill: &str) -> Result<(PathBuf, String), SetupError> {
    let stamp = Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let dir = base.join(drill).join(&stamp);
    std::fs::create_dir_all(&dir).map_err(|source| SetupError::RunDir { path: dir.display().to_string(), source })?;
    Ok((dir, format!("{drill}-{}", stamp.to_lowercase())))
}

async fn interrupted() -> &'static str {
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
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

enum Stop {
    Completed,
    StepFailed(String),
    Aborted(String),
    /// A step refused the drill before anything was changed (a failed preflight).
    Refused(String),
}

pub async fn run(loaded: &LoadedDrill, opts: &RunOptions) -> Result<RunResult, SetupError> {
    let drill = &loaded.drill;
    // Registered before anything is touched, so a signal never kills the process mid-change.
    let signals = tokio::spawn(interrupted());
    let (cluster, version) = connect(&opts.target, &drill.spec.cluster.context).await?;
    let plan = plan::resolve(&cluster, drill).await?;
    confirm(&plan, loaded, &cluster.context, opts.yes)?;

    let (dir, run_id) = run_dir(&opts.reports_dir, &drill.metadata.name)?;
    let io = |source| SetupError::RunDir { path: dir.display().to_string(), source };
    std::fs::write(dir.join("drill.yaml"), &loaded.source).map_err(io)?;
    let timeline = Timeline::create(&dir.join("timeline.jsonl")).map_err(io)?;
    let journal = Journal::create(&dir.join("journal.jsonl")).map_err(io)?;
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

    let view = SharedView::default();
    let mut watches = Watches::start(&cluster, drill, &view, &timeline);
    watches.synced(Duration::from_secs(60)).await.map_err(SetupError::Watches)?;
    let baseline = view.read(|v| Event::Baseline {
        on_prem_nodes: v.on_prem_nodes().count(),
        workload_pods: v.pods.len(),
        ready_pods: v.ready_pods(),
        fallback_nodeclaims: v.claims.len(),
        fallback_nodes: v.fallback_nodes().count(),
        fallback_gpu_limit: plan.pool_gpu_limit,
        on_prem_pods: v
            .live_pods()
            .filter(|p| p.node.as_deref().is_some_and(|n| v.role_of(n) == NodeRole::OnPrem))
            .map(|p| p.name.clone())
            .collect(),
    });
    timeline.record(baseline);
    if !plan.tolerations.is_empty() {
        timeline.record(Event::TolerationsRead { tolerations: plan.tolerations.clone() });
    }
    if let Some(delay) = plan.eviction_delay() {
        progress.line(delay.trim_end());
    }
    let monitor = Monitor::start(drill, &view, &timeline);
    let mutator = Mutator::new(cluster.clone(), journal, timeline.clone(), run_id.clone());

    // Every fact the report shows is a timeline event: `report::build` reads them back.
    let warn = |message: String| timeline.record(Event::Warning { message });
    if let Some(warning) = plan.split_brain_warning() {
        progress.line(&format!("WARNING: {warning}"));
        warn(warning);
    }
    let mut ctx = StepContext {
        cluster: &cluster,
        drill,
        view: &view,
        timeline: &timeline,
        mutator: &mutator,
        derived: monitor.derived.clone(),
        progress: &progress,
        on_prem_nodes: &plan.on_prem_nodes,
    };

    let deadline = drill.spec.guards.deadline.0;
    let stop = {
        let run_steps = async {
            for (i, step) in drill.spec.steps.iter().enumerate() {
                let action = step.action().map(|a| steps::action_name(&a)).unwrap_or_default();
                progress.step(&format!("[{}/{}] {}", i + 1, drill.spec.steps.len(), step.id));
                timeline.record(Event::StepStarted { step: step.id.clone(), action });
                match steps::run_step(&mut ctx, step).await {
                    Ok(success) => {
                        let outcome = if success.warning { StepOutcome::Warned } else { StepOutcome::Passed };
                        let message = success.message;
                        timeline.record(Event::StepFinished {
                            step: step.id.clone(),
                            outcome,
                            message: message.clone(),
                        });
                        if success.warning {
                            warn(format!("step {}: {message}", step.id));
                        }
                    }
                    Err(e) => {
                        let message = e.to_string();
                        timeline.record(Event::StepFinished {
                            step: step.id.clone(),
                            outcome: StepOutcome::Failed,
                            message: message.clone(),
                        });
                        if matches!(e, StepError::Refused(_)) {
                            return Stop::Refused(format!("step {} refused the drill: {message}", step.id));
                        }
                        return Stop::StepFailed(format!("step {} failed: {message}", step.id));
                    }
                }
            }
            Stop::Completed
        };
        tokio::select! {
            stop = run_steps => stop,
            signal = signals => Stop::Aborted(format!("interrupted by {}", signal.unwrap_or("a signal"))),
            _ = tokio::time::sleep(deadline) => Stop::Aborted(format!("the drill's deadline of {} passed", humantime::format_duration(deadline))),
            message = guard_tripped(monitor.guard.clone()) => Stop::Aborted(message),
        }
    };

    let mut restore_failed = false;
    if let Stop::StepFailed(reason) | Stop::Aborted(reason) = &stop {
        timeline.record(Event::Aborted { reason: reason.clone() });
        progress.line(&format!("aborting: {reason}; restoring the cluster"));
        let notice = second_signal_notice(dir.clone(), progress.clone());
        let outcome = mutator.rollback().await;
        notice.abort();
        restore_failed = !outcome.restored();
        timeline.record(Event::RollbackFinished {
            undone: outcome.undone,
            failed: outcome.failed.into_iter().map(|(what, why)| format!("{what}: {why}")).collect(),
        });
        if let Some(warning) = view.read(|v| displaced_workload_warning(drill, v)) {
            warn(warning);
        }
    }
    if let Stop::Refused(reason) = &stop {
        // Validation puts the refusing step before any change, so there is nothing to restore.
        timeline.record(Event::Aborted { reason: reason.clone() });
        progress.line(&format!("refusing the drill: {reason}; nothing was changed"));
    }

    drop(monitor);
    drop(watches);
    let observations = timeline.observations();
    let analysis = phases::analyse(drill, &observations);
    let outcome = match (&stop, restore_failed) {
        (_, true) => Outcome::RestoreFailed,
        (Stop::Completed, _) if analysis.objectives_missed.is_empty() => Outcome::Passed,
        (Stop::Completed, _) => Outcome::ObjectiveMissed,
        (Stop::Refused(_), _) => Outcome::Refused,
        _ => Outcome::Aborted,
    };
    if analysis.fallback.overrun {
        warn(format!(
            "the fallback peaked at {} GPUs, above its NodePool limit of {} (Karpenter's limits are eventually consistent)",
            analysis.fallback.max_gpus,
            analysis.fallback.gpu_limit.unwrap_or_default()
        ));
    }
    if cluster.context == "hybrid-lab" {
        warn(
            "this ran against the lab: its timings are shortened (see lab/README.md) and are not a real cluster's"
                .into(),
        );
    }
    timeline.record(Event::RequestsSent { total: cluster.requests_sent() });
    timeline.record(Event::DrillFinished { outcome: outcome.as_str().into() });
    follow.abort();
    progress.finish();
    let meta = RunMeta {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        drill_file: loaded.path.display().to_string(),
        drill_source: loaded.source.clone(),
        cluster_server: cluster.server.clone(),
        cluster_version: version,
    };
    let mut report = report::build(drill, &timeline.observations(), &meta);
    if let Some(url) = &opts.pushgateway
        && let Err(e) = crate::pushgateway::push(url, &report).await
    {
        // The drill's verdict stands; the report says the metrics did not leave.
        let message = format!("metrics not pushed: {e}");
        timeline.record(Event::Warning { message: message.clone() });
        report.warnings.push(message);
    }
    write_reports(&dir, &report).map_err(io)?;
    Ok(RunResult { report, run_dir: dir })
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
    let restart = drill
        .spec
        .steps
        .iter()
        .find_map(|s| match s.action() {
            Some(Action::Return(ReturnAction { restart: Some(target), .. })) => Some(target),
            _ => None,
        })
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

/// Writes report.json, report.md, report.html, junit.xml and metrics.prom into the run directory.
pub fn write_reports(dir: &Path, report: &Report) -> std::io::Result<()> {
    report::write_all(dir, report).map(|_| ())
}

/// While restoring, a further Ctrl-C does not skip the restore: it says what remains and how to finish.
fn second_signal_notice(dir: PathBuf, progress: Progress) -> tokio::task::JoinHandle<()> {
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
