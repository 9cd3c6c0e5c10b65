//! The container image as the tests build it: `scripts/image build --local` with the binary cargo built for the
//! tests (no second compile), once per set of inputs (the script keeps an image built from the same ones).

use std::process::Command;

use super::repo;

fn on_path(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Why no image can be built and run here, if none can: the tests that need one say so and skip.
pub fn cannot_build_and_run() -> Option<String> {
    let builder = ["buildah", "podman"].into_iter().any(on_path);
    let runner = on_path("podman");
    match (builder, runner) {
        (true, true) => None,
        (false, _) => Some("no daemonless image builder on PATH (buildah or podman): the image was not built".into()),
        (true, false) => Some("no podman on PATH to run the image: the image was not run".into()),
    }
}

/// The default image (busybox) and its minimal variant, built from this checkout's test binary; their names, one
/// pair per checkout (the machine's image store is shared: another checkout's tests build their own binary's).
pub fn build() -> (String, String) {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut checkout = DefaultHasher::new();
    repo().hash(&mut checkout);
    let tag = format!("localhost/hybrid-drill:test-{:012x}", checkout.finish() & 0xffff_ffff_ffff);
    let out = Command::new(repo().join("scripts/image"))
        .args(["build", "--local", "--binary", env!("CARGO_BIN_EXE_hybrid-drill"), "--tag", &tag])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "scripts/image build failed:\n{text}");
    // The sizes, which docs/in-cluster.md quotes.
    eprintln!("{text}");
    let minimal = format!("{tag}-minimal");
    (tag, minimal)
}

/// `podman run` as this machine's kind needs it (runc, the cgroupfs manager, explicit ulimits: docs/in-cluster.md).
pub fn podman_run() -> Command {
    let mut command = Command::new("podman");
    if on_path("runc") {
        command.args(["--runtime", "runc"]);
    }
    command.args(["--cgroup-manager", "cgroupfs", "run", "--rm", "--network", "host"]);
    command.args(["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]);
    command
}
