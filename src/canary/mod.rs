//! `hybrid-drill canary`: proves the cloud fallback between drills without touching on-prem. Under the drill lock and
//! its start gates it starts one replica of the drill's workload pinned to the fallback NodePool (`pod`), measures
//! the NodeClaim it causes from launch to first good answer (`measure`), removes it, waits for the reclaim, checks
//! nothing is left, and records the run like a drill's (`report`).

pub mod measure;
pub mod pod;
pub mod report;
mod stages;

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;

use crate::cluster::lease::{Claimant, Observer, this_host};
use crate::cluster::{self, Cluster, ClusterError, KubeContext};
use crate::drill::LoadedDrill;
use crate::record::{self, RecordError};
use crate::safety::Mutator;
use crate::safety::lock::{self, Claim, LockError};
use crate::timeline::{Event, Timeline};

pub use report::{CANARY_FILE, CanaryOutcome, CanaryReport};

/// How long each stage of the canary may take before it is an outcome of its own.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// The pod created to its NodeClaim Launched: past it, the launch was refused.
    pub launch: Duration,
    /// Launched to Initialized (with GPUs allocatable): past it, the node never initialised.
    pub initialise: Duration,
    /// The node usable to the first good answer: past it, the pod never served.
    pub serve: Duration,
    /// The canary removed to its NodeClaim gone: past it, the canary deletes the NodeClaim itself.
    pub reclaim: Duration,
}

#[derive(Debug, Clone)]
pub struct CanaryOptions {
    pub target: KubeContext,
    pub yes: bool,
    pub reports_dir: PathBuf,
    pub pushgateway: Option<String>,
    pub overrides: Vec<crate::gates::Override>,
    pub deadlines: Deadlines,
}

/// What stops a canary before it touched anything, or keeps its record from being written.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    #[error("refusing to launch a cloud GPU node without --yes (a canary costs one node for a few minutes)")]
    NeedsYes,
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Locked(#[from] LockError),
    #[error(transparent)]
    Gate(#[from] crate::gates::GateError),
    #[error(
        "refusing the canary: the fallback already runs {claims}; a canary measures a launch from zero (is an incident under way? `hybrid-drill status` names what a drill left)"
    )]
    FallbackBusy { claims: String },
    #[error("cannot read the fallback's NodeClaims and nodes: {0}")]
    Claims(#[source] kube::Error),
    #[error(transparent)]
    Template(#[from] pod::TemplateError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("the watches could not list the canary's objects: {0}")]
    Watches(#[from] crate::timeline::watch::SyncError),
    #[error("cannot write the canary's report in {dir}: {source}")]
    Write { dir: String, source: std::io::Error },
}

impl CanaryError {
    /// Refused when the cluster's state forbids a canary now; any other problem is invalid set-up.
    pub fn exit_code(&self) -> u8 {
        match self {
            CanaryError::Gate(_) | CanaryError::FallbackBusy { .. } => crate::exit::EXIT_REFUSED,
            CanaryError::Locked(lock) if lock.is_held() => crate::exit::EXIT_REFUSED,
            _ => crate::exit::EXIT_INVALID,
        }
    }
}

pub struct CanaryResult {
    pub report: CanaryReport,
    pub run_dir: PathBuf,
}

/// Runs one canary of `loaded`'s workload on its fallback NodePool.
pub async fn run(loaded: &LoadedDrill, opts: &CanaryOptions) -> Result<CanaryResult, CanaryError> {
    if !opts.yes {
        return Err(CanaryError::NeedsYes);
    }
    let signals = tokio::spawn(crate::safety::signals::interrupted());
    let drill = &loaded.drill;
    let (cluster, _) = cluster::connect(&opts.target, &drill.spec.cluster).await?;
    let observed = cluster.observe().await?;
    let mut observer = Observer::default();
    let say = |text: &str| eprintln!("hybrid-drill: {text}");
    lock::check(&cluster, &drill.spec.lock, Claim::Run, &this_host(), &mut observer, &say).await?;
    check_gates(&cluster, loaded, opts).await?;
    refuse_busy_fallback(&cluster, loaded).await?;
    let template = pod::workload_template(&cluster.reader(), drill).await?;

    let (dir, run_id) = record::run_dir(&opts.reports_dir, &drill.metadata.name)?;
    let provenance = crate::evidence::provenance::gather(&cluster, loaded, &Default::default()).await;
    let (timeline, journal) = record::open_files(loaded, &dir, &run_id, &observed, &provenance)?;
    let mutator = Mutator::new(cluster.clone(), journal, timeline.clone(), run_id.clone());
    let label = mutator.run_label();
    let pod = pod::canary_pod(&template, drill, &drill.spec.targets.fallback.node_pool, &pod::pod_name(&label), &label);
    let mut report = new_report(loaded, &cluster, &run_id, &pod);
    report.write(&dir).map_err(|source| CanaryError::Write { dir: dir.display().to_string(), source })?;
    let held = match mutator.take_lock(&drill.spec.lock, &Claimant::this_process(&run_id, &dir), observer).await {
        Ok(held) => held,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e.into());
        }
    };
    timeline.record(Event::DrillStarted {
        drill: drill.metadata.name.clone(),
        run_id: run_id.clone(),
        context: cluster.context.clone(),
    });
    eprintln!(
        "hybrid-drill: canary of {} on NodePool {} against {} · run directory {}",
        drill.metadata.name,
        drill.spec.targets.fallback.node_pool,
        cluster.context,
        dir.display()
    );
    let ended = stages::Canary::new(&cluster, loaded, &timeline, &mutator, &pod, &label, opts.deadlines)
        .run(signals, held.lost())
        .await;
    if let Err(e) = mutator.release_lock(held).await {
        ended.warn(format!("the drill lock was not released (it falls free after its duration): {e}"));
    }
    finish(&mut report, ended, &timeline, loaded, opts, &dir).await?;
    Ok(CanaryResult { report, run_dir: dir })
}

async fn check_gates(cluster: &Cluster, loaded: &LoadedDrill, opts: &CanaryOptions) -> Result<(), CanaryError> {
    let readings = crate::gates::read(cluster, &loaded.drill, &opts.reports_dir, Utc::now()).await;
    let by = if opts.overrides.is_empty() { String::new() } else { crate::gates::who(cluster).await };
    for o in crate::gates::judge(&readings, &opts.overrides, &by)? {
        eprintln!("hybrid-drill: WARNING: {o}");
    }
    Ok(())
}

/// A fallback already running is an incident or a drill's leftover, and a canary beside it would measure nothing.
async fn refuse_busy_fallback(cluster: &Cluster, loaded: &LoadedDrill) -> Result<(), CanaryError> {
    let claims = stages::fallback_claims(cluster, &loaded.drill).await.map_err(CanaryError::Claims)?;
    let nodes = stages::fallback_nodes(cluster, &loaded.drill).await.map_err(CanaryError::Claims)?;
    let busy: Vec<String> =
        claims.iter().map(|c| format!("NodeClaim {c}")).chain(nodes.iter().map(|n| format!("node {n}"))).collect();
    if busy.is_empty() {
        return Ok(());
    }
    Err(CanaryError::FallbackBusy { claims: busy.join(", ") })
}

fn new_report(
    loaded: &LoadedDrill,
    cluster: &Cluster,
    run_id: &str,
    pod: &k8s_openapi::api::core::v1::Pod,
) -> CanaryReport {
    CanaryReport {
        schema: report::CANARY_SCHEMA.into(),
        kind: "canary".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        run_id: run_id.into(),
        drill: loaded.drill.metadata.name.clone(),
        context: cluster.context.clone(),
        node_pool: loaded.drill.spec.targets.fallback.node_pool.clone(),
        pod: pod.metadata.name.clone().unwrap_or_default(),
        started: Utc::now(),
        finished: None,
        outcome: CanaryOutcome::Unfinished,
        cause: Some(
            "the canary has not finished: if no process runs it, `hybrid-drill recover` removes its pod".into(),
        ),
        exit_code: CanaryOutcome::Unfinished.exit_code(),
        phases: Vec::new(),
        first_answer_seconds: None,
        measured: Default::default(),
        estimated_cost: None,
        against: None,
        regressions: Vec::new(),
        left_behind: Vec::new(),
        warnings: Vec::new(),
    }
}

/// Measures the timeline, sets the canary against the drill's last run, writes and seals the record, pushes the
/// metrics.
async fn finish(
    report: &mut CanaryReport,
    ended: stages::Ended,
    timeline: &Timeline,
    loaded: &LoadedDrill,
    opts: &CanaryOptions,
    dir: &Path,
) -> Result<(), CanaryError> {
    timeline.record(Event::DrillFinished { outcome: ended.drill_outcome() });
    let measured = measure::measure(&timeline.observations(), &report.pod);
    let last = report::last_drill(&opts.reports_dir, &loaded.drill.metadata.name);
    report.measured(measured, &loaded.drill.spec.pricing, last);
    report.outcome = ended.outcome;
    report.exit_code = ended.outcome.exit_code();
    report.cause = ended.cause.clone();
    report.left_behind = ended.left_behind.clone();
    report.warnings = ended.warnings();
    report.finished = Some(Utc::now());
    if let Some(url) = &opts.pushgateway {
        let metrics = report::prometheus(report);
        if let Err(e) = crate::pushgateway::push_text(url, "hybrid-drill-canary", &report.drill, metrics).await {
            report.warnings.push(format!("metrics not pushed: {e}"));
        }
    }
    let write = |source| CanaryError::Write { dir: dir.display().to_string(), source };
    report.write(dir).map_err(write)?;
    std::fs::write(dir.join("metrics.prom"), report::prometheus(report)).map_err(write)?;
    if let Err(e) = crate::evidence::seal(dir, &report.run_id, None) {
        eprintln!("hybrid-drill: WARNING: the run directory was not sealed: {e}");
    }
    Ok(())
}
