//! `hybrid-drill canary`: its body (its flags and help are `args.rs`'s; the canary itself is `crate::canary`).

use super::args::{CanaryArgs, OutputFormat};
use super::commands::{block_on, load};
use super::failure::{Failure, Outcome};
use crate::canary::{self, CanaryOptions, Deadlines};

/// `overrides` are the command's `--override-gate` flags paired with their reasons.
pub(super) fn canary_command(args: CanaryArgs, overrides: Vec<crate::gates::Override>) -> Outcome {
    let json = matches!(args.output, OutputFormat::Json);
    let loaded = load(&args.file).map_err(|f| f.json_too(json))?;
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
