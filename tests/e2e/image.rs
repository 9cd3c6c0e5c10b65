//! The in-cluster schedule in its image (`scripts/image drill`): deploy/schedule.yaml's pod run with podman against
//! the lab as a kubelet would run it, its init container's `recover` and then the drain drill, as the ServiceAccount
//! deploy/ binds, non-root on a read-only root file system, the report on the reports volume, the token rotated
//! mid-drill; then the watch's container. Skipped, saying so, where no image can be built and run.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::common::image;
use crate::common::lab::{
    audit_lines, eventually, lock_lab, reset_lab, run_dir_of, workload_on_prem_and_fallback_empty,
};
use crate::common::repo;

/// The `jti` of a ServiceAccount token, which the API server's audit log names as the request's credential.
fn token_id(token_file: &Path) -> String {
    let token = std::fs::read_to_string(token_file).unwrap();
    let payload = token.trim().split('.').nth(1).unwrap();
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    format!("JTI={}", claims["jti"].as_str().unwrap())
}

/// The credentials the tool's requests were made with, from the audit log's line `from` on, in order of first use.
fn credentials_used(instance: u32, from: usize) -> Vec<String> {
    let log = std::fs::read_to_string(run_dir_of(instance).join("logs/audit.log")).unwrap_or_default();
    let mut used: Vec<String> = Vec::new();
    for event in log.lines().skip(from).filter_map(|line| serde_json::from_str::<Value>(line).ok()) {
        let ours = event["user"]["username"] == "system:serviceaccount:hybrid-drill:hybrid-drill"
            && event["userAgent"].as_str().is_some_and(|a| a.starts_with("hybrid-drill/"));
        let credential = event["user"]["extra"]["authentication.kubernetes.io/credential-id"][0].as_str();
        if let (true, Some(credential)) = (ours, credential)
            && !used.iter().any(|u| u == credential)
        {
            used.push(credential.to_string());
        }
    }
    used
}

#[test]
fn the_scheduled_drill_passes_in_its_container_as_the_service_account() {
    if let Some(why) = image::cannot_build_and_run() {
        eprintln!("skipped: {why}");
        return;
    }
    // Built before an instance is held: the pool's other tests use it meanwhile.
    let (tag, _) = image::build();
    let lab = lock_lab();
    reset_lab();
    let work = tempfile::tempdir().unwrap();
    // The lab's drain drill held 15 s once restored: kube's client reads the mounted token file again once a minute,
    // and the drill alone ends within one.
    let drain = std::fs::read_to_string(repo().join("drills/drain.yaml")).unwrap();
    let held = drain.replace("    - id: return\n", "    - id: hold\n      pause: 15s\n    - id: return\n");
    assert_ne!(held, drain);
    let drill = work.path().join("drain-held.yaml");
    std::fs::write(&drill, held).unwrap();
    let from = audit_lines(lab.instance());
    let out = Command::new(repo().join("scripts/image"))
        .args(["drill", "--instance", &lab.instance().to_string(), "--image", &tag, "--drill"])
        .arg(&drill)
        .arg("--work")
        .arg(work.path())
        .args(["--rotate-token-after", ROTATE_AFTER, "--watch-seconds", "5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");

    // The init container found nothing to finish; the drill passed, its report on the volume, written as the pod's
    // user, and on stdout (the Job's log).
    assert!(stdout.contains("nothing to recover"), "{stdout}");
    let run_dir = work.path().join("reports/onprem-gpu-drain");
    let stamp = std::fs::read_dir(&run_dir).unwrap().flatten().next().expect("no run directory on the volume").path();
    let report: Value = serde_json::from_str(&std::fs::read_to_string(stamp.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["outcome"], "passed", "{report}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(stamp.join("report.json")).unwrap().uid(), 65532);
    assert!(stdout.contains(r#""outcome":"passed""#) || stdout.contains(r#""outcome": "passed""#), "{stdout}");

    // The token the drill started with, and the one it was rotated to, both used by the drill's requests.
    let rotated = token_id(&work.path().join("serviceaccount/token"));
    let used = credentials_used(lab.instance(), from);
    assert!(stderr.contains("token rotated"), "{stderr}");
    assert_eq!(used.len(), 2, "the drill's requests used {used:?}; the rotated token is {rotated}");
    assert_eq!(used[1], rotated, "{used:?}");

    assert!(stderr.contains("the watch is running"), "{stderr}");
    eventually("steady state after the drill", Duration::from_secs(120), workload_on_prem_and_fallback_empty);
}

/// Seconds into the drill: while it drains.
const ROTATE_AFTER: &str = "5";
