//! The command line as clap reads it: global flags, one variant per command with its flags and help, and the
//! parsers of flag values. No command runs here.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::drill::{NotifyFormat, Webhook};
use crate::report::Format;

const EXAMPLES: &str = "\
Examples:
  hybrid-drill validate drills/drain.yaml        check a drill file; touches no cluster
  hybrid-drill preflight drills/drain.yaml       check the fallback design against the recommendations
  hybrid-drill plan drills/drain.yaml            show exactly what a run would touch; changes nothing
  hybrid-drill run drills/drain.yaml             run it (asks you to confirm the blast radius)
  hybrid-drill run drills/drain.yaml --yes --output json > result.json
  hybrid-drill recover reports/onprem-gpu-drain/20261202T101500Z
  hybrid-drill status                            is anything left over, who holds the drill lock? (reads only)
  hybrid-drill report reports/onprem-gpu-drain/20261202T101500Z -o html > drill.html
  hybrid-drill history reports                   every run of each drill, changes and regressions
  hybrid-drill whatif RUN_DIR                    what each change would cut from the RTO, and its cost
  hybrid-drill predict drills/drain.yaml         the RTO forecast with an interval, before the drill
  hybrid-drill canary drills/drain.yaml --yes    one fallback GPU node launched, served and reclaimed
  hybrid-drill run drills/drain.yaml --change CHG-1 --approved-by alice
  hybrid-drill verify reports/onprem-gpu-drain/20261202T101500Z
  hybrid-drill evidence reports --since 2026-01-01 --out evidence-2026
  hybrid-drill identify                          the cluster's context and kube-system UID, for spec.cluster
  hybrid-drill schema > drill.schema.json        JSON Schema for editors
  hybrid-drill completions bash > ~/.local/share/bash-completion/completions/hybrid-drill
  hybrid-drill man | man -l -                    this manual page
";

/// Failure drills for hybrid GPU clusters: drain or cut the on-prem GPU nodes, measure the Karpenter cloud
/// fallback phase by phase, return to on-prem, and leave a timestamped report.
#[derive(Debug, Parser)]
#[command(name = "hybrid-drill", version, after_help = with_exit_codes(EXAMPLES, None))]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// The cluster a command reads, as kubectl takes it: only on the commands that read one.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterFlags {
    /// Kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context). It must match the drill's spec.cluster.context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl ClusterFlags {
    pub fn target(&self) -> crate::cluster::KubeContext {
        crate::cluster::KubeContext { kubeconfig: self.kubeconfig.clone(), context: self.context.clone() }
    }
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

// Parsed once per process and matched at once: boxing `run`'s flag groups to even out the variants' sizes buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a drill against the cluster: checks, fault, fallback, restore check, return, reclaim, report.
    #[command(after_help = with_exit_codes(RUN_HELP, Some("run")))]
    Run {
        /// The drill file (YAML).
        file: PathBuf,
        /// Skip the interactive confirmation of the blast radius (scripts and CI).
        #[arg(long, short = 'y')]
        yes: bool,
        /// Resolve the drill read-only and print what a run would touch and the preflight verdict (as `plan`),
        /// then stop; nothing is written, no run directory is made. Exits as `plan` does.
        #[arg(long)]
        dry_run: bool,
        /// `text` prints a summary table; `json` prints report.json on stdout (with --dry-run, the plan's JSON).
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
        /// Where run directories are created.
        #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// Also push the run's metrics to this Prometheus Pushgateway (e.g. http://pushgateway:9091); a failed push
        /// is a warning in the report, not a failed drill.
        #[arg(long, value_name = "URL", env = "HYBRID_DRILL_PUSHGATEWAY", hide_env_values = true)]
        pushgateway: Option<String>,
        /// Also tell this webhook of the start, each missed objective, an abort and the end: `URL` gets the plain
        /// JSON event, `slack=URL` Slack's incoming-webhook message. Repeatable; the variable takes a comma-separated
        /// list (keep a secret URL there rather than in the drill file, which every run directory copies).
        #[arg(long, value_name = "[slack=]URL", env = "HYBRID_DRILL_NOTIFY", hide_env_values = true, value_delimiter = ',', value_parser = notify_flag)]
        notify: Vec<Webhook>,
        /// Let a closed start gate through: alert, incident, freeze-window or cluster-freeze. Each needs its own
        /// --reason after it; repeatable. The report and the timeline record the gate, who and why.
        #[arg(long = "override-gate", value_name = "NAME", value_parser = gate_name)]
        override_gate: Vec<crate::domain::GateKind>,
        /// Why the --override-gate before it lets its gate through.
        #[arg(long, value_name = "TEXT")]
        reason: Vec<String>,
        /// The change record the drill runs under (e.g. CHG-1), recorded in every report format.
        #[arg(long, value_name = "ID")]
        change: Option<String>,
        /// Who approved the drill, recorded in every report format.
        #[arg(long, value_name = "NAME")]
        approved_by: Option<String>,
        /// Sign the run directory's manifest with this ed25519 key: a file (PKCS#8 PEM as `openssl genpkey -algorithm
        /// ed25519` writes it, or the 32-byte seed in base64 or hex), or a secret reference `${env:NAME}` or
        /// `${file:/path}` (a Kubernetes Secret as a variable or a mounted file).
        #[arg(long, value_name = "KEY", env = "HYBRID_DRILL_SIGNING_KEY", hide_env_values = true)]
        signing_key: Option<String>,
        /// Let the drill's commands run: `exec` steps and their undo, node-failure, capacity and last-resort hooks.
        /// They run on this machine with its identity and Secrets at hand, so a drill that has any is refused
        /// (exit 2, nothing touched) without this flag; `hybrid-drill plan` lists each command line.
        #[arg(long)]
        allow_commands: bool,
        #[command(flatten)]
        ship: ShipFlags,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
    /// Check a run directory against its manifest: each file changed, removed or added since, and the signature.
    #[command(after_help = with_exit_codes(VERIFY_HELP, Some("verify")))]
    Verify {
        /// The run directory (reports/<drill>/<UTC timestamp>/).
        run_dir: PathBuf,
        #[command(flatten)]
        trust: TrustFlags,
        /// `text` names each file and the signature's status; `json` one object for scripts (`intact`,
        /// `authentic`, the files).
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Gather every drill and incident of a period for an auditor: each run directory verified and copied, with an
    /// index in Markdown and HTML.
    #[command(after_help = with_exit_codes(EVIDENCE_HELP, Some("evidence")))]
    Evidence {
        /// A reports directory (reports/<drill>/<run>/report.json), as `history` reads it, or where runs were
        /// shipped (s3://BUCKET/PREFIX).
        #[arg(default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// The first day (or RFC 3339 time) of the period, in UTC.
        #[arg(long, value_name = "DATE", value_parser = parse_day_start)]
        since: chrono::DateTime<chrono::Utc>,
        /// The last day of the period, included (default: now).
        #[arg(long, value_name = "DATE", value_parser = parse_day_end)]
        until: Option<chrono::DateTime<chrono::Utc>>,
        /// Where to write the bundle (default: evidence-SINCE-UNTIL); it must not exist or be empty.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Also write the bundle as DIR.tar.gz.
        #[arg(long)]
        archive: bool,
        #[command(flatten)]
        trust: TrustFlags,
        /// `text` says where the index is; `json` one object for scripts (`runs`, `not_intact`, `index`, `archive`).
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
        #[command(flatten)]
        s3: S3Flags,
    },
    /// Watch the cluster for real fallbacks and measure each with the drills' ruler: read-only, long-running.
    #[command(after_help = with_exit_codes(WATCH_HELP, Some("watch")))]
    Watch {
        /// The drill file whose targets and objectives the incidents are measured by (YAML).
        file: PathBuf,
        /// Where the episodes' run directories are created.
        #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// Close an episode after this long even if the workload is not back on-prem with the fallback reclaimed.
        #[arg(long, value_name = "DURATION", default_value = "6h", value_parser = crate::drill::duration::parse_flag)]
        episode_limit: std::time::Duration,
        /// Serve Prometheus metrics here (e.g. 0.0.0.0:9464): the episode in progress, the fallback's nodes and GPUs
        /// now, the last episode's RTO and phases.
        #[arg(long, value_name = "ADDR")]
        metrics_addr: Option<std::net::SocketAddr>,
        /// Stop once this many episodes have closed (default: watch until SIGINT or SIGTERM).
        #[arg(long, value_name = "N")]
        episodes: Option<u64>,
        /// Sign each incident's manifest with this ed25519 key, as `run --signing-key` does.
        #[arg(long, value_name = "KEY", env = "HYBRID_DRILL_SIGNING_KEY", hide_env_values = true)]
        signing_key: Option<String>,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
    /// Re-render a past run from its run directory (report.json, and timeline.jsonl for the event markers).
    #[command(after_help = with_exit_codes(REPORT_HELP, Some("report")))]
    Report {
        /// The run directory (reports/<drill>/<UTC timestamp>/) or its report.json.
        run_dir: PathBuf,
        /// The format to print: md, html, json, junit or prometheus.
        #[arg(long, short = 'o', short_alias = 'f', alias = "format", value_enum, default_value = "md")]
        output: Format,
        /// Also push the run's metrics to this Prometheus Pushgateway (e.g. http://pushgateway:9091).
        #[arg(long, value_name = "URL", env = "HYBRID_DRILL_PUSHGATEWAY", hide_env_values = true)]
        pushgateway: Option<String>,
    },
    /// Compare every past run of each drill: RTO and every phase, change against the previous run and the objective.
    #[command(after_help = with_exit_codes(HISTORY_HELP, Some("history")))]
    History {
        /// A reports directory (reports/<drill>/<run>/report.json), one drill's directory, or one run; local, or
        /// where runs were shipped (s3://BUCKET/PREFIX).
        #[arg(default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// The format to print: text, md, html or json.
        #[arg(long, short = 'o', short_alias = 'f', alias = "format", value_enum, default_value = "text")]
        output: HistoryFormat,
        /// Exit 7 when the latest run of any series has a regression: a phase more than PCT percent (default 20)
        /// and 1s slower than the run before, over its objective, or not measured. PCT takes `=`
        /// (`--fail-on-regression=10`), so a reports directory after the flag is never read as PCT.
        #[arg(long, value_name = "PCT", num_args = 0..=1, require_equals = true, default_missing_value = "20")]
        fail_on_regression: Option<f64>,
        /// A drill renamed from OLD to NEW: OLD's runs join NEW's series (repeat for several).
        #[arg(long, value_name = "OLD=NEW")]
        join: Vec<crate::report::history::Join>,
        #[command(flatten)]
        s3: S3Flags,
    },
    /// Check drill files without touching a cluster: every problem at once, each at its line and column with the
    /// fix. With --context, also whether the drill is for that context.
    #[command(after_help = with_exit_codes(VALIDATE_HELP, Some("validate")))]
    Validate {
        /// The drill files (YAML) to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also check that each drill is for this kubeconfig context (its spec.cluster.context); reads no cluster.
        #[arg(long, value_name = "NAME")]
        context: Option<String>,
        /// `text` prints each problem with its line; `json` one object for scripts and editors.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Resolve a drill read-only against the cluster and print exactly what a run would touch, in order, and the
    /// preflight verdict.
    #[command(after_help = with_exit_codes(PLAN_HELP, Some("plan")))]
    Plan {
        /// The drill file (YAML).
        file: PathBuf,
        /// Where `hybrid-drill watch` writes its episodes: an incident open there closes the `incident` gate.
        #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// `text` prints the plan and the preflight table; `json` one object for scripts.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
    /// Check the fallback design read-only against the recommendations: GPU taint, device plugin scope, fallback
    /// NodePool, workloads, Karpenter's CRDs, and the RTO floor a node failure sets.
    #[command(after_help = with_exit_codes(PREFLIGHT_HELP, Some("preflight")))]
    Preflight {
        /// A drill file: its targets, context and RTO objective.
        file: Option<PathBuf>,
        /// Label selector of the hybrid GPU nodes, e.g. eks.amazonaws.com/compute-type=hybrid.
        #[arg(long, value_name = "SELECTOR")]
        nodes: Option<String>,
        /// Namespace of the GPU workload (as kubectl's -n).
        #[arg(long, short = 'n', value_name = "NS")]
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
        /// Refuse on a warning too (exit 5).
        #[arg(long)]
        strict: bool,
        /// Judge time-dependent settings (NodePool disruption budgets) at this planned time instead of now, in RFC
        /// 3339, e.g. 2026-12-08T14:00:00Z.
        #[arg(long, value_name = "TIME", value_parser = parse_time)]
        at: Option<chrono::DateTime<chrono::Utc>>,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
    /// Restore a cluster from the journal of an interrupted run (after kill -9 or a lost machine).
    #[command(after_help = with_exit_codes(RECOVER_HELP, Some("recover")))]
    Recover {
        /// A run directory; without one, every run under --reports-dir with something left to undo.
        run_dir: Option<PathBuf>,
        /// Where run directories are looked for when no run directory is named.
        #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// Sign the manifest `recover` writes into a crashed run's directory once it is restored (the key `run`
        /// takes).
        #[arg(long, value_name = "KEY", env = "HYBRID_DRILL_SIGNING_KEY", hide_env_values = true)]
        signing_key: Option<String>,
        /// Run the commands (`exec` undo, recovery and give-back hooks, a cut's last resort) of this run's journal
        /// lines even where the tool cannot authenticate them (no HYBRID_DRILL_JOURNAL_KEY, or another): only once
        /// you have read them, since anyone who can write the reports volume can append a line.
        #[arg(long, value_name = "RUN_DIR")]
        trust_journal: Option<PathBuf>,
        /// `text` prints a line per change restored, check held and run sealed; `json` one object at the end
        /// (`schema: hybrid-drill.io/recover/v1`; an error before anything is touched as `{"error": ...}`).
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
    /// Say, reading only, whether a drill left anything behind: who holds the drill lock, unfinished runs, objects
    /// in the cluster a run marked, fallback NodeClaims a run saw created that still exist.
    #[command(after_help = with_exit_codes(STATUS_HELP, Some("status")))]
    Status {
        /// Where run directories are looked for unfinished runs.
        #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
        reports_dir: PathBuf,
        /// The drill lock's Lease as NAMESPACE/NAME, when a drill file's spec.lock names another than
        /// kube-system/hybrid-drill (the locks of unfinished runs are read too).
        #[arg(long, value_name = "NAMESPACE/NAME")]
        lock: Option<String>,
        /// `text` prints one line per finding; `json` one object for scripts.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
    /// Print the cluster's identity: the context (or `in-cluster`), the API server and the UID of its kube-system
    /// namespace, which a drill's spec.cluster.kubeSystemUID names. Reads one object; touches nothing.
    #[command(after_help = with_exit_codes(IDENTIFY_HELP, Some("identify")))]
    Identify {
        /// `text` prints the identity and the drill file's lines for it; `json` one object for scripts (an error as
        /// `{"error": ...}` on stdout).
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: OutputFormat,
        #[command(flatten)]
        cluster: ClusterFlags,
    },
    /// What a recorded run's RTO would have been with each knob turned (budget, tolerations, warm nodes, caches,
    /// instance types, consolidateAfter, replicas), what each costs a month, ranked by minutes saved per dollar.
    #[command(after_help = with_exit_codes(WHATIF_HELP, Some("whatif")))]
    Whatif(WhatifArgs),
    /// Prove the cloud fallback between drills, on-prem untouched: one replica of the workload on the fallback
    /// NodePool, timed from launch to first good answer, then removed and reclaimed.
    #[command(after_help = with_exit_codes(CANARY_HELP, Some("canary")))]
    Canary(CanaryArgs),
    /// Forecast a drill's RTO and phases with an interval before running it, from the cluster's objects (read-only)
    /// and the drill's earlier runs.
    #[command(after_help = with_exit_codes(PREDICT_HELP, Some("predict")))]
    Predict(PredictArgs),
    /// Print the JSON Schema of the drill file format, for editors.
    #[command(after_help = with_exit_codes(SCHEMA_HELP, Some("schema")))]
    Schema,
    /// Print the shell completion script for SHELL.
    #[command(after_help = with_exit_codes(COMPLETIONS_HELP, Some("completions")))]
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff); with --dir, write one page per command there instead.
    #[command(after_help = with_exit_codes(MAN_HELP, Some("man")))]
    Man {
        /// Write hybrid-drill.1 and a page per command (hybrid-drill-run.1, ...) into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// Whose signatures `verify` and `evidence` accept: a run is intact only when its manifest is signed by one of these
/// keys, unless the user settles for its files alone.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TrustFlags {
    /// A public key the manifest must be signed by (SPKI PEM from `openssl pkey -pubout`, or 32 bytes in base64 or
    /// hex; the key itself, a file or a secret reference).
    #[arg(long, value_name = "KEY", env = "HYBRID_DRILL_PUBLIC_KEY")]
    pub public_key: Option<String>,
    /// A file of trusted public keys, one per line (32 bytes in base64 or hex, then optionally a name); `#` starts a
    /// comment. Keep it where the signers' keys are managed, not beside the runs.
    #[arg(long, value_name = "FILE", env = "HYBRID_DRILL_TRUSTED_KEYS")]
    pub trusted_keys: Option<PathBuf>,
    /// Accept a run that is unsigned or signed by a key not trusted when its files match its manifest: the output
    /// then says its authenticity is not proven (anyone who can write the run directory can re-seal it).
    #[arg(long)]
    pub allow_unsigned: bool,
}

/// Where `run` ships the run directory besides, and how to reach it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ShipFlags {
    /// Also ship the run directory, manifest and signature included, to S3-compatible object storage at
    /// s3://BUCKET/PREFIX (under PREFIX/<drill>/<run>/) once it is written; overrides spec.evidence.ship.to. A
    /// failed upload is a warning and a deviation; the local run directory stays.
    #[arg(long, value_name = "s3://BUCKET/PREFIX", env = "HYBRID_DRILL_SHIP", value_parser = ship_location)]
    pub ship: Option<crate::store::Location>,
    /// Keep each shipped object from deletion and overwriting this long (object lock, compliance mode), e.g.
    /// 400d; overrides spec.evidence.ship.retention.
    #[arg(long, value_name = "DURATION", value_parser = retention_flag)]
    pub ship_retention: Option<std::time::Duration>,
    #[command(flatten)]
    pub s3: S3Flags,
}

impl ShipFlags {
    pub fn overrides(&self) -> crate::store::ShipOverrides {
        crate::store::ShipOverrides {
            location: self.ship.clone(),
            connection: self.s3.connection(),
            retention: self.ship_retention,
        }
    }
}

/// How to reach S3-compatible object storage, for the commands that write or read runs there; each overrides the
/// drill file's `spec.evidence.ship` field of the same name.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct S3Flags {
    /// The S3-compatible server's URL (default: AWS_ENDPOINT_URL, else AWS S3).
    #[arg(long, value_name = "URL", env = "HYBRID_DRILL_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// The region requests are signed for (default: AWS_REGION, else us-east-1).
    #[arg(long, value_name = "REGION", env = "HYBRID_DRILL_S3_REGION")]
    pub s3_region: Option<String>,
    /// Address buckets in the path (ENDPOINT/BUCKET/KEY), as most S3-compatible servers need.
    #[arg(long, env = "HYBRID_DRILL_S3_PATH_STYLE")]
    pub s3_path_style: bool,
    /// A credentials file (aws_access_key_id and aws_secret_access_key, or AWS_ACCESS_KEY_ID=... lines), or a
    /// secret reference to one (${file:/path}); default: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then EKS's
    /// pod identity.
    #[arg(long, value_name = "FILE", env = "HYBRID_DRILL_S3_CREDENTIALS", hide_env_values = true)]
    pub s3_credentials: Option<String>,
}

impl S3Flags {
    pub fn connection(&self) -> crate::store::Connection {
        crate::store::Connection {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            path_style: self.s3_path_style,
            credentials: self.s3_credentials.clone(),
        }
    }
}

/// `--ship-retention`: a duration object lock can keep.
fn retention_flag(text: &str) -> Result<std::time::Duration, String> {
    let period = crate::drill::duration::parse_flag(text)?;
    crate::store::retention::refuse(period).map_or(Ok(period), Err)
}

fn ship_location(text: &str) -> Result<crate::store::Location, String> {
    text.parse().map_err(|e: crate::store::StoreError| e.to_string())
}

/// A command's help epilogue: its examples and notes, then the exit codes it may return.
fn with_exit_codes(text: &str, command: Option<&str>) -> String {
    format!("{}\n\n{}", text.trim_end(), crate::exit::help_text(command))
}

const RUN_HELP: &str = "\
Examples:
  hybrid-drill run drills/drain.yaml                 asks you to confirm the nodes and pods it will touch
  hybrid-drill run drills/drain.yaml --dry-run       what it would touch and the preflight verdict; writes nothing
  hybrid-drill run drills/drain.yaml --yes -o json > result.json
  HYBRID_DRILL_PUSHGATEWAY=http://pushgateway:9091 hybrid-drill run drills/drain.yaml --yes

The run directory reports/<drill>/<UTC timestamp>/ holds drill.yaml, timeline.jsonl, journal.jsonl, report.json, \
report.md, report.html, junit.xml and metrics.prom, then manifest.json (the sha256 of every other file; `hybrid-drill \
verify` checks it) and, with a signing key, manifest.sig. A failed, timed-out or interrupted drill restores the cluster \
and still writes its report. A drill whose spec.evidence requires a change or an approver is refused (exit 2) without \
--change or --approved-by, before the cluster is contacted. Guards in the drill file abort and restore: guards.deadline (the whole drill), \
guards.maxFallbackGpus, guards.maxServiceDown (the service unavailable longer than this).";

const VERIFY_HELP: &str = "\
Examples:
  hybrid-drill verify reports/onprem-gpu-drain/20261202T101500Z
  hybrid-drill verify RUN_DIR --public-key drill-signing.pub -o json
  hybrid-drill verify RUN_DIR --trusted-keys /etc/hybrid-drill/trusted-keys
  hybrid-drill verify RUN_DIR --allow-unsigned        the files alone; authenticity not proven

Exit 0 only when every file is as the manifest records it, the manifest is this directory's (its run id is \
<drill>-<stamp> of the directory it is in: a run copied over another fails) and it is signed by a key you trust \
(--public-key, --trusted-keys, or HYBRID_DRILL_PUBLIC_KEY / HYBRID_DRILL_TRUSTED_KEYS); a key the run directory \
names itself proves nothing. 8 otherwise: a file changed, removed or added, a symbolic link or FIFO in the directory \
(never followed nor read), no manifest, or no trusted signature. --allow-unsigned accepts matching files without a \
trusted signature and says their authenticity is not proven. 2 when the directory cannot be read or its manifest is \
not one. `hybrid-drill report` prints to stdout and never rewrites a run directory: keep \
re-rendered reports elsewhere. Touches no cluster.";

const EVIDENCE_HELP: &str = "\
Examples:
  hybrid-drill evidence reports --since 2026-01-01 --out evidence-2026
  hybrid-drill evidence reports --since 2026-10-01 --until 2026-12-31 --archive --public-key drill-signing.pub

The directory holds index.md, index.html, evidence.json and runs/<drill>/<stamp>/ (each run directory as it was, its \
manifest included): the verdicts, the RTO trend, the deviations, the action items (open, or closed by a later run of \
the drill) and a table of the controls the bundle supports (DORA ICT continuity testing, SOC 2 A1.3, ISO 22301 \
exercises); support, never a certification. Each run is verified as `verify` does, with the same --public-key, \
--trusted-keys and --allow-unsigned: one that is not intact is bundled, marked FAILED in the index, and makes the \
command exit 8. A run's place in the bundle is made of the names of the directories it was found in, never of what \
its report says; symbolic links and FIFOs are not copied. Touches no cluster.";

const WATCH_HELP: &str = "\
Examples:
  hybrid-drill watch drills/drain.yaml --metrics-addr 0.0.0.0:9464
  hybrid-drill watch drills/drain.yaml --episodes 1 --episode-limit 2h

FILE is a drill file: its targets (on-prem nodes, workload, fallback NodePool), restoredWhen and objectives are used; \
its steps are ignored (nothing is injected, nothing changed: get, list and watch only). An episode opens when an \
on-prem node goes NotReady or Unknown, a cordoned on-prem node's workload pods leave, or workload pods run on the \
fallback; it closes when the workload is back on-prem and the fallback reclaimed, or after --episode-limit. Each \
episode writes reports/<drill>/<UTC timestamp>/ like a run (kind: incident in report.json) and prints its path. A \
watch restarted during an episode takes it up (the marker .open-episode.json beside the runs) with what it missed \
marked unknown.";

const REPORT_HELP: &str = "\
Examples:
  hybrid-drill report reports/onprem-gpu-drain/20261202T101500Z
  hybrid-drill report reports/onprem-gpu-drain/20261202T101500Z -o html > drill.html
  hybrid-drill report reports/onprem-gpu-drain/20261202T101500Z -o junit > junit.xml
  hybrid-drill report RUN_DIR --pushgateway http://pushgateway:9091

Formats: md (report.md), html (report.html: a self-contained page with the timeline), json (report.json), junit \
(junit.xml: each objective a test case), prometheus (metrics.prom: text exposition for node-exporter's textfile \
collector). Touches no cluster.";

const HISTORY_HELP: &str = "\
Examples:
  hybrid-drill history
  hybrid-drill history reports/onprem-gpu-drain -o md
  hybrid-drill history -o html > history.html
  hybrid-drill history --fail-on-regression reports      # in CI, after a drill
  hybrid-drill history --fail-on-regression=10 reports   # a phase 10% (and 1s) slower fails
  hybrid-drill history --join gpu-drain=onprem-gpu-drain # a drill renamed: its old runs in the new series

Runs compare within a series: one drill (by its name) on one cluster (by the UID of its kube-system namespace, and \
its `hybrid-drill.io/profile` label), whatever path the drill file was given by and whatever the context is called; \
◆ marks a run whose drill file changed (sha256). A phase is flagged as a regression when it is more than 20% (and \
1s) slower than in the previous run that measured it, over its objective, or not measured. A crashed run (a \
timeline and no report.json) is listed as `crashed; restored by recover at T` or `crashed; not yet recovered`. The \
text view fits COLUMNS (default 80). `-o html` draws the trend of each phase. Touches no cluster.";

const VALIDATE_HELP: &str = "\
Examples:
  hybrid-drill validate drills/drain.yaml
  hybrid-drill validate drills/*.yaml -o json
  hybrid-drill validate --context prod-eks drills/drain.yaml

JSON (`schema: hybrid-drill.io/validate/v1`): `valid`, and `files`, each with `file`, `valid`, `drill`, `steps`, \
`warnings` and `errors` (each `message`, `line`, `column`, and `label` and `help` when known; a warning about what \
the drill leaves in place has no line). Warnings keep exit 0. Touches no cluster.";

const PLAN_HELP: &str = "\
Examples:
  hybrid-drill plan drills/drain.yaml
  hybrid-drill plan drills/drain.yaml -o json | jq .preflight.verdict

JSON (`schema: hybrid-drill.io/plan/v1`): `context`, `server`, `kubernetes`, `drill`, `nodes`, `cordoned_already`, \
`pods_to_evict`, `pods_protected`, `budgets`, `node_pool`, `pool_gpu_limit`, `steps`, `warnings`, `refused` \
(whether a run would be refused), `text` (the plan as printed) and `preflight` (as `preflight -o json`, or \
`error`). Reads only. A failed preflight check exits 5, as `run` would refuse the drill.";

const PREFLIGHT_HELP: &str = "\
Examples:
  hybrid-drill preflight drills/drain.yaml
  hybrid-drill preflight --nodes eks.amazonaws.com/compute-type=hybrid -n inference --selector app=llm-inference \
--node-pool gpu-fallback
  hybrid-drill preflight drills/drain.yaml --strict -o json

Targets come from a drill file, or from all four of --nodes, --namespace, --selector and --node-pool (a flag given \
with a file replaces the file's value). A failed check (or, with --strict, a warning) exits 5, as `run` and `plan` \
do. Touches nothing.";

const RECOVER_HELP: &str = "\
Examples:
  hybrid-drill status                                 look first: reads only
  hybrid-drill recover reports/onprem-gpu-drain/20261202T101500Z
  hybrid-drill recover --reports-dir /reports         every run there with something left to undo
  hybrid-drill recover RUN_DIR -o json                what was restored, verified and sealed, for scripts

Undoes what the journal says is outstanding, then what the cluster's marks say (hybrid-drill.io/run-id, \
hybrid-drill.io/cut), takes the drill lock while it works, and checks the restored state. Once it holds, a crashed \
run's directory is sealed: recovered.json (when, by whom, what was undone) and manifest.json, signed with \
--signing-key. Safe to repeat.";

const STATUS_HELP: &str = "\
Examples:
  hybrid-drill status
  hybrid-drill status --reports-dir /reports -o json
  hybrid-drill status --lock ops/gpu-drill-lock

Reads only (get and list): the drill lock's holder, since when and whether it still renews; run directories under \
--reports-dir with a journal and no end, and what their journals leave outstanding; nodes, pods and cut policies \
carrying a run's marks; fallback NodeClaims an unfinished run saw created that still exist. Exits 0 when all is \
clean, 6 when anything is found (run `hybrid-drill recover` to restore).";

const IDENTIFY_HELP: &str = "\
Examples:
  hybrid-drill identify
  hybrid-drill identify --context prod-eks";

const SCHEMA_HELP: &str = "\
Examples:
  hybrid-drill schema > drill.schema.json
  # then, first line of a drill file: # yaml-language-server: $schema=drill.schema.json";

const COMPLETIONS_HELP: &str = "\
Examples:
  hybrid-drill completions bash > ~/.local/share/bash-completion/completions/hybrid-drill
  hybrid-drill completions zsh > \"${fpath[1]}/_hybrid-drill\"
  hybrid-drill completions fish > ~/.config/fish/completions/hybrid-drill.fish";

const MAN_HELP: &str = "\
Examples:
  hybrid-drill man | man -l -
  hybrid-drill man --dir /usr/local/share/man/man1    hybrid-drill.1 and hybrid-drill-COMMAND.1 for each command";

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

/// `--override-gate NAME`: one of the start gates.
fn gate_name(text: &str) -> Result<crate::domain::GateKind, String> {
    crate::domain::GateKind::parse(text).ok_or_else(|| {
        let names: Vec<&str> = crate::domain::GateKind::ALL.iter().map(|g| g.as_str()).collect();
        format!("unknown gate `{text}`: one of {}", names.join(", "))
    })
}

/// `2026-01-01` as its first instant in UTC, or an RFC 3339 time.
fn parse_day_start(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    parse_day(text, chrono::NaiveTime::MIN)
}

/// `2026-12-31` as its last instant in UTC (the day included), or an RFC 3339 time.
fn parse_day_end(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    parse_day(text, chrono::NaiveTime::from_hms_milli_opt(23, 59, 59, 999).unwrap_or_default())
}

fn parse_day(text: &str, at: chrono::NaiveTime) -> Result<chrono::DateTime<chrono::Utc>, String> {
    match chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        Ok(day) => Ok(day.and_time(at).and_utc()),
        Err(_) => parse_time(text).map_err(|_| format!("`{text}`: expected a date (2026-01-01) or RFC 3339 time")),
    }
}

/// An RFC 3339 time, with any offset, as UTC.
fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| format!("{e}: expected RFC 3339, e.g. 2026-12-08T14:00:00Z"))
}

const WHATIF_HELP: &str = "\
Examples:
  hybrid-drill whatif reports/onprem-gpu-drain/20261202T101500Z
  hybrid-drill whatif RUN_DIR --set pdb.max-unavailable=4 --set image-cached=true
  hybrid-drill whatif RUN_DIR --storage-price 0.05 --weights-gb 140 -o json

Knobs: pdb.max-unavailable, pdb.min-available, toleration-seconds, warm-nodes, image-cached, weights-cached, \
instance-types, consolidate-after, replicas. Each is turned on its own one step the way that shortens the RTO; \
--set turns several together. A warm GPU node costs its hourly price from the drill's `pricing` times 730 a month; \
a cache costs its size times --storage-price. Reads the run directory only; touches no cluster.";

const PREDICT_HELP: &str = "\
Examples:
  hybrid-drill predict drills/drain.yaml
  hybrid-drill predict drills/drain.yaml -o json | jq .rto

Reads the workload's PodDisruptionBudget, replicas and tolerations and the fallback NodePool's consolidateAfter \
(read-only), and the drill's earlier runs under --reports-dir on the same cluster and profile; the model is the \
latest run's, the interval is widened by how far the model missed each earlier run. `run` records the same forecast \
in the run directory (forecast.json) before its fault, and the reports show it against the measured phases.";

/// `whatif`'s flags.
#[derive(Debug, clap::Args)]
pub struct WhatifArgs {
    /// The run directory (reports/<drill>/<UTC timestamp>/).
    pub run_dir: PathBuf,
    /// Turn knobs together, KNOB=VALUE (repeatable): e.g. pdb.max-unavailable=4, toleration-seconds=30s.
    #[arg(long = "set", value_name = "KNOB=VALUE", value_parser = set_flag)]
    pub set: Vec<crate::whatif::Setting>,
    /// $ per GB-month of a snapshot or cache volume, to price image-cached and weights-cached.
    #[arg(long, value_name = "DOLLARS")]
    pub storage_price: Option<f64>,
    /// The model weights' size in GB, to price weights-cached.
    #[arg(long, value_name = "GB")]
    pub weights_gb: Option<f64>,
    /// `text` prints the tables; `json` one object (`knobs[]` with name, value, rto_seconds, delta_seconds,
    /// monthly_cost, assumptions).
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: OutputFormat,
}

/// `predict`'s flags.
#[derive(Debug, clap::Args)]
pub struct PredictArgs {
    /// The drill file (YAML).
    pub file: PathBuf,
    /// Where the drill's earlier runs are (reports/<drill>/<run>/).
    #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
    pub reports_dir: PathBuf,
    /// `text` prints the phases; `json` the forecast (`rto.seconds`, `rto.low_seconds`, `rto.high_seconds`).
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

fn set_flag(text: &str) -> Result<crate::whatif::Setting, String> {
    crate::whatif::Setting::parse(text).map_err(|e| e.to_string())
}

const CANARY_HELP: &str = "\
Examples:
  hybrid-drill canary drills/drain.yaml --yes                one fallback node launched, served, reclaimed
  hybrid-drill canary drills/drain.yaml --yes -o json        canary.json on stdout
  hybrid-drill canary drills/drain.yaml --yes --launch-timeout 5m --pushgateway http://pushgateway:9091

What it does, touching nothing on-prem: under the drill lock and the drill's start gates, with the fallback NodePool \
at 0 (a fallback already running is refused: exit 5), it creates one pod from the workload's template (image, init \
containers, tolerations, affinity, resources) pinned to spec.targets.fallback's first NodePool by \
karpenter.sh/nodepool, without the labels the workload's selector reads (no Service routes users to it, no \
PodDisruptionBudget or controller counts it). It measures the NodeClaim it causes (Launched, Registered, Initialized), \
the node Ready with GPUs allocatable, the image pull, the model load and the first good answer (the pod's readiness \
probe), then deletes the pod and waits for Karpenter to reclaim the node. It reads the cluster back before it says \
nothing is left.

Outcomes, each with its cause: passed (exit 0); launch refused (Karpenter's InsufficientCapacityError events and the \
pools EC2 refused, or the pod's last event), node never initialised (how far the NodeClaim came, the node's taints), \
pod never served (its phase and last event), reclaim missed (consolidation did not remove the node in time; the \
canary deletes it): exit 1. A node that never initialised is deleted at once, as Karpenter does not consolidate it. \
Something it caused still in the cluster: exit 4. Interrupted: exit 3, the pod and node removed. A canary killed \
outright is undone by `hybrid-drill recover` (its pod creation is journalled).

The run directory reports/<drill>/<UTC timestamp>/ holds drill.yaml, timeline.jsonl, journal.jsonl, canary.json \
(`-o json` prints it: outcome, cause, phases, first_answer_seconds, the cost from spec.pricing, each phase against the \
drill's last run), report.md, metrics.prom (hybrid_drill_canary_*, pushed as job hybrid-drill-canary with \
--pushgateway) and manifest.json. `hybrid-drill history` lists canaries after the drills. deploy/canary.yaml runs it \
as a CronJob; runbooks/canary.md says what to do with each outcome.";

/// `canary`'s flags.
#[derive(Debug, clap::Args)]
pub struct CanaryArgs {
    /// The drill file (YAML) whose workload, fallback NodePool, lock, gates and prices the canary uses.
    pub file: PathBuf,
    /// Launch the cloud GPU node without asking (a canary costs one node for a few minutes).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// `text` prints the phases and the verdict; `json` prints canary.json on stdout.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: OutputFormat,
    /// Where run directories are created.
    #[arg(long, value_name = "DIR", default_value = "reports", env = "HYBRID_DRILL_REPORTS")]
    pub reports_dir: PathBuf,
    /// Also push the canary's metrics (hybrid_drill_canary_*) to this Prometheus Pushgateway.
    #[arg(long, value_name = "URL", env = "HYBRID_DRILL_PUSHGATEWAY", hide_env_values = true)]
    pub pushgateway: Option<String>,
    /// From the pod's creation to its NodeClaim Launched; past it the launch was refused.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = crate::drill::duration::parse_flag)]
    pub launch_timeout: std::time::Duration,
    /// From Launched to Initialized with GPUs allocatable; past it the node never initialised (Karpenter's own
    /// registration limit is 15 minutes, and a GPU node that takes longer is a finding).
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = crate::drill::duration::parse_flag)]
    pub initialise_timeout: std::time::Duration,
    /// From the node usable to the pod's first good answer (image pull and model load); past it the pod never served.
    #[arg(long, value_name = "DURATION", default_value = "20m", value_parser = crate::drill::duration::parse_flag)]
    pub serve_timeout: std::time::Duration,
    /// From the pod's deletion to its NodeClaim gone (the NodePool's consolidateAfter and a margin).
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = crate::drill::duration::parse_flag)]
    pub reclaim_timeout: std::time::Duration,
    /// Let a closed start gate through (alert, incident, freeze-window, cluster-freeze); each needs a --reason.
    #[arg(long = "override-gate", value_name = "NAME", value_parser = gate_name)]
    pub override_gate: Vec<crate::domain::GateKind>,
    /// Why the --override-gate before it lets its gate through.
    #[arg(long, value_name = "TEXT")]
    pub reason: Vec<String>,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}
