//! The container image: the Containerfile builds with a daemonless builder where one is installed (buildah or podman;
//! kaniko's executor in a CI job that runs in its image), its build context holds what it copies, and the images run
//! as the manifests run them. tests/e2e/image.rs runs the schedule in it against the lab.

mod common;

use std::process::Command;

use common::repo;

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

/// Both images, built as `scripts/image build` builds them where the bases cannot be pulled (the Containerfile's stages
/// on bases made on this machine from this checkout's binary), run with podman: non-root, a read-only root file
/// system, `tar` in the default one for `kubectl cp`, no shell in the minimal one.
#[test]
fn the_images_build_and_run_non_root_with_a_read_only_root() {
    if let Some(why) = common::image::cannot_build_and_run() {
        eprintln!("skipped: {why}");
        return;
    }
    let (default, minimal) = common::image::build();
    for image in [&default, &minimal] {
        let version = common::image::podman_run()
            .args(["--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL", image, "--version"])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&version.stdout).contains("hybrid-drill"), "{image}: {version:?}");
        let user = Command::new("podman").args(["image", "inspect", "--format", "{{.Config.User}}", image]).output();
        assert_eq!(String::from_utf8_lossy(&user.unwrap().stdout).trim(), "65532:65532", "{image}");
    }
    // kubectl cp runs tar in the container; kubectl exec a shell.
    for tool in ["tar", "sh"] {
        let run = common::image::podman_run().args(["--entrypoint", tool, &default, "--help"]).output().unwrap();
        assert!(run.status.success(), "no {tool} in {default}: {run:?}");
        let run = common::image::podman_run().args(["--entrypoint", tool, &minimal, "--help"]).output().unwrap();
        assert!(!run.status.success(), "{tool} in the minimal image {minimal}");
    }
    // The user has a name (what `id` and a home directory read), and the tz database a drill's freeze windows use.
    let id = common::image::podman_run().args(["--entrypoint", "id", &default]).output().unwrap();
    assert!(String::from_utf8_lossy(&id.stdout).contains("uid=65532(nonroot)"), "{id:?}");
    let zone = common::image::podman_run()
        .args([
            "--entrypoint",
            "ls",
            &default,
            "/usr/share/zoneinfo/Europe/Berlin",
            "/etc/ssl/certs/ca-certificates.crt",
        ])
        .output()
        .unwrap();
    assert!(zone.status.success(), "{zone:?}");
}
