//! `hybrid-drill whatif` and `hybrid-drill predict`: their flags and bodies (the model is `crate::whatif`).

use super::args::{OutputFormat, PredictArgs, WhatifArgs};
use super::commands::{block_on, load};
use super::failure::{Failure, Outcome};
use crate::exit::EXIT_PASSED;
use crate::whatif;

pub(super) fn whatif_command(args: WhatifArgs) -> Outcome {
    let json = matches!(args.output, OutputFormat::Json);
    let run = whatif::load_run(&args.run_dir).map_err(|e| Failure::invalid(e).json_too(json))?;
    let prices = whatif::prices(&run, args.storage_price, args.weights_gb);
    let answer = whatif::what_if(&run, &args.set, &prices);
    match args.output {
        OutputFormat::Text => print!("{}", whatif::render::what_if(&answer)),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&answer).unwrap_or_default()),
    }
    Ok(EXIT_PASSED)
}

pub(super) fn predict_command(args: PredictArgs) -> Outcome {
    let json = matches!(args.output, OutputFormat::Json);
    let loaded = load(&args.file).map_err(|f| f.json_too(json))?;
    block_on(async move {
        let (cluster, _) = crate::cluster::connect(&args.cluster.target(), &loaded.drill.spec.cluster)
            .await
            .map_err(|e| Failure::invalid(e).json_too(json))?;
        let forecast = whatif::forecast::predict(&cluster, &loaded.drill, &args.reports_dir).await;
        match args.output {
            OutputFormat::Text => print!("{}", whatif::render::forecast(&forecast)),
            OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&forecast).unwrap_or_default()),
        }
        Ok(EXIT_PASSED)
    })
}
