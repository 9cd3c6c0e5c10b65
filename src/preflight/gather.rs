//! The read-only look-ups preflight needs, taken once into a [`Snapshot`] that the checks read without a cluster.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};

use super::checks::{reads_daemonset, reads_node};
use super::snapshot::{AutoscalerLookup, NodeClassLookup, PoolLookup, Snapshot, Workload};
use super::targets::PreflightTargets;
use crate::cluster::autoscaler::scaled_objects;
use crate::cluster::drain_selection::{daemonset_of, is_finished};
use crate::cluster::karpenter::{NODEPOOL_LABEL, NodeClaim, NodeClassReference, NodePool};
use crate::cluster::paged::list_paged;
use crate::cluster::readiness::is_not_ready;
use crate::cluster::zones::zone_of;
use crate::cluster::{first_line, is_not_found};

pub const KARPENTER_GROUP: &str = "karpenter.sh";

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// The API server's answer, or the request that got none, kept whole: a caller can tell a refusal (403, 404)
    /// from a timeout. The message shows its first line only.
    #[error("cannot read {what}: {}", first_line(&.error.to_string()))]
    Api { what: String, error: kube::Error },
}

fn api_error(what: &str, e: kube::Error) -> PreflightError {
    PreflightError::Api { what: what.into(), error: e }
}

async fn pods_on(client: &Client, node: &str) -> Result<Vec<Pod>, PreflightError> {
    let pods: Api<Pod> = Api::all(client.clone());
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    Ok(pods.list(&params).await.map_err(|e| api_error(&format!("pods on {node}"), e))?.items)
}

/// The DaemonSets that control live pods among `pods` but are not among `existing`.
fn orphans(pods: &[Pod], existing: &BTreeSet<String>) -> BTreeSet<String> {
    pods.iter().filter(|p| !is_finished(p)).filter_map(daemonset_of).filter(|ds| !existing.contains(ds)).collect()
}

pub async fn gather(client: &Client, targets: &PreflightTargets) -> Result<Snapshot, PreflightError> {
    let mut s = Snapshot {
        server_minor: client.apiserver_version().await.ok().and_then(|v| v.minor.trim_end_matches('+').parse().ok()),
        ..Snapshot::default()
    };
    let groups = client.list_api_groups().await.map_err(|e| api_error("the API groups", e))?;
    if let Some(group) = groups.groups.iter().find(|g| g.name == KARPENTER_GROUP) {
        s.karpenter_versions = group.versions.iter().map(|v| v.version.clone()).collect();
    }
    if s.karpenter_versions.iter().any(|v| v == "v1") {
        let resources = client
            .list_api_group_resources(&format!("{KARPENTER_GROUP}/v1"))
            .await
            .map_err(|e| api_error("karpenter.sh/v1", e))?;
        s.karpenter_v1_resources = resources.resources.into_iter().map(|r| r.name).collect();
    }

    let nodes: Api<Node> = Api::all(client.clone());
    s.on_prem = nodes
        .list(&ListParams::default().labels(&targets.nodes))
        .await
        .map_err(|e| api_error("the on-prem nodes", e))?
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    // Every node, in pages: only those a check reads are kept, so a large cluster is never held whole.
    let fetch = |params: ListParams| {
        let nodes = nodes.clone();
        async move { nodes.list(&params).await }
    };
    // Each node read leaves its zone and readiness; only the nodes a check reads are kept whole.
    let read =
        |n: Node| Some((zone_of(&n), is_not_ready(&n), reads_node(&n, &s.on_prem, &targets.node_pool).then_some(n)));
    let read = list_paged(&ListParams::default(), fetch, read).await.map_err(|e| api_error("nodes", e))?;
    for (zone, not_ready, node) in read {
        s.zones.entry(zone).or_default().count(not_ready);
        s.nodes.extend(node);
    }
    for node in &s.on_prem {
        s.pods_on_prem.extend(pods_on(client, node).await?);
    }
    let daemonsets: Api<DaemonSet> = Api::all(client.clone());
    let fetch = |params: ListParams| {
        let daemonsets = daemonsets.clone();
        async move { daemonsets.list(&params).await }
    };
    // Every DaemonSet's name, for the drain's orphans; only the device plugin's family kept whole.
    let keep = |ds: DaemonSet| {
        let name = format!("{}/{}", ds.namespace().unwrap_or_default(), ds.name_any());
        Some((name, reads_daemonset(&ds).then_some(ds)))
    };
    let read = list_paged(&ListParams::default(), fetch, keep).await.map_err(|e| api_error("DaemonSets", e))?;
    let existing: BTreeSet<String> = read.iter().map(|(name, _)| name.clone()).collect();
    s.daemonsets = read.into_iter().filter_map(|(_, ds)| ds).collect();
    s.missing_daemonsets = orphans(&s.pods_on_prem, &existing);

    fallback(client, targets, &groups, &mut s).await?;

    let pods: Api<Pod> = Api::namespaced(client.clone(), &targets.namespace);
    let workload_pods = pods
        .list(&ListParams::default().labels(&targets.selector))
        .await
        .map_err(|e| api_error("the workload's pods", e))?
        .items;
    s.workload_pods = workload_pods.len();
    s.workload_pod_names =
        workload_pods.iter().map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any())).collect();
    s.workloads = workloads(client, workload_pods).await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &targets.namespace);
    s.budgets = budgets.list(&ListParams::default()).await.map_err(|e| api_error("PodDisruptionBudgets", e))?.items;
    s.autoscalers = autoscalers(client, &targets.namespace).await;
    Ok(s)
}

/// The fallback NodePool (and the others the drill names), its NodeClaims, the pods on its nodes and its node
/// class, as far as Karpenter's API serves them.
async fn fallback(
    client: &Client,
    targets: &PreflightTargets,
    groups: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList,
    s: &mut Snapshot,
) -> Result<(), PreflightError> {
    if s.karpenter_v1_resources.iter().any(|r| r == "nodepools") {
        let pools: Api<NodePool> = Api::all(client.clone());
        let list = pools.list(&ListParams::default()).await.map_err(|e| api_error("NodePools", e))?.items;
        s.pool = match list.iter().find(|p| p.name_any() == targets.node_pool) {
            Some(pool) => PoolLookup::Found(Box::new(pool.clone())),
            None => PoolLookup::Missing { existing: list.iter().map(|p| p.name_any()).collect() },
        };
        s.more_pools = list.iter().filter(|p| targets.more_pools.contains(&p.name_any())).cloned().collect();
    }
    if let PoolLookup::Found(pool) = &s.pool {
        let by_pool = ListParams::default().labels(&format!("{NODEPOOL_LABEL}={}", targets.node_pool));
        if s.karpenter_v1_resources.iter().any(|r| r == "nodeclaims") {
            let claims: Api<NodeClaim> = Api::all(client.clone());
            s.claims = claims.list(&by_pool).await.map_err(|e| api_error("NodeClaims", e))?.items;
        }
        let fallback_nodes: Vec<String> = s
            .nodes
            .iter()
            .filter(|n| n.labels().get(NODEPOOL_LABEL) == Some(&targets.node_pool))
            .map(|n| n.name_any())
            .collect();
        for node in &fallback_nodes {
            s.pods_on_fallback.extend(pods_on(client, node).await?);
        }
        if let Some(reference) = pool.node_class_ref() {
            s.node_class = node_class(client, groups, reference).await?;
        }
    }
    Ok(())
}

async fn node_class(
    client: &Client,
    groups: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList,
    reference: &NodeClassReference,
) -> Result<NodeClassLookup, PreflightError> {
    let Some(group) = groups.groups.iter().find(|g| g.name == reference.group) else {
        return Ok(NodeClassLookup::NotServed);
    };
    let Some(version) = group.preferred_version.as_ref().or_else(|| group.versions.first()) else {
        return Ok(NodeClassLookup::NotServed);
    };
    let resources = client
        .list_api_group_resources(&version.group_version)
        .await
        .map_err(|e| api_error(&version.group_version, e))?;
    let Some(resource) = resources.resources.iter().find(|r| r.kind == reference.kind && !r.name.contains('/')) else {
        return Ok(NodeClassLookup::NotServed);
    };
    let ar = ApiResource {
        group: reference.group.clone(),
        version: version.version.clone(),
        api_version: version.group_version.clone(),
        kind: reference.kind.clone(),
        plural: resource.name.clone(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    match api.get(&reference.name).await {
        Ok(object) => Ok(NodeClassLookup::Found(serde_json::to_value(object).unwrap_or_default())),
        Err(e) if is_not_found(&e) => Ok(NodeClassLookup::Missing),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(NodeClassLookup::Unreadable(first_line(&s.message))),
        Err(e) => Err(api_error(&reference.object(), e)),
    }
}

/// The namespace's HPAs and KEDA ScaledObjects; a namespace without KEDA's CRD has no ScaledObject, and a role
/// that may not list them leaves the row a warning rather than the whole preflight unread.
async fn autoscalers(client: &Client, namespace: &str) -> AutoscalerLookup {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
    let hpas = match hpas.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) => return AutoscalerLookup::Unreadable(first_line(&e.to_string())),
    };
    let scaled: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &scaled_objects());
    match scaled.list(&ListParams::default()).await {
        Ok(list) => AutoscalerLookup::Read { hpas, scaled_objects: list.items },
        Err(e) if is_not_found(&e) => AutoscalerLookup::Read { hpas, scaled_objects: Vec::new() },
        Err(e) => AutoscalerLookup::Unreadable(first_line(&e.to_string())),
    }
}

fn controller(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|o| o.controller == Some(true))
}

fn bare(pod: &Pod) -> Workload {
    Workload {
        kind: "Pod".into(),
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        replicas: 1,
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta { labels: pod.metadata.labels.clone(), ..Default::default() }),
            spec: pod.spec.clone(),
        },
        sample_pod: Some(pod.clone()),
    }
}

/// The controllers of the workload's pods: Deployment (through its ReplicaSet) or StatefulSet; the template is
/// theirs, so a toleration only admission added to the pods does not count as explicit.
async fn workloads(client: &Client, pods: Vec<Pod>) -> Result<Vec<Workload>, PreflightError> {
    let mut found: Vec<Workload> = Vec::new();
    for pod in pods {
        let ns = pod.namespace().unwrap_or_default();
        let owner = controller(&pod.metadata).map(|o| (o.kind.clone(), o.name.clone()));
        let known = |kind: &str, name: &str| found.iter().any(|w| w.kind == kind && w.name == name);
        let workload = match owner {
            Some((kind, name)) if kind == "ReplicaSet" => {
                let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
                let Some(set) = sets.get_opt(&name).await.map_err(|e| api_error(&format!("ReplicaSet {name}"), e))?
                else {
                    found.push(bare(&pod));
                    continue;
                };
                match controller(&set.metadata).filter(|o| o.kind == "Deployment") {
                    Some(o) if known("Deployment", &o.name) => continue,
                    Some(o) => {
                        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
                        let d = deployments
                            .get_opt(&o.name)
                            .await
                            .map_err(|e| api_error(&format!("Deployment {}", o.name), e))?;
                        match d.and_then(|d| d.spec) {
                            Some(spec) => Workload {
                                kind: "Deployment".into(),
                                namespace: ns.clone(),
                                name: o.name.clone(),
                                replicas: spec.replicas.unwrap_or(1),
                                template: spec.template,
                                sample_pod: Some(pod.clone()),
                            },
                            None => bare(&pod),
                        }
                    }
                    None if known("ReplicaSet", &name) => continue,
                    None => match set.spec {
                        Some(spec) => Workload {
                            kind: "ReplicaSet".into(),
                            namespace: ns.clone(),
                            name,
                            replicas: spec.replicas.unwrap_or(1),
                            template: spec.template.unwrap_or_default(),
                            sample_pod: Some(pod.clone()),
                        },
                        None => bare(&pod),
                    },
                }
            }
            Some((kind, name)) if kind == "StatefulSet" => {
                if known("StatefulSet", &name) {
                    continue;
                }
                let sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
                let set = sets.get_opt(&name).await.map_err(|e| api_error(&format!("StatefulSet {name}"), e))?;
                match set.and_then(|s| s.spec) {
                    Some(spec) => Workload {
                        kind: "StatefulSet".into(),
                        namespace: ns.clone(),
                        name,
                        replicas: spec.replicas.unwrap_or(1),
                        template: spec.template,
                        sample_pod: Some(pod.clone()),
                    },
                    None => bare(&pod),
                }
            }
            _ => bare(&pod),
        };
        found.push(workload);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http::{Method, Request, Response};
    use kube::client::Body;

    use super::*;

    /// An API server without Karpenter (or with only `karpenter_versions` of it) and no objects, recording requests.
    type Requests = Arc<Mutex<Vec<(Method, String)>>>;

    fn api_server(karpenter_versions: &[&str]) -> (Client, Requests) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let versions: Vec<serde_json::Value> = karpenter_versions
            .iter()
            .map(|v| serde_json::json!({"groupVersion": format!("karpenter.sh/{v}"), "version": v}))
            .collect();
        let mut groups = vec![serde_json::json!({
            "name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}
        })];
        if !versions.is_empty() {
            groups.push(
                serde_json::json!({"name": "karpenter.sh", "versions": versions, "preferredVersion": versions[0]}),
            );
        }
        let apis = serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups});
        let service = tower::service_fn(move |req: Request<Body>| {
            log.lock().unwrap().push((req.method().clone(), req.uri().to_string()));
            let path = req.uri().path().to_string();
            let (status, body) = if path == "/apis" {
                (200, apis.clone())
            } else if path.starts_with("/apis/karpenter.sh") || path == "/version" {
                (
                    404,
                    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound", "message": "not found"}),
                )
            } else {
                (200, serde_json::json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}))
            };
            let response = Response::builder().status(status).body(Body::from(serde_json::to_vec(&body).unwrap()));
            async move { Ok::<_, std::convert::Infallible>(response.unwrap()) }
        });
        (Client::new(service, "default"), seen)
    }

    fn targets() -> PreflightTargets {
        PreflightTargets {
            nodes: "a=b".into(),
            namespace: "inference".into(),
            selector: "app=x".into(),
            node_pool: "gpu-fallback".into(),
            more_pools: Vec::new(),
        }
    }

    #[tokio::test]
    async fn without_karpenter_nodepools_are_not_listed_and_nothing_is_written() {
        let (client, seen) = api_server(&[]);
        let s = gather(&client, &targets()).await.unwrap();
        assert!(s.karpenter_versions.is_empty());
        assert!(matches!(s.pool, PoolLookup::NotServed));
        let requests = seen.lock().unwrap().clone();
        assert!(requests.iter().all(|(m, _)| m == Method::GET), "preflight only reads: {requests:?}");
        assert!(!requests.iter().any(|(_, u)| u.contains("karpenter.sh")), "{requests:?}");
        assert!(requests.iter().any(|(_, u)| u.starts_with("/apis/apps/v1/daemonsets")), "{requests:?}");
    }

    #[tokio::test]
    async fn karpenter_served_only_at_an_older_version_is_seen_as_such() {
        let (client, seen) = api_server(&["v1beta1"]);
        let s = gather(&client, &targets()).await.unwrap();
        assert_eq!(s.karpenter_versions, ["v1beta1"]);
        assert!(matches!(s.pool, PoolLookup::NotServed));
        assert!(!seen.lock().unwrap().iter().any(|(_, u)| u.contains("karpenter.sh/v1")));
    }

    /// An API server of a large cluster: the on-prem node, an ordinary node and a cloud GPU node (all nodes served in
    /// two pages), the device plugin's DaemonSet and kube-proxy's; recording every request's URI.
    fn large_cluster() -> (Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let node = |name: &str, labels: serde_json::Value, gpus: &str| {
            serde_json::json!({"metadata": {"name": name, "labels": labels},
                "status": {"allocatable": {"nvidia.com/gpu": gpus}}})
        };
        let service = tower::service_fn(move |req: Request<Body>| {
            let uri = req.uri().to_string();
            log.lock().unwrap().push(uri.clone());
            let list = |items: Vec<serde_json::Value>, next: &str| serde_json::json!({"kind": "List", "apiVersion": "v1", "metadata": {"continue": next}, "items": items});
            let body = match req.uri().path() {
                "/apis" => serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
                "/api/v1/nodes" if uri.contains("labelSelector") => {
                    list(vec![node("hybrid-1", serde_json::json!({"a": "b"}), "8")], "")
                }
                "/api/v1/nodes" if uri.contains("continue=page-2") => {
                    list(vec![node("cloud-gpu-1", serde_json::json!({}), "4")], "")
                }
                "/api/v1/nodes" => list(
                    vec![
                        node("hybrid-1", serde_json::json!({"a": "b"}), "8"),
                        node("plain-1", serde_json::json!({}), "0"),
                    ],
                    "page-2",
                ),
                "/apis/apps/v1/daemonsets" => list(
                    vec![
                        serde_json::json!({"metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"}}),
                        serde_json::json!({"metadata": {"name": "kube-proxy", "namespace": "kube-system"}}),
                    ],
                    "",
                ),
                _ => list(Vec::new(), ""),
            };
            let response = Response::builder().status(200).body(Body::from(serde_json::to_vec(&body).unwrap()));
            async move { Ok::<_, std::convert::Infallible>(response.unwrap()) }
        });
        (Client::new(service, "default"), seen)
    }

    #[tokio::test]
    async fn every_node_and_daemonset_is_read_in_pages_and_only_what_a_check_reads_is_kept() {
        let (client, seen) = large_cluster();
        let s = gather(&client, &targets()).await.unwrap();
        let nodes: Vec<String> = s.nodes.iter().map(|n| n.name_any()).collect();
        assert_eq!(nodes, ["hybrid-1", "cloud-gpu-1"], "the node without GPUs is dropped");
        // ... but still counted in its zone: the node lifecycle controller judges a zone by every node in it.
        let all = crate::cluster::zones::ZoneTally { size: 3, not_ready: 0 };
        assert_eq!(s.zones.into_iter().collect::<Vec<_>>(), [("(no zone label)".to_string(), all)]);
        let daemonsets: Vec<String> = s.daemonsets.iter().map(|d| d.name_any()).collect();
        assert_eq!(daemonsets, ["nvidia-device-plugin"]);
        let requests = seen.lock().unwrap().clone();
        let all_nodes: Vec<&String> =
            requests.iter().filter(|u| u.starts_with("/api/v1/nodes?") && !u.contains("labelSelector")).collect();
        assert_eq!(all_nodes, ["/api/v1/nodes?&limit=500", "/api/v1/nodes?&limit=500&continue=page-2"]);
        assert!(requests.contains(&"/apis/apps/v1/daemonsets?&limit=500".to_string()), "{requests:?}");
    }
}
