//! Build script: the git commit the binary is built from, for the run's provenance (`HYBRID_DRILL_GIT_COMMIT`):
//! the variable when the build sets it (a container build has no .git), else `git rev-parse HEAD`, else `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=HYBRID_DRILL_GIT_COMMIT");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    // Rebuilt when HEAD moves: the file HEAD and the branch it names (a worktree's HEAD lives in its own git dir).
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["rev-parse", "--symbolic-full-name", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])),
    ]
    .into_iter()
    .flatten()
    {
        println!("cargo:rerun-if-changed={path}");
    }
    let commit = std::env::var("HYBRID_DRILL_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HYBRID_DRILL_GIT_COMMIT={commit}");
}
