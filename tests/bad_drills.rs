//! The drill files a new user gets wrong, each in `tests/fixtures/bad-drills/`, validated by the real binary: its
//! exit status, stdout and stderr must equal the `.out` file beside it, since the message is the contract.
//! `HD_BLESS=1 cargo test --test bad_drills` rewrites the `.out` files from what the binary prints now; read the diff.

use std::path::{Path, PathBuf};
use std::process::Command;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-drills")
}

/// What `hybrid-drill validate FILE` does with the file, run from its directory so paths print as in the `.out`.
fn validate(file: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_hybrid-drill"))
        .arg("validate")
        .arg(file.file_name().unwrap())
        .current_dir(dir())
        .env("PROM_TOKEN", "fixture-token-value")
        .env("SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/T0/B0/fixture")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().map_or("signal".into(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_bad_drill_is_refused_with_its_exact_message_and_every_good_one_passes() {
    let bless = std::env::var_os("HD_BLESS").is_some();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "the fixtures are missing: {files:?}");
    let mut differ = Vec::new();
    for file in &files {
        let got = validate(file);
        let expected_at = file.with_extension("out");
        if bless {
            std::fs::write(&expected_at, &got).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_at).unwrap_or_default();
        let name = file.file_name().unwrap().to_string_lossy();
        let good = name.starts_with("ok-");
        assert_eq!(got.starts_with("exit 0\n"), good, "{name}: an ok- file must pass, any other be refused:\n{got}");
        if got != expected {
            differ.push(format!("{name}:\n--- expected\n{expected}\n--- got\n{got}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}
