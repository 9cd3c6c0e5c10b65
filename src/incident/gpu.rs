//! A real GPU fault as `watch` sees it: an on-prem node that stays Ready with fewer `nvidia.com/gpu` allocatable than
//! its capacity, when the watch first saw a sign of it, and the `GpuFaulted` record that lets the drill's own GPU
//! phases (phases/gpu_fault.rs) cut the incident with the same ruler.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;

use crate::cluster::quantity::as_integer;
use crate::timeline::gpu::NodeMarks;
use crate::timeline::view::ClusterView;
use crate::timeline::{Event, Observation};

const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// How long before the GPUs dropped out of allocatable a workload pod on the node may have stopped being Ready and
/// still count as the fault's first sign: a CUDA error fails the pod before the device plugin's health check marks
/// the GPU unhealthy, but a pod that failed long before is another story.
const POD_SIGN_WINDOW: chrono::Duration = chrono::Duration::seconds(60);

/// The on-prem nodes Ready with GPUs failed.
pub fn failed_gpu_nodes(v: &ClusterView) -> Vec<String> {
    v.on_prem_nodes().filter(|n| n.gpus_failed()).map(|n| n.name.clone()).collect()
}

/// A node's `nvidia.com/gpu` (allocatable, capacity) when allocatable is short of capacity.
pub fn gpus_short(node: &Node) -> Option<(i64, i64)> {
    let status = node.status.as_ref()?;
    let get = |m: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
        m.and_then(|m| m.get(GPU_RESOURCE)).and_then(as_integer)
    };
    let capacity = get(status.capacity.as_ref())?;
    let allocatable = get(status.allocatable.as_ref()).unwrap_or(0);
    (allocatable < capacity).then_some((allocatable, capacity))
}

/// When the watch first saw the fault on `nodes`: their GPUs leaving allocatable while Ready, or a workload pod on
/// them not Ready shortly before that. `None` when the watch never saw the drop (it started with the GPUs already
/// failed): then nothing keeps when the fault began.
pub fn first_sign(observations: &[Observation], nodes: &[String]) -> Option<DateTime<Utc>> {
    let mut gpus: BTreeMap<&str, i64> = BTreeMap::new();
    let mut dropped = None;
    for o in observations {
        match &o.event {
            Event::NodeAdded { node, gpus: g, .. } => {
                gpus.insert(node, *g);
            }
            Event::NodeReady { node, gpus: g, status, .. } => {
                let before = gpus.insert(node, *g);
                // The watch records no node it found at its start: a Ready node's first change seen, with no figure
                // before it, is its GPUs dropping (the rule phases/gpu_fault.rs detects by).
                let is_drop = status.is_true() && before.is_none_or(|b| *g < b);
                if is_drop && nodes.contains(node) {
                    dropped = Some(o.received);
                    break;
                }
            }
            _ => {}
        }
    }
    let dropped = dropped?;
    let pod_sign = observations
        .iter()
        .filter(|o| o.received <= dropped && dropped - o.received <= POD_SIGN_WINDOW)
        .filter(|o| matches!(&o.event, Event::PodNotReady { node, .. } if nodes.contains(node)))
        .map(|o| o.received)
        .min();
    Some(pod_sign.map_or(dropped, |p| p.min(dropped)))
}

/// The record the drill's `gpuFault` step writes, for the nodes the watch found: `bound` stands for the step's
/// `quarantineWithin` (the episode limit: a real incident has no other).
pub fn faulted(v: &ClusterView, nodes: &[String], bound: Duration) -> Event {
    let before = v
        .on_prem_nodes()
        .filter(|n| nodes.contains(&n.name))
        .map(|n| (n.name.clone(), NodeMarks { gpus: n.gpu_capacity, schedulable: true, ..NodeMarks::of(n) }))
        .collect();
    Event::GpuFaulted { nodes: nodes.to_vec(), quarantine_within_seconds: bound.as_secs_f64(), before }
}

/// What t0 stands on for a GPU fault.
pub const T0_BASIS: &str = "t0 is the first sign of the GPU fault the watch saw (a workload pod on the node not Ready, \
or its allocatable nvidia.com/gpu dropping below capacity while Ready): the GPU failed at or before it, by up to the \
device plugin's health-check interval, which no object records";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{ConditionStatus, NodeRole};

    fn obs(s: f64, event: Event) -> Observation {
        let at = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc)
            + chrono::Duration::milliseconds((s * 1000.0) as i64);
        Observation { seq: 0, t_ms: 0, received: at, server_time: None, event }
    }

    #[test]
    fn the_first_sign_is_the_gpu_drop_or_a_pod_failing_just_before_it() {
        let on = NodeRole::OnPrem;
        let ready =
            |s, gpus| obs(s, Event::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus });
        let added =
            obs(0.0, Event::NodeAdded { node: "h1".into(), role: on, instance_type: None, gpus: 8, node_pool: None });
        let old_pod = obs(1.0, Event::PodNotReady { pod: "old".into(), node: "h1".into(), role: on });
        let pod = obs(100.0, Event::PodNotReady { pod: "p".into(), node: "h1".into(), role: on });
        let nodes = ["h1".to_string()];
        let drop_only = [added.clone(), old_pod.clone(), ready(110.0, 8), ready(120.0, 0)];
        assert_eq!(first_sign(&drop_only, &nodes), Some(drop_only[3].received));
        let with_pod = [added.clone(), old_pod, pod.clone(), ready(120.0, 0)];
        assert_eq!(first_sign(&with_pod, &nodes), Some(pod.received));
        assert_eq!(first_sign(&[ready(5.0, 0)], &nodes), Some(ready(5.0, 0).received), "the first change seen");
        assert_eq!(first_sign(&[added.clone(), ready(5.0, 8)], &nodes), None, "no drop seen");
        assert_eq!(first_sign(&with_pod, &["h2".to_string()]), None);
    }
}
