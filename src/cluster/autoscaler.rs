//! The workload's autoscaler: the HPA (`autoscaling/v2`) or KEDA ScaledObject (`keda.sh/v1alpha1`) whose scale target
//! is the controller of the workload's pods, read once before a drill, and the replicas it wants.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};

use crate::domain::Autoscaler;

pub const HPA_KIND: &str = "HorizontalPodAutoscaler";
pub const SCALED_OBJECT_KIND: &str = "ScaledObject";

/// The kinds of controller an autoscaler's scale target may be, to watch their `spec.replicas`.
pub fn controller_resource(kind: &str) -> Option<ApiResource> {
    match kind {
        "Deployment" => Some(ApiResource::erase::<Deployment>(&())),
        "StatefulSet" => Some(ApiResource::erase::<StatefulSet>(&())),
        "ReplicaSet" => Some(ApiResource::erase::<ReplicaSet>(&())),
        _ => None,
    }
}

/// KEDA's ScaledObject, served only where KEDA's CRDs are installed.
pub fn scaled_objects() -> ApiResource {
    ApiResource {
        group: "keda.sh".into(),
        version: "v1alpha1".into(),
        api_version: "keda.sh/v1alpha1".into(),
        kind: SCALED_OBJECT_KIND.into(),
        plural: "scaledobjects".into(),
    }
}

/// The controller of the workload's pods and what sets its replicas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkloadScale {
    /// `Deployment/llm-inference`: the controller an autoscaler would target.
    pub target: Option<String>,
    /// Its `spec.replicas` as read.
    pub replicas: Option<u32>,
    pub autoscaler: Option<Autoscaler>,
    /// Further autoscalers on the same target: they fight over its replicas.
    pub others: Vec<String>,
}

impl WorkloadScale {
    /// The replicas wanted now: the controller's `spec.replicas`, which the autoscaler sets (an HPA whose metrics
    /// never resolved keeps `status.desiredReplicas` at 0 while it holds its bounds), else the autoscaler's status.
    pub fn desired(&self) -> Option<u32> {
        self.replicas.or(self.autoscaler.as_ref().and_then(|a| a.desired_replicas))
    }

    /// The controller as `(kind, name)`.
    pub fn target_ref(&self) -> Option<(&str, &str)> {
        self.target.as_deref().and_then(|t| t.split_once('/'))
    }
}

fn controller(meta: &ObjectMeta) -> Option<(String, String)> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.clone(), o.name.clone()))
}

fn count(n: Option<i32>) -> Option<u32> {
    n.and_then(|n| u32::try_from(n).ok())
}

/// Reads the workload's controller (a Deployment through its ReplicaSet, or a StatefulSet) from its first pod that
/// has one, then the autoscalers of its namespace. A namespace without KEDA's CRD has no ScaledObject.
pub async fn read(client: &Client, namespace: &str, pods: &[Pod]) -> Result<WorkloadScale, kube::Error> {
    let Some((kind, name)) = pods.iter().find_map(|p| controller(&p.metadata)) else {
        return Ok(WorkloadScale::default());
    };
    let (kind, name, replicas) = match kind.as_str() {
        "ReplicaSet" => {
            let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
            let set = sets.get_opt(&name).await?;
            match set.as_ref().and_then(|s| controller(&s.metadata)).filter(|(k, _)| k == "Deployment") {
                Some((_, deployment)) => {
                    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
                    let replicas = api.get_opt(&deployment).await?.and_then(|d| d.spec).and_then(|s| s.replicas);
                    ("Deployment".to_string(), deployment, count(replicas))
                }
                None => (kind, name, count(set.and_then(|s| s.spec).and_then(|s| s.replicas))),
            }
        }
        "StatefulSet" => {
            let api: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
            let replicas = api.get_opt(&name).await?.and_then(|s| s.spec).and_then(|s| s.replicas);
            (kind, name, count(replicas))
        }
        _ => return Ok(WorkloadScale::default()),
    };
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
    let hpas = hpas.list(&ListParams::default()).await?.items;
    let scaled: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &scaled_objects());
    let scaled = match scaled.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) if super::is_not_found(&e) => Vec::new(),
        Err(e) => return Err(e),
    };
    let (autoscaler, others) = find(&kind, &name, &hpas, &scaled);
    Ok(WorkloadScale { target: Some(format!("{kind}/{name}")), replicas, autoscaler, others })
}

/// The bounds and desired replicas an HPA's spec and status give.
pub fn hpa_state(hpa: &HorizontalPodAutoscaler) -> (u32, u32, Option<u32>) {
    let spec = hpa.spec.as_ref();
    let min = spec.and_then(|s| count(s.min_replicas)).unwrap_or(1);
    let max = spec.and_then(|s| count(Some(s.max_replicas))).unwrap_or(min);
    // 0 until the HPA has computed a scale once: an HPA without its metrics holds the bounds and reports none.
    let desired = hpa.status.as_ref().and_then(|s| count(Some(s.desired_replicas))).filter(|d| *d > 0);
    (min, max, desired)
}

/// The autoscaler whose scale target is `kind/name` (an HPA KEDA made for a ScaledObject counts as the ScaledObject),
/// and any further ones.
pub fn find(
    kind: &str,
    name: &str,
    hpas: &[HorizontalPodAutoscaler],
    scaled: &[DynamicObject],
) -> (Option<Autoscaler>, Vec<String>) {
    let target = format!("{kind}/{name}");
    let made_by_keda = |h: &HorizontalPodAutoscaler| {
        h.owner_references().iter().any(|o| o.kind == SCALED_OBJECT_KIND && o.api_version.starts_with("keda.sh/"))
    };
    let mut found: Vec<Autoscaler> = Vec::new();
    for so in scaled {
        let spec = &so.data["spec"];
        let reference = &spec["scaleTargetRef"];
        let so_kind = reference["kind"].as_str().unwrap_or("Deployment");
        if so_kind != kind || reference["name"].as_str() != Some(name) {
            continue;
        }
        let hpa_name =
            so.data["status"]["hpaName"].as_str().map(str::to_string).unwrap_or(format!("keda-hpa-{}", so.name_any()));
        let desired = hpas.iter().find(|h| h.name_any() == hpa_name).and_then(|h| hpa_state(h).2);
        let bound = |key: &str, default: u64| spec[key].as_u64().unwrap_or(default).min(u64::from(u32::MAX)) as u32;
        found.push(Autoscaler {
            kind: SCALED_OBJECT_KIND.into(),
            name: so.name_any(),
            target: target.clone(),
            min_replicas: bound("minReplicaCount", 0),
            max_replicas: bound("maxReplicaCount", 100),
            desired_replicas: desired,
            hpa: Some(hpa_name),
        });
    }
    for hpa in hpas.iter().filter(|h| !made_by_keda(h)) {
        let Some(reference) = hpa.spec.as_ref().map(|s| &s.scale_target_ref) else { continue };
        if reference.kind != kind || reference.name != name {
            continue;
        }
        let (min, max, desired) = hpa_state(hpa);
        found.push(Autoscaler {
            kind: HPA_KIND.into(),
            name: hpa.name_any(),
            target: target.clone(),
            min_replicas: min,
            max_replicas: max,
            desired_replicas: desired,
            hpa: Some(hpa.name_any()),
        });
    }
    let mut found = found.into_iter();
    let first = found.next();
    (first, found.map(|a| format!("{} {}", a.kind, a.name)).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hpa(name: &str, target: &str, min: i32, max: i32, desired: i32, keda: Option<&str>) -> HorizontalPodAutoscaler {
        let mut meta = json!({"name": name, "namespace": "inference"});
        if let Some(owner) = keda {
            meta["ownerReferences"] =
                json!([{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "name": owner, "uid": "u"}]);
        }
        // As the API server answers a GET of autoscaling/v2.
        serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta,
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                "minReplicas": min, "maxReplicas": max},
            "status": {"currentReplicas": desired, "desiredReplicas": desired}
        }))
        .unwrap()
    }

    fn scaled_object(name: &str, target: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": name, "namespace": "inference"},
            "spec": {"scaleTargetRef": {"name": target}, "minReplicaCount": 2, "maxReplicaCount": 6,
                "triggers": [{"type": "prometheus", "metadata": {"query": "sum(queue)", "threshold": "10"}}]},
            "status": {"hpaName": format!("keda-hpa-{name}")}
        }))
        .unwrap()
    }

    #[test]
    fn an_hpa_on_the_workloads_deployment_is_its_autoscaler() {
        let hpas = [hpa("other", "batch", 1, 3, 1, None), hpa("llm", "llm-inference", 4, 8, 6, None)];
        let (found, others) = find("Deployment", "llm-inference", &hpas, &[]);
        let found = found.unwrap();
        assert_eq!((found.kind.as_str(), found.name.as_str()), (HPA_KIND, "llm"));
        assert_eq!((found.min_replicas, found.max_replicas, found.desired_replicas), (4, 8, Some(6)));
        assert_eq!(found.describe(), "HorizontalPodAutoscaler llm (Deployment/llm-inference, 4-8 replicas)");
        assert!(others.is_empty());
        assert_eq!(find("StatefulSet", "llm-inference", &hpas, &[]).0, None, "the kind must match too");
    }

    #[test]
    fn a_scaled_object_names_itself_and_its_hpa_gives_the_desired_replicas() {
        let hpas = [hpa("keda-hpa-llm", "llm-inference", 2, 6, 3, Some("llm"))];
        let (found, others) = find("Deployment", "llm-inference", &hpas, &[scaled_object("llm", "llm-inference")]);
        let found = found.unwrap();
        assert_eq!((found.kind.as_str(), found.name.as_str()), (SCALED_OBJECT_KIND, "llm"));
        assert_eq!((found.min_replicas, found.max_replicas, found.desired_replicas), (2, 6, Some(3)));
        assert_eq!(found.hpa.as_deref(), Some("keda-hpa-llm"));
        assert!(others.is_empty(), "KEDA's own HPA is not a second autoscaler");
        // Without KEDA's operator (its CRD only) there is no HPA yet: the bounds still come from the ScaledObject.
        let (alone, _) = find("Deployment", "llm-inference", &[], &[scaled_object("llm", "llm-inference")]);
        assert_eq!(alone.unwrap().desired_replicas, None);
    }

    #[test]
    fn two_autoscalers_on_one_workload_are_named() {
        let hpas = [hpa("a", "llm-inference", 1, 2, 1, None)];
        let (found, others) = find("Deployment", "llm-inference", &hpas, &[scaled_object("so", "llm-inference")]);
        assert_eq!(found.unwrap().kind, SCALED_OBJECT_KIND);
        assert_eq!(others, ["HorizontalPodAutoscaler a"]);
    }
}
