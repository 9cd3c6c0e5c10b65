//! The container image: the Containerfile builds with a daemonless builder where one is installed (buildah or podman;
//! kaniko's executor in a CI job that runs in its image), and its build context holds what it copies.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn on_path(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Whether .containerignore (a `*` then `!path` exceptions, as it is written) lets `path` into the build context.
fn in_context(ignore: &str, path: &str) -> bool {
    let kept: Vec<&str> = ignore.lines().filter_map(|l| l.trim().strip_prefix('!')).collect();
    kept.iter().any(|k| path == k.trim_end_matches('/') || path.starts_with(k))
}

#[test]
fn the_build_context_holds_what_the_containerfile_copies_and_nothing_else() {
    let containerfile = std::fs::read_to_string(repo().join("Containerfile")).unwrap();
    let ignore = std::fs::read_to_string(repo().join(".containerignore")).unwrap();
    assert_eq!(ignore.lines().find(|l| !l.starts_with('#') && !l.trim().is_empty()), Some("*"), "{ignore}");
    let copied: Vec<&str> = containerfile
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words[..words.len() - 1].to_vec()
        })
        .collect();
    assert_eq!(copied, ["Cargo.toml", "Cargo.lock", "src", "build.rs"]);
    for path in copied {
        assert!(in_context(&ignore, path), "{path} is copied but .containerignore leaves it out");
    }
    for secret in ["lab/.run-14/pki/ca.key", "reports/d/journal.jsonl", "target/debug/hybrid-drill", ".git/config"] {
        assert!(!in_context(&ignore, secret), "{secret} would be in the build context");
    }
    // Multi-arch: the Rust target follows the platform being built.
    assert!(containerfile.contains("ARG TARGETARCH") && containerfile.contains("aarch64-unknown-linux-musl"));
}

/// The image for the platform of this machine, as a user builds it; then, with podman, it runs.
#[test]
fn the_containerfile_builds_with_a_daemonless_builder() {
    let builder = ["buildah", "podman"].into_iter().find(|b| on_path(b));
    let Some(builder) = builder else {
        eprintln!(
            "skipped: no daemonless image builder on PATH (buildah or podman; kaniko runs as its own image in CI): \
             the Containerfile was not built"
        );
        return;
    };
    let tag = "localhost/hybrid-drill:test";
    let root: &Path = &repo();
    let build = Command::new(builder)
        .args(["build", "--layers", "-t", tag, "-f", "Containerfile", "."])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(build.success(), "{builder} build failed");
    if builder == "podman" {
        let version = Command::new("podman").args(["run", "--rm", tag, "--version"]).output().unwrap();
        assert!(String::from_utf8_lossy(&version.stdout).contains("hybrid-drill"), "{version:?}");
        // kubectl cp runs tar in the container.
        let tar = Command::new("podman").args(["run", "--rm", "--entrypoint", "tar", tag, "--help"]).output().unwrap();
        assert!(tar.status.success(), "no tar in the image: kubectl cp cannot copy reports out");
    }
}
