//! Reads of a lab instance's API server from inside the test process, for the `kubectl get ... -o json` calls the
//! end-to-end tests poll with: a kubectl process costs 60 to 90 ms of CPU a call, and the waits poll several of them
//! every half second, which on a 2-core machine took most of a core from the labs the tests are timing.
//!
//! Only plain reads of the resources below are answered here, with kubectl's JSON (lists carry each item's kind and
//! apiVersion, as kubectl's do); anything else returns `None` and the caller runs kubectl.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

/// Where a resource lives in the API: (kubectl's names for it, path prefix, plural, namespaced, kind, apiVersion).
type Resource = (&'static [&'static str], &'static str, &'static str, bool, &'static str, &'static str);

const RESOURCES: &[Resource] = &[
    (&["nodes", "node", "no"], "/api/v1", "nodes", false, "Node", "v1"),
    (&["pods", "pod", "po"], "/api/v1", "pods", true, "Pod", "v1"),
    (&["events", "event", "ev"], "/api/v1", "events", true, "Event", "v1"),
    (&["configmaps", "configmap", "cm"], "/api/v1", "configmaps", true, "ConfigMap", "v1"),
    (
        &["pdb", "pdbs", "poddisruptionbudgets"],
        "/apis/policy/v1",
        "poddisruptionbudgets",
        true,
        "PodDisruptionBudget",
        "policy/v1",
    ),
    (&["deployment", "deployments", "deploy"], "/apis/apps/v1", "deployments", true, "Deployment", "apps/v1"),
    (&["replicasets", "replicaset", "rs"], "/apis/apps/v1", "replicasets", true, "ReplicaSet", "apps/v1"),
    (&["statefulsets", "statefulset", "sts"], "/apis/apps/v1", "statefulsets", true, "StatefulSet", "apps/v1"),
    (&["lease", "leases"], "/apis/coordination.k8s.io/v1", "leases", true, "Lease", "coordination.k8s.io/v1"),
    (
        &["networkpolicies", "networkpolicy", "netpol"],
        "/apis/networking.k8s.io/v1",
        "networkpolicies",
        true,
        "NetworkPolicy",
        "networking.k8s.io/v1",
    ),
    (&["nodeclaims", "nodeclaim"], "/apis/karpenter.sh/v1", "nodeclaims", false, "NodeClaim", "karpenter.sh/v1"),
    (&["nodepools", "nodepool"], "/apis/karpenter.sh/v1", "nodepools", false, "NodePool", "karpenter.sh/v1"),
    (
        &["ciliumclusterwidenetworkpolicies.cilium.io", "ciliumclusterwidenetworkpolicies"],
        "/apis/cilium.io/v2",
        "ciliumclusterwidenetworkpolicies",
        false,
        "CiliumClusterwideNetworkPolicy",
        "cilium.io/v2",
    ),
];

/// A plain `get`: one resource, an optional name, its namespace or all of them, label and field selectors.
#[derive(Debug, PartialEq)]
pub struct Get<'a> {
    resource: &'static Resource,
    name: Option<&'a str>,
    namespace: Option<&'a str>,
    all_namespaces: bool,
    labels: Option<&'a str>,
    fields: Option<&'a str>,
}

impl<'a> Get<'a> {
    /// The read kubectl would make of `args` (without `-o json`), or `None` for anything this reader does not answer.
    pub fn parse(args: &[&'a str]) -> Option<Get<'a>> {
        let (&verb, rest) = args.split_first()?;
        let (&kind, mut rest) = rest.split_first()?;
        if verb != "get" {
            return None;
        }
        let resource = RESOURCES.iter().find(|r| r.0.contains(&kind))?;
        let mut get = Get { resource, name: None, namespace: None, all_namespaces: false, labels: None, fields: None };
        while let Some((&arg, tail)) = rest.split_first() {
            rest = tail;
            match arg {
                "-A" | "--all-namespaces" => get.all_namespaces = true,
                "-n" | "--namespace" | "-l" | "--selector" | "--field-selector" => {
                    let (&v, tail) = rest.split_first()?;
                    rest = tail;
                    match arg {
                        "-n" | "--namespace" => get.namespace = Some(v),
                        "-l" | "--selector" => get.labels = Some(v),
                        _ => get.fields = Some(v),
                    }
                }
                name if !name.starts_with('-') && get.name.is_none() => get.name = Some(name),
                _ => return None,
            }
        }
        Some(get)
    }

    /// The request path, query included.
    pub fn path(&self) -> String {
        let (_, prefix, plural, namespaced, _, _) = *self.resource;
        let mut path = prefix.to_string();
        if namespaced && !self.all_namespaces {
            path += &format!("/namespaces/{}", self.namespace.unwrap_or("default"));
        }
        path += &format!("/{plural}");
        if let Some(name) = self.name {
            path += &format!("/{name}");
        }
        let query: Vec<String> = [("labelSelector", self.labels), ("fieldSelector", self.fields)]
            .into_iter()
            .filter_map(|(key, value)| value.map(|v| format!("{key}={}", percent_encode(v))))
            .collect();
        if !query.is_empty() {
            path += &format!("?{}", query.join("&"));
        }
        path
    }

    /// kubectl's JSON for what the API server answered: a list's items carry their kind and apiVersion.
    fn as_kubectl_prints(&self, mut answer: Value) -> Value {
        if self.name.is_none() {
            let (_, _, _, _, kind, api_version) = *self.resource;
            for item in answer["items"].as_array_mut().into_iter().flatten() {
                item["kind"] = Value::from(kind);
                item["apiVersion"] = Value::from(api_version);
            }
        }
        answer
    }
}

fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
    })
}

/// One client per kubeconfig as it reads now: an instance brought down and up again gets new certificates.
fn client(kubeconfig: &Path) -> kube::Client {
    static CLIENTS: OnceLock<Mutex<HashMap<String, kube::Client>>> = OnceLock::new();
    let text = std::fs::read_to_string(kubeconfig).unwrap_or_else(|e| panic!("{}: {e}", kubeconfig.display()));
    let mut clients = CLIENTS.get_or_init(Default::default).lock().unwrap();
    if let Some(client) = clients.get(&text) {
        return client.clone();
    }
    let client = runtime().block_on(async {
        let parsed = Kubeconfig::from_yaml(&text).expect("the lab's kubeconfig parses");
        let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default()).await.unwrap();
        kube::Client::try_from(config).unwrap()
    });
    clients.insert(text, client.clone());
    client
}

/// What `kubectl get ARGS -o json` would print, read in-process, or `None` when `args` are not a plain read this
/// module answers. Panics, as the kubectl helpers do, when the API server refuses the read.
pub fn get_json(kubeconfig: &Path, args: &[&str]) -> Option<Value> {
    let get = Get::parse(args)?;
    let client = client(kubeconfig);
    let request = http::Request::get(get.path()).body(Vec::new()).unwrap();
    let answer = runtime()
        .block_on(client.request_text(request))
        .unwrap_or_else(|e| panic!("kubectl {args:?} (read in-process as {}): {e}", get.path()));
    Some(get.as_kubectl_prints(serde_json::from_str(&answer).unwrap()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_reads_map_to_their_api_paths() {
        let path = |args: &[&str]| Get::parse(args).map(|g| g.path());
        assert_eq!(path(&["get", "nodes"]).unwrap(), "/api/v1/nodes");
        assert_eq!(
            path(&["get", "pods", "-n", "inference", "-l", "app=llm-inference"]).unwrap(),
            "/api/v1/namespaces/inference/pods?labelSelector=app%3Dllm-inference"
        );
        assert_eq!(
            path(&["get", "lease", "hybrid-drill", "-n", "kube-system"]).unwrap(),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/hybrid-drill"
        );
        assert_eq!(
            path(&["get", "events", "-A", "--field-selector", "reason=InsufficientCapacityError"]).unwrap(),
            "/api/v1/events?fieldSelector=reason%3DInsufficientCapacityError"
        );
        assert_eq!(
            path(&["get", "nodeclaims", "-l", "karpenter.sh/nodepool=gpu-fallback"]).unwrap(),
            "/apis/karpenter.sh/v1/nodeclaims?labelSelector=karpenter.sh%2Fnodepool%3Dgpu-fallback"
        );
    }

    #[test]
    fn anything_else_is_left_to_kubectl() {
        assert!(Get::parse(&["get", "pods,networkpolicies", "-A"]).is_none());
        assert!(Get::parse(&["config", "view", "--raw"]).is_none());
        assert!(Get::parse(&["get", "pods", "--sort-by", ".metadata.name"]).is_none());
        assert!(Get::parse(&["get", "pods", "-n"]).is_none());
    }
}
