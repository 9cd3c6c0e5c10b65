//! The read-only handle steps get: the reads they need, over a client that refuses every request but a GET, so only
//! the mutator (which holds the `Cluster`) can change the cluster.

use http::{Method, Request, Response};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::client::Body;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};

use super::budgets::BudgetWatch;
use super::client::Cluster;
use super::policy::{self, PolicyError, PolicyKind};
use crate::domain::Cni;

/// Reads of the drill's cluster; it holds no client that can write.
#[derive(Clone)]
pub struct Reader {
    client: Client,
    context: String,
    server: String,
}

/// A request other than a read reached the read-only client: a bug, refused before it left the process.
#[derive(Debug, thiserror::Error)]
#[error("refused {method} {uri}: this handle only reads; changes go through the mutator")]
struct WriteRefused {
    method: Method,
    uri: http::Uri,
}

impl Cluster {
    /// The handle steps read through; it cannot write. Needs a Tokio runtime.
    pub fn reader(&self) -> Reader {
        Reader::new(self)
    }
}

impl Reader {
    /// Needs a Tokio runtime: the read-only client buffers its requests on a task.
    fn new(cluster: &Cluster) -> Reader {
        Reader {
            client: read_only(cluster.client.clone()),
            context: cluster.context.clone(),
            server: cluster.server.clone(),
        }
    }

    pub fn context(&self) -> &str {
        &self.context
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// For read-only subsystems that read many kinds (preflight's snapshot); it refuses anything but a GET.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub async fn node(&self, name: &str) -> Result<Node, kube::Error> {
        Api::<Node>::all(self.client.clone()).get(name).await
    }

    /// Every node of the cluster (the zones the node lifecycle controller judges span them all).
    pub async fn nodes(&self) -> Result<Vec<Node>, kube::Error> {
        Ok(Api::<Node>::all(self.client.clone()).list(&Default::default()).await?.items)
    }

    /// Every pod bound to a node, in any namespace.
    pub async fn pods_on(&self, node: &str) -> Result<Vec<Pod>, kube::Error> {
        let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        Ok(Api::<Pod>::all(self.client.clone()).list(&params).await?.items)
    }

    /// Every pod of one namespace.
    pub async fn pods_in(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error> {
        Ok(Api::<Pod>::namespaced(self.client.clone(), namespace).list(&ListParams::default()).await?.items)
    }

    /// Returns once the pod with this uid is gone, watch-driven; callers bound it with their deadline.
    pub async fn pod_deleted(&self, namespace: &str, name: &str, uid: &str) -> Result<(), kube::runtime::wait::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        await_condition(api, name, conditions::is_deleted(uid)).await.map(|_| ())
    }

    /// Watches the PodDisruptionBudgets of these namespaces until the returned handle is dropped.
    pub fn watch_budgets(&self, namespaces: impl IntoIterator<Item = String>) -> BudgetWatch {
        BudgetWatch::start(&self.client, namespaces)
    }

    /// The host firewall kind a `cni` resolves to in this cluster.
    pub async fn host_firewall(&self, cni: Cni) -> Result<PolicyKind, PolicyError> {
        policy::host_firewall(&self.client, &self.context, cni).await
    }
}

/// A client that sends GETs (reads, lists and watches) through `client` and refuses every other method.
fn read_only(client: Client) -> Client {
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        async move {
            if request.method() != Method::GET {
                let refused = WriteRefused { method: request.method().clone(), uri: request.uri().clone() };
                return Err::<Response<Body>, tower::BoxError>(Box::new(refused));
            }
            client.send(request).await.map_err(Into::into)
        }
    });
    Client::new(service, namespace)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A client answering every request with an empty Node, recording the methods it saw.
    fn fake_cluster(seen: Arc<Mutex<Vec<Method>>>) -> Client {
        let service = tower::service_fn(move |request: Request<Body>| {
            seen.lock().unwrap().push(request.method().clone());
            let node = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "h1"}});
            async move { Ok::<_, tower::BoxError>(Response::new(Body::from(serde_json::to_vec(&node).unwrap()))) }
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn reads_pass_and_writes_never_leave() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let client = read_only(fake_cluster(seen.clone()));
        let nodes: Api<Node> = Api::all(client);
        assert_eq!(nodes.get("h1").await.unwrap().metadata.name.as_deref(), Some("h1"));
        let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "h2"}})).unwrap();
        let err = nodes.create(&Default::default(), &node).await.unwrap_err();
        assert!(crate::cluster::error_chain(&err).contains("only reads"), "{err}");
        let patch = kube::api::Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}}));
        assert!(nodes.patch("h1", &Default::default(), &patch).await.is_err());
        assert!(nodes.delete("h1", &Default::default()).await.is_err());
        assert_eq!(*seen.lock().unwrap(), [Method::GET]);
    }
}
