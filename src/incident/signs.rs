//! The signs of an incident, read from what the watches hold and from the on-prem nodes' own records: whether the
//! on-prem side degraded, what started it, and when the objects say it started. Pure functions, tested on inline YAML.

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;

use crate::cluster::to_utc;
use crate::domain::IncidentCause;
use crate::timeline::NodeRole;
use crate::timeline::view::ClusterView;

/// What opens an episode, as the view shows it now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Degraded {
    /// On-prem nodes NotReady or Unknown.
    pub lost: Vec<String>,
    /// On-prem nodes cordoned while workload pods leave them or run elsewhere.
    pub drained: Vec<String>,
    /// Workload pods on fallback nodes.
    pub on_fallback: usize,
    /// On-prem nodes Ready with GPUs failed (allocatable below capacity).
    pub gpu_failed: Vec<String>,
}

impl Degraded {
    /// Whether the on-prem side degraded: a node lost, a drain under way, GPUs failed on a Ready node, or the workload
    /// on the fallback.
    pub fn of(v: &ClusterView) -> Option<Degraded> {
        let lost: Vec<String> = v.on_prem_nodes().filter(|n| !n.is_ready()).map(|n| n.name.clone()).collect();
        let leaving = |node: &str| v.pods.values().any(|p| p.terminating && p.node.as_deref() == Some(node));
        // Evicted pods are replaced at once: the replacements wait for a node, or run off the on-prem nodes.
        let elsewhere = v.live_pods().any(|p| p.node.as_deref().is_none_or(|n| v.role_of(n) != NodeRole::OnPrem));
        let drained: Vec<String> = v
            .on_prem_nodes()
            .filter(|n| n.is_ready() && !n.schedulable && (leaving(&n.name) || elsewhere))
            .map(|n| n.name.clone())
            .collect();
        let on_fallback =
            v.live_pods().filter(|p| p.node.as_deref().is_some_and(|n| v.role_of(n) == NodeRole::Fallback)).count();
        let gpu_failed = super::gpu::failed_gpu_nodes(v);
        let d = Degraded { lost, drained, on_fallback, gpu_failed };
        (!d.lost.is_empty() || !d.drained.is_empty() || d.on_fallback > 0 || !d.gpu_failed.is_empty()).then_some(d)
    }

    /// What two looks saw together: nodes seen degraded at the first look stay involved at the second.
    pub fn merge(mut self, earlier: Degraded) -> Degraded {
        let pairs = [
            (&mut self.lost, earlier.lost),
            (&mut self.drained, earlier.drained),
            (&mut self.gpu_failed, earlier.gpu_failed),
        ];
        for (now, before) in pairs {
            now.extend(before);
            now.sort();
            now.dedup();
        }
        self
    }

    /// The on-prem nodes involved.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self.lost.iter().chain(&self.drained).chain(&self.gpu_failed).cloned().collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }
}

/// Whether the on-prem side is whole again: every on-prem node Ready and schedulable, with all its GPUs allocatable.
pub fn on_prem_whole(v: &ClusterView) -> bool {
    v.on_prem_nodes().all(|n| n.is_ready() && n.schedulable && !n.gpus_failed())
}

/// What one on-prem node's own objects say, read once when the episode opens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeEvidence {
    pub name: String,
    /// `Ready=<status>` and since when.
    pub ready: Option<(String, Option<DateTime<Utc>>)>,
    pub network_unavailable: bool,
    /// The taints it carries, `key:effect`.
    pub taints: Vec<String>,
    pub unschedulable: bool,
    /// When `spec.unschedulable` was last written, from the node's managedFields (whole seconds), and by whom.
    pub cordoned: Option<(DateTime<Utc>, String)>,
    /// The kubelet's last heartbeat: its Lease's renewTime (microseconds), which the kubelet writes from its own
    /// clock: the API server stores it as sent and stamps nothing of its own on it.
    pub last_heartbeat: Option<DateTime<Utc>>,
    /// The hybrid-drill run that marked the node (a drain's cordon annotation, a host cut's label): a drill, not an
    /// incident.
    pub drill_run: Option<String>,
    /// `nvidia.com/gpu` allocatable and capacity, when they differ: GPUs the device plugin reports unhealthy.
    pub gpus_short: Option<(i64, i64)>,
}

impl NodeEvidence {
    pub fn read(node: &Node, lease: Option<&Lease>) -> NodeEvidence {
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
        let condition = |t: &str| conditions.iter().find(|c| c.type_ == t);
        let spec = node.spec.as_ref();
        let cordoned = node.metadata.managed_fields.iter().flatten().find_map(|m| {
            let owns = m.fields_v1.as_ref().is_some_and(|f| f.0.pointer("/f:spec/f:unschedulable").is_some());
            let time = m.time.as_ref().map(|t| to_utc(&t.0))?;
            owns.then(|| (time, m.manager.clone().unwrap_or_default()))
        });
        NodeEvidence {
            name: node.metadata.name.clone().unwrap_or_default(),
            ready: condition("Ready")
                .map(|c| (c.status.clone(), c.last_transition_time.as_ref().map(|t| to_utc(&t.0)))),
            network_unavailable: condition("NetworkUnavailable").is_some_and(|c| c.status == "True"),
            taints: spec
                .and_then(|s| s.taints.as_ref())
                .map(|ts| ts.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect())
                .unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            cordoned,
            last_heartbeat: lease.and_then(|l| l.spec.as_ref()?.renew_time.as_ref()).map(|t| to_utc(&t.0)),
            drill_run: drill_mark(node),
            gpus_short: super::gpu::gpus_short(node),
        }
    }

    fn lost(&self) -> bool {
        self.ready.as_ref().is_some_and(|(s, _)| s != "True")
    }

    /// The node in one clause: its readiness, taints, cordon and heartbeat.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some((status, since)) = &self.ready {
            parts.push(match since {
                Some(t) => format!("Ready={status} since {}", crate::timeline::rfc3339(t)),
                None => format!("Ready={status}"),
            });
        }
        if let Some((allocatable, capacity)) = self.gpus_short {
            parts.push(format!("nvidia.com/gpu allocatable {allocatable} of {capacity}"));
        }
        if self.network_unavailable {
            parts.push("NetworkUnavailable=True".into());
        }
        if !self.taints.is_empty() {
            parts.push(format!("taints {}", self.taints.join(", ")));
        }
        if let Some((at, by)) = self.cordoned.as_ref().filter(|_| self.unschedulable) {
            parts.push(format!("cordoned at {} by {by}", crate::timeline::rfc3339(at)));
        }
        if let Some(t) = self.last_heartbeat {
            parts.push(format!("last heartbeat (Lease renewTime) {}", crate::timeline::rfc3339(&t)));
        }
        if let Some(run) = &self.drill_run {
            parts.push(format!("marked by the hybrid-drill run {run}: a drill, not an incident"));
        }
        format!("{}: {}", self.name, parts.join(", "))
    }
}

/// The run a node carries the mark of: the cordon's `hybrid-drill.io/run-id` annotation, or a host cut's
/// `hybrid-drill.io/cut` label (or a run label).
fn drill_mark(node: &Node) -> Option<String> {
    use crate::cluster::marks::{CUT_LABEL, RUN_ANNOTATION};
    let annotations = node.metadata.annotations.as_ref();
    let labels = node.metadata.labels.as_ref();
    annotations
        .and_then(|a| a.get(RUN_ANNOTATION))
        .or_else(|| labels.and_then(|l| l.get(CUT_LABEL).or_else(|| l.get(RUN_ANNOTATION))))
        .cloned()
}

/// What started the episode, from the nodes' evidence: several nodes lost together or a node without network is the
/// link; one node lost is a node failure; a Ready node with GPUs failed is a GPU fault (even once a remediation
/// cordoned it: that drain is the fault's quarantine); cordoned Ready nodes are a drain, whether the node still is when its record is
/// read or only the watch saw it cordoned (a drain over and uncordoned in seconds); otherwise unknown.
pub fn cause(evidence: &[NodeEvidence], watched: &Degraded) -> IncidentCause {
    let lost = evidence.iter().filter(|e| e.lost()).count();
    if evidence.iter().any(|e| e.network_unavailable) || lost >= 2 {
        IncidentCause::LinkLoss
    } else if lost == 1 {
        IncidentCause::NodeFailure
    } else if !watched.gpu_failed.is_empty() {
        IncidentCause::GpuFault
    } else if evidence.iter().any(|e| e.unschedulable) || !watched.drained.is_empty() {
        IncidentCause::Drain
    } else {
        IncidentCause::Unknown
    }
}

/// Where t0 comes from when the objects give it: the earliest last heartbeat of a lost node (the failure came after
/// it, within one renew interval), or the earliest cordon of a drain. `None`: no object kept the time.
pub fn t0_evidence(cause: IncidentCause, evidence: &[NodeEvidence]) -> Option<(DateTime<Utc>, String)> {
    match cause {
        IncidentCause::NodeFailure | IncidentCause::LinkLoss => evidence
            .iter()
            .filter(|e| e.lost())
            .filter_map(|e| e.last_heartbeat.map(|t| (t, e.name.clone())))
            .min()
            .map(|(t, node)| {
                (t, format!("t0 is {node}'s last heartbeat (its Lease's renewTime, on the kubelet's own clock): the failure came after it, within one renew interval (a quarter of the Lease's duration), and off by the node's clock offset from the API server's"))
            }),
        IncidentCause::Drain => evidence
            .iter()
            .filter(|e| e.unschedulable)
            .filter_map(|e| e.cordoned.as_ref().map(|(t, by)| (*t, e.name.clone(), by.clone())))
            .min()
            .map(|(t, node, by)| (t, format!("t0 is {node}'s cordon (managedFields, by {by})"))),
        // No object keeps when a GPU failed: the watch's own sighting is t0 (incident/gpu.rs).
        IncidentCause::GpuFault | IncidentCause::Unknown => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
        let value = crate::drill::parse::parse_document(text).unwrap().value;
        serde_json::from_value(value).unwrap()
    }

    fn lost_node() -> Node {
        yaml(
            r#"
metadata: {name: hybrid-gpu-1}
spec:
  taints:
  - {key: nvidia.com/gpu, effect: NoSchedule}
  - {key: node.kubernetes.io/unreachable, effect: NoExecute, timeAdded: "2026-12-03T10:00:45Z"}
status:
  conditions:
  - {type: Ready, status: Unknown, lastTransitionTime: "2026-12-03T10:00:40Z", lastHeartbeatTime: "2026-12-03T09:59:00Z"}
"#,
        )
    }

    fn lease(renew: &str) -> Lease {
        yaml(&format!(
            "metadata: {{name: hybrid-gpu-1, namespace: kube-node-lease}}\nspec: {{renewTime: \"{renew}\"}}\n"
        ))
    }

    #[test]
    fn a_lost_node_shows_its_condition_taints_and_last_heartbeat() {
        let e = NodeEvidence::read(&lost_node(), Some(&lease("2026-12-03T10:00:12.250000Z")));
        assert_eq!(cause(std::slice::from_ref(&e), &Degraded::default()), IncidentCause::NodeFailure);
        let (t0, basis) = t0_evidence(IncidentCause::NodeFailure, std::slice::from_ref(&e)).unwrap();
        assert_eq!(crate::timeline::rfc3339(&t0), "2026-12-03T10:00:12.250Z");
        assert!(basis.contains("renewTime"), "{basis}");
        let d = e.describe();
        assert!(d.contains("Ready=Unknown since 2026-12-03T10:00:40.000Z"), "{d}");
        assert!(d.contains("node.kubernetes.io/unreachable:NoExecute"), "{d}");
    }

    #[test]
    fn t0_from_the_lease_says_whose_clock_and_its_bound() {
        let e = NodeEvidence::read(&lost_node(), Some(&lease("2026-12-03T10:00:12.250000Z")));
        let (_, basis) = t0_evidence(IncidentCause::NodeFailure, &[e]).unwrap();
        assert!(basis.contains("on the kubelet's own clock"), "{basis}");
        assert!(basis.contains("within one renew interval") && basis.contains("clock offset"), "{basis}");
    }

    #[test]
    fn a_node_marked_by_a_drill_names_its_run_by_the_cordon_annotation_or_the_cut_label() {
        assert_eq!(NodeEvidence::read(&lost_node(), None).drill_run, None);
        let mut cut = lost_node();
        cut.metadata.labels = Some([("hybrid-drill.io/cut".to_string(), "dx-20261203t1000z".to_string())].into());
        assert_eq!(NodeEvidence::read(&cut, None).drill_run.as_deref(), Some("dx-20261203t1000z"));
        let mut cordoned = lost_node();
        let annotation = ("hybrid-drill.io/run-id".to_string(), "drain-20261203T100000Z".to_string());
        cordoned.metadata.annotations = Some([annotation].into());
        let e = NodeEvidence::read(&cordoned, None);
        assert_eq!(e.drill_run.as_deref(), Some("drain-20261203T100000Z"));
        assert!(e.describe().contains("a drill, not an incident"), "{}", e.describe());
    }

    #[test]
    fn without_a_lease_t0_is_unknown_never_guessed() {
        let e = NodeEvidence::read(&lost_node(), None);
        assert_eq!(t0_evidence(IncidentCause::NodeFailure, &[e]), None);
    }

    #[test]
    fn two_nodes_lost_together_or_no_network_is_the_link() {
        let a = NodeEvidence::read(&lost_node(), None);
        let mut b = a.clone();
        b.name = "hybrid-gpu-2".into();
        assert_eq!(cause(&[a.clone(), b], &Degraded::default()), IncidentCause::LinkLoss);
        let mut c = a;
        c.network_unavailable = true;
        assert_eq!(cause(&[c], &Degraded::default()), IncidentCause::LinkLoss);
    }

    #[test]
    fn a_cordoned_ready_node_is_a_drain_timed_by_its_managed_fields() {
        let node: Node = yaml(
            r#"
metadata:
  name: hybrid-gpu-1
  managedFields:
  - {manager: kube-controller-manager, operation: Update, time: "2026-12-03T09:00:00Z", fieldsType: FieldsV1, fieldsV1: {"f:status": {}}}
  - {manager: kubectl-cordon, operation: Update, time: "2026-12-03T10:00:03Z", fieldsType: FieldsV1, fieldsV1: {"f:spec": {"f:unschedulable": {}}}}
spec: {unschedulable: true}
status:
  conditions:
  - {type: Ready, status: "True", lastTransitionTime: "2026-12-01T00:00:00Z"}
"#,
        );
        let e = NodeEvidence::read(&node, None);
        assert_eq!(cause(std::slice::from_ref(&e), &Degraded::default()), IncidentCause::Drain);
        // Uncordoned by the time its record is read: the watch saw the cordon, so it is still a drain.
        let uncordoned = NodeEvidence { unschedulable: false, ..e.clone() };
        let watched = Degraded { drained: vec![e.name.clone()], ..Degraded::default() };
        assert_eq!(cause(std::slice::from_ref(&uncordoned), &watched), IncidentCause::Drain);
        assert_eq!(cause(std::slice::from_ref(&uncordoned), &Degraded::default()), IncidentCause::Unknown);
        let (t0, basis) = t0_evidence(IncidentCause::Drain, &[e]).unwrap();
        assert_eq!(crate::timeline::rfc3339(&t0), "2026-12-03T10:00:03.000Z");
        assert!(basis.contains("kubectl-cordon"), "{basis}");
    }
}
