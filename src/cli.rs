//! Command-line interface: clap definitions and dispatch; exit codes come from `exit`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use crate::cluster::drain_selection::DrainFlags;
use crate::cluster::marks::RunId;
use crate::cluster::{self, Cluster, Target};
use crate::drill::{self, NotifyFormat, Webhook};
use crate::exit::{EXIT_INVALID, EXIT_LOCKED, EXIT_OBJECTIVE_MISSED, EXIT_PASSED, EXIT_RESTORE_FAILED};
use crate::preflight;
use crate::report::history::{self, History};
use crate::report::{Format, terminal};
use crate::run::{self, RunOptions};
use crate::safety::{self, RestoreScope};

const AFTER_HELP: &str = "\
Examples:
  hybrid-drill validate drills/drain.yaml        check a drill file; touches no cluster
  hybrid-drill preflight drills/drain.yaml       check the fallback design against the recommendations
  hybrid-drill plan drills/drain.yaml            show exactly what a run would touch; changes nothing
  hybrid-drill run drills/drain.yaml             run it (asks you to confirm the blast radius)
  hybrid-drill run drills/drain.yaml --yes --output json > result.json
  hybrid-drill recover reports/onprem-gpu-drain/20261202T101500Z
  hybrid-drill report reports/onprem-gpu-drain/20261202T101500Z --format html > drill.html
  hybrid-drill history reports                   every run of each drill, changes and regressions
  hybrid-drill identify                          the cluster's context and kube-system UID, for spec.cluster
  hybrid-drill schema > drill.schema.json        JSON Schema for editors
  hybrid-drill completions bash > ~/.local/share/bash-completion/completions/hybrid-drill
  hybrid-drill man | man -l -                    this manual page

Exit codes:
  0  drill passed: every step ran and every objective was met
  1  drill completed but missed an objective
  2  invalid input or set-up: bad drill file, wrong context, unreachable cluster, missing CRD,
     selector matching nothing; nothing was touched
  3  aborted (step failed or timed out, guard tripped, SIGINT/SIGTERM); the cluster was restored
  4  restore failed: the cluster needs a human (run `hybrid-drill recover RUN_DIR`)
  5  refused: another drill or recover holds the cluster's drill lock (a Lease); nothing was touched";

/// Failure drills for hybrid GPU clusters: drain or cut the on-prem GPU nodes, measure the Karpenter cloud
/// fallback phase by phase, return to on-prem, and leave a timestamped report.
#[derive(Debug, Parser)]
#[command(name = "hybrid-drill", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context). It must match the drill's spec.cluster.context.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HistoryFormat {
    Text,
    Md,
    Html,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a drill against the cluster: checks, fault, fallback, restore check, return, reclaim, report.
    #[command(after_help = "The run directory reports/<drill>/<UTC timestamp>/ holds drill.yaml, timeline.jsonl, \
journal.jsonl, report.json, report.md, report.html, junit.xml and metrics.prom. A failed, timed-out or interrupted \
drill restores the cluster and still writes its report.")]
    Run {
        /// The drill file (YAML).
        file: PathBuf,
        /// Skip the interactive confirmation of the blast radius (scripts and CI).
        #[arg(long, short = 'y')]
        yes: bool,
        /// Resolve and print what would be touched, then stop; nothing is written.
        #[arg(long)]
        dry_run: bool,
        /// `text` prints a summary table; `json` prints report.json on stdout.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
        /// Where run directories are created.
        #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// Also push the run's metrics to this Prometheus Pushgateway (e.g. http://pushgateway:9091); a failed push
        /// is a warning in the report, not a failed drill.
        #[arg(long, value_name = "URL", env = "HYBRID_DRILL_PUSHGATEWAY")]
        pushgateway: Option<String>,
        /// Also tell this webhook of the start, each missed objective, an abort and the end: `URL` gets the plain
        /// JSON event, `slack=URL` Slack's incoming-webhook message. Repeatable; the variable takes a comma-separated
        /// list (keep a secret URL there rather than in the drill file, which every run directory copies).
        #[arg(long, value_name = "[slack=]URL", env = "HYBRID_DRILL_NOTIFY", value_delimiter = ',', value_parser = notify_flag)]
        notify: Vec<Webhook>,
    },
    /// Watch the cluster for real fallbacks and measure each with the drills' ruler: read-only, long-running.
    #[command(
        after_help = "FILE is a drill file: its targets (on-prem nodes, workload, fallback NodePool), restoredWhen \
and objectives are used; its steps are ignored (nothing is injected, nothing changed: get, list and watch only). An \
episode opens when an on-prem node goes NotReady or Unknown, a cordoned on-prem node's workload pods leave, or workload \
pods run on the fallback; it closes when the workload is back on-prem and the fallback reclaimed, or after \
--episode-limit. Each episode writes reports/<drill>/<UTC timestamp>/ like a run (kind: incident in report.json) and \
prints its path. A watch restarted during an episode takes it up (the marker .open-episode.json beside the runs) with \
what it missed marked unknown."
    )]
    Watch {
        /// The drill file whose targets and objectives the incidents are measured by (YAML).
        file: PathBuf,
        /// Where the episodes' run directories are created.
        #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// Close an episode after this long even if the workload is not back on-prem with the fallback reclaimed.
        #[arg(long, value_name = "DURATION", default_value = "6h", value_parser = humantime::parse_duration)]
        episode_limit: std::time::Duration,
        /// Serve Prometheus metrics here (e.g. 0.0.0.0:9464): the episode in progress, the fallback's nodes and GPUs
        /// now, the last episode's RTO and phases.
        #[arg(long, value_name = "ADDR")]
        metrics_addr: Option<std::net::SocketAddr>,
        /// Stop once this many episodes have closed (default: watch until SIGINT or SIGTERM).
        #[arg(long, value_name = "N")]
        episodes: Option<u64>,
    },
    /// Re-render a past run from its run directory (report.json, and timeline.jsonl for the event markers).
    #[command(after_help = "Formats: md (report.md), html (report.html: a self-contained page with the timeline), \
json (report.json), junit (junit.xml: each objective a test case), prometheus (metrics.prom: text exposition for \
node-exporter's textfile collector). Touches no cluster.")]
    Report {
        /// The run directory (reports/<drill>/<UTC timestamp>/) or its report.json.
        run_dir: PathBuf,
        #[arg(long, short = 'f', value_enum, default_value = "md")]
        format: Format,
        /// Also push the run's metrics to this Prometheus Pushgateway.
        #[arg(long, value_name = "URL", env = "HYBRID_DRILL_PUSHGATEWAY")]
        pushgateway: Option<String>,
    },
    /// Compare every past run of each drill: RTO and every phase, change against the previous run and the objective.
    #[command(after_help = "A phase is flagged as a regression when it is more than 20% (and 1s) slower than in the \
previous run that measured it, over its objective, or not measured. `--format html` draws the trend of each phase. \
Touches no cluster.")]
    History {
        /// A reports directory (reports/<drill>/<run>/report.json), one drill's directory, or one run.
        #[arg(default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        #[arg(long, short = 'f', value_enum, default_value = "text")]
        format: HistoryFormat,
    },
    /// Check drill files without touching a cluster; errors point at the line and column.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Resolve a drill read-only against the cluster and print exactly what a run would touch, in order, and the
    /// preflight verdict.
    Plan { file: PathBuf },
    /// Check the fallback design read-only against the recommendations: GPU taint, device plugin scope, fallback
    /// NodePool, workloads, Karpenter's CRDs, and the RTO floor a node failure sets.
    #[command(after_help = "Targets come from a drill file, or from all four of --nodes, --namespace, --selector and \
--node-pool (a flag given with a file replaces the file's value). Exit codes: 0 no check failed (warnings allowed \
unless --strict), 1 a check failed (or, with --strict, warned), 2 invalid input, wrong context or unreachable \
cluster. Touches nothing.")]
    Preflight {
        /// A drill file: its targets, context and RTO objective.
        file: Option<PathBuf>,
        /// Label selector of the hybrid GPU nodes, e.g. eks.amazonaws.com/compute-type=hybrid.
        #[arg(long, value_name = "SELECTOR")]
        nodes: Option<String>,
        /// Namespace of the GPU workload.
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
        /// Label selector of the workload's pods, e.g. app=llm-inference.
        #[arg(long, value_name = "SELECTOR")]
        selector: Option<String>,
        /// The fallback Karpenter NodePool.
        #[arg(long, value_name = "NAME")]
        node_pool: Option<String>,
        /// Judge the drain as `kubectl drain --force` would run: pods no controller re-creates may be deleted (a
        /// drill file's `force: true` on its drain step says the same).
        #[arg(long)]
        force: bool,
        /// Judge the drain as `kubectl drain --delete-emptydir-data` would run: pods with emptyDir data may be
        /// evicted, the data lost (a drill file's `deleteEmptyDirData: true`).
        #[arg(long)]
        delete_emptydir_data: bool,
        /// `text` prints a table; `json` the findings for scripts.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
        /// Exit 1 on a warning too.
        #[arg(long)]
        strict: bool,
    },
    /// Restore a cluster from the journal of an interrupted run (after kill -9 or a lost machine).
    Recover {
        /// A run directory; without one, every run under --reports-dir with something left to undo.
        run_dir: Option<PathBuf>,
        #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
    },
    /// Print the cluster's identity: the context (or `in-cluster`), the API server and the UID of its kube-system
    /// namespace, which a drill's spec.cluster.kubeSystemUID names. Reads one object; touches nothing.
    Identify,
    /// Print the JSON Schema of the drill file format, for editors.
    Schema,
    /// Print the shell completion script for SHELL.
    #[command(after_help = "Install: bash `hybrid-drill completions bash > \
~/.local/share/bash-completion/completions/hybrid-drill`; zsh `hybrid-drill completions zsh > \
\"${fpath[1]}/_hybrid-drill\"`; fish `hybrid-drill completions fish > ~/.config/fish/completions/hybrid-drill.fish`.")]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff); with --dir, write one page per command there instead.
    #[command(after_help = "Read it: `hybrid-drill man | man -l -`. Install: `hybrid-drill man --dir \
/usr/local/share/man/man1` writes hybrid-drill.1 and hybrid-drill-COMMAND.1 for each command.")]
    Man {
        /// Write hybrid-drill.1 and a page per command (hybrid-drill-run.1, ...) into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let target = Target { kubeconfig: cli.kubeconfig.clone(), context: cli.context.clone() };
    let code = match cli.command {
        Command::Validate { files } => validate(&files),
        Command::Schema => {
            println!("{}", serde_json::to_string_pretty(&drill::json_schema()).unwrap_or_default());
            EXIT_PASSED
        }
        Command::Run { file, yes, dry_run, output, reports_dir, pushgateway, notify } => {
            let json = output == OutputFormat::Json;
            let opts = RunOptions { target, yes, dry_run, json, reports_dir, pushgateway, notify };
            block_on(run_command(&file, opts))
        }
        Command::Watch { file, reports_dir, episode_limit, metrics_addr, episodes } => {
            let opts = crate::incident::WatchOptions { target, reports_dir, episode_limit, metrics_addr, episodes };
            block_on(watch_command(&file, opts))
        }
        Command::Report { run_dir, format, pushgateway } => report_command(&run_dir, format, pushgateway.as_deref()),
        Command::History { reports_dir, format } => history_command(&reports_dir, format),
        Command::Plan { file } => block_on(plan_command(&file, &target)),
        Command::Preflight {
            file,
            nodes,
            namespace,
            selector,
            node_pool,
            force,
            delete_emptydir_data,
            output,
            strict,
        } => {
            let flags = preflight::TargetFlags { nodes, namespace, selector, node_pool };
            let drain = DrainFlags { force, delete_empty_dir_data: delete_emptydir_data };
            block_on(preflight_command(file.as_deref(), flags, drain, &target, output, strict))
        }
        Command::Recover { run_dir, reports_dir } => block_on(recover_command(run_dir, &reports_dir, &target)),
        Command::Identify => block_on(identify_command(&target)),
        Command::Completions { shell } => {
            print!("{}", completions(shell));
            EXIT_PASSED
        }
        Command::Man { dir } => man_command(dir.as_deref()),
    };
    ExitCode::from(code)
}

/// `--notify [slack=|json=]URL`: a webhook with the default timeout.
fn notify_flag(text: &str) -> Result<Webhook, crate::http::UrlError> {
    let (format, url) = match text.split_once('=') {
        Some(("slack", url)) => (NotifyFormat::Slack, url),
        Some(("json", url)) => (NotifyFormat::Json, url),
        _ => (NotifyFormat::Json, text),
    };
    let url = crate::http::service_url(url)?;
    Ok(Webhook { url, format, timeout: Webhook::DEFAULT_TIMEOUT })
}

/// The completion script for `shell`. clap_complete 4.6 names the bash case labels of a hyphenated binary's
/// subcommands differently from the states it sets (`hybrid__subcmd__drill__subcmd__run` against
/// `hybrid__drill__subcmd__run`), so no subcommand's flags would complete: the labels are put right here.
fn completions(shell: clap_complete::Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "hybrid-drill", &mut script);
    let script = String::from_utf8_lossy(&script).into_owned();
    match shell {
        clap_complete::Shell::Bash => script.replace("hybrid__subcmd__drill", "hybrid__drill"),
        _ => script,
    }
}

/// The manual page on stdout, or every page (one per command) written into `dir`.
fn man_command(dir: Option<&Path>) -> u8 {
    let written = match dir {
        None => clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()),
        Some(dir) => std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(Cli::command(), dir)),
    };
    match written {
        Ok(()) => EXIT_PASSED,
        Err(e) => {
            eprintln!("error: cannot write the manual page: {e}");
            EXIT_INVALID
        }
    }
}

fn init_tracing(verbose: u8) {
    // Libraries log their own view of errors this tool already reports in one line; show them only on -v.
    let level = match verbose {
        0 => "off,hybrid_drill=warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false).try_init();
}

fn block_on<F: std::future::Future<Output = u8>>(f: F) -> u8 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt.block_on(f),
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            EXIT_INVALID
        }
    }
}

fn load(file: &Path) -> Result<drill::LoadedDrill, u8> {
    drill::load(file).map_err(|e| {
        eprint!("{}", e.render());
        EXIT_INVALID
    })
}

fn validate(files: &[PathBuf]) -> u8 {
    let mut code = EXIT_PASSED;
    for file in files {
        match load(file) {
            Ok(d) => {
                println!(
                    "ok: {} is a valid drill ({}, {} steps)",
                    file.display(),
                    d.drill.metadata.name,
                    d.drill.spec.steps.len()
                );
                for warning in drill::left::warnings(&d.drill) {
                    println!("warning: {}: {warning}", file.display());
                }
            }
            Err(c) => code = c,
        }
    }
    code
}

async fn plan_command(file: &Path, target: &Target) -> u8 {
    let loaded = match load(file) {
        Ok(l) => l,
        Err(c) => return c,
    };
    match run::plan_only(&loaded, target).await {
        Ok(text) => {
            print!("{text}");
            EXIT_PASSED
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_INVALID
        }
    }
}

async fn preflight_command(
    file: Option<&Path>,
    flags: preflight::TargetFlags,
    drain: DrainFlags,
    target: &Target,
    output: OutputFormat,
    strict: bool,
) -> u8 {
    let loaded = match file.map(load).transpose() {
        Ok(l) => l,
        Err(c) => return c,
    };
    let drill = loaded.as_ref().map(|l| &l.drill);
    let targets = match preflight::PreflightTargets::resolve(drill, flags) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    // A drill names its cluster; without one, the kubeconfig's context (or --context) is the one checked.
    let connected = match drill {
        Some(d) => cluster::connect(target, &d.spec.cluster).await.map(|(c, _)| c),
        None => match Cluster::connect(target).await {
            Ok(c) => c.ping().await.map(|_| c),
            Err(e) => Err(e),
        },
    };
    let cluster = match connected {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    let mut expect = drill.map(preflight::Expectations::of).unwrap_or_default();
    expect.drain_flags.force |= drain.force;
    expect.drain_flags.delete_empty_dir_data |= drain.delete_empty_dir_data;
    let report = match preflight::run(&cluster.reader(), &targets, &expect).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    match output {
        OutputFormat::Json => println!("{}", preflight::render::json(&report)),
        OutputFormat::Text => print!("{}", preflight::render::table(&report)),
    }
    if report.passed(strict) { EXIT_PASSED } else { EXIT_OBJECTIVE_MISSED }
}

async fn run_command(file: &Path, opts: RunOptions) -> u8 {
    let loaded = match load(file) {
        Ok(l) => l,
        Err(c) => return c,
    };
    if opts.dry_run {
        return plan_command(file, &opts.target).await;
    }
    match run::run(&loaded, &opts).await {
        Ok(result) => {
            if opts.json {
                println!("{}", serde_json::to_string_pretty(&result.report).unwrap_or_default());
            } else {
                print!("{}", terminal::render(&result.report, &result.run_dir.display().to_string()));
            }
            result.report.exit_code as u8
        }
        Err(e) => {
            eprintln!("error: {e}");
            if matches!(&e, run::SetupError::Locked(l) if l.is_held()) { EXIT_LOCKED } else { EXIT_INVALID }
        }
    }
}

async fn watch_command(file: &Path, opts: crate::incident::WatchOptions) -> u8 {
    let loaded = match load(file) {
        Ok(l) => l,
        Err(c) => return c,
    };
    match crate::incident::watch(&loaded, &opts).await {
        Ok(()) => EXIT_PASSED,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_INVALID
        }
    }
}

fn report_command(run_dir: &Path, format: Format, pushgateway: Option<&str>) -> u8 {
    let report = match crate::report::load(run_dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    match format.render(&report) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    }
    if let Some(url) = pushgateway {
        if let Err(e) = block_on_result(crate::pushgateway::push(url, &report)) {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
        eprintln!("pushed the metrics of {} to {url}", report.run_id);
    }
    EXIT_PASSED
}

/// Why async work run from synchronous code failed: no runtime, or the work itself.
#[derive(Debug, thiserror::Error)]
enum BlockingError<E: std::error::Error + 'static> {
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Failed(E),
}

fn block_on_result<T, E: std::error::Error + 'static>(
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, BlockingError<E>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(BlockingError::Runtime)?;
    rt.block_on(f).map_err(BlockingError::Failed)
}

async fn identify_command(target: &Target) -> u8 {
    let identity = async {
        let cluster = Cluster::connect(target).await?;
        let version = cluster.ping().await?;
        let uid = cluster.kube_system_uid().await?;
        Ok::<_, cluster::ClusterError>((cluster, version, uid))
    };
    match identity.await {
        Ok((cluster, version, uid)) => {
            println!("context: {}", cluster.context);
            println!("server: {} (Kubernetes {version})", cluster.server);
            println!("kube-system UID: {uid}");
            let context = if cluster.in_cluster { String::new() } else { format!("context: {}, ", cluster.context) };
            println!("in a drill file: spec: {{cluster: {{{context}kubeSystemUID: {uid}}}}}");
            EXIT_PASSED
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_INVALID
        }
    }
}

fn history_command(reports_dir: &Path, format: HistoryFormat) -> u8 {
    let (runs, warnings) = match history::collect(reports_dir) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let h: History = history::build(runs);
    print!(
        "{}",
        match format {
            HistoryFormat::Text => history::render_text(&h),
            HistoryFormat::Md => history::render_markdown(&h),
            HistoryFormat::Html => history::html::render(&h),
            HistoryFormat::Json => history::render_json(&h),
        }
    );
    EXIT_PASSED
}

async fn recover_command(run_dir: Option<PathBuf>, reports_dir: &Path, target: &Target) -> u8 {
    let journals: Vec<PathBuf> = match &run_dir {
        Some(dir) => vec![dir.join("journal.jsonl")],
        None => find_journals(reports_dir),
    };
    // Marks in the cluster are scoped to the named run; without one, any run's marks are restored.
    let run_id = run_dir.as_ref().and_then(|d| run_id_of(d)).map(RunId::new);
    // Undos found by the marks are journalled in the run's own journal when there is a readable one, else in one of
    // their own under the reports directory, where `recover` looks next time (see `recover_marks`).
    let marks_journal = match &run_dir {
        Some(dir) if dir.is_dir() && safety::journal::read(&dir.join("journal.jsonl")).is_ok() => {
            dir.join("journal.jsonl")
        }
        _ => {
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
            reports_dir.join("recover").join(stamp).join("journal.jsonl")
        }
    };
    let cluster = match Cluster::connect(target).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    if let Err(e) = cluster.ping().await {
        eprintln!("error: {e}");
        return EXIT_INVALID;
    }
    // Recover holds the drill lock too: a drill must not start while a recover restores, nor two recovers run.
    let lock = match take_recover_lock(&cluster, run_dir.as_deref(), &journals, reports_dir).await {
        Ok(lock) => lock,
        Err(e) => {
            eprintln!("error: {e}");
            return if e.is_held() { EXIT_LOCKED } else { EXIT_INVALID };
        }
    };
    if let Some(warning) = &lock.took_over {
        eprintln!("warning: {warning}");
    }
    let scope = RestoreScope { nodes: on_prem_nodes_of(&cluster, run_dir.as_deref()).await, run: run_id.clone() };
    let code = recover_with(&cluster, journals, &scope, &marks_journal).await;
    if let Err(e) = lock.release().await {
        eprintln!("warning: the drill lock was not released (it falls free after its duration): {e}");
    }
    code
}

/// Takes the drill lock for `recover`: the run's own (its drill file's `spec.lock`), else the default one. The lock
/// of a run being recovered is taken over at once when that run's process is gone.
async fn take_recover_lock(
    cluster: &Cluster,
    run_dir: Option<&Path>,
    journals: &[PathBuf],
    reports_dir: &Path,
) -> Result<safety::lock::Lock, safety::lock::LockError> {
    let lease = run_dir
        .and_then(|d| crate::drill::load(&d.join("drill.yaml")).ok())
        .map(|loaded| loaded.drill.spec.lock)
        .unwrap_or_default();
    // The runs being recovered: by their timeline, and by the lock their journal says they took (a run that died
    // taking it has no timeline entry yet).
    let mut runs: Vec<String> = journals.iter().filter_map(|j| j.parent().and_then(run_id_of)).collect();
    let journalled = journals.iter().filter_map(|j| safety::journal::read(j).ok()).flat_map(|c| c.entries);
    runs.extend(journalled.filter_map(|e| match e.mutation {
        safety::journal::Mutation::HoldLease { holder, .. } => Some(holder),
        _ => None,
    }));
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string().to_lowercase();
    let claimant =
        crate::cluster::lease::Claimant::this_process(&format!("recover-{stamp}"), run_dir.unwrap_or(reports_dir));
    safety::lock::take(cluster, &lease, &claimant, safety::lock::Claim::Recover { runs: &runs }).await
}

/// The on-prem nodes the run's own copy of its drill file selects, which the restored-state check covers besides
/// those its journal names; none when the run directory holds no readable drill file.
async fn on_prem_nodes_of(cluster: &Cluster, run_dir: Option<&Path>) -> std::collections::BTreeSet<String> {
    let Some(loaded) = run_dir.and_then(|d| crate::drill::load(&d.join("drill.yaml")).ok()) else {
        return Default::default();
    };
    let selector = loaded.drill.spec.targets.on_prem.nodes.as_str().to_string();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(cluster.client.clone());
    match nodes.list(&kube::api::ListParams::default().labels(&selector)).await {
        Ok(list) => list.items.iter().map(kube::ResourceExt::name_any).collect(),
        Err(_) => Default::default(),
    }
}

/// Recovers from each journal with something outstanding, then from the marks in the cluster; an unreadable journal
/// is an error (exit 4), a torn last line a one-line notice.
async fn recover_with(cluster: &Cluster, journals: Vec<PathBuf>, scope: &RestoreScope, marks_journal: &Path) -> u8 {
    let mut outcomes = Vec::new();
    for journal in journals {
        let contents = match safety::journal::read(&journal) {
            Ok(contents) => contents,
            Err(e) => {
                outcomes.push((journal.display().to_string(), Err(e.into())));
                continue;
            }
        };
        if let Some(torn) = &contents.torn {
            eprintln!("note: {}: ignoring its last line, cut short by a crash mid-write: {torn}", journal.display());
        }
        if safety::journal::outstanding(&contents.entries).is_empty() {
            continue;
        }
        outcomes.push((journal.display().to_string(), safety::recover(cluster, &journal, scope).await));
    }
    let marks = safety::recover_marks(cluster, scope.run.as_ref(), marks_journal).await;
    outcomes.push(("marks in the cluster".to_string(), marks));
    let mut code = EXIT_PASSED;
    let mut anything = false;
    for (source, outcome) in outcomes {
        match outcome {
            Ok(outcome) => {
                for u in &outcome.undone {
                    anything = true;
                    println!("restored: {u} (from {source})");
                }
                for checked in &outcome.verified {
                    println!("verified: {checked} (from {source})");
                }
                for (u, why) in &outcome.failed {
                    anything = true;
                    println!("NOT RESTORED: {u}: {why} (from {source})");
                    code = EXIT_RESTORE_FAILED;
                }
            }
            Err(e) => {
                anything = true;
                eprintln!("error: {e}");
                code = EXIT_RESTORE_FAILED;
            }
        }
    }
    if !anything {
        println!("nothing to recover");
    }
    code
}

/// The run id a run directory's timeline starts with.
fn run_id_of(dir: &Path) -> Option<String> {
    crate::timeline::read(&dir.join("timeline.jsonl")).ok()?.into_iter().find_map(|o| match o.event {
        crate::timeline::Event::DrillStarted { run_id, .. } => Some(run_id),
        _ => None,
    })
}

fn find_journals(reports_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(drills) = std::fs::read_dir(reports_dir) else {
        return found;
    };
    for drill in drills.flatten() {
        let Ok(runs) = std::fs::read_dir(drill.path()) else {
            continue;
        };
        for run in runs.flatten() {
            let journal = run.path().join("journal.jsonl");
            if journal.exists() {
                found.push(journal);
            }
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::safety::journal::{EntryState, Journal, Mutation};
    use crate::safety::tests::{Answer, Seen, serve, status};

    /// A cluster with no marks left by any run: every list is empty.
    fn unmarked(request: &Seen) -> Answer {
        match request.method.as_str() {
            "GET" if request.uri.starts_with("/api/v1/nodes/") => Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "hybrid-gpu-1"},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            ),
            "GET" => Answer::Json(200, json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []})),
            _ => Answer::Json(200, json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "hybrid-gpu-1"}})),
        }
    }

    fn cordoned(path: &Path) -> Mutation {
        let cordon = Mutation::Cordon { node: "hybrid-gpu-1".into(), was_unschedulable: false };
        let mut journal = Journal::create(path).unwrap();
        let seq = journal.intend(&cordon).unwrap();
        journal.write(seq, EntryState::Done, &cordon, None).unwrap();
        cordon
    }

    /// `recover` of the one journal `path` against an API server that answers with `answer`.
    async fn recover_one(path: &Path, answer: impl FnMut(&Seen) -> Answer + Send + 'static) -> (u8, Vec<Seen>) {
        let (cluster, handle) = Cluster::mock();
        let server = serve(handle, answer);
        let marks_journal = path.with_file_name("marks.jsonl");
        let code = recover_with(&cluster, vec![path.to_path_buf()], &RestoreScope::default(), &marks_journal).await;
        drop(cluster);
        (code, server.await.unwrap())
    }

    #[tokio::test]
    async fn recover_fails_on_an_unreadable_journal_instead_of_finding_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        cordoned(&path);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.insert_str(0, "{not an entry}\n");
        std::fs::write(&path, &text).unwrap();
        let (code, seen) = recover_one(&path, unmarked).await;
        assert_eq!(code, EXIT_RESTORE_FAILED);
        assert!(seen.iter().all(|r| r.method == "GET"), "nothing is undone on a guess: {seen:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "the journal is left as found");
    }

    #[tokio::test]
    async fn recover_proceeds_past_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        cordoned(&path);
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, br#"{"seq":0,"at":"2026-12-02T10:15:01Z","state":"und"#).unwrap();
        let (code, seen) = recover_one(&path, unmarked).await;
        assert_eq!(code, EXIT_PASSED);
        assert_eq!(seen.iter().filter(|r| r.method == "PATCH").count(), 1, "{seen:?}");
        let contents = crate::safety::journal::read(&path).unwrap();
        assert_eq!(contents.torn, None);
        assert!(crate::safety::journal::outstanding(&contents.entries).is_empty());
    }

    #[tokio::test]
    async fn recover_reports_a_failed_undo() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        cordoned(&path);
        let (code, _) = recover_one(&path, |request| match request.method.as_str() {
            "PATCH" => status(403, "Forbidden"),
            _ => unmarked(request),
        })
        .await;
        assert_eq!(code, EXIT_RESTORE_FAILED);
        assert_eq!(crate::safety::journal::outstanding(&crate::safety::journal::read(&path).unwrap().entries).len(), 1);
    }
}
