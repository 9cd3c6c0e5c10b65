//! The body of each command but `recover`: load and validate, plan, preflight, run, watch, report, history,
//! identify, completions and man pages, each returning its exit code or the failure `failure::report` prints.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cluster::drain_selection::DrainFlags;
use crate::cluster::{self, Cluster, KubeContext};
use crate::drill::{self};
use crate::exit::{EXIT_INVALID, EXIT_PASSED, EXIT_REGRESSION};
use crate::preflight;
use crate::report::history::{self, History};
use crate::report::{Format, terminal};
use crate::run::{self, RunOptions};

use super::args::{Cli, HistoryFormat, OutputFormat};
use super::failure::{Failure, Outcome};

/// The completion script for `shell`. clap_complete 4.6 names the bash case labels of a hyphenated binary's
/// subcommands differently from the states it sets (`hybrid__subcmd__drill__subcmd__run` against
/// `hybrid__drill__subcmd__run`), so no subcommand's flags would complete: the labels are put right here.
pub(super) fn completions(shell: clap_complete::Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "hybrid-drill", &mut script);
    let script = String::from_utf8_lossy(&script).into_owned();
    match shell {
        clap_complete::Shell::Bash => script.replace("hybrid__subcmd__drill", "hybrid__drill"),
        _ => script,
    }
}

pub(super) fn block_on<F: std::future::Future<Output = Outcome>>(f: F) -> Outcome {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt.block_on(f),
        Err(e) => Err(Failure::invalid(format!("cannot start the runtime: {e}"))),
    }
}

/// The drill file, or its located errors; the JSON line names the command that lists each.
pub(super) fn load(file: &Path) -> Result<drill::LoadedDrill, Failure> {
    drill::load(file).map_err(|e| {
        let summary = format!(
            "{} is not a valid drill: `hybrid-drill validate -o json {}` lists each problem",
            file.display(),
            file.display()
        );
        Failure::rendered(e.render(), summary)
    })
}

/// Each file checked on its own, and against `--context` when given; warnings do not change the exit code. With
/// `-o json` the one object is all that is printed.
pub(super) fn validate(files: &[PathBuf], output: OutputFormat, context: Option<&str>) -> Outcome {
    let checked: Vec<(&PathBuf, Result<drill::LoadedDrill, drill::DrillError>)> =
        files.iter().map(|file| (file, drill::load_expecting(file, drill::validate::Expected { context }))).collect();
    if output == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&super::validate_json::render(&checked)).unwrap_or_default());
    }
    let mut code = EXIT_PASSED;
    for (file, loaded) in &checked {
        match loaded {
            Ok(_) if output == OutputFormat::Json => {}
            Ok(d) => {
                eprint!("{}", d.render_warnings());
                println!(
                    "ok: {} is a valid drill ({}, {} steps)",
                    file.display(),
                    d.drill.metadata.name,
                    d.drill.spec.steps.len()
                );
                for warning in drill::left_in_place::warnings(&d.drill) {
                    println!("warning: {}: {warning}", file.display());
                }
            }
            Err(e) => {
                if output == OutputFormat::Text {
                    eprint!("{}", e.render());
                }
                code = EXIT_INVALID;
            }
        }
    }
    Ok(code)
}

pub(super) async fn plan_command(
    file: &Path,
    target: &KubeContext,
    reports_dir: &Path,
    output: OutputFormat,
) -> Outcome {
    plan_overriding(file, target, reports_dir, output, &[]).await
}

/// `plan`, or `run --dry-run` with the closed gates its `--override-gate` flags would let through.
async fn plan_overriding(
    file: &Path,
    target: &KubeContext,
    reports_dir: &Path,
    output: OutputFormat,
    overrides: &[crate::gates::Override],
) -> Outcome {
    // With `-o json` a plan refused or unreadable still leaves one object on stdout, as `run -o json` does.
    let json = matches!(output, OutputFormat::Json);
    let loaded = load(file).map_err(|f| f.json_too(json))?;
    match run::plan_only(&loaded, target, reports_dir).await {
        Ok(mut planned) => {
            planned.overrides = overrides.to_vec();
            match output {
                OutputFormat::Text => print!("{}", planned.text(&loaded.drill)),
                OutputFormat::Json => println!(
                    "{}",
                    crate::secrets::redact(
                        &serde_json::to_string_pretty(&planned.json(&loaded.drill)).unwrap_or_default()
                    )
                ),
            }
            Ok(planned.exit_code(&loaded.drill))
        }
        Err(e) => Err(Failure::new(&e, e.exit_code()).json_too(json)),
    }
}

pub(super) async fn preflight_command(
    file: Option<&Path>,
    flags: preflight::TargetFlags,
    drain: DrainFlags,
    target: &KubeContext,
    (output, strict): (OutputFormat, bool),
    at: Option<chrono::DateTime<chrono::Utc>>,
) -> Outcome {
    let loaded = file.map(load).transpose()?;
    let drill = loaded.as_ref().map(|l| &l.drill);
    let targets = preflight::PreflightTargets::resolve(drill, flags).map_err(Failure::invalid)?;
    // A drill names its cluster; without one, the kubeconfig's context (or --context) is the one checked.
    let connected = match drill {
        Some(d) => cluster::connect(target, &d.spec.cluster).await.map(|(c, _)| c),
        None => match Cluster::connect(target).await {
            Ok(c) => c.ping().await.map(|_| c),
            Err(e) => Err(e),
        },
    };
    let cluster = connected.map_err(Failure::invalid)?;
    let mut expect = drill.map(preflight::Expectations::of).unwrap_or_default();
    expect.drain_flags.force |= drain.force;
    expect.drain_flags.delete_empty_dir_data |= drain.delete_empty_dir_data;
    expect.at = at;
    let mut report = preflight::run(&cluster.reader(), &targets, &expect).await.map_err(Failure::invalid)?;
    if let Some(slo) = drill.and_then(|d| d.spec.slo.as_ref()) {
        report = report.with_findings(crate::slo::trial::try_queries(slo, &cluster.reader()).await);
    }
    if let Some(drill) = drill {
        report = report.with_findings(crate::nets::preflight::findings(drill).await);
    }
    match output {
        OutputFormat::Json => println!("{}", preflight::render::json(&report)),
        OutputFormat::Text => print!("{}", preflight::render::table(&report)),
    }
    Ok(crate::exit::preflight_code(report.passed(strict)))
}

pub(super) async fn run_command(file: &Path, opts: RunOptions) -> Outcome {
    // With `-o json` a run that never started still leaves one object on stdout: a CI step reading it gets the
    // reason, not an empty file.
    let loaded = load(file).map_err(|f| f.json_too(opts.json))?;
    if opts.dry_run {
        let output = if opts.json { OutputFormat::Json } else { OutputFormat::Text };
        return plan_overriding(file, &opts.target, &opts.reports_dir, output, &opts.overrides).await;
    }
    let result = run::run(&loaded, &opts).await.map_err(|e| Failure::new(&e, e.exit_code()).json_too(opts.json))?;
    if opts.json {
        let json = serde_json::to_string_pretty(&result.report).unwrap_or_default();
        println!("{}", crate::secrets::redact(&json));
    } else {
        let run_dir = result.run_dir.display().to_string();
        let table = terminal::render(&result.report, &run_dir, history::terminal_width());
        print!("{}", crate::secrets::redact(&table));
    }
    Ok(result.report.exit_code as u8)
}

pub(super) async fn watch_command(file: &Path, opts: crate::incident::WatchOptions) -> Outcome {
    let loaded = load(file)?;
    crate::incident::watch(&loaded, &opts).await.map_err(Failure::invalid)?;
    Ok(EXIT_PASSED)
}

pub(super) fn report_command(run_dir: &Path, format: Format, pushgateway: Option<&str>) -> Outcome {
    let report = crate::report::load(run_dir).map_err(Failure::invalid)?;
    let text = format.render(&report).map_err(Failure::invalid)?;
    print!("{}", crate::secrets::redact(&text));
    if let Some(url) = pushgateway {
        block_on_result(crate::pushgateway::push(url, &report)).map_err(Failure::invalid)?;
        eprintln!("pushed the metrics of {} to {}", report.run_id, crate::secrets::redact(url));
    }
    Ok(EXIT_PASSED)
}

/// Why async work run from synchronous code failed: no runtime, or the work itself.
#[derive(Debug, thiserror::Error)]
pub(super) enum BlockingError<E: std::error::Error + 'static> {
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Failed(E),
}

pub(super) fn block_on_result<T, E: std::error::Error + 'static>(
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, BlockingError<E>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(BlockingError::Runtime)?;
    rt.block_on(f).map_err(BlockingError::Failed)
}

pub(super) async fn identify_command(target: &KubeContext, output: OutputFormat) -> Outcome {
    let identity = async {
        let cluster = Cluster::connect(target).await?;
        let version = cluster.ping().await?;
        let uid = cluster.kube_system_uid().await?;
        Ok::<_, cluster::ClusterError>((cluster, version, uid))
    };
    let json = output == OutputFormat::Json;
    let (cluster, version, uid) = identity.await.map_err(|e| Failure::invalid(e).json_too(json))?;
    match json {
        true => {
            let value = serde_json::json!({
                "context": (!cluster.in_cluster).then_some(&cluster.context),
                "in_cluster": cluster.in_cluster,
                "server": cluster.server,
                "kubernetes_version": version.to_string(),
                "kube_system_uid": uid,
            });
            println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        }
        false => {
            println!("context: {}", cluster.context);
            println!("server: {} (Kubernetes {version})", cluster.server);
            println!("kube-system UID: {uid}");
            let context = if cluster.in_cluster { String::new() } else { format!("context: {}, ", cluster.context) };
            println!("in a drill file: spec: {{cluster: {{{context}kubeSystemUID: {uid}}}}}");
        }
    }
    Ok(EXIT_PASSED)
}

pub(super) fn history_command(
    reports_dir: &Path,
    format: HistoryFormat,
    fail_on_regression: Option<f64>,
    joins: &[history::Join],
) -> Outcome {
    // Canaries are listed after the drills, in the text and Markdown renderings.
    let canaries = match format {
        HistoryFormat::Text | HistoryFormat::Md => crate::canary::report::history_text(reports_dir),
        HistoryFormat::Html | HistoryFormat::Json => String::new(),
    };
    let (runs, warnings) = match history::collect(reports_dir) {
        Err(history::HistoryError::NoRuns(_)) if !canaries.is_empty() => {
            print!("{canaries}");
            return Ok(EXIT_PASSED);
        }
        collected => collected.map_err(Failure::invalid)?,
    };
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let ratio = fail_on_regression.map_or(history::REGRESSION_RATIO, |pct| pct / 100.0);
    let h: History = history::build(runs, ratio, joins);
    print!(
        "{}",
        match format {
            HistoryFormat::Text => history::render_text(&h, history::terminal_width()),
            HistoryFormat::Md => history::render_markdown(&h),
            HistoryFormat::Html => history::html::render(&h),
            HistoryFormat::Json => history::render_json(&h),
        }
    );
    print!("{canaries}");
    let regressed = history::latest_regressions(&h);
    if fail_on_regression.is_none() || regressed.is_empty() {
        return Ok(EXIT_PASSED);
    }
    for r in regressed {
        eprintln!("regression: {r}");
    }
    Ok(EXIT_REGRESSION)
}
