//! The bodies of `verify` (a run directory against its manifest) and `evidence` (a period's runs bundled for an
//! auditor), each returning its exit code.

use std::path::{Path, PathBuf};

use crate::evidence::bundle::{self, BundleOptions};
use crate::evidence::{self, PublicKey};
use crate::exit::{EXIT_INVALID, EXIT_PASSED, EXIT_TAMPERED};

use super::args::OutputFormat;

fn trusted_key(spec: Option<&str>) -> Result<Option<PublicKey>, u8> {
    spec.map(PublicKey::load).transpose().map_err(|e| {
        eprintln!("error: {e}");
        EXIT_INVALID
    })
}

pub(super) fn verify_command(run_dir: &Path, public_key: Option<&str>, output: OutputFormat) -> u8 {
    let trusted = match trusted_key(public_key) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let crashed = crate::report::crashed::state(run_dir);
    let found = match evidence::verify(run_dir, trusted.as_ref()) {
        Ok(v) => v,
        Err(_) if crashed.is_some() && !run_dir.join(evidence::manifest::MANIFEST_FILE).exists() => {
            let why = crate::report::crashed::unsealed(crashed.as_deref().unwrap_or_default());
            eprintln!("error: {}: {why}", run_dir.display());
            return EXIT_INVALID;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    let intact = found.intact(trusted.is_some());
    match output {
        OutputFormat::Json => {
            let mut json = serde_json::to_value(&found).unwrap_or_default();
            json["intact"] = intact.into();
            if let Some(crashed) = &crashed {
                json["crashed"] = crashed.as_str().into();
            }
            println!("{}", serde_json::to_string_pretty(&json).unwrap_or_default());
        }
        OutputFormat::Text => {
            if let Some(crashed) = &crashed {
                println!("run: {crashed}");
            }
            print!("{}", found.describe());
            println!("{}: {}", if intact { "intact" } else { "NOT INTACT" }, run_dir.display());
        }
    }
    if intact { EXIT_PASSED } else { EXIT_TAMPERED }
}

pub(super) struct EvidenceFlags {
    pub reports_dir: PathBuf,
    pub since: chrono::DateTime<chrono::Utc>,
    pub until: Option<chrono::DateTime<chrono::Utc>>,
    pub out: Option<PathBuf>,
    pub archive: bool,
    pub public_key: Option<String>,
    pub output: OutputFormat,
}

pub(super) fn evidence_command(flags: EvidenceFlags) -> u8 {
    let trusted_key = match trusted_key(flags.public_key.as_deref()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let until = flags.until.unwrap_or_else(chrono::Utc::now);
    if until < flags.since {
        eprintln!("error: --until {} is before --since {}", until.date_naive(), flags.since.date_naive());
        return EXIT_INVALID;
    }
    let out = flags
        .out
        .unwrap_or_else(|| PathBuf::from(format!("evidence-{}-{}", flags.since.date_naive(), until.date_naive())));
    let opts = BundleOptions {
        reports_dir: flags.reports_dir,
        since: flags.since,
        until,
        out: out.clone(),
        archive: flags.archive,
        trusted_key,
    };
    match bundle::write(&opts) {
        Ok((bundle, archive)) => {
            for w in &bundle.warnings {
                eprintln!("warning: {w}");
            }
            let failed = bundle.runs.iter().filter(|e| e.verification.is_some() && !e.intact()).count();
            let index = out.join("index.html");
            match flags.output {
                OutputFormat::Json => {
                    let json = serde_json::json!({
                        "runs": bundle.runs.len(),
                        "not_intact": failed,
                        "index": index,
                        "archive": archive,
                    });
                    println!("{}", serde_json::to_string_pretty(&json).unwrap_or_default());
                }
                OutputFormat::Text => {
                    println!("{} runs in {}", bundle.runs.len(), index.display());
                    if let Some(archive) = archive {
                        println!("archive: {}", archive.display());
                    }
                }
            }
            if failed > 0 {
                eprintln!("warning: {failed} run directories do not match their manifest: see the index");
            }
            EXIT_PASSED
        }
        Err(e) => {
            eprintln!("error: {}", crate::secrets::redact(&e.to_string()));
            EXIT_INVALID
        }
    }
}
