//! A small synthetic drain drill for the renderers' tests: a timeline run through the real phase analysis.

use chrono::{DateTime, Utc};

use super::{ClusterIdentity, DrillIdentity, Outcome, Report, StepRecord};
use crate::timeline::{Event as E, NodeRole, Observation};

pub const DRILL: &str = r#"apiVersion: hybrid-drill.io/v1alpha1
kind: Drill
metadata: {name: onprem-gpu-drain, description: "Drain <h200> & fall back"}
spec:
  cluster: {context: hybrid-lab}
  targets:
    onPrem: {nodes: "gpu.model=h200"}
    workload: {namespace: inference, selector: "app=llm", restoredWhen: {readyPods: 1}}
    fallback: {nodePool: gpu-fallback}
  objectives: {rto: 60s, phases: {provisioning: 5s, reclaim: 10s}}
  pricing: {g6.12xlarge: 4.6}
  steps:
    - {id: drain, drain: onPrem}
    - {id: fallback, waitFor: fallback-ready}
    - {id: return, return: {restart: deployment/llm}}
    - {id: reclaim, waitFor: fallback-empty}
"#;

pub fn base() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-05T09:30:00Z").unwrap().with_timezone(&Utc)
}

pub fn timeline() -> Vec<Observation> {
    let (on, fb) = (NodeRole::OnPrem, NodeRole::Fallback);
    let cond = |c: &str| E::NodeClaimCondition {
        nodeclaim: "gpu-fallback-x1".into(),
        condition: c.into(),
        status: "True".into(),
    };
    let events: Vec<(f64, Option<i64>, E)> = vec![
        (0.1, Some(-600), E::PodScheduled { pod: "llm-old".into(), node: "h1".into(), role: on }),
        (0.2, None, E::StepStarted { step: "drain".into(), action: "drain onPrem".into() }),
        (0.5, None, E::FaultInjected { step: "drain".into(), kind: "drain".into() }),
        (0.6, None, E::Cordoned { node: "h1".into() }),
        (
            0.7,
            Some(0),
            E::NodeTaint {
                node: "h1".into(),
                role: on,
                key: "node.kubernetes.io/unschedulable".into(),
                effect: "NoSchedule".into(),
                added: true,
            },
        ),
        (1.0, None, E::Evicted { pod: "inference/llm-old".into(), node: "h1".into() }),
        (1.1, None, E::ServiceLost { ready_pods: 0 }),
        (1.2, Some(1), E::PodCreated { pod: "llm-new".into() }),
        (2.0, None, E::PodDeleted { pod: "llm-old".into(), node: "h1".into(), role: on }),
        (2.5, Some(2), E::NodeClaimCreated { nodeclaim: "gpu-fallback-x1".into() }),
        (4.0, Some(4), cond("Launched")),
        (
            5.0,
            Some(5),
            E::NodeAdded { node: "f1".into(), role: fb, instance_type: Some("g6.12xlarge".into()), gpus: 4 },
        ),
        (5.1, Some(5), cond("Registered")),
        (8.5, Some(8), cond("Initialized")),
        (8.6, Some(8), E::NodeReady { node: "f1".into(), role: fb, status: "True".into(), gpus: 4 }),
        (8.7, None, E::FallbackReady { nodeclaims: 1 }),
        (9.0, Some(9), E::PodScheduled { pod: "llm-new".into(), node: "f1".into(), role: fb }),
        (12.0, Some(12), E::PodReady { pod: "llm-new".into(), node: "f1".into(), role: fb }),
        (12.1, None, E::ServiceRestored { ready_pods: 1 }),
        (20.0, None, E::ReturnStarted { step: "return".into() }),
        (20.1, None, E::Uncordoned { node: "h1".into() }),
        (20.2, None, E::RestartTriggered { target: "deployment/llm".into() }),
        (26.0, None, E::BackOnPrem { ready_pods: 1 }),
        (38.0, None, E::NodeDeleted { node: "f1".into(), role: fb }),
        (38.5, None, E::FallbackEmpty),
    ];
    crate::timeline::observations_from(base(), events)
}

/// A finished drain drill that met its RTO, missed provisioning (5s) and reclaim (10s), with a fallback cost.
pub fn report() -> Report {
    let drill = crate::drill::from_source(std::path::Path::new("drills/drain.yaml"), DRILL.into()).unwrap();
    let observations = timeline();
    let analysis = crate::phases::analyse(&drill.drill, &observations);
    let step = |id: &str, action: &str, outcome: &str, seconds: f64| StepRecord {
        id: id.into(),
        action: action.into(),
        outcome: outcome.into(),
        message: String::new(),
        seconds: Some(seconds),
    };
    Report {
        schema: super::REPORT_SCHEMA.into(),
        tool_version: "0.1.0".into(),
        run_id: "onprem-gpu-drain-20260105t093000z".into(),
        drill: DrillIdentity {
            name: "onprem-gpu-drain".into(),
            description: drill.drill.metadata.description.clone(),
            file: "drills/drain.yaml".into(),
            source: DRILL.into(),
        },
        cluster: ClusterIdentity {
            context: "hybrid-lab".into(),
            server: "https://127.0.0.1:26443/".into(),
            version: "v1.34.1".into(),
        },
        started: base(),
        finished: base() + chrono::Duration::seconds(39),
        outcome: Outcome::ObjectiveMissed,
        exit_code: 1,
        abort_reason: None,
        fidelity: super::DRAIN_FIDELITY.into(),
        steps: vec![
            step("drain", "drain onPrem", "passed", 1.8),
            step("fallback", "waitFor fallback-ready", "passed", 6.9),
            step("return", "return", "passed", 0.3),
            step("reclaim", "waitFor fallback-empty", "passed", 18.2),
        ],
        phases: analysis.phases,
        milestones: analysis.milestones,
        objectives_missed: analysis.objectives_missed,
        fallback: analysis.fallback,
        rollback: None,
        notable_events: super::notable(&observations),
        overlap: super::overlap(&observations),
        watch_gaps: 0,
        api_requests: 42,
        warnings: vec!["this ran against the lab: <timings shortened>".into()],
    }
}
