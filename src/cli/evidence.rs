//! The bodies of `verify` (a run directory against its manifest) and `evidence` (a period's runs bundled for an
//! auditor), each returning its exit code.

use std::path::{Path, PathBuf};

use crate::evidence::bundle::{self, BundleOptions};
use crate::evidence::{self, TrustedKeys, Verification};
use crate::exit::{EXIT_PASSED, EXIT_TAMPERED};

use super::args::{OutputFormat, TrustFlags};
use super::failure::{Failure, Outcome};

fn trusted_keys(flags: &TrustFlags) -> Result<TrustedKeys, Failure> {
    TrustedKeys::load(flags.public_key.as_deref(), flags.trusted_keys.as_deref()).map_err(Failure::invalid)
}

/// The last line of `verify`: the verdict, and what it does not prove.
fn verdict_line(found: &Verification, flags: &TrustFlags, trusted: &TrustedKeys) -> String {
    let dir = &found.run_dir;
    if !found.files_intact() {
        return format!("NOT INTACT: {dir}");
    }
    if found.authentic() {
        return format!("intact: {dir}");
    }
    if flags.allow_unsigned {
        return format!(
            "intact, but authenticity NOT proven (--allow-unsigned: the files match a manifest anyone who can write \
             the directory could have written): {dir}"
        );
    }
    let how = if trusted.is_empty() {
        "no key is trusted: pass the signer's public key with --public-key (or HYBRID_DRILL_PUBLIC_KEY) or \
         --trusted-keys FILE"
    } else {
        "the manifest is not signed by a trusted key"
    };
    format!("NOT INTACT: {dir}: authenticity not proven: {how}; --allow-unsigned checks the files alone")
}

pub(super) fn verify_command(run_dir: &Path, flags: &TrustFlags, output: OutputFormat) -> Outcome {
    let trusted = trusted_keys(flags)?;
    let crashed = crate::report::crashed::state(run_dir);
    // A crashed run has no manifest until `recover` seals it: say so rather than list a missing manifest.
    if let Some(state) = crashed.as_deref().filter(|_| !run_dir.join(evidence::manifest::MANIFEST_FILE).exists()) {
        return Err(Failure::invalid(format!("{}: {}", run_dir.display(), crate::report::crashed::unsealed(state))));
    }
    let found = evidence::verify(run_dir, &trusted).map_err(Failure::invalid)?;
    let intact = found.intact(flags.allow_unsigned);
    match output {
        OutputFormat::Json => {
            let mut json = serde_json::to_value(&found).unwrap_or_default();
            json["intact"] = intact.into();
            if let Some(crashed) = &crashed {
                json["crashed"] = crashed.as_str().into();
            }
            json["authentic"] = found.authentic().into();
            println!("{}", serde_json::to_string_pretty(&json).unwrap_or_default());
        }
        OutputFormat::Text => {
            if let Some(crashed) = &crashed {
                println!("run: {crashed}");
            }
            print!("{}", found.describe());
            println!("{}", verdict_line(&found, flags, &trusted));
        }
    }
    Ok(if intact { EXIT_PASSED } else { EXIT_TAMPERED })
}

pub(super) struct EvidenceFlags {
    pub reports_dir: PathBuf,
    pub since: chrono::DateTime<chrono::Utc>,
    pub until: Option<chrono::DateTime<chrono::Utc>>,
    pub out: Option<PathBuf>,
    pub archive: bool,
    pub trust: TrustFlags,
    pub output: OutputFormat,
}

pub(super) fn evidence_command(flags: EvidenceFlags) -> Outcome {
    let trusted = trusted_keys(&flags.trust)?;
    let until = flags.until.unwrap_or_else(chrono::Utc::now);
    if until < flags.since {
        let message = format!("--until {} is before --since {}", until.date_naive(), flags.since.date_naive());
        return Err(Failure::invalid(message));
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
        trusted,
        allow_unsigned: flags.trust.allow_unsigned,
    };
    let (bundle, archive) = bundle::write(&opts).map_err(Failure::invalid)?;
    {
        {
            for w in &bundle.warnings {
                eprintln!("warning: {w}");
            }
            let failed = bundle.runs.iter().filter(|e| !e.intact()).count();
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
            let said = bundle::authenticity_line(&bundle, flags.trust.allow_unsigned);
            if !said.is_empty() {
                eprintln!("{said}");
            }
            Ok(if failed > 0 { EXIT_TAMPERED } else { EXIT_PASSED })
        }
    }
}
