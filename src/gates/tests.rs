use super::*;

fn closed(gate: GateKind, why: &str) -> Reading {
    Reading { gate, what: gate.to_string(), state: GateState::Closed { why: why.into(), fix: "wait".into() } }
}

fn open(gate: GateKind) -> Reading {
    Reading { gate, what: gate.to_string(), state: GateState::Open }
}

#[test]
fn a_closed_gate_refuses_naming_itself_its_cause_and_the_override() {
    let readings = [open(GateKind::Incident), closed(GateKind::Alert, "GPUNodeDown fires")];
    let refused = judge(&readings, &[], "alice").unwrap_err().to_string();
    assert_eq!(
        refused,
        "refusing to start: start gate `alert` is closed: GPUNodeDown fires; wait, or let it through with \
         `--override-gate alert --reason TEXT`; nothing was touched"
    );
}

#[test]
fn an_override_lets_through_its_own_gate_only_and_is_recorded_with_who_and_why() {
    let readings = [closed(GateKind::Alert, "GPUNodeDown fires"), closed(GateKind::ClusterFreeze, "frozen")];
    let alert = Override { gate: GateKind::Alert, reason: "the alert is the drill's own".into() };
    let refused = judge(&readings, std::slice::from_ref(&alert), "alice").unwrap_err();
    assert!(refused.to_string().contains("start gate `cluster-freeze` is closed: frozen"), "{refused}");
    assert!(!refused.to_string().contains("`alert`"), "{refused}");
    let freeze = Override { gate: GateKind::ClusterFreeze, reason: "approved by the release manager".into() };
    let through = judge(&readings, &[alert, freeze], "alice").unwrap();
    assert_eq!(through.len(), 2);
    assert_eq!(
        through[0].to_string(),
        "start gate `alert` overridden by alice: the alert is the drill's own (it was closed: GPUNodeDown fires)"
    );
}

#[test]
fn plan_shows_each_gate_and_what_an_override_would_let_through() {
    let readings = [open(GateKind::Incident), closed(GateKind::ClusterFreeze, "frozen")];
    let text = describe(&readings, &[]);
    assert!(text.contains("  open    incident: incident\n"), "{text}");
    assert!(text.contains("  CLOSED  cluster-freeze: frozen; wait\n"), "{text}");
    let ok = Override { gate: GateKind::ClusterFreeze, reason: "hotfix window approved".into() };
    assert!(describe(&readings, &[ok]).contains("overridden: hotfix window approved"));
    assert_eq!(describe(&[], &[]), "start gates: none\n");
}

#[test]
fn an_open_incident_in_the_reports_directory_closes_its_gate() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read::incidents(dir.path()).state, GateState::Open);
    let run = dir.path().join("gpu-watch/20261206T180000Z");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("timeline.jsonl"), "").unwrap();
    let episode = crate::report::open_episode::OpenEpisode {
        run_dir: run.clone(),
        run_id: "gpu-watch-x".into(),
        opened: "2026-12-06T18:00:00Z".parse().unwrap(),
    };
    crate::report::open_episode::write(&crate::report::open_episode::path(dir.path(), "gpu-watch"), &episode).unwrap();
    let GateState::Closed { why, .. } = read::incidents(dir.path()).state else { panic!("closed") };
    assert!(
        why.starts_with("`hybrid-drill watch` has an incident open: gpu-watch since 2026-12-06 18:00 UTC"),
        "{why}"
    );
}
