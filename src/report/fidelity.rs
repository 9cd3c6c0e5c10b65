//! What a drill simulated and what it does not reproduce, stated in every report, with what the timeline shows the
//! fault actually did to the nodes and the fallback.

use std::collections::BTreeMap;

use crate::cluster::displacement::WorkloadMove;
use crate::drill::{Action, CutEnforcement, Drill};
use crate::timeline::{ConditionStatus, Event, NodeRole, Observation};

const HOST: &str = "link cut, host fidelity ({policy}, selecting the on-prem nodes by the run's \
hybrid-drill.io/cut label). Blocked: {blocks}. Not blocked: {leaves}. Reproduced: the control plane's side of the cut \
(the nodes go Unknown, the unreachable NoExecute taint, eviction once the pods' tolerationSeconds run out, the \
fallback), and the window in which the old pods may still run on-prem next to their replacements (the overlap). Not \
reproduced: what the cut-off side itself does (its clients, storage and own view of the cut).";

/// A host cut no on-prem node felt: said instead of [`HOST`], which would claim a cut that did not happen.
const HOST_NO_EFFECT: &str = "link cut, host fidelity, without effect: a host firewall policy ({cni}) selecting the \
on-prem nodes by the run's hybrid-drill.io/cut label was created, but no on-prem node lost the API server: nothing was \
cut, and nothing in this report measures a cut. Check that the CNI enforces host policies on these nodes.";

const POD_NETWORK: &str = "link cut, pod-network fidelity ({policy}): a data-plane partition. Blocked: {blocks}. \
Reproduced: those pods losing the cloud side (clients, DNS, dependencies). Not blocked: {leaves}. Not reproduced: \
the control plane losing the nodes; NetworkPolicy selects pods, never nodes.";

const NODE_FAILURE: &str = "node failure: the drill's own hooks (`{fail}`) failed the on-prem nodes and its recovery \
hooks (`{recover}`) brought them back. Reproduced: what the hook does; for a power-off, the nodes go Unknown, the \
unreachable NoExecute taint, eviction once the pods' tolerationSeconds run out, the fallback. A powered-off node's pods \
really stop, so the overlap is an upper bound; a hook that only stops the kubelet leaves them running, as a cut would. \
Not reproduced: a DX/VPN cut, where the nodes keep running (see the cut drills).";

/// The drain drill's fidelity statement.
pub const DRAIN_FIDELITY: &str = "drain: the on-prem nodes were cordoned and their pods evicted through the Eviction API \
(PodDisruptionBudgets honoured). The nodes stayed Ready: this measures the fallback path of a planned evacuation, not \
the node-failure detection delay or the not-ready/unreachable toleration wait of a real outage.";

/// The fidelity statement of a run: the drill's fault, then what was observed after it.
pub fn statement(drill: &Drill, observations: &[Observation]) -> String {
    let fault = drill.spec.steps.iter().map(|s| &s.action).find(|a| a.is_fault());
    let text = match fault {
        Some(Action::Drain(_)) => return DRAIN_FIDELITY.into(),
        Some(Action::Cut(cut)) => match cut.enforcement {
            CutEnforcement::Host(cni) if !any_on_prem_lost(observations) => {
                HOST_NO_EFFECT.replace("{cni}", &cni.to_string())
            }
            CutEnforcement::Host(_) => reach(HOST, cut.enforcement),
            CutEnforcement::PodNetwork => reach(POD_NETWORK, cut.enforcement),
        },
        Some(Action::NodeFailure(f)) => {
            NODE_FAILURE.replace("{fail}", &f.fail.join(" ")).replace("{recover}", &f.recover.join(" "))
        }
        Some(Action::GpuFault(g)) => crate::report::gpu_fault::FIDELITY
            .replace("{fail}", &g.hooks.fail.join(" "))
            .replace("{recover}", &g.hooks.recover.join(" ")),
        _ => return "no fault step: the drill observed the cluster without injecting a failure".into(),
    };
    match observed(observations) {
        Some(seen) => format!("{text} Observed: {seen}."),
        None => text,
    }
}

/// A cut's statement with what its policy type blocks and does not.
fn reach(text: &str, enforcement: CutEnforcement) -> String {
    text.replace("{policy}", enforcement.policy_type())
        .replace("{blocks}", enforcement.blocks())
        .replace("{leaves}", enforcement.leaves())
}

/// Whether an on-prem node was seen not Ready after the fault.
fn any_on_prem_lost(observations: &[Observation]) -> bool {
    let after = observations.iter().skip_while(|o| !matches!(o.event, Event::FaultInjected { .. }));
    after
        .into_iter()
        .any(|o| matches!(&o.event, Event::NodeReady { role: NodeRole::OnPrem, status, .. } if !status.is_true()))
}

/// What the fault did, from the fault to the return: the on-prem nodes' readiness, evictions, the fallback.
fn observed(observations: &[Observation]) -> Option<String> {
    let t0 = observations.iter().position(|o| matches!(o.event, Event::FaultInjected { .. }))?;
    let window = observations[t0..].iter().take_while(|o| !matches!(o.event, Event::ReturnStarted { .. }));
    let mut lost: BTreeMap<&str, ConditionStatus> = BTreeMap::new();
    let (mut evicted, mut claims) = (0, 0);
    let mut moves = None;
    for o in window {
        match &o.event {
            Event::WorkloadsDisplaced { workloads } => moves = Some(workloads),
            Event::NodeReady { node, role: NodeRole::OnPrem, status, .. } if !status.is_true() => {
                lost.entry(node).or_insert(*status);
            }
            Event::PodTerminating { role: NodeRole::OnPrem, .. } => evicted += 1,
            Event::NodeClaimCreated { .. } => claims += 1,
            _ => {}
        }
    }
    let nodes = if lost.is_empty() {
        "the on-prem nodes stayed Ready throughout".to_string()
    } else {
        let each: Vec<String> = lost.iter().map(|(n, s)| format!("{n} went {}", s.node_readiness())).collect();
        each.join(", ")
    };
    let pods = match evicted {
        0 => "no workload pod was evicted from them".to_string(),
        n => format!("{n} workload pods were evicted from them"),
    };
    let fallback = match claims {
        0 => "no fallback was triggered (no NodeClaim created)".to_string(),
        n => format!("the fallback was triggered ({n} NodeClaims created)"),
    };
    let mut seen = format!("{nodes}; {pods}; {fallback}");
    if let Some(workloads) = moves {
        seen.push_str(&moved_or_not(workloads));
    }
    Some(seen)
}

/// What moved off the lost nodes and what did not, per workload, as read while the fault held.
fn moved_or_not(workloads: &[WorkloadMove]) -> String {
    let (moved, stayed): (Vec<&WorkloadMove>, Vec<&WorkloadMove>) = workloads.iter().partition(|w| w.moved());
    let list = |ws: &[&WorkloadMove]| ws.iter().map(|w| w.to_string()).collect::<Vec<_>>().join("; ");
    let mut out = String::new();
    if !moved.is_empty() {
        out.push_str(&format!("; replaced elsewhere: {}", list(&moved)));
    }
    if !stayed.is_empty() {
        out.push_str(&format!("; DID NOT MOVE: {}", list(&stayed)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::CutFidelity;
    use crate::timeline::{Event as E, FaultKind};

    fn drill(step: &str) -> Drill {
        let src = format!(
            r#"
apiVersion: hybrid-drill.io/v1alpha1
kind: Drill
metadata: {{name: t}}
spec:
  cluster: {{context: c}}
  targets:
    onPrem: {{nodes: "a=b"}}
    workload: {{namespace: n, selector: "app=x", restoredWhen: {{readyPods: 2}}}}
    fallback: {{nodePool: p}}
  steps: [{step}, {{id: r, restore: cut}}]
"#
        );
        crate::drill::from_source(std::path::Path::new("t.yaml"), src).unwrap().drill
    }

    fn observations(events: Vec<E>) -> Vec<Observation> {
        let base = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
        crate::timeline::observations_from(
            base,
            events.into_iter().enumerate().map(|(i, e)| (i as f64, None, e)).collect(),
        )
    }

    #[test]
    fn a_pod_network_cut_says_the_nodes_stayed_ready_and_nothing_fell_back() {
        let d = drill("{id: c, cut: {fidelity: pod-network}}");
        let text = statement(
            &d,
            &observations(vec![E::FaultInjected { step: "c".into(), kind: FaultKind::Cut(CutFidelity::PodNetwork) }]),
        );
        assert!(text.starts_with("link cut, pod-network fidelity"), "{text}");
        assert!(
            text.ends_with("Observed: the on-prem nodes stayed Ready throughout; no workload pod was evicted from them; no fallback was triggered (no NodeClaim created)."),
            "{text}"
        );
    }

    #[test]
    fn each_cut_says_what_its_policy_type_blocks_for_which_endpoints_and_what_it_does_not() {
        let lost = |kind: CutFidelity| {
            observations(vec![
                E::FaultInjected { step: "c".into(), kind: FaultKind::Cut(kind) },
                E::NodeReady { node: "h1".into(), role: NodeRole::OnPrem, status: ConditionStatus::Unknown, gpus: 8 },
            ])
        };
        let cilium = statement(&drill("{id: c, cut: {fidelity: host, cni: cilium}}"), &lost(CutFidelity::Host));
        assert!(cilium.starts_with("link cut, host fidelity (Cilium host policy, "), "{cilium}");
        assert!(cilium.contains("Blocked: the on-prem nodes' own traffic (the host endpoint: kubelet"), "{cilium}");
        assert!(
            cilium.contains("Not blocked: the pods' own traffic: a Cilium host policy filters the host endpoint, not pod endpoints (that takes a Cilium pod policy"),
            "{cilium}"
        );
        assert!(!cilium.contains("all traffic") && !cilium.contains("everything in and out"), "{cilium}");

        let calico = statement(&drill("{id: c, cut: {fidelity: host, cni: calico}}"), &lost(CutFidelity::Host));
        assert!(calico.starts_with("link cut, host fidelity (Calico GlobalNetworkPolicy on host endpoints, "));
        assert!(
            calico.contains("as the policy applies on forward, the pods' traffic that leaves or enters"),
            "{calico}"
        );
        assert!(calico.contains("Not blocked: Calico's failsafe ports"), "{calico}");

        let pods = statement(&drill("{id: c, cut: {fidelity: pod-network}}"), &lost(CutFidelity::PodNetwork));
        assert!(pods.starts_with("link cut, pod-network fidelity (Kubernetes NetworkPolicy)"), "{pods}");
        assert!(pods.contains("Blocked: the traffic of the workload's pods on the on-prem nodes"), "{pods}");
        assert!(pods.contains("(Cilium and Calico enforce it as a pod policy on those pods' endpoints)"), "{pods}");
        assert!(pods.contains("Not blocked: the nodes' own traffic (the kubelets keep reporting"), "{pods}");
    }

    #[test]
    fn a_lost_node_says_which_workloads_moved_and_which_did_not() {
        let d = drill("{id: c, cut: {fidelity: host, cni: cilium}}");
        let moved = |kind: &str, workload: &str, left: &str, elsewhere| WorkloadMove {
            kind: kind.into(),
            workload: workload.into(),
            left: vec![left.into()],
            elsewhere,
            pending: 0,
        };
        let text = statement(
            &d,
            &observations(vec![
                E::FaultInjected { step: "c".into(), kind: FaultKind::Cut(CutFidelity::Host) },
                E::NodeReady { node: "h1".into(), role: NodeRole::OnPrem, status: ConditionStatus::Unknown, gpus: 8 },
                E::WorkloadsDisplaced {
                    workloads: vec![
                        moved("Deployment", "inference/llm", "llm-a on h1 (Terminating)", 1),
                        moved("StatefulSet", "batch/index", "index-0 on h1 (Terminating)", 0),
                    ],
                },
            ]),
        );
        assert!(
            text.contains("; replaced elsewhere: Deployment inference/llm (llm-a on h1 (Terminating); 1 elsewhere)"),
            "{text}"
        );
        assert!(
            text.contains(
                "; DID NOT MOVE: StatefulSet batch/index (index-0 on h1 (Terminating); 0 elsewhere: a \
                 StatefulSet creates no replacement until the old pod is confirmed gone"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_host_cut_says_what_the_nodes_did() {
        let d = drill("{id: c, cut: {fidelity: host, cni: cilium}}");
        let on = NodeRole::OnPrem;
        let text = statement(
            &d,
            &observations(vec![
                E::FaultInjected { step: "c".into(), kind: FaultKind::Cut(CutFidelity::Host) },
                E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 },
                E::PodTerminating { pod: "p".into(), node: "h1".into(), role: on },
                E::NodeClaimCreated { nodeclaim: "c1".into() },
            ]),
        );
        assert!(text.starts_with("link cut, host fidelity (Cilium host policy, "), "{text}");
        assert!(text.ends_with("Observed: h1 went Unknown; 1 workload pods were evicted from them; the fallback was triggered (1 NodeClaims created)."), "{text}");
        let fault = E::FaultInjected { step: "c".into(), kind: FaultKind::Cut(CutFidelity::Host) };
        let felt_by_none = statement(&d, &observations(vec![fault]));
        assert!(felt_by_none.starts_with("link cut, host fidelity, without effect:"), "{felt_by_none}");
        assert!(!felt_by_none.contains("lost the API server as on"), "{felt_by_none}");
    }
}
