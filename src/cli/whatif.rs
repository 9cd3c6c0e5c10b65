//! `hybrid-drill whatif` and `hybrid-drill predict`: their flags and bodies (the model is `crate::whatif`).

use std::path::PathBuf;

use super::args::{ClusterFlags, OutputFormat};
use super::commands::{block_on, load};
use crate::exit::{EXIT_INVALID, EXIT_PASSED};
use crate::whatif::{self, Setting};

pub(super) const WHATIF_HELP: &str = "\
Examples:
  hybrid-drill whatif reports/onprem-gpu-drain/20261202T101500Z
  hybrid-drill whatif RUN_DIR --set pdb.max-unavailable=4 --set image-cached=true
  hybrid-drill whatif RUN_DIR --storage-price 0.05 --weights-gb 140 -o json

Knobs: pdb.max-unavailable, pdb.min-available, toleration-seconds, warm-nodes, image-cached, weights-cached, \
instance-types, consolidate-after, replicas. Each is turned on its own one step the way that shortens the RTO; \
--set turns several together. A warm GPU node costs its hourly price from the drill's `pricing` times 730 a month; \
a cache costs its size times --storage-price. Reads the run directory only; touches no cluster.";

pub(super) const PREDICT_HELP: &str = "\
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
    pub set: Vec<Setting>,
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

fn set_flag(text: &str) -> Result<Setting, String> {
    Setting::parse(text).map_err(|e| e.to_string())
}

pub(super) fn whatif_command(args: WhatifArgs) -> u8 {
    let run = match whatif::load_run(&args.run_dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    let prices = whatif::prices(&run, args.storage_price, args.weights_gb);
    let answer = whatif::what_if(&run, &args.set, &prices);
    match args.output {
        OutputFormat::Text => print!("{}", whatif::render::what_if(&answer)),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&answer).unwrap_or_default()),
    }
    EXIT_PASSED
}

pub(super) fn predict_command(args: PredictArgs) -> u8 {
    let loaded = match load(&args.file) {
        Ok(l) => l,
        Err(code) => return code,
    };
    block_on(async move {
        let cluster = match crate::cluster::connect(&args.cluster.target(), &loaded.drill.spec.cluster).await {
            Ok((c, _)) => c,
            Err(e) => {
                eprintln!("error: {}", crate::secrets::redact(&e.to_string()));
                return EXIT_INVALID;
            }
        };
        let forecast = whatif::forecast::predict(&cluster, &loaded.drill, &args.reports_dir).await;
        match args.output {
            OutputFormat::Text => print!("{}", whatif::render::forecast(&forecast)),
            OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&forecast).unwrap_or_default()),
        }
        EXIT_PASSED
    })
}
