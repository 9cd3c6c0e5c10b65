//! A small synthetic drain drill for the renderers' tests: a timeline run through the real report builder.

use chrono::{DateTime, Utc};

use super::{Outcome, Report, RunMeta};
use crate::cluster::karpenter::ClaimCondition;
use crate::timeline::{ConditionStatus, ContainerStart, Event as E, FaultKind, NodeRole, Observation, StepOutcome};

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

/// The kubelet's event about the replacement pod.
fn kubelet(reason: &str, message: &str) -> E {
    E::KubeEvent { object: "Pod/llm-new".into(), reason: reason.into(), message: message.into() }
}

fn container(name: &str, init: bool, started: i64, finished: Option<i64>) -> ContainerStart {
    let at = |s: i64| base() + chrono::Duration::seconds(s);
    ContainerStart { name: name.into(), init, started: Some(at(started)), finished: finished.map(at) }
}

pub fn base() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-05T09:30:00Z").unwrap().with_timezone(&Utc)
}

pub fn timeline() -> Vec<Observation> {
    let (on, fb) = (NodeRole::OnPrem, NodeRole::Fallback);
    let cond = |condition: ClaimCondition| E::NodeClaimCondition {
        nodeclaim: "gpu-fallback-x1".into(),
        condition,
        status: ConditionStatus::True,
    };
    let started = |step: &str, action: &str| E::StepStarted { step: step.into(), action: action.into() };
    let passed =
        |step: &str| E::StepFinished { step: step.into(), outcome: StepOutcome::Passed, message: String::new() };
    let events: Vec<(f64, Option<i64>, E)> = vec![
        (
            0.0,
            None,
            E::DrillStarted {
                drill: "onprem-gpu-drain".into(),
                run_id: "onprem-gpu-drain-20260105t093000z".into(),
                context: "hybrid-lab".into(),
            },
        ),
        (0.1, Some(-600), E::PodScheduled { pod: "llm-old".into(), node: "h1".into(), role: on }),
        (0.2, None, started("drain", "drain onPrem")),
        (0.5, None, E::FaultInjected { step: "drain".into(), kind: FaultKind::Drain }),
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
        (2.0, None, passed("drain")),
        (2.0, None, started("fallback", "waitFor fallback-ready")),
        (2.5, Some(2), E::NodeClaimCreated { nodeclaim: "gpu-fallback-x1".into() }),
        (4.0, Some(4), cond(ClaimCondition::Launched)),
        (
            5.0,
            Some(5),
            E::NodeAdded {
                node: "f1".into(),
                role: fb,
                instance_type: Some("g6.12xlarge".into()),
                gpus: 4,
                node_pool: Some("gpu-fallback".into()),
            },
        ),
        (5.1, Some(5), cond(ClaimCondition::Registered)),
        (8.5, Some(8), cond(ClaimCondition::Initialized)),
        (8.6, Some(8), E::NodeReady { node: "f1".into(), role: fb, status: ConditionStatus::True, gpus: 4 }),
        (8.7, None, E::FallbackReady { nodeclaims: 1 }),
        (8.9, None, passed("fallback")),
        (9.0, Some(9), E::PodScheduled { pod: "llm-new".into(), node: "f1".into(), role: fb }),
        (9.2, Some(9), kubelet("Pulling", "Pulling image \"llm:1\"")),
        (
            10.4,
            Some(10),
            kubelet(
                "Pulled",
                "Successfully pulled image \"llm:1\" in 1.2s (1.2s including waiting). Image size: 9000000000 bytes.",
            ),
        ),
        (11.3, Some(11), kubelet("Created", "Created container: server")),
        (11.4, Some(11), kubelet("Started", "Started container server")),
        (
            12.0,
            Some(12),
            E::PodReady {
                pod: "llm-new".into(),
                node: "f1".into(),
                role: fb,
                containers: vec![container("model-download", true, 10, Some(11)), container("server", false, 11, None)],
            },
        ),
        (12.1, None, E::ServiceRestored { ready_pods: 1, held_since_ms: None }),
        (20.0, None, started("return", "return")),
        (20.0, None, E::ReturnStarted { step: "return".into() }),
        (20.1, None, E::Uncordoned { node: "h1".into() }),
        (20.2, None, E::RestartTriggered { target: "deployment/llm".into() }),
        (20.3, None, passed("return")),
        (20.3, None, started("reclaim", "waitFor fallback-empty")),
        (26.0, None, E::BackOnPrem { ready_pods: 1 }),
        (38.0, None, E::NodeDeleted { node: "f1".into(), role: fb }),
        (38.5, None, E::FallbackEmpty),
        (38.5, None, passed("reclaim")),
        (38.6, None, E::Warning { message: "this ran against the lab: <timings shortened>".into() }),
        (38.7, None, E::RequestsSent { total: 42, by_verb: Default::default() }),
        (39.0, None, E::DrillFinished { outcome: Outcome::ObjectiveMissed }),
    ];
    crate::timeline::observations_from(base(), events)
}

pub fn drill() -> crate::drill::Drill {
    crate::drill::from_source(std::path::Path::new("drills/drain.yaml"), DRILL.into()).unwrap().drill
}

pub fn meta() -> RunMeta {
    RunMeta {
        tool_version: "0.1.0".into(),
        drill_file: "drills/drain.yaml".into(),
        drill_source: DRILL.into(),
        cluster_server: "https://127.0.0.1:26443/".into(),
        cluster_version: "v1.34.1".into(),
        provenance: Some(provenance()),
    }
}

/// An operator's run through EKS's IAM authenticator, under a change record.
pub fn provenance() -> super::provenance::Provenance {
    let extra = std::collections::BTreeMap::from([(
        "arn".to_string(),
        vec!["arn:aws:sts::111122223333:assumed-role/gpu-ops/alice".to_string()],
    )]);
    super::provenance::Provenance {
        initiator: Some(crate::cluster::initiator::Initiator::of("alice".into(), vec!["gpu-ops".into()], extra)),
        initiator_unknown: None,
        host: "ops-laptop".into(),
        tool_version: "0.1.0".into(),
        git_commit: "0123456789abcdef0123456789abcdef01234567".into(),
        drill_sha256: "ab".repeat(32),
        change: Some("CHG-1".into()),
        approved_by: Some("bob".into()),
    }
}

/// A finished drain drill that met its RTO, missed provisioning (5s) and reclaim (10s), with a fallback cost.
pub fn report() -> Report {
    super::build(&drill(), &timeline(), &meta())
}
