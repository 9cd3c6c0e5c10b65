//! Reports built from timelines and read back from run directories: determinism, the fixture run, the outcome and
//! the steps a timeline says.

use std::path::Path;

use super::build::{recorded_outcome, step_records};
use super::*;
use crate::domain::{PhaseId, StepOutcome};
use crate::drill::CutFidelity;
use crate::timeline::{ConditionStatus, Event as E, FaultKind};
use crate::timeline::{NodeRole, Observation};

/// Observations from (seconds, event) pairs, without server times.
fn observations(events: Vec<(f64, E)>) -> Vec<Observation> {
    crate::timeline::observations_from(sample::base(), events.into_iter().map(|(t, e)| (t, None, e)).collect())
}

fn cut(old_pods_gone_at: Option<f64>, after_return: bool) -> Vec<Observation> {
    let (on, fb) = (NodeRole::OnPrem, NodeRole::Fallback);
    let mut events = vec![
        (
            0.0,
            E::Baseline {
                on_prem_nodes: 1,
                workload_pods: 1,
                ready_pods: 1,
                fallback_nodeclaims: 0,
                fallback_nodes: 0,
                fallback_gpu_limit: None,
                on_prem_pods: vec!["old-1".into()],
            },
        ),
        (0.1, E::PodScheduled { pod: "old-2".into(), node: "h1".into(), role: on }),
        (1.0, E::FaultInjected { step: "cut".into(), kind: FaultKind::Cut(CutFidelity::Host) }),
        (21.0, E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 }),
        (300.0, E::PodCreated { pod: "new-1".into() }),
        (360.0, E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb, containers: vec![] }),
        (361.0, E::PodDeleted { pod: "old-1".into(), node: "h1".into(), role: on }),
    ];
    if let Some(t) = old_pods_gone_at {
        events.push((t, E::PodDeleted { pod: "old-2".into(), node: "h1".into(), role: on }));
    }
    events.push((600.0, E::ReturnStarted { step: "return".into() }));
    if after_return {
        events.push((601.0, E::PodDeleted { pod: "old-2".into(), node: "h1".into(), role: on }));
    }
    observations(events)
}

#[test]
fn overlap_runs_from_the_first_cloud_replacement_ready_until_the_old_pods_are_gone() {
    let o = overlap(&cut(Some(420.0), false)).unwrap();
    assert_eq!(o.seconds, Some(60.0));
    assert_eq!(o.from.t_ms, 360_000);
    assert_eq!(o.to.unwrap().label, "last on-prem pod confirmed gone");
    // confirmed gone only after the return started: the window still ends there
    assert_eq!(overlap(&cut(None, true)).unwrap().seconds, Some(241.0));
    // never confirmed by the end of the drill: the window is open-ended and names the pod
    let open = overlap(&cut(None, false)).unwrap();
    assert_eq!((open.seconds, open.unconfirmed_pods), (None, vec!["old-2".to_string()]));
    // a drain evicts the old pods before any replacement is Ready: no overlap
    assert_eq!(overlap(&sample::timeline()), None);
    // nor is there one while the API server sees the on-prem nodes: their kubelets confirm what stops
    let seen: Vec<Observation> =
        cut(None, true).into_iter().filter(|o| !matches!(o.event, E::NodeReady { .. })).collect();
    assert_eq!(overlap(&seen), None);
}

#[test]
fn every_notable_event_has_a_marker_lane() {
    let notables = notable(&sample::timeline());
    let kinds: Vec<Marker> = notables.iter().map(|n| n.kind).collect();
    for kind in [Marker::Fault, Marker::Eviction, Marker::NodeClaim, Marker::Node, Marker::Taint, Marker::Service] {
        assert!(kinds.contains(&kind), "{kind:?} missing");
    }
    assert!(!kinds.contains(&Marker::Other));
    // a report.json written before markers existed still reads, its events in the `other` lane
    let old: Notable = serde_json::from_str(r#"{"t_seconds":1.0,"at":"2026-01-05T09:30:00Z","what":"x"}"#).unwrap();
    assert_eq!(old.kind, Marker::Other);
}

#[test]
fn load_reads_a_run_directory_and_refuses_other_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let mut report = sample::report();
    report.notable_events.clear();
    std::fs::write(dir.path().join("report.json"), serde_json::to_string(&report).unwrap()).unwrap();
    assert!(load(dir.path()).unwrap().notable_events.is_empty());
    // with its timeline beside it, the markers are derived again
    let timeline: Vec<String> = sample::timeline().iter().map(|o| serde_json::to_string(o).unwrap()).collect();
    std::fs::write(dir.path().join("timeline.jsonl"), timeline.join("\n")).unwrap();
    assert_eq!(load(dir.path()).unwrap().notable_events.len(), notable(&sample::timeline()).len());
    report.schema = "hybrid-drill.io/report/v0".into();
    std::fs::write(dir.path().join("report.json"), serde_json::to_string(&report).unwrap()).unwrap();
    let e = load(dir.path()).unwrap_err().to_string();
    assert!(
        e.ends_with("has schema `hybrid-drill.io/report/v0`; this hybrid-drill reads `hybrid-drill.io/report/v1`"),
        "{e}"
    );
    let e = load(&dir.path().join("nope")).unwrap_err().to_string();
    assert!(e.starts_with("cannot read ") && e.contains("No such file"), "{e}");
}

#[test]
fn durations_read_naturally() {
    assert_eq!(human_seconds(38.14), "38.1s");
    assert_eq!(human_seconds(245.2), "4m 05.2s");
    assert_eq!(human_seconds(3720.0), "1h 02m");
}

fn json(report: &Report) -> String {
    Format::Json.render(report).unwrap()
}

fn jsonl(observations: &[Observation]) -> String {
    observations.iter().map(|o| serde_json::to_string(o).unwrap() + "\n").collect()
}

/// The files a run leaves for its report: the drill file, the timeline, and report.json from `build`.
fn run_files(observations: &[Observation]) -> [(&'static str, String); 3] {
    [
        ("drill.yaml", sample::DRILL.to_string()),
        ("timeline.jsonl", jsonl(observations)),
        ("report.json", json(&build(&sample::drill(), observations, &sample::meta()))),
    ]
}

/// Writes a run directory as a run leaves it; returns it and its report.json.
fn run_dir(observations: &[Observation]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let files = run_files(observations);
    for (name, content) in &files {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    let [.., (_, recorded)] = files;
    (dir, recorded)
}

/// `tests/reports.rs` re-renders this run through the binary; it must stay the sample run. `BLESS=1` rewrites it.
#[test]
fn the_run_fixture_is_the_sample_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run");
    for (name, content) in run_files(&sample::timeline()) {
        if std::env::var_os("BLESS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), &content).unwrap();
        }
        let fixture = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(fixture == content, "tests/fixtures/run/{name} is not the sample run; rewrite it with BLESS=1");
    }
}

/// A small xorshift generator: reproducible cases without a property-testing crate for one test.
struct Cases(u64);

impl Cases {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    /// The sample timeline cut short at a random point, some of its observations swapped out of order.
    fn timeline(&mut self) -> Vec<Observation> {
        let mut obs = sample::timeline();
        obs.truncate(1 + self.below(obs.len()));
        for _ in 0..self.below(4) {
            let (i, j) = (self.below(obs.len()), self.below(obs.len()));
            obs.swap(i, j);
        }
        obs
    }
}

#[test]
fn build_is_deterministic_and_a_run_directory_re_renders_byte_for_byte() {
    let mut cases = Cases(0x9e37_79b9_7f4a_7c15);
    for case in 0..200 {
        let obs = cases.timeline();
        let once = json(&build(&sample::drill(), &obs, &sample::meta()));
        let again = json(&build(&sample::drill(), &obs, &sample::meta()));
        assert_eq!(once, again, "case {case}: build differs between two calls");
        let (dir, recorded) = run_dir(&obs);
        assert_eq!(json(&load(dir.path()).unwrap()), recorded, "case {case}: load does not reproduce report.json");
    }
}

#[test]
fn the_sample_run_re_renders_byte_for_byte_with_todays_logic() {
    let (dir, recorded) = run_dir(&sample::timeline());
    assert_eq!(json(&load(dir.path()).unwrap()), recorded);
    // a report.json whose figures an older logic computed is recomputed from the timeline
    let mut stale = sample::report();
    stale.phases.retain(|p| p.name != PhaseId::Rto);
    std::fs::write(dir.path().join("report.json"), json(&stale)).unwrap();
    assert_eq!(json(&load(dir.path()).unwrap()), recorded);
    // a run recorded before the report's facts were events keeps its recorded report
    let old: Vec<Observation> =
        sample::timeline().into_iter().filter(|o| !matches!(o.event, E::RequestsSent { .. })).collect();
    std::fs::write(dir.path().join("timeline.jsonl"), jsonl(&old)).unwrap();
    assert!(load(dir.path()).unwrap().phase(PhaseId::Rto).is_none());
}

#[test]
fn the_sample_report_reads_its_facts_from_the_timeline() {
    let r = sample::report();
    assert_eq!((r.outcome, r.exit_code, r.api_requests), (Outcome::ObjectiveMissed, 1, 42));
    assert_eq!(r.run_id, "onprem-gpu-drain-20260105t093000z");
    assert_eq!(r.cluster.context, "hybrid-lab");
    assert_eq!((r.started, r.finished), (sample::base(), sample::base() + chrono::Duration::seconds(39)));
    assert_eq!(r.warnings, ["this ran against the lab: <timings shortened>"]);
    assert_eq!(r.objectives_missed, [PhaseId::Provisioning, PhaseId::Reclaim]);
    let steps: Vec<(&str, &str, StepOutcome, Option<f64>)> =
        r.steps.iter().map(|s| (s.id.as_str(), s.action.as_str(), s.outcome, s.seconds)).collect();
    assert_eq!(
        steps,
        [
            ("drain", "drain onPrem", StepOutcome::Passed, Some(1.8)),
            ("fallback", "waitFor fallback-ready", StepOutcome::Passed, Some(6.9)),
            ("return", "return", StepOutcome::Passed, Some(0.3)),
            ("reclaim", "waitFor fallback-empty", StepOutcome::Passed, Some(18.2)),
        ]
    );
}

#[test]
fn steps_never_reached_are_skipped_and_steps_cut_short_aborted() {
    let finished =
        |step: &str, outcome, message: &str| E::StepFinished { step: step.into(), outcome, message: message.into() };
    let started = |step: &str| E::StepStarted { step: step.into(), action: "ignored".into() };
    let records = |events: Vec<(f64, E)>| step_records(&sample::drill(), &observations(events));
    // stopped by a signal while `fallback` waited: it is aborted, unmeasured; the rest never ran
    let stopped = records(vec![
        (0.0, started("drain")),
        (1.5, finished("drain", StepOutcome::Warned, "1 pod left")),
        (1.5, started("fallback")),
        (3.0, E::Aborted { reason: "interrupted by SIGINT".into() }),
    ]);
    let got: Vec<(StepOutcome, &str, Option<f64>)> =
        stopped.iter().map(|s| (s.outcome, s.message.as_str(), s.seconds)).collect();
    assert_eq!(
        got,
        [
            (StepOutcome::Warned, "1 pod left", Some(1.5)),
            (StepOutcome::Aborted, "", None),
            (StepOutcome::Skipped, "", None),
            (StepOutcome::Skipped, "", None),
        ]
    );
    // the action is the drill's, whatever an older run wrote
    assert_eq!(stopped[0].action, "drain onPrem");
    // a failed step keeps its message; a StepFinished of another step does not end it
    let failed = records(vec![
        (0.0, started("drain")),
        (0.5, finished("fallback", StepOutcome::Passed, "")),
        (2.0, finished("drain", StepOutcome::Failed, "eviction blocked")),
    ]);
    assert_eq!((failed[0].outcome, failed[0].message.as_str()), (StepOutcome::Failed, "eviction blocked"));
    assert_eq!(failed[0].seconds, Some(2.0));
    assert_eq!(failed[1].outcome, StepOutcome::Skipped);
}

/// The realistic-profile drain recorded "objective missed" with the phases of its day (provisioning cut across
/// the budget's waves); rendered again, its phases meet every objective and so does its verdict.
#[test]
fn a_report_rendered_again_judges_the_phases_it_shows_not_the_verdict_it_recorded() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-drain");
    let source = std::fs::read_to_string(dir.join("drill.yaml")).unwrap();
    let drill = crate::drill::from_source(&dir.join("drill.yaml"), source).unwrap().drill;
    let obs = crate::timeline::read(&dir.join("timeline.jsonl")).unwrap();
    assert_eq!(recorded_outcome(&obs), Some(Outcome::ObjectiveMissed));
    let r = build(&drill, &obs, &sample::meta());
    assert!(r.objectives_missed.is_empty(), "{:?}", r.objectives_missed);
    assert_eq!((r.outcome, r.exit_code), (Outcome::Passed, 0));
}

#[test]
fn an_aborted_run_reads_its_reason_rollback_and_outcome_from_the_timeline() {
    let events = vec![
        (0.0, E::DrillStarted { drill: "d".into(), run_id: "r".into(), context: "c".into() }),
        (1.0, E::Aborted { reason: "guard tripped".into() }),
        (
            2.0,
            E::RollbackFinished {
                undone: vec!["uncordon h1".into()],
                failed: vec!["delete p: 500".into()],
                verified: vec![],
            },
        ),
        (3.0, E::DrillFinished { outcome: Outcome::RestoreFailed }),
    ];
    let r = build(&sample::drill(), &observations(events.clone()), &sample::meta());
    assert_eq!((r.outcome, r.exit_code), (Outcome::RestoreFailed, crate::exit::exit_code(Outcome::RestoreFailed)));
    assert_eq!(r.abort_reason.as_deref(), Some("guard tripped"));
    assert_eq!(r.rollback.unwrap().failed, ["delete p: 500"]);
    // without the recorded outcome (a crash before the end), the rollback's failure still says it
    let crashed = build(&sample::drill(), &observations(events[..3].to_vec()), &sample::meta());
    assert_eq!(
        (crashed.outcome, crashed.finished),
        (Outcome::RestoreFailed, sample::base() + chrono::Duration::seconds(2))
    );
}

#[test]
fn timelines_written_as_text_read_as_types() {
    let lines = [
        r#"{"seq":0,"t_ms":0,"received":"2026-01-05T09:30:00Z","type":"fault-injected","step":"c","kind":"cut (host)"}"#,
        r#"{"seq":1,"t_ms":1,"received":"2026-01-05T09:30:00Z","type":"node-ready","node":"h","role":"on-prem","status":"Unknown","gpus":8}"#,
        r#"{"seq":2,"t_ms":2,"received":"2026-01-05T09:30:00Z","type":"node-claim-condition","nodeclaim":"c","condition":"Initialized","status":"True"}"#,
        r#"{"seq":3,"t_ms":3,"received":"2026-01-05T09:30:00Z","type":"step-finished","step":"c","outcome":"warned"}"#,
        r#"{"seq":4,"t_ms":4,"received":"2026-01-05T09:30:00Z","type":"restore-started","step":"r","what":"node-failure"}"#,
    ];
    for line in lines {
        let o: Observation = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(serde_json::to_string(&o).unwrap(), line, "written back as it was read");
    }
}
