//! The checks on the lab as `lab/up` leaves it, each recommendation broken one at a time.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::de::DeserializeOwned;

use super::evaluate;
use crate::cluster::karpenter::{Disruption, NodeClassReference, NodePool, NodeRequirement};
use crate::preflight::finding::{CheckId, Finding, Status};
use crate::preflight::snapshot::{AutoscalerLookup, NodeClassLookup, PoolLookup, Snapshot, Workload};
use crate::preflight::targets::{Expectations, PreflightTargets};

fn obj<T: DeserializeOwned>(yaml: &str) -> T {
    serde_json::from_value(crate::drill::parse::parse_document(yaml).unwrap().value).unwrap()
}

fn targets() -> PreflightTargets {
    PreflightTargets {
        nodes: "eks.amazonaws.com/compute-type=hybrid,gpu.model=h200".into(),
        namespace: "inference".into(),
        selector: "app=llm-inference".into(),
        node_pool: "gpu-fallback".into(),
        more_pools: Vec::new(),
    }
}

fn hybrid_node(name: &str) -> Node {
    obj(&format!(
        "metadata: {{name: {name}, labels: {{eks.amazonaws.com/compute-type: hybrid, node-type: hybrid-gpu, gpu.model: h200}}}}\n\
             spec: {{taints: [{{key: nvidia.com/gpu, effect: NoSchedule}}]}}\n\
             status: {{allocatable: {{nvidia.com/gpu: '8'}}}}"
    ))
}

const TEMPLATE: &str = "\
metadata: {labels: {app: llm-inference}}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          preference: {matchExpressions: [{key: eks.amazonaws.com/compute-type, operator: In, values: [hybrid]}]}
  containers:
    - name: server
      resources: {limits: {nvidia.com/gpu: '4'}}
";

fn workload_pod(name: &str, node: &str) -> Pod {
    obj(&format!(
        "metadata:
  name: {name}
  namespace: inference
  labels: {{app: llm-inference}}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: llm-inference-abc, uid: u, controller: true}}]
spec:
  nodeName: {node}
  containers: [{{name: server}}]
  tolerations:
    - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
    - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 30}}
    - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 30}}
"
    ))
}

fn pool() -> NodePool {
    obj("\
metadata: {name: gpu-fallback}
spec:
  template:
    metadata: {labels: {node-type: cloud-gpu-fallback}}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [g6.12xlarge, g6e.12xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
  limits: {nvidia.com/gpu: '16'}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 20s}
status:
  conditions: [{type: Ready, status: 'True'}, {type: NodeClassReady, status: 'True'}]
")
}

/// The lab as `lab/up` leaves it.
fn lab() -> Snapshot {
    let device_plugin: DaemonSet = obj("\
metadata: {name: nvidia-device-plugin, namespace: kube-system}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: nvidia-device-plugin}}
  template:
    metadata: {labels: {app.kubernetes.io/name: nvidia-device-plugin}}
    spec:
      nodeSelector: {eks.amazonaws.com/compute-type: hybrid}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers: [{name: p, image: 'stand-in/nvidia-device-plugin:lab'}]
");
    let ds_pod: Pod = obj(
        "metadata: {name: nvidia-device-plugin-x, namespace: kube-system, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: nvidia-device-plugin, uid: u, controller: true}]}\n\
             spec: {nodeName: hybrid-gpu-1, containers: [{name: p}]}",
    );
    let budget: PodDisruptionBudget = obj("metadata: {name: llm-inference, namespace: inference}\n\
             spec: {maxUnavailable: 2, selector: {matchLabels: {app: llm-inference}}}\n\
             status: {disruptionsAllowed: 2, currentHealthy: 4, desiredHealthy: 2, expectedPods: 4}");
    Snapshot {
        server_minor: Some(34),
        karpenter_versions: vec!["v1".into()],
        karpenter_v1_resources: vec!["nodepools".into(), "nodepools/status".into(), "nodeclaims".into()],
        nodes: vec![
            hybrid_node("hybrid-gpu-1"),
            hybrid_node("hybrid-gpu-2"),
            obj("metadata: {name: cloud-system-1, labels: {node-type: system}}"),
        ],
        // The three nodes above, no zone label, none NotReady.
        zones: [("(no zone label)".to_string(), crate::cluster::zones::ZoneTally { size: 3, not_ready: 0 })].into(),
        on_prem: ["hybrid-gpu-1".to_string(), "hybrid-gpu-2".to_string()].into(),
        pods_on_prem: vec![workload_pod("llm-1", "hybrid-gpu-1"), workload_pod("llm-2", "hybrid-gpu-2"), ds_pod],
        missing_daemonsets: Default::default(),
        daemonsets: vec![device_plugin],
        pool: PoolLookup::Found(Box::new(pool())),
        more_pools: Vec::new(),
        node_class: NodeClassLookup::Found(serde_json::json!({
            "kind": "KWOKNodeClass", "metadata": {"name": "default"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        })),
        claims: Vec::new(),
        pods_on_fallback: Vec::new(),
        workload_pods: 4,
        workload_pod_names: Default::default(),
        workloads: vec![Workload {
            kind: "Deployment".into(),
            namespace: "inference".into(),
            name: "llm-inference".into(),
            replicas: 4,
            template: obj(TEMPLATE),
            sample_pod: Some(workload_pod("llm-1", "hybrid-gpu-1")),
        }],
        budgets: vec![budget],
        autoscalers: AutoscalerLookup::Read { hpas: Vec::new(), scaled_objects: Vec::new() },
    }
}

fn run(s: &Snapshot) -> Vec<Finding> {
    evaluate(s, &targets(), &Expectations::default())
}

fn with_rto(seconds: u64) -> Expectations {
    Expectations { rto_objective: Some(Duration::from_secs(seconds)), ..Expectations::default() }
}

/// The (check, object) of every finding with this status.
fn with(findings: &[Finding], status: Status) -> Vec<(CheckId, String)> {
    findings.iter().filter(|f| f.status == status).map(|f| (f.check, f.object.clone())).collect()
}

fn only_failure(s: &Snapshot) -> Finding {
    let findings = run(s);
    let failed: Vec<&Finding> = findings.iter().filter(|f| f.status == Status::Fail).collect();
    assert_eq!(failed.len(), 1, "expected exactly one failure: {findings:#?}");
    assert!(with(&findings, Status::Warn).is_empty(), "{findings:#?}");
    assert!(failed[0].fix.is_some(), "a failure says the fix: {:?}", failed[0]);
    failed[0].clone()
}

fn template_of(p: &mut NodePool) -> &mut crate::cluster::karpenter::NodeClaimTemplateSpec {
    &mut p.spec.template.as_mut().unwrap().spec
}

fn disruption(policy: &str, after: &str) -> Disruption {
    Disruption {
        consolidation_policy: Some(policy.into()),
        consolidate_after: Some(after.into()),
        ..Default::default()
    }
}

fn template_mut(s: &mut Snapshot) -> &mut PodSpec {
    s.workloads[0].template.spec.as_mut().unwrap()
}

#[test]
fn the_lab_as_set_up_passes_every_check() {
    let findings = run(&lab());
    assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
    assert!(with(&findings, Status::Warn).is_empty(), "{findings:#?}");
    assert!(with(&findings, Status::Skip).is_empty(), "{findings:#?}");
    let seen: BTreeSet<CheckId> = findings.iter().map(|f| f.check).collect();
    assert_eq!(seen.len(), 24, "every check reports: {seen:?}");
    let floor = findings.iter().find(|f| f.check == CheckId::RtoFloor).unwrap();
    assert_eq!(floor.status, Status::Info);
    assert!(floor.message.contains("about 80s after the fault"), "{}", floor.message);
    assert!(floor.message.contains("unreachable 30s (added by the API server's DefaultTolerationSeconds)"));
}

#[test]
fn a_pod_that_does_not_tolerate_the_gpu_taint_is_evidence_of_late_tainting() {
    let mut s = lab();
    let mut intruder = workload_pod("monitoring-agent", "hybrid-gpu-2");
    intruder.metadata.namespace = Some("monitoring".into());
    intruder.spec.as_mut().unwrap().tolerations = None;
    s.pods_on_prem.push(intruder);
    let f = only_failure(&s);
    assert_eq!((f.check, f.object.as_str()), (CheckId::TaintAppliedLate, "Node hybrid-gpu-2"));
    assert!(f.message.contains("monitoring/monitoring-agent"), "{}", f.message);
    assert!(f.fix.unwrap().contains("--register-with-taints=nvidia.com/gpu=Exists:NoSchedule"));
}

#[test]
fn a_hybrid_node_without_the_taint_fails_by_name() {
    let mut s = lab();
    s.nodes[1].spec = None;
    let f = only_failure(&s);
    assert_eq!((f.check, f.object.as_str()), (CheckId::GpuTaint, "Node hybrid-gpu-2"));
}

#[test]
fn a_selector_matching_no_node_fails() {
    let mut s = lab();
    s.on_prem.clear();
    let findings = run(&s);
    assert_eq!(with(&findings, Status::Fail), [(CheckId::GpuTaint, format!("Nodes -l {}", targets().nodes))]);
}

fn device_plugin_spec(s: &mut Snapshot) -> &mut PodSpec {
    s.daemonsets[0].spec.as_mut().unwrap().template.spec.as_mut().unwrap()
}

#[test]
fn a_device_plugin_that_lands_on_the_fallback_nodes_fails() {
    let mut s = lab();
    device_plugin_spec(&mut s).node_selector = None;
    let f = only_failure(&s);
    assert_eq!(
        (f.check, f.object.as_str()),
        (CheckId::DevicePluginScope, "DaemonSet kube-system/nvidia-device-plugin")
    );
    assert!(f.message.contains("new nodes of NodePool gpu-fallback"), "{}", f.message);
    assert!(f.fix.unwrap().contains("eks.amazonaws.com/compute-type: hybrid"));
}

#[test]
fn gpu_operator_operands_selected_by_gpu_labels_may_land_on_cloud_gpu_nodes() {
    let mut s = lab();
    let dcgm: DaemonSet = obj("\
metadata: {name: nvidia-dcgm-exporter, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: nvidia-dcgm-exporter}}
  template:
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.dcgm-exporter: 'true'}
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      containers: [{name: e, image: 'nvcr.io/nvidia/k8s/dcgm-exporter:3.3'}]
");
    s.daemonsets.push(dcgm);
    let findings = run(&s);
    assert_eq!(
        with(&findings, Status::Fail),
        [(CheckId::DevicePluginScope, "DaemonSet gpu-operator/nvidia-dcgm-exporter".to_string())]
    );
}

#[test]
fn a_device_plugin_that_misses_hybrid_nodes_warns() {
    let mut s = lab();
    device_plugin_spec(&mut s).tolerations = None;
    let findings = run(&s);
    assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
    assert_eq!(
        with(&findings, Status::Warn),
        [(CheckId::DevicePluginScope, "DaemonSet kube-system/nvidia-device-plugin".to_string())]
    );
    s.daemonsets.clear();
    assert_eq!(with(&run(&s), Status::Warn), [(CheckId::DevicePluginScope, "DaemonSets (all namespaces)".to_string())]);
}

#[test]
fn cloud_gpu_nodes_are_judged_by_the_stack_they_bring() {
    let mut s = lab();
    let bottlerocket: Node = obj("metadata: {name: ip-10-0-1-5, labels: {node-type: inference-cloud}}\n\
             status: {allocatable: {nvidia.com/gpu: '4'}, nodeInfo: {osImage: 'Bottlerocket OS 1.20.0 (aws-k8s-1.31-nvidia)', \
             architecture: amd64, bootID: b, containerRuntimeVersion: c, kernelVersion: k, kubeProxyVersion: p, kubeletVersion: v, \
             machineID: m, operatingSystem: linux, systemUUID: s}}");
    s.nodes.push(bottlerocket);
    device_plugin_spec(&mut s).node_selector = Some([("gpu.model".to_string(), "h200".to_string())].into());
    assert!(with(&run(&s), Status::Fail).is_empty(), "h200 only: not on the Bottlerocket node");
    device_plugin_spec(&mut s).node_selector = None;
    let f = run(&s).into_iter().find(|f| f.status == Status::Fail).unwrap();
    assert!(f.message.contains("ip-10-0-1-5 (runs Bottlerocket"), "{}", f.message);

    // An AL2023 fallback brings drivers but no device plugin: one must be installed for it.
    let mut s = lab();
    let mut p = pool();
    template_of(&mut p).node_class_ref = Some(NodeClassReference {
        group: "karpenter.k8s.aws".into(),
        kind: "EC2NodeClass".into(),
        name: "gpu-fallback".into(),
    });
    s.pool = PoolLookup::Found(Box::new(p));
    s.node_class =
        NodeClassLookup::Found(serde_json::json!({"spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}}));
    let f = only_failure(&s);
    assert_eq!((f.check, f.object.as_str()), (CheckId::DevicePluginScope, "NodePool gpu-fallback"));
    let cloud_plugin: DaemonSet = obj("\
metadata: {name: nvidia-device-plugin-cloud, namespace: kube-system}
spec:
  selector: {matchLabels: {a: b}}
  template:
    spec:
      nodeSelector: {karpenter.sh/nodepool: gpu-fallback}
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
      containers: [{name: p, image: 'nvcr.io/nvidia/k8s-device-plugin:v0.17.0'}]
");
    s.daemonsets.push(cloud_plugin);
    let findings = run(&s);
    assert!(with(&findings, Status::Fail).is_empty() && with(&findings, Status::Warn).is_empty(), "{findings:#?}");
}

#[test]
fn each_nodepool_recommendation_fails_on_its_own() {
    type Break = Box<dyn Fn(&mut NodePool)>;
    let cases: Vec<(CheckId, Break)> = vec![
        (CheckId::NodepoolLimits, Box::new(|p| p.spec.limits = None)),
        (CheckId::NodepoolConsolidation, Box::new(|p| p.spec.disruption = Some(disruption("WhenEmpty", "Never")))),
        (
            CheckId::NodepoolCapacityType,
            Box::new(|p| template_of(p).requirements[1].values = vec!["spot".into(), "on-demand".into()]),
        ),
        (CheckId::NodepoolTaint, Box::new(|p| template_of(p).taints.clear())),
        (CheckId::NodepoolReady, Box::new(|p| p.status.as_mut().unwrap().conditions[0].status = "False".into())),
    ];
    for (check, break_it) in cases {
        let mut s = lab();
        let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
        break_it(p);
        let f = only_failure(&s);
        assert_eq!((f.check, f.object.as_str()), (check, "NodePool gpu-fallback"), "{f:?}");
    }
    // Without a limit there is nothing to fit under: that check is skipped, not failed twice.
    let mut s = lab();
    let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
    p.spec.limits = None;
    assert!(run(&s).iter().any(|f| f.check == CheckId::WorkloadFitsLimit && f.status == Status::Skip));
}

#[test]
fn consolidate_after_zero_and_unpinned_capacity_type_warn() {
    let mut s = lab();
    let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
    p.spec.disruption = Some(disruption("WhenEmptyOrUnderutilized", "0s"));
    template_of(p).requirements = Vec::<NodeRequirement>::new();
    let findings = run(&s);
    let warned: Vec<CheckId> = with(&findings, Status::Warn).into_iter().map(|(c, _)| c).collect();
    assert_eq!(warned, [CheckId::NodepoolConsolidation, CheckId::NodepoolCapacityType]);
}

#[test]
fn a_missing_nodepool_names_the_existing_ones_and_skips_the_rest() {
    let mut s = lab();
    s.pool = PoolLookup::Missing { existing: vec!["default".into()] };
    let findings = run(&s);
    let f = findings.iter().find(|f| f.status == Status::Fail).unwrap();
    assert_eq!(f.check, CheckId::NodepoolReady);
    assert!(f.message.contains("existing: default"));
    assert_eq!(with(&findings, Status::Fail).len(), 1, "{findings:#?}");
}

#[test]
fn a_nodeclass_that_is_missing_or_not_served_fails() {
    for (lookup, says) in
        [(NodeClassLookup::NotServed, "the NodeClass CRD is not installed"), (NodeClassLookup::Missing, "not found")]
    {
        let mut s = lab();
        s.node_class = lookup;
        let f = only_failure(&s);
        assert_eq!(
            (f.check, f.object.as_str()),
            (CheckId::NodepoolNodeclass, "KWOKNodeClass.karpenter.kwok.sh default")
        );
        assert!(f.message.contains(says), "{}", f.message);
    }
}

#[test]
fn a_fallback_that_is_not_empty_names_the_pods_holding_it() {
    let mut s = lab();
    s.nodes.push(obj("metadata: {name: fallback-a, labels: {karpenter.sh/nodepool: gpu-fallback}}\nstatus: {allocatable: {nvidia.com/gpu: '4'}}"));
    s.claims.push(obj("metadata: {name: gpu-fallback-x}\nspec: {}"));
    s.pods_on_fallback.push(workload_pod("llm-9", "fallback-a"));
    let findings = run(&s);
    assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
    let f = findings.iter().find(|f| f.status == Status::Warn).unwrap();
    assert_eq!(f.check, CheckId::NodepoolEmpty);
    assert!(f.message.contains("inference/llm-9") && f.message.contains("fallback-a"), "{}", f.message);
}

#[test]
fn a_workload_without_its_toleration_fails_even_when_admission_added_one() {
    let mut s = lab();
    template_mut(&mut s).tolerations = None;
    let f = only_failure(&s);
    assert_eq!((f.check, f.object.as_str()), (CheckId::WorkloadToleration, "Deployment inference/llm-inference"));
    assert!(f.message.contains("ExtendedResourceToleration"), "{}", f.message);
    assert!(f.fix.unwrap().contains("{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}"));
}

#[test]
fn a_workload_without_gpus_or_preference_fails() {
    let mut s = lab();
    template_mut(&mut s).containers[0].resources = None;
    let findings = run(&s);
    assert_eq!(
        with(&findings, Status::Fail),
        [(CheckId::WorkloadGpuRequest, "Deployment inference/llm-inference".into())]
    );

    let mut s = lab();
    template_mut(&mut s).affinity = None;
    let f = only_failure(&s);
    assert_eq!(f.check, CheckId::WorkloadAffinity);

    // Requiring the hybrid nodes is allowed, but it can never fall back.
    let mut s = lab();
    template_mut(&mut s).node_selector = Some([("node-type".to_string(), "hybrid-gpu".to_string())].into());
    let findings = run(&s);
    assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
    assert_eq!(
        with(&findings, Status::Warn),
        [(CheckId::WorkloadAffinity, "Deployment inference/llm-inference".into())]
    );
}

#[test]
fn budgets_must_exist_alone_and_allow_a_disruption() {
    let mut s = lab();
    s.budgets[0].status.as_mut().unwrap().disruptions_allowed = 0;
    let f = only_failure(&s);
    assert_eq!((f.check, f.object.as_str()), (CheckId::WorkloadPdb, "PodDisruptionBudget inference/llm-inference"));
    // Without a drain the budget is in nobody's way: a lost node's taint evicts regardless.
    let findings = evaluate(&s, &targets(), &Expectations { drains: false, ..Expectations::default() });
    assert!(with(&findings, Status::Fail).is_empty(), "{findings:#?}");
    assert_eq!(with(&findings, Status::Warn).len(), 1);

    let mut s = lab();
    let mut second = s.budgets[0].clone();
    second.metadata.name = Some("another".into());
    s.budgets.push(second);
    assert!(only_failure(&s).message.contains("2 PodDisruptionBudgets cover it"));

    let mut s = lab();
    s.budgets.clear();
    assert_eq!(with(&run(&s), Status::Warn), [(CheckId::WorkloadPdb, "Deployment inference/llm-inference".into())]);
}

#[test]
fn gpu_demand_above_the_fallback_limit_fails() {
    let mut s = lab();
    s.workloads[0].replicas = 5;
    let f = only_failure(&s);
    assert_eq!(f.check, CheckId::WorkloadFitsLimit);
    assert!(f.message.contains("needs 20 GPUs") && f.message.contains("limited to 16"), "{}", f.message);
}

#[test]
fn no_workload_fails_once_and_skips_the_rest() {
    let mut s = lab();
    s.workloads.clear();
    s.workload_pods = 0;
    let findings = run(&s);
    assert_eq!(
        with(&findings, Status::Fail),
        [(CheckId::WorkloadFound, "Pods -n inference -l app=llm-inference".into())]
    );
}

#[test]
fn karpenter_crds_missing_or_too_old_fail_and_the_nodepool_is_not_judged() {
    let mut s = lab();
    s.karpenter_versions.clear();
    s.karpenter_v1_resources.clear();
    s.pool = PoolLookup::NotServed;
    s.node_class = NodeClassLookup::NotLooked;
    let f = only_failure(&s);
    assert_eq!((f.check, f.object.as_str()), (CheckId::KarpenterCrds, "API group karpenter.sh"));
    assert!(f.fix.unwrap().contains("karpenter-crd"));
    assert!(run(&s).iter().any(|f| f.check == CheckId::NodepoolLimits && f.status == Status::Skip));
    s.karpenter_versions = vec!["v1beta1".into()];
    assert!(only_failure(&s).message.contains("served only at v1beta1"));
}

#[test]
fn the_rto_floor_follows_the_tolerations_and_warns_below_the_objective() {
    let s = lab();
    let warned = evaluate(&s, &targets(), &with_rto(60));
    assert_eq!(with(&warned, Status::Warn), [(CheckId::RtoFloor, "Deployment inference/llm-inference".into())]);
    assert!(with(&evaluate(&s, &targets(), &with_rto(900)), Status::Warn).is_empty());

    let mut s = lab();
    s.server_minor = Some(30);
    s.workloads[0].sample_pod.as_mut().unwrap().spec.as_mut().unwrap().tolerations.as_mut().unwrap().pop();
    let floor = run(&s).into_iter().find(|f| f.check == CheckId::RtoFloor).unwrap();
    assert!(floor.message.contains("about 40s") && floor.message.contains("evicted as soon as"), "{}", floor.message);

    let mut s = lab();
    template_mut(&mut s)
        .tolerations
        .as_mut()
        .unwrap()
        .push(obj("{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}"));
    s.workloads[0].sample_pod.as_mut().unwrap().spec.as_mut().unwrap().tolerations.as_mut().unwrap()[2]
        .toleration_seconds = None;
    let findings = run(&s);
    let f = findings.iter().find(|f| f.status == Status::Warn).unwrap();
    assert!(
        f.message.contains("tolerates node.kubernetes.io/unreachable forever (set in its pod template)"),
        "{}",
        f.message
    );
}

/// A pod on a hybrid node, tolerating its GPU taint.
fn on_prem_pod(yaml: &str) -> Pod {
    let mut pod: Pod = obj(yaml);
    pod.spec.as_mut().unwrap().tolerations =
        Some(vec![obj("{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}")]);
    pod
}

#[test]
fn a_bare_or_empty_dir_pod_on_prem_fails_drain_pods_naming_the_flag_and_passes_with_it() {
    let mut s = lab();
    s.pods_on_prem.push(on_prem_pod(
        "metadata: {name: debug, namespace: default}\nspec: {nodeName: hybrid-gpu-1, containers: [{name: c}]}",
    ));
    s.pods_on_prem.push(on_prem_pod(
        "metadata: {name: coredns-x, namespace: kube-system, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: coredns, uid: c, controller: true}]}\n\
         spec: {nodeName: hybrid-gpu-2, containers: [{name: c}], volumes: [{name: tmp, emptyDir: {}}]}",
    ));
    let failed = with(&run(&s), Status::Fail);
    assert_eq!(failed, [(CheckId::DrainPods, "Pod default/debug on hybrid-gpu-1".to_string())]);
    let f = run(&s).into_iter().find(|f| f.check == CheckId::DrainPods).unwrap();
    assert!(f.message.contains("without `force`: no controller"), "{}", f.message);

    let mut flags = Expectations::default();
    flags.drain_flags.force = true;
    let findings = evaluate(&s, &targets(), &flags);
    let f = findings.iter().find(|f| f.check == CheckId::DrainPods).unwrap();
    assert_eq!(f.status, Status::Pass);
    assert!(
        f.message.ends_with("3 pods to evict; left alone (protected namespace): kube-system/coredns-x on hybrid-gpu-2"),
        "{}",
        f.message
    );
    let no_drain = evaluate(&s, &targets(), &Expectations { drains: false, ..Expectations::default() });
    assert!(no_drain.iter().any(|f| f.check == CheckId::DrainPods && f.status == Status::Skip));
}

#[test]
fn every_gpu_pod_a_lost_node_displaces_counts_against_the_fallback_limit() {
    let mut s = lab();
    let gpu_pod = |name: &str, namespace: &str| {
        on_prem_pod(&format!(
            "metadata: {{name: {name}, namespace: {namespace}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: r, uid: r, controller: true}}]}}\n\
             spec: {{nodeName: hybrid-gpu-1, containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: '1'}}}}}}]}}"
        ))
    };
    // 4 x 4 of the workload fill the limit of 16; a second GPU workload on-prem falls back too, a protected one not.
    s.pods_on_prem.push(gpu_pod("dcgm-probe", "kube-system"));
    assert!(with(&run(&s), Status::Fail).is_empty());
    s.pods_on_prem.push(gpu_pod("embeddings-x", "batch"));
    let f = only_failure(&s);
    assert_eq!(f.check, CheckId::WorkloadFitsLimit);
    assert!(f.message.contains("needs 17 GPUs") && f.message.contains("batch/embeddings-x x 1"), "{}", f.message);
}

#[test]
fn a_displaced_pod_the_fallback_pool_cannot_take_counts_against_no_limit() {
    let mut s = lab();
    // Batch work that asks for Spot only: the on-demand fallback's nodes never take it, so its GPUs go elsewhere.
    s.pods_on_prem.push(on_prem_pod(
        "metadata: {name: embeddings-x, namespace: batch, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: r, uid: r, controller: true}]}\n\
         spec:\n  nodeName: hybrid-gpu-1\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: \
         [{matchExpressions: [{key: karpenter.sh/capacity-type, operator: NotIn, values: [on-demand]}]}]}}}\n  \
         containers: [{name: c, resources: {limits: {nvidia.com/gpu: '2'}}}]",
    ));
    let findings = run(&s);
    let f = findings.iter().find(|f| f.check == CheckId::WorkloadFitsLimit).unwrap();
    assert_eq!(f.status, Status::Pass, "{}", f.message);
    assert!(f.message.contains("needs 16 GPUs"), "{}", f.message);
}

#[test]
fn a_disruption_budget_of_zero_at_the_drills_time_warns_with_its_window_and_one_that_never_opens_fails() {
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&chrono::Utc);
    let mut s = lab();
    let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
    // Business hours on weekdays allow no node; the rest of the week every node.
    p.spec.disruption.as_mut().unwrap().budgets =
        obj("[{nodes: '100%'}, {nodes: '0', schedule: '0 9 * * 1-5', duration: 8h, reasons: [Empty, Underutilized]}]");
    let judge = |s: &Snapshot, when: &str, span: u64| {
        let expect =
            Expectations { at: Some(at(when)), span: Some(Duration::from_secs(span)), ..Expectations::default() };
        evaluate(s, &targets(), &expect).into_iter().find(|f| f.check == CheckId::NodepoolDisruption).unwrap()
    };
    // Monday noon: blocked until 17:00.
    let noon = judge(&s, "2026-12-07T12:00:00Z", 2700);
    assert_eq!(noon.status, Status::Warn, "{noon:?}");
    assert!(noon.message.contains("budget 1 (nodes: 0, schedule: \"0 9 * * 1-5\" for 8h"), "{}", noon.message);
    assert!(noon.message.contains("2026-12-07T17:00:00Z until 2026-12-08T09:00:00Z"), "{}", noon.message);
    // Monday evening: open, and the drill's 45 minutes end long before 09:00.
    assert_eq!(judge(&s, "2026-12-07T19:00:00Z", 2700).status, Status::Pass);
    // Monday 08:30: open now, closed from 09:00, within the drill's deadline.
    let early = judge(&s, "2026-12-07T08:30:00Z", 2700);
    assert_eq!(early.status, Status::Warn);
    assert!(early.message.contains("from 2026-12-07T09:00:00Z"), "{}", early.message);
    // A budget of 0 nodes for the reason Empty at all times: never reclaimed.
    let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
    p.spec.disruption.as_mut().unwrap().budgets = obj("[{nodes: '0', reasons: [Empty]}]");
    let never = judge(&s, "2026-12-07T19:00:00Z", 2700);
    assert_eq!(never.status, Status::Fail, "{never:?}");
    // The same for Drifted only leaves reclaim alone.
    let PoolLookup::Found(p) = &mut s.pool else { unreachable!() };
    p.spec.disruption.as_mut().unwrap().budgets = obj("[{nodes: '0', reasons: [Drifted]}]");
    assert_eq!(judge(&s, "2026-12-07T19:00:00Z", 2700).status, Status::Pass);
}

#[test]
fn a_statefulset_on_prem_warns_that_it_will_not_fail_over_when_the_nodes_are_lost() {
    let mut s = lab();
    s.pods_on_prem.push(on_prem_pod(
        "metadata: {name: vector-index-0, namespace: batch, ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: vector-index, uid: v, controller: true}]}\n\
         spec: {nodeName: hybrid-gpu-2, containers: [{name: c}]}",
    ));
    s.pods_on_prem.push(on_prem_pod(
        "metadata: {name: etcd-0, namespace: kube-system, ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: etcd, uid: e, controller: true}]}\n\
         spec: {nodeName: hybrid-gpu-1, containers: [{name: c}]}",
    ));
    let findings = run(&s);
    assert_eq!(
        with(&findings, Status::Warn),
        [(CheckId::StatefulsetFailover, "StatefulSet batch/vector-index".into())]
    );
    let f = findings.iter().find(|f| f.check == CheckId::StatefulsetFailover).unwrap();
    assert!(f.message.starts_with("its pods (vector-index-0 on hybrid-gpu-2) will stay Terminating"), "{}", f.message);
    assert!(f.fix.as_deref().unwrap().contains("node.kubernetes.io/out-of-service"), "{f:?}");

    // A drain evicts it through the API, and its controller re-creates it: nothing to warn about.
    let drain = evaluate(&s, &targets(), &Expectations { loses_nodes: false, ..Expectations::default() });
    let f = drain.iter().find(|f| f.check == CheckId::StatefulsetFailover).unwrap();
    assert_eq!(f.status, Status::Skip, "{f:?}");
    let f = run(&lab()).into_iter().find(|f| f.check == CheckId::StatefulsetFailover).unwrap();
    assert_eq!((f.status, f.message.as_str()), (Status::Pass, "no StatefulSet pod runs on the on-prem nodes"));
}

#[test]
fn an_orphaned_daemonset_pod_fails_drain_pods_without_force_as_kubectl_drain_refuses_it() {
    let mut s = lab();
    s.pods_on_prem.push(on_prem_pod(
        "metadata: {name: old-agent-x, namespace: monitoring, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: old-agent, uid: o, controller: true}]}\n\
         spec: {nodeName: hybrid-gpu-1, containers: [{name: c}]}",
    ));
    // Its DaemonSet exists: left alone, as kubectl drain --ignore-daemonsets leaves it.
    assert!(with(&run(&s), Status::Fail).is_empty());
    s.missing_daemonsets = ["monitoring/old-agent".to_string()].into();
    let f = only_failure(&s);
    assert_eq!((f.check, f.object.as_str()), (CheckId::DrainPods, "Pod monitoring/old-agent-x on hybrid-gpu-1"));
    assert!(
        f.message.contains("without `force`: its DaemonSet monitoring/old-agent no longer exists"),
        "{}",
        f.message
    );
    let mut flags = Expectations::default();
    flags.drain_flags.force = true;
    assert!(with(&evaluate(&s, &targets(), &flags), Status::Fail).is_empty());
}

fn autoscaler_rows(s: &Snapshot, expect: &Expectations) -> Vec<(Status, String)> {
    evaluate(s, &targets(), expect)
        .into_iter()
        .filter(|f| f.check == CheckId::WorkloadAutoscaler)
        .map(|f| (f.status, f.message))
        .collect()
}

fn hpa(name: &str, min: u32, max: u32) -> k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler {
    obj(&format!(
        "metadata: {{name: {name}, namespace: inference}}\n\
         spec: {{scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: llm-inference}}, minReplicas: {min}, maxReplicas: {max}}}\n\
         status: {{currentReplicas: 4, desiredReplicas: 0}}"
    ))
}

#[test]
fn the_autoscaler_row_names_the_hpa_and_how_ready_pods_is_judged() {
    let mut s = lab();
    assert_eq!(
        autoscaler_rows(&s, &Expectations::default()),
        [(Status::Pass, "no HPA or KEDA ScaledObject scales it: readyPods counts pods as written".to_string())]
    );
    s.autoscalers = AutoscalerLookup::Read { hpas: vec![hpa("llm-inference", 2, 8)], scaled_objects: Vec::new() };
    let rows = autoscaler_rows(&s, &Expectations { ready_pods_count: Some(4), ..Expectations::default() });
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, Status::Info, "{rows:?}");
    assert!(
        rows[0].1.starts_with(
            "HorizontalPodAutoscaler llm-inference (Deployment/llm-inference, 2-8 replicas), desired 4 now: restoration"
        ),
        "{rows:?}"
    );
    // A number that differs from the desired replicas is read as 100% of them: said, with the share to write.
    let rows = autoscaler_rows(&s, &Expectations { ready_pods_count: Some(2), ..Expectations::default() });
    assert_eq!(rows[0].0, Status::Warn, "{rows:?}");
    assert!(rows[0].1.contains("readyPods: 2 counts as 100% of them (4 if the fault began now)"), "{rows:?}");
    s.autoscalers = AutoscalerLookup::Read { hpas: vec![hpa("a", 2, 8), hpa("b", 1, 3)], scaled_objects: Vec::new() };
    let rows = autoscaler_rows(&s, &Expectations::default());
    assert_eq!(rows[0].0, Status::Warn);
    assert!(rows[0].1.contains("also scaled by HorizontalPodAutoscaler b: they fight"), "{rows:?}");
    s.autoscalers = AutoscalerLookup::Unreadable("forbidden".into());
    assert_eq!(autoscaler_rows(&s, &Expectations::default())[0].0, Status::Warn);
}
