//! `hybrid-drill whatif` and `hybrid-drill predict`: their flags and bodies (the model is `crate::whatif`).

use super::args::{OutputFormat, PredictArgs, WhatifArgs};
use super::commands::{block_on, load};
use crate::exit::{EXIT_INVALID, EXIT_PASSED};
use crate::whatif;

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
