//! The canary's pod: one replica of the drill's workload (its image, init containers, tolerations, affinity and
//! resources, from its controller's template) pinned to the fallback NodePool, outside every selector of the workload.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::Api;
use kube::api::ListParams;
use kube::core::ObjectMeta;

use crate::cluster::Reader;
use crate::cluster::karpenter::NODEPOOL_LABEL;
use crate::drill::Drill;

/// The label every canary pod carries (value: the run's label), which the canary's own watches select.
pub const CANARY_LABEL: &str = "hybrid-drill.io/canary";

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "no pod of the workload matches `{selector}` in namespace {namespace}: the canary copies a running replica's template"
    )]
    NoPod { namespace: String, selector: String },
    #[error("cannot read the workload's template: {0}")]
    Api(#[source] kube::Error),
}

/// The workload's pod template: its ReplicaSet's (a Deployment's), else a pod of it as the API server holds it.
pub async fn workload_template(reader: &Reader, drill: &Drill) -> Result<PodTemplateSpec, TemplateError> {
    let workload = &drill.spec.targets.workload;
    let pods = Api::<Pod>::namespaced(reader.client().clone(), &workload.namespace)
        .list(&ListParams::default().labels(workload.selector.as_str()))
        .await
        .map_err(TemplateError::Api)?;
    let Some(pod) = pods.items.into_iter().next() else {
        return Err(TemplateError::NoPod {
            namespace: workload.namespace.clone(),
            selector: workload.selector.as_str().into(),
        });
    };
    let owner = pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    if let Some(owner) = owner.filter(|o| o.kind == "ReplicaSet") {
        let replica_sets = Api::<ReplicaSet>::namespaced(reader.client().clone(), &workload.namespace);
        let rs = replica_sets.get(&owner.name).await.map_err(TemplateError::Api)?;
        if let Some(template) = rs.spec.and_then(|s| s.template) {
            return Ok(template);
        }
    }
    Ok(PodTemplateSpec { metadata: Some(pod.metadata), spec: pod.spec })
}

/// The canary pod built from the workload's template: the same containers, tolerations and affinity, pinned to
/// `pool` by Karpenter's NodePool label. It keeps none of the labels the workload's selector (or its controller's
/// `pod-template-hash`) reads, so no Service routes users to it, no PodDisruptionBudget counts it and no controller
/// adopts it; the node it lands on and the runtime's own volumes are the scheduler's and the kubelet's to fill.
pub fn canary_pod(template: &PodTemplateSpec, drill: &Drill, pool: &str, name: &str, run_label: &str) -> Pod {
    let workload = &drill.spec.targets.workload;
    let selected: Vec<&str> = workload.selector.requirements().iter().map(|r| r.key.as_str()).collect();
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = meta
        .labels
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !selected.contains(&k.as_str()))
        .filter(|(k, _)| k != "pod-template-hash" && k != "controller-revision-hash")
        .collect();
    labels.insert(CANARY_LABEL.into(), run_label.into());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.node_name = None;
    spec.node_selector.get_or_insert_with(BTreeMap::new).insert(NODEPOOL_LABEL.into(), pool.into());
    // The service-account token volume of a pod read back is the admission plugin's to add again.
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| !v.name.starts_with("kube-api-access-"));
    }
    for container in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
        if let Some(mounts) = container.volume_mounts.as_mut() {
            mounts.retain(|m| !m.name.starts_with("kube-api-access-"));
        }
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(workload.namespace.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(crate::cluster::marks::RUN_ANNOTATION.into(), run_label.into())])),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The canary pod's name for a run: the run's label, within a name's 63 characters.
pub fn pod_name(run_label: &str) -> String {
    let name = format!("canary-{run_label}");
    name.chars().take(63).collect::<String>().trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRILL: &str = include_str!("../../drills/drain.yaml");

    fn template() -> PodTemplateSpec {
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "llm-inference", "pod-template-hash": "abc", "hybrid-lab.io/pod-start": "kubelet"}},
            "spec": {
                "nodeName": "hybrid-gpu-1",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
                    "preference": {"matchExpressions": [{"key": "eks.amazonaws.com/compute-type", "operator": "In", "values": ["hybrid"]}]}}]}},
                "volumes": [{"name": "kube-api-access-x1", "emptyDir": {}}, {"name": "weights", "emptyDir": {}}],
                "containers": [{
                    "name": "server",
                    "image": "stand-in/llm-inference:lab",
                    "volumeMounts": [{"name": "kube-api-access-x1", "mountPath": "/var/run/secrets"}, {"name": "weights", "mountPath": "/w"}],
                    "resources": {"limits": {"nvidia.com/gpu": "4"}, "requests": {"nvidia.com/gpu": "4"}}
                }]
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_canary_keeps_the_workload_but_leaves_its_selector_and_is_pinned_to_the_pool() {
        let drill = crate::drill::from_source(std::path::Path::new("drain.yaml"), DRILL.into()).unwrap().drill;
        let pod = canary_pod(&template(), &drill, "gpu-fallback", "canary-x", "x");
        let labels = pod.metadata.labels.clone().unwrap();
        assert!(!labels.contains_key("app") && !labels.contains_key("pod-template-hash"), "{labels:?}");
        assert_eq!(labels.get("hybrid-lab.io/pod-start").map(String::as_str), Some("kubelet"));
        assert_eq!(labels.get(CANARY_LABEL).map(String::as_str), Some("x"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name, None);
        assert_eq!(spec.node_selector.unwrap().get(NODEPOOL_LABEL).map(String::as_str), Some("gpu-fallback"));
        assert_eq!(spec.tolerations.unwrap().len(), 1);
        assert!(spec.affinity.is_some());
        assert_eq!(spec.volumes.unwrap().len(), 1);
        assert_eq!(spec.containers[0].volume_mounts.as_ref().unwrap().len(), 1);
        assert_eq!(spec.containers[0].image.as_deref(), Some("stand-in/llm-inference:lab"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("inference"));
    }

    #[test]
    fn a_long_run_label_still_makes_a_valid_name() {
        assert!(pod_name(&"a".repeat(70)).len() <= 63);
        assert_eq!(pod_name("onprem-gpu-drain-20261207t202000z"), "canary-onprem-gpu-drain-20261207t202000z");
    }
}
