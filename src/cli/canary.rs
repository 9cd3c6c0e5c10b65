//! `hybrid-drill canary`: its flags, help and body (the canary itself is `crate::canary`).

use std::path::PathBuf;
use std::time::Duration;

use super::args::{ClusterFlags, OutputFormat};
use super::commands::{block_on, load};
use super::failure::{Failure, Outcome};
use crate::canary::{self, CanaryOptions, Deadlines};

pub(super) const CANARY_HELP: &str = "\
Examples:
  hybrid-drill canary drills/canary.yaml --yes               one fallback node launched, served, reclaimed
  hybrid-drill canary drills/drain.yaml --yes -o json        any drill file: its workload, fallback and lock
  hybrid-drill canary drills/canary.yaml --yes --launch-timeout 5m --pushgateway http://pushgateway:9091

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
    pub launch_timeout: Duration,
    /// From Launched to Initialized with GPUs allocatable; past it the node never initialised (Karpenter's own
    /// registration limit is 15 minutes, and a GPU node that takes longer is a finding).
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = crate::drill::duration::parse_flag)]
    pub initialise_timeout: Duration,
    /// From the node usable to the pod's first good answer (image pull and model load); past it the pod never served.
    #[arg(long, value_name = "DURATION", default_value = "20m", value_parser = crate::drill::duration::parse_flag)]
    pub serve_timeout: Duration,
    /// From the pod's deletion to its NodeClaim gone (the NodePool's consolidateAfter and a margin).
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = crate::drill::duration::parse_flag)]
    pub reclaim_timeout: Duration,
    /// Let a closed start gate through (alert, incident, freeze-window, cluster-freeze); each needs a --reason.
    #[arg(long = "override-gate", value_name = "NAME", value_parser = super::args::gate_name)]
    pub override_gate: Vec<crate::domain::GateKind>,
    /// Why the --override-gate before it lets its gate through.
    #[arg(long, value_name = "TEXT")]
    pub reason: Vec<String>,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

pub(super) fn canary_command(args: CanaryArgs) -> Outcome {
    let json = matches!(args.output, OutputFormat::Json);
    let loaded = load(&args.file).map_err(|f| f.json_too(json))?;
    let overrides =
        super::overrides(args.override_gate, args.reason).map_err(|e| Failure::invalid(e).json_too(json))?;
    let opts = CanaryOptions {
        target: args.cluster.target(),
        yes: args.yes,
        reports_dir: args.reports_dir,
        pushgateway: args.pushgateway,
        overrides,
        deadlines: Deadlines {
            launch: args.launch_timeout,
            initialise: args.initialise_timeout,
            serve: args.serve_timeout,
            reclaim: args.reclaim_timeout,
        },
    };
    block_on(async move {
        let result = canary::run(&loaded, &opts).await.map_err(|e| {
            let code = e.exit_code();
            Failure::new(e, code).json_too(json)
        })?;
        match json {
            true => println!("{}", serde_json::to_string_pretty(&result.report).unwrap_or_default()),
            false => print!("{}", canary::report::text(&result.report, &result.run_dir)),
        }
        Ok(result.report.exit_code)
    })
}
