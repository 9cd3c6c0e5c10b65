//! The phases cut from synthetic timelines: every phase of each kind of drill, and what a missing or reversed
//! observation leaves (incomplete or inconsistent, never a guess).

use chrono::{DateTime, Utc};

use super::analyse::{Recorder, phase};
use super::*;
use crate::cluster::karpenter::ClaimCondition;
use crate::cluster::tolerations;
use crate::drill::{Drill, RestoreTarget};
use crate::timeline::Event as E;
use crate::timeline::{ConditionStatus, FaultKind, NodeRole, Observation};

/// A drill with objectives for RTO, provisioning and reclaim, and a price table.
pub(crate) fn drill() -> Drill {
    let src = r#"
apiVersion: hybrid-drill.io/v1alpha1
kind: Drill
metadata: {name: t}
spec:
  cluster: {context: c}
  targets:
    onPrem: {nodes: "a=b"}
    workload: {namespace: n, selector: "app=x", restoredWhen: {readyPods: 2}}
    fallback: {nodePool: p}
  objectives: {rto: 60s, phases: {provisioning: 5s, reclaim: 10s}}
  pricing: {g6.12xlarge: 4.6}
  steps: [{id: s, check: steady-state}]
"#;
    crate::drill::from_source(std::path::Path::new("t.yaml"), src.into()).unwrap().drill
}

/// Builds a timeline from (seconds, server seconds, event) triples.
pub(crate) fn timeline(events: Vec<(f64, Option<i64>, E)>) -> Vec<Observation> {
    let base = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
    crate::timeline::observations_from(base, events)
}

fn full_drain() -> Vec<(f64, Option<i64>, E)> {
    let on = NodeRole::OnPrem;
    let fb = NodeRole::Fallback;
    let cond = |c: &str, claim: &str| E::NodeClaimCondition {
        nodeclaim: claim.into(),
        condition: ClaimCondition::parse(c).unwrap(),
        status: ConditionStatus::True,
    };
    vec![
        (0.0, None, E::StepStarted { step: "drain".into(), action: "drain".into() }),
        (0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain }),
        (1.0, None, E::ServiceLost { ready_pods: 1 }),
        (1.2, Some(1), E::PodCreated { pod: "new-1".into() }),
        (2.0, None, E::PodDeleted { pod: "old-1".into(), node: "h1".into(), role: on }),
        (2.5, Some(2), E::NodeClaimCreated { nodeclaim: "c1".into() }),
        (2.6, Some(2), E::NodeClaimCreated { nodeclaim: "c2".into() }),
        (3.0, None, E::PodDeleted { pod: "old-2".into(), node: "h2".into(), role: on }),
        (4.0, Some(4), cond("Launched", "c1")),
        (4.2, Some(4), cond("Launched", "c2")),
        (
            5.0,
            Some(5),
            // Recorded before nodes carried their NodePool.
            E::NodeAdded {
                node: "f1".into(),
                role: fb,
                gpus: 4,
                instance_type: Some("g6.12xlarge".into()),
                node_pool: None,
            },
        ),
        (5.1, Some(5), cond("Registered", "c1")),
        (5.3, Some(5), cond("Registered", "c2")),
        (6.0, Some(6), cond("Initialized", "c1")),
        (6.5, Some(6), cond("Initialized", "c2")),
        (6.6, Some(6), E::NodeReady { node: "f1".into(), role: fb, status: ConditionStatus::True, gpus: 4 }),
        (7.0, Some(7), E::PodScheduled { pod: "new-1".into(), node: "f1".into(), role: fb }),
        (9.0, Some(9), E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb, containers: vec![] }),
        (9.1, None, E::ServiceRestored { ready_pods: 2, held_since_ms: None }),
        (10.0, None, E::ReturnStarted { step: "return".into() }),
        (15.0, None, E::BackOnPrem { ready_pods: 2 }),
        (3605.0, None, E::NodeDeleted { node: "f1".into(), role: fb }),
        (3611.0, None, E::FallbackEmpty),
    ]
}

#[test]
fn a_drain_drill_yields_every_phase_in_order() {
    let a = analyse(&drill(), &timeline(full_drain()));
    let secs = |n: &str| a.phase(n.parse().unwrap()).unwrap().seconds.unwrap();
    assert_eq!(secs("eviction"), 2.5);
    assert_eq!(secs("pending"), 1.3);
    assert_eq!(secs("provisioning"), 4.0);
    assert_eq!(secs("launched"), 1.7);
    assert_eq!(secs("registered"), 1.1);
    assert_eq!(secs("initialized"), 1.2);
    assert_eq!(secs("scheduling"), 0.4);
    assert_eq!(secs("startup"), 2.0);
    assert_eq!(secs("rto"), 8.6);
    assert_eq!(secs("return"), 5.0);
    assert_eq!(a.phase(PhaseId::Provisioning).unwrap().server_seconds, Some(4));
    assert_eq!(a.phase(PhaseId::Rto).unwrap().verdict, Verdict::Met);
    assert_eq!(a.phase(PhaseId::Provisioning).unwrap().verdict, Verdict::Met);
    assert_eq!(a.phase(PhaseId::Reclaim).unwrap().verdict, Verdict::Missed);
    assert_eq!(a.objectives_missed, [PhaseId::Reclaim]);
    let labels: Vec<&str> = a.milestones.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(labels.first(), Some(&"fault injected (t0)"));
    assert_eq!(labels.last(), Some(&"fallback reclaimed to 0"));
    assert!(a.milestones.windows(2).all(|w| w[0].seq < w[1].seq));
    // one node of 4 GPUs for an hour, at 4.6 $/h
    assert!((a.fallback.gpu_hours - 4.0).abs() < 0.01, "{:?}", a.fallback);
    assert_eq!(a.fallback.estimated_cost, Some(4.6));
}

/// A budget-paced drain brings the fallback in two waves minutes apart: the phases after the eviction follow the
/// second wave's pod, the one the restore waited for, and add up to the RTO; a first-wave claim created before the
/// pod leaves it no pending time.
#[test]
fn phases_follow_the_pod_the_restore_waited_for_not_the_first_wave() {
    let (on, fb) = (NodeRole::OnPrem, NodeRole::Fallback);
    let cond = |c: &str, claim: &str| E::NodeClaimCondition {
        nodeclaim: claim.into(),
        condition: ClaimCondition::parse(c).unwrap(),
        status: ConditionStatus::True,
    };
    let ready = |node: &str| E::NodeReady { node: node.into(), role: fb, status: ConditionStatus::True, gpus: 4 };
    let wave = |start: f64, n: &str| -> Vec<(f64, Option<i64>, E)> {
        let (pod, claim, node) = (format!("new-{n}"), format!("c{n}"), format!("f{n}"));
        vec![
            (start, None, E::PodDeleted { pod: format!("old-{n}"), node: format!("h{n}"), role: on }),
            (start + 0.1, None, E::PodCreated { pod: pod.clone() }),
            (start + 1.0, None, E::NodeClaimCreated { nodeclaim: claim.clone() }),
            (start + 1.5, None, cond("Launched", &claim)),
            (start + 90.0, None, E::NodeClaimNode { nodeclaim: claim.clone(), node: node.clone() }),
            (start + 90.0, None, cond("Registered", &claim)),
            (start + 91.0, None, cond("Initialized", &claim)),
            (start + 91.2, None, ready(&node)),
            (start + 91.3, None, E::PodScheduled { pod: pod.clone(), node: node.clone(), role: fb }),
        ]
    };
    let mut events = vec![(0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain })];
    events.extend(wave(1.0, "1"));
    events.push((300.0, None, E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb, containers: vec![] }));
    events.extend(wave(400.0, "2"));
    events.push((800.0, None, E::PodReady { pod: "new-2".into(), node: "f2".into(), role: fb, containers: vec![] }));
    events.push((800.1, None, E::ServiceRestored { ready_pods: 2, held_since_ms: None }));
    let a = analyse(&drill(), &timeline(events.clone()));
    let secs = |a: &Analysis, n: &str| a.phase(n.parse().unwrap()).unwrap().seconds.unwrap();
    let near = |x: f64, y: f64| (x - y).abs() < 1e-6;
    assert!(near(secs(&a, "eviction"), 399.5));
    assert!(near(secs(&a, "pending"), 0.9));
    assert!(near(secs(&a, "provisioning"), 90.0), "budget wait counted as provisioning: {:?}", a.phases);
    assert!(near(secs(&a, "launched"), 0.5));
    assert!(near(secs(&a, "registered"), 88.5));
    assert!(near(secs(&a, "scheduling"), 0.1));
    assert!(near(secs(&a, "startup"), 308.7));
    let path =
        ["eviction", "pending", "provisioning", "scheduling", "startup"].map(|p| secs(&a, p)).iter().sum::<f64>();
    assert!(secs(&a, "rto") - path < 0.5, "the path's phases add up to the RTO but for the gaps between them");
    assert_eq!(
        a.phase(PhaseId::Provisioning).unwrap().from.as_ref().unwrap().label,
        "first NodeClaim created after it"
    );

    // The last pod lands on a node whose NodeClaim was created before it: no pending, provisioning from the pod.
    let mut early_claim = events;
    early_claim.retain(|(_, _, e)| !matches!(e, E::NodeClaimCreated { nodeclaim } if nodeclaim == "c2"));
    early_claim.insert(1, (0.9, None, E::NodeClaimCreated { nodeclaim: "c2".into() }));
    let a = analyse(&drill(), &timeline(early_claim));
    assert!(near(secs(&a, "pending"), 0.0));
    assert!(near(secs(&a, "provisioning"), 90.9));
}

/// The drain drill on the lab's realistic profile (tests/fixtures/realistic-drain: minutes of pull and load, a
/// 90 s launch): the budget let the second pair go only after 6.5 minutes, and Karpenter took 90 s for its
/// NodeClaims, not the 8 minutes from the first wave's claim to the last wave's.
#[test]
fn a_budget_paced_drain_on_realistic_timings_is_measured_on_its_last_wave() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-drain");
    let source = std::fs::read_to_string(dir.join("drill.yaml")).unwrap();
    let drill = crate::drill::from_source(&dir.join("drill.yaml"), source).unwrap().drill;
    let obs = crate::timeline::read(&dir.join("timeline.jsonl")).unwrap();
    let a = analyse(&drill, &obs);
    let secs = |n: &str| a.phase(n.parse().unwrap()).unwrap().seconds.unwrap();
    assert!((90.0..92.0).contains(&secs("provisioning")), "{}", secs("provisioning"));
    assert!((89.0..91.0).contains(&secs("registered")), "{}", secs("registered"));
    assert!(secs("scheduling") < 1.0, "{}", secs("scheduling"));
    assert!((330.0..340.0).contains(&secs("startup")), "{}", secs("startup"));
    assert_eq!(a.phase(PhaseId::Provisioning).unwrap().verdict, Verdict::Met);
    let path: f64 = ["eviction", "pending", "provisioning", "scheduling", "startup"].map(secs).iter().sum();
    assert!((secs("rto") - path).abs() < 2.0, "path {path} vs rto {}", secs("rto"));
}

#[test]
fn a_host_cut_yields_detection_taint_toleration_and_restore() {
    let mut d = drill();
    d.spec.steps.push(crate::drill::Step {
        id: "r".into(),
        timeout: crate::drill::DEFAULT_STEP_TIMEOUT,
        action: crate::drill::Action::Restore(RestoreTarget::Cut),
    });
    let (on, fb) = (NodeRole::OnPrem, NodeRole::Fallback);
    let tolerance = crate::cluster::tolerations::TaintTolerance {
        taint: tolerations::UNREACHABLE.into(),
        pods: 2,
        min_seconds: Some(30),
        max_seconds: Some(30),
        forever: 0,
    };
    let events = vec![
        (0.0, None, E::TolerationsRead { tolerations: vec![tolerance] }),
        (1.0, None, E::FaultInjected { step: "cut".into(), kind: FaultKind::Cut(crate::drill::CutFidelity::Host) }),
        (21.0, Some(21), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 }),
        (21.5, None, E::ServiceLost { ready_pods: 0 }),
        (
            22.0,
            Some(21),
            E::NodeTaint {
                node: "h1".into(),
                role: on,
                key: tolerations::UNREACHABLE.into(),
                effect: "NoExecute".into(),
                added: true,
            },
        ),
        (52.0, Some(52), E::PodTerminating { pod: "old-1".into(), node: "h1".into(), role: on }),
        (52.1, Some(52), E::PodTerminating { pod: "old-2".into(), node: "h1".into(), role: on }),
        (52.2, Some(52), E::PodCreated { pod: "new-1".into() }),
        (53.0, Some(53), E::NodeClaimCreated { nodeclaim: "c1".into() }),
        (55.0, Some(55), E::PodReady { pod: "new-1".into(), node: "f1".into(), role: fb, containers: vec![] }),
        (55.1, None, E::ServiceRestored { ready_pods: 2, held_since_ms: None }),
        (60.0, None, E::RestoreStarted { step: "r".into(), what: RestoreTarget::Cut }),
        (60.2, None, E::FaultRemoved { step: "r".into(), what: "link restored".into() }),
        (61.0, Some(61), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 8 }),
        (61.1, Some(61), E::PodDeleted { pod: "old-1".into(), node: "h1".into(), role: on }),
        (61.2, None, E::OnPremReady { nodes: 1 }),
        (70.0, None, E::ReturnStarted { step: "return".into() }),
    ];
    let a = analyse(&d, &timeline(events));
    let secs = |n: &str| a.phase(n.parse().unwrap()).unwrap().seconds.unwrap();
    assert_eq!(secs("detection"), 20.0);
    assert_eq!(secs("taint"), 1.0);
    assert_eq!(secs("toleration"), 30.0);
    // evicted once the API server deleted the pods, not when the node came back and they were gone
    assert_eq!(secs("eviction"), 51.1);
    assert_eq!(secs("rto"), 54.1);
    // the watch saw h1 Ready at 61.0; the step confirmed it at 61.2
    assert_eq!(secs("restore"), 1.0);
    assert_eq!(secs("revert"), 0.2);
    assert_eq!(a.phase(PhaseId::Taint).unwrap().parent, Some(PhaseId::Eviction));
    let note = a.phase(PhaseId::Toleration).unwrap().note.clone().unwrap();
    assert!(note.contains("evicted after 30s"), "{note}");
    let labels: Vec<&str> = a.milestones.iter().map(|m| m.label.as_str()).collect();
    let chain = [
        "fault injected (t0)",
        "on-prem node Unknown",
        "node.kubernetes.io/unreachable:NoExecute taint",
        "first workload pod evicted from on-prem",
        "first NodeClaim created",
        "service restored",
        "restore started",
        "link restored",
        "on-prem nodes Ready",
        "return started",
    ];
    let seen: Vec<&str> = labels.iter().filter(|l| chain.contains(l)).copied().collect();
    assert_eq!(seen, chain, "{labels:?}");
    assert_eq!(secs("rejoin"), 0.8);

    // A recovery hook that waits for its node returns after the node is Ready: the revert ends there and the
    // rejoin takes no time, never a reversed, inconsistent span.
    let events = timeline(vec![
        (1.0, None, E::FaultInjected { step: "fail".into(), kind: FaultKind::NodeFailure }),
        (60.0, None, E::RestoreStarted { step: "r".into(), what: RestoreTarget::NodeFailure }),
        (63.0, Some(63), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 8 }),
        (63.4, None, E::FaultRemoved { step: "r".into(), what: "recovery hooks ran".into() }),
        (63.5, None, E::OnPremReady { nodes: 1 }),
    ]);
    let a = analyse(&d, &events);
    let phase = |id: PhaseId| a.phase(id).unwrap().clone();
    assert_eq!(phase(PhaseId::Restore).seconds, Some(3.0));
    assert_eq!(phase(PhaseId::Revert).seconds, Some(3.0));
    let rejoin = phase(PhaseId::Rejoin);
    assert_eq!(rejoin.seconds, Some(0.0));
    assert_ne!(rejoin.verdict, Verdict::Inconsistent);
    assert_eq!(rejoin.from.unwrap().label, "on-prem nodes Ready (before the revert returned)");
}

/// A cut whose last resort reboots the nodes one by one: Karpenter's consolidation moves the workload onto the
/// nodes back first and empties the fallback before the drill's return step starts. Return and reclaim end where
/// they start, met, never "end not observed".
#[test]
fn a_fallback_consolidated_home_before_the_return_ends_return_and_reclaim_at_once() {
    let mut d = drill();
    d.spec.steps.push(crate::drill::Step {
        id: "r".into(),
        timeout: crate::drill::DEFAULT_STEP_TIMEOUT,
        action: crate::drill::Action::Restore(RestoreTarget::Cut),
    });
    let on = NodeRole::OnPrem;
    let cut = E::FaultInjected { step: "cut".into(), kind: FaultKind::Cut(crate::drill::CutFidelity::Host) };
    let early = vec![
        (1.0, None, cut),
        (53.0, Some(53), E::NodeClaimCreated { nodeclaim: "c1".into() }),
        (80.0, None, E::RestoreStarted { step: "r".into(), what: RestoreTarget::Cut }),
        (120.0, Some(120), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 8 }),
        (185.1, None, E::FallbackEmpty),
        (185.3, None, E::BackOnPrem { ready_pods: 2 }),
        (241.7, None, E::FaultRemoved { step: "r".into(), what: "link restored".into() }),
        (241.8, None, E::ReturnStarted { step: "return".into() }),
    ];
    let a = analyse(&d, &timeline(early.clone()));
    for id in [PhaseId::Return, PhaseId::Reclaim] {
        let p = a.phase(id).unwrap();
        assert_eq!(p.seconds, Some(0.0), "{p:?}");
        assert!(p.from.as_ref().unwrap().label.ends_with("before the return"), "{p:?}");
    }
    assert_eq!(a.phase(PhaseId::Reclaim).unwrap().verdict, Verdict::Met);
    // A drain has no restore: the return's phases start with the return, whatever came before.
    let mut late = early;
    late.retain(|(_, _, e)| !matches!(e, E::RestoreStarted { .. } | E::FaultRemoved { .. }));
    late.push((250.0, None, E::BackOnPrem { ready_pods: 2 }));
    late.push((260.0, None, E::FallbackEmpty));
    let a = analyse(&drill(), &timeline(late));
    let secs = |id: PhaseId| a.phase(id).unwrap().seconds;
    assert_eq!((secs(PhaseId::Return), secs(PhaseId::Reclaim)), (Some(8.2), Some(18.2)));
}

#[test]
fn a_node_failure_says_how_long_its_hooks_ran_after_t0() {
    let on = NodeRole::OnPrem;
    let hook =
        |node: &str| E::HookRan { step: "fail".into(), command: format!("lab/node-fail {node}"), exit_code: Some(0) };
    let events = vec![
        (1.0, None, E::FaultInjected { step: "fail".into(), kind: FaultKind::NodeFailure }),
        (1.2, None, hook("h1")),
        (1.31, None, hook("h2")),
        (
            1.32,
            None,
            E::StepFinished {
                step: "fail".into(),
                outcome: crate::timeline::StepOutcome::Passed,
                message: String::new(),
            },
        ),
        (21.0, Some(21), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 }),
    ];
    let a = analyse(&drill(), &timeline(events));
    let detection = a.phase(PhaseId::Detection).unwrap();
    assert_eq!(detection.seconds, Some(20.0));
    assert_eq!(
        detection.note.as_deref(),
        Some("t0 is when the failure hooks started; the 2 of them ran until +0.31 s")
    );
    let drained = analyse(&drill(), &timeline(full_drain()));
    assert!(drained.phase(PhaseId::Eviction).unwrap().note.is_none());
}

#[test]
fn missing_observations_leave_phases_incomplete_not_wrong() {
    let events: Vec<_> = full_drain()
        .into_iter()
        .filter(|(_, _, e)| !matches!(e, E::ServiceRestored { .. } | E::FallbackEmpty))
        .collect();
    let a = analyse(&drill(), &timeline(events));
    let rto = a.phase(PhaseId::Rto).unwrap();
    assert_eq!(rto.verdict, Verdict::Incomplete);
    assert_eq!(rto.note.as_deref(), Some("end not observed"));
    assert!(a.objectives_missed.contains(&PhaseId::Rto));
    assert_eq!(a.phase(PhaseId::Reclaim).unwrap().verdict, Verdict::Incomplete);
}

#[test]
fn no_fault_means_no_fallback_phases() {
    let a =
        analyse(&drill(), &timeline(vec![(0.0, None, E::StepStarted { step: "s".into(), action: "check".into() })]));
    assert!(a.phases.iter().all(|p| p.verdict == Verdict::Incomplete));
    assert!(a.milestones.is_empty());
}

#[test]
fn out_of_order_server_times_keep_tool_clock_durations() {
    let mut events = full_drain();
    // the server stamped Initialized a second before Registered: clocks of different writers disagree
    events[14].1 = Some(4);
    let a = analyse(&drill(), &timeline(events));
    let init = a.phase(PhaseId::Initialized).unwrap();
    assert_eq!(init.seconds, Some(1.2));
    assert_eq!(init.server_seconds, Some(-1));
}

#[test]
fn with_a_probe_the_service_is_restored_when_the_criterion_first_held_not_when_confirmed() {
    let mut events = full_drain();
    let restored = events.iter_mut().find(|e| matches!(e.2, E::ServiceRestored { .. })).unwrap();
    // Confirmed at +9.1 s by the last of several successes in a row; the first of them came at +5.1 s.
    restored.2 = E::ServiceRestored { ready_pods: 2, held_since_ms: Some(5100) };
    let a = analyse(&drill(), &timeline(events));
    let rto = a.phase(PhaseId::Rto).unwrap();
    assert_eq!(rto.seconds, Some(4.6), "{rto:?}");
    let to = rto.to.as_ref().unwrap();
    assert_eq!(to.received.to_rfc3339(), "2026-01-01T00:00:05.100+00:00");
    let note = rto.note.as_deref().unwrap();
    assert!(note.contains("restored when 2 pods Ready first held"), "{note}");
    assert!(note.contains("first held at +5.1 s, confirmed at +9.1 s"), "{note}");
}

#[test]
fn reversed_boundaries_are_inconsistent_claim_no_duration_and_miss_any_objective() {
    let at = |label: &str, seq, t_ms| Boundary {
        label: label.into(),
        key: None,
        seq,
        t_ms,
        received: DateTime::from_timestamp_millis(1_700_000_000_000 + t_ms as i64).unwrap(),
        server_time: None,
    };
    let p =
        phase(PhaseId::Eviction, Some(at("start", 2, 2000)), Some(at("end", 1, 1000)), Some(600.0), Recorder::Drill);
    assert_eq!((p.seconds, p.verdict), (None, Verdict::Inconsistent));
    assert!(p.misses_objective());
    let note = p.note.unwrap();
    assert!(note.contains("end (end, 2023-11-14T22:13:21.000Z)"), "{note}");
    assert!(note.contains("start (start, 2023-11-14T22:13:22.000Z)"), "{note}");
    let without_objective =
        phase(PhaseId::Eviction, Some(at("start", 2, 2000)), Some(at("end", 1, 1000)), None, Recorder::Drill);
    assert_eq!(without_objective.verdict, Verdict::Inconsistent);
    assert!(!without_objective.misses_objective());
}
