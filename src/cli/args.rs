//! The command line as clap reads it: global flags, one variant per command with its flags and help, and the
//! parsers of flag values. No command runs here.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::drill::{NotifyFormat, Webhook};
use crate::report::Format;

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
    #[command(after_help = "Runs compare within a series: one drill file on one cluster profile (the \
`hybrid-drill.io/profile` label of kube-system, else the context); ◆ marks a run whose drill file changed (sha256). \
A phase is flagged as a regression when it is more than 20% (and 1s) slower than in the previous run that measured \
it, over its objective, or not measured. A crashed run (a timeline and no report.json) is listed as `crashed: \
incomplete`. The text view fits COLUMNS (default 80). `--format html` draws the trend of each phase. Touches no \
cluster.\n\nExit codes: 0 listed (and no regression with --fail-on-regression), 2 nothing readable, 6 the latest run \
of a series regressed (--fail-on-regression).\n\nExample (CI, after a drill):\n  hybrid-drill history reports \
--fail-on-regression 10")]
    History {
        /// A reports directory (reports/<drill>/<run>/report.json), one drill's directory, or one run.
        #[arg(default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        #[arg(long, short = 'f', value_enum, default_value = "text")]
        format: HistoryFormat,
        /// Exit 6 when the latest run of any series has a regression: a phase more than PCT percent (default 20)
        /// and 1s slower than the run before, over its objective, or not measured.
        #[arg(long, value_name = "PCT", num_args = 0..=1, default_missing_value = "20")]
        fail_on_regression: Option<f64>,
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
        /// Judge time-dependent settings (NodePool disruption budgets) at this planned time instead of now, in RFC
        /// 3339, e.g. 2026-12-08T14:00:00Z.
        #[arg(long, value_name = "TIME", value_parser = parse_time)]
        at: Option<chrono::DateTime<chrono::Utc>>,
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

/// `--notify [slack=|json=]URL`: a webhook with the default timeout.
pub(super) fn notify_flag(text: &str) -> Result<Webhook, crate::http::UrlError> {
    let (format, url) = match text.split_once('=') {
        Some(("slack", url)) => (NotifyFormat::Slack, url),
        Some(("json", url)) => (NotifyFormat::Json, url),
        _ => (NotifyFormat::Json, text),
    };
    let url = crate::http::service_url(url)?;
    Ok(Webhook { url, format, timeout: Webhook::DEFAULT_TIMEOUT })
}

/// An RFC 3339 time, with any offset, as UTC.
fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| format!("{e}: expected RFC 3339, e.g. 2026-12-08T14:00:00Z"))
}
