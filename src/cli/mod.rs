//! Command-line interface: the argument definitions (`args`), the dispatch here, and one body per command
//! (`commands`, `recover`); exit codes come from `exit`.

mod args;
mod commands;
mod recover;

use std::process::ExitCode;

use clap::Parser;

use crate::cluster::KubeContext;
use crate::cluster::drain_selection::DrainFlags;
use crate::drill;
use crate::exit::EXIT_PASSED;
use crate::preflight;
use crate::run::RunOptions;

pub use args::{Cli, Command, HistoryFormat, OutputFormat};
use commands::{
    block_on, completions, history_command, identify_command, man_command, plan_command, preflight_command,
    report_command, run_command, validate, watch_command,
};
use recover::recover_command;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let target = KubeContext { kubeconfig: cli.kubeconfig.clone(), context: cli.context.clone() };
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
        Command::History { reports_dir, format, fail_on_regression } => {
            history_command(&reports_dir, format, fail_on_regression)
        }
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
            at,
        } => {
            let flags = preflight::TargetFlags { nodes, namespace, selector, node_pool };
            let drain = DrainFlags { force, delete_empty_dir_data: delete_emptydir_data };
            block_on(preflight_command(file.as_deref(), flags, drain, &target, (output, strict), at))
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
