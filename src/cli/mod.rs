//! Command-line interface: the argument definitions (`args`), the dispatch here, one body per command (`commands`,
//! `evidence`, `status`), the manual pages (`man`), and the one place a failure is printed (`failure`); exit codes
//! come from `exit`.

mod args;
mod canary;
mod commands;
mod evidence;
mod failure;
mod man;
mod status;
mod stored;
mod validate_json;
mod whatif;

use std::process::ExitCode;

use clap::Parser;

use crate::cluster::drain_selection::DrainFlags;
use crate::drill;
use crate::exit::EXIT_PASSED;
use crate::preflight;
use crate::run::RunOptions;

pub use args::{Cli, Command, HistoryFormat, OutputFormat};
use commands::{
    block_on, completions, history_command, identify_command, plan_command, preflight_command, report_command,
    run_command, validate, watch_command,
};
use evidence::{EvidenceFlags, evidence_command, verify_command};
use failure::{Failure, Outcome};
use man::man_command;
use status::status_command;

/// Each `--override-gate` with the `--reason` given for it, in order.
fn overrides(
    gates: Vec<crate::domain::GateKind>,
    reasons: Vec<String>,
) -> Result<Vec<crate::gates::Override>, Unpaired> {
    if gates.len() != reasons.len() || reasons.iter().any(|r| r.trim().is_empty()) {
        let reasons = reasons.iter().filter(|r| !r.trim().is_empty()).count();
        return Err(Unpaired { gates: gates.len(), reasons });
    }
    Ok(gates.into_iter().zip(reasons).map(|(gate, reason)| crate::gates::Override { gate, reason }).collect())
}

/// `--override-gate` flags without a `--reason` each.
#[derive(Debug, thiserror::Error)]
#[error(
    "each --override-gate needs a --reason saying why (got {gates} gates and {reasons} reasons); e.g. --override-gate \
     alert --reason \"the alert is the drill's own\""
)]
struct Unpaired {
    gates: usize,
    reasons: usize,
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_error(e),
    };
    init_tracing(cli.verbose);
    if let Some(warning) = deprecated_flag(std::env::args().skip(1)) {
        eprintln!("warning: {warning}");
    }
    if !matches!(cli.command, Command::Run { .. } | Command::Watch { .. } | Command::Recover { .. }) {
        exit_quietly_on_a_closed_pipe();
    }
    ExitCode::from(failure::report(dispatch(cli.command)))
}

/// Runs one command: its exit code, or why it failed.
fn dispatch(command: Command) -> Outcome {
    match command {
        Command::Validate { files, output, context } => validate(&files, output, context.as_deref()),
        Command::Schema => {
            println!("{}", serde_json::to_string_pretty(&drill::json_schema()).unwrap_or_default());
            Ok(EXIT_PASSED)
        }
        run @ Command::Run { .. } => run_from_flags(run),
        Command::Canary(args) => {
            let json = matches!(args.output, args::OutputFormat::Json);
            let paired = overrides(args.override_gate.clone(), args.reason.clone());
            canary::canary_command(args, paired.map_err(|e| Failure::invalid(e).json_too(json))?)
        }
        Command::Verify { run_dir, trust, output } => verify_command(&run_dir, &trust, output),
        Command::Evidence { reports_dir, since, until, out, archive, trust, output, s3 } => {
            stored::with_local_reports(&reports_dir, &s3, |reports_dir| {
                evidence_command(EvidenceFlags {
                    reports_dir,
                    since,
                    until,
                    out,
                    archive,
                    trust: trust.clone(),
                    output,
                })
            })
        }
        Command::Watch { file, reports_dir, episode_limit, metrics_addr, episodes, signing_key, cluster } => {
            let opts = crate::incident::WatchOptions {
                target: cluster.target(),
                reports_dir,
                episode_limit,
                metrics_addr,
                episodes,
                signing_key,
            };
            block_on(watch_command(&file, opts))
        }
        Command::Report { run_dir, output, pushgateway } => report_command(&run_dir, output, pushgateway.as_deref()),
        Command::History { reports_dir, output, fail_on_regression, join, s3 } => {
            stored::with_local_reports(&reports_dir, &s3, |dir| {
                history_command(&dir, output, fail_on_regression, &join)
            })
        }
        Command::Plan { file, reports_dir, output, cluster } => {
            block_on(plan_command(&file, &cluster.target(), &reports_dir, output))
        }
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
            cluster,
        } => {
            let flags = preflight::TargetFlags { nodes, namespace, selector, node_pool };
            let drain = DrainFlags { force, delete_empty_dir_data: delete_emptydir_data };
            block_on(preflight_command(file.as_deref(), flags, drain, &cluster.target(), (output, strict), at))
        }
        recover @ Command::Recover { .. } => recover_from_flags(recover),
        Command::Status { reports_dir, lock, output, cluster } => {
            block_on(status_command(&reports_dir, lock.as_deref(), &cluster.target(), output))
        }
        Command::Identify { output, cluster } => block_on(identify_command(&cluster.target(), output)),
        Command::Completions { shell } => {
            print!("{}", completions(shell));
            Ok(EXIT_PASSED)
        }
        Command::Man { dir } => man_command(dir.as_deref()),
        Command::Whatif(args) => whatif::whatif_command(args),
        Command::Predict(args) => whatif::predict_command(args),
    }
}

/// A reader that closed its end of the pipe (`report RUN -o html | head`) has read what it wanted: the command
/// stops there and exits 0, as `cat` and ripgrep do, instead of std's panic on the failed print (exit 101). Only for
/// the commands that read and print: a drill (`run`, `watch`, `recover`) must go on to restore the cluster and is
/// never stopped by its reader leaving.
fn exit_quietly_on_a_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        let broken = std::io::Error::from(std::io::ErrorKind::BrokenPipe).kind().to_string();
        if message.starts_with("failed printing to stdout")
            && (message.contains("os error 32") || message.to_ascii_lowercase().contains(&broken))
        {
            std::process::exit(0);
        }
        default(info)
    }));
}

/// `run`: the flags as the run's options (each `--override-gate` paired with its `--reason`), then the drill.
fn run_from_flags(run: Command) -> Outcome {
    let Command::Run {
        file,
        yes,
        dry_run,
        output,
        reports_dir,
        pushgateway,
        notify,
        override_gate,
        reason,
        change,
        approved_by,
        signing_key,
        allow_commands,
        ship,
        cluster,
    } = run
    else {
        return Ok(crate::exit::EXIT_INVALID);
    };
    let json = output == OutputFormat::Json;
    let overrides = overrides(override_gate, reason).map_err(|e| Failure::invalid(e).json_too(json))?;
    let approval = crate::evidence::Approval { change, approved_by };
    let ship = ship.overrides();
    let opts = RunOptions {
        target: cluster.target(),
        yes,
        dry_run,
        json,
        reports_dir,
        pushgateway,
        notify,
        approval,
        signing_key,
        allow_commands,
        overrides,
        ship,
    };
    block_on(run_command(&file, opts))
}

/// `recover`: the flags as its options, then the restore.
fn recover_from_flags(recover: Command) -> Outcome {
    let Command::Recover { run_dir, reports_dir, signing_key, trust_journal, output, cluster } = recover else {
        return Ok(crate::exit::EXIT_INVALID);
    };
    let target = cluster.target();
    let opts = crate::recover::RecoverOptions {
        run_dir,
        reports_dir: &reports_dir,
        trust_journal: trust_journal.as_deref(),
        target: &target,
        signing_key: signing_key.as_deref(),
        json: matches!(output, OutputFormat::Json),
    };
    let json = opts.json;
    block_on(async { crate::recover::recover(opts).await.map_err(|e| Failure::new(&e, e.exit_code()).json_too(json)) })
}

/// Prints clap's refusal of the command line with the values of the tool's secret variables masked: clap quotes a
/// value it cannot parse, and `HYBRID_DRILL_NOTIFY` holds webhook URLs whose path is the credential.
fn parse_error(e: clap::Error) -> ExitCode {
    let code = u8::try_from(e.exit_code()).unwrap_or(crate::exit::EXIT_INVALID);
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::from(code);
    }
    for name in crate::secrets::TOOL_SECRETS {
        if let Ok(value) = std::env::var(name) {
            value.split(',').chain([value.as_str()]).for_each(crate::secrets::remember);
        }
    }
    // A key pasted where its path belongs (`--signing-key -----BEGIN...`) is an argument clap quotes back.
    for arg in std::env::args().skip(1) {
        let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
        if crate::secrets::looks_inline(value) || crate::secrets::looks_inline(&arg) {
            crate::secrets::remember(value);
            crate::secrets::remember(&arg);
        }
    }
    eprint!("{}", crate::secrets::redact(&e.render().to_string()));
    ExitCode::from(code)
}

/// The warning for `-f`/`--format`, which `-o`/`--output` replaced on `report` and `history` (still accepted, so
/// scripts keep working).
fn deprecated_flag(args: impl Iterator<Item = String>) -> Option<String> {
    let args: Vec<String> = args.take_while(|a| a != "--").collect();
    let command = args.iter().find(|a| a.as_str() == "report" || a.as_str() == "history")?;
    let old = args.iter().find(|a| {
        a.as_str() == "--format" || a.starts_with("--format=") || (a.starts_with("-f") && !a.starts_with("--"))
    })?;
    Some(format!("`{old}` is deprecated on `{command}`: use `-o`/`--output` (same formats)"))
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn args(line: &str) -> impl Iterator<Item = String> {
        line.split(' ').map(String::from).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn the_old_format_flag_is_named_as_deprecated() {
        assert!(deprecated_flag(args("report RUN -f json")).unwrap().contains("`-f` is deprecated on `report`"));
        assert!(deprecated_flag(args("history --format=md")).unwrap().contains("`--format=md`"));
        assert_eq!(deprecated_flag(args("report RUN -o json")), None);
        assert_eq!(deprecated_flag(args("run drill.yaml -o json")), None);
    }

    #[test]
    fn every_command_has_examples_exit_codes_and_help_on_every_argument() {
        let cli = Cli::command();
        for command in cli.get_subcommands() {
            let name = command.get_name();
            let after = command.get_after_help().map(ToString::to_string).unwrap_or_default();
            assert!(after.starts_with("Examples:\n  hybrid-drill "), "{name}: {after}");
            assert!(after.contains("\nExit codes:\n  0  "), "{name}: {after}");
            for arg in command.get_arguments() {
                assert!(arg.get_help().is_some(), "{name}: argument {} has no help", arg.get_id());
            }
        }
    }
}
