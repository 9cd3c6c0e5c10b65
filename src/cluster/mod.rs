//! Cluster access: the client for the chosen kubeconfig context (or the pod's ServiceAccount) and the cluster's
//! identity, the Karpenter types, Kubernetes scheduling rules
//! (selectors, tolerations, placement, drain selection), and read-only look-ups.

pub mod budgets;
pub mod drain_selection;
pub mod identity;
pub mod karpenter;
pub mod lease;
pub mod marks;
pub mod paged;
pub mod policy;
pub mod quantity;
pub mod reader;
pub mod requests;
pub mod retry;
pub mod scheduling;
pub mod selector;
pub mod tolerations;

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use requests::{CountRequests, RequestTally, RequestsByVerb};

pub use identity::ExpectedCluster;
pub use reader::Reader;

/// What the API server's audit log names as the requests' client.
pub const USER_AGENT: &str = concat!("hybrid-drill/", env!("CARGO_PKG_VERSION"));

/// Every (API group, resource, verb) the tool uses; deploy/clusterrole.yaml must grant exactly these. `resource[name]`
/// is the one object of that name (a rule's `resourceNames`).
pub const PERMISSIONS: &[(&str, &str, &[&str])] = &[
    ("", "nodes", &["get", "list", "watch", "patch"]),
    ("", "pods", &["get", "list", "watch", "patch"]),
    ("", "pods/eviction", &["create"]),
    ("", "events", &["list", "watch"]),
    ("", "configmaps", &["get"]),
    ("", "namespaces[kube-system]", &["get"]),
    ("", "endpoints", &["get"]),
    ("discovery.k8s.io", "endpointslices", &["list"]),
    ("policy", "poddisruptionbudgets", &["list", "watch"]),
    ("karpenter.sh", "nodepools", &["list", "watch"]),
    ("karpenter.sh", "nodeclaims", &["list", "watch"]),
    ("apps", "deployments", &["get", "patch"]),
    ("apps", "statefulsets", &["get", "patch"]),
    ("apps", "daemonsets", &["list"]),
    ("apps", "replicasets", &["get"]),
    ("karpenter.k8s.aws", "ec2nodeclasses", &["get"]),
    ("eks.amazonaws.com", "nodeclasses", &["get"]),
    ("networking.k8s.io", "networkpolicies", &["list", "create", "delete"]),
    ("cilium.io", "ciliumclusterwidenetworkpolicies", &["list", "create", "delete"]),
    ("projectcalico.org", "globalnetworkpolicies", &["list", "create", "delete"]),
    ("crd.projectcalico.org", "globalnetworkpolicies", &["list", "create", "delete"]),
    ("crd.projectcalico.org", "hostendpoints", &["list"]),
    ("crd.projectcalico.org", "kubecontrollersconfigurations", &["get"]),
];

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "cannot read kubeconfig: {0}; point at one with --kubeconfig or KUBECONFIG, or run in a pod with a ServiceAccount token"
    )]
    Kubeconfig(String),
    #[error("kubeconfig has no current context; pass --context NAME")]
    NoContext,
    #[error("cannot build a client for context `{context}`: {message}")]
    Client { context: String, message: String },
    #[error(
        "this drill is for context `{expected}` but the kubeconfig selects `{actual}`; run `kubectl config use-context {expected}` or pass --context {expected}"
    )]
    WrongContext { expected: String, actual: String },
    #[error(
        "running in a pod there is no kubeconfig context to check the drill's spec.cluster.context `{expected}` against; name the cluster by the UID of its kube-system namespace in spec.cluster.kubeSystemUID (`hybrid-drill identify` prints it)"
    )]
    NoContextInPod { expected: String },
    #[error(
        "this drill is for the cluster whose kube-system namespace has UID `{expected}`, but context `{context}` reaches one whose kube-system UID is `{actual}`; point at the drill's cluster, or if this is the one, set spec.cluster.kubeSystemUID: {actual} (`hybrid-drill identify` prints it)"
    )]
    WrongCluster { expected: String, actual: String, context: String },
    #[error(
        "cannot read the kube-system namespace of context `{context}` to check the cluster's identity: {message}; grant get on namespaces/kube-system (deploy/clusterrole.yaml)"
    )]
    Identity { context: String, message: String },
    #[error(
        "cannot reach the API server of context `{context}` at {server}: {message}; check the cluster is up and the kubeconfig is current"
    )]
    Unreachable { context: String, server: String, message: String },
}

/// A client bound to one kubeconfig context, counting every request it sends.
#[derive(Clone)]
pub struct Cluster {
    /// The client that can write: only the mutator and read-only set-up code (plan, watches, preflight) use it.
    pub(crate) client: Client,
    pub context: String,
    pub server: String,
    /// Reached through the pod's ServiceAccount (kube's in-cluster config), not a kubeconfig.
    pub in_cluster: bool,
    requests: RequestTally,
}

/// Which kubeconfig and context to use, as kubectl takes them.
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

impl Cluster {
    pub async fn connect(target: &Target) -> Result<Cluster, ClusterError> {
        let source = identity::select(target, &identity::Environment::current());
        let in_cluster = source == identity::Source::InCluster;
        let (config, context) = match source {
            identity::Source::Kubeconfig(path) => Self::kubeconfig(path.as_deref(), target.context.clone()).await?,
            identity::Source::InCluster => {
                let context = identity::IN_CLUSTER_CONTEXT.to_string();
                let config = Config::incluster()
                    .map_err(|e| ClusterError::Client { context: context.clone(), message: error_chain(&e) })?;
                (config, context)
            }
        };
        let mut config = config;
        // Named in the API server's audit log as kubectl is, so an operator (and scripts/bench) can tell its requests.
        config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT)));
        // kube's retry again, below, but not of evictions (see `retry`).
        config.default_retry = false;
        let server = config.cluster_url.to_string();
        let requests = RequestTally::default();
        let tally = requests.clone();
        let builder = kube::client::ClientBuilder::try_from(config)
            .map_err(|e| ClusterError::Client { context: context.clone(), message: e.to_string() })?;
        let client = retry::with_retry(builder, retry::ExceptEvictions::default())
            .with_layer(&tower::layer::layer_fn(move |inner| CountRequests { inner, tally: tally.clone() }))
            .build();
        Ok(Cluster { client, context, server, in_cluster, requests })
    }

    /// The client configuration of a kubeconfig's context (the given one, else its current one).
    async fn kubeconfig(
        path: Option<&std::path::Path>,
        context: Option<String>,
    ) -> Result<(Config, String), ClusterError> {
        let kubeconfig = match path {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        }
        .map_err(|e| ClusterError::Kubeconfig(e.to_string()))?;
        let context = context.or_else(|| kubeconfig.current_context.clone()).ok_or(ClusterError::NoContext)?;
        let options = KubeConfigOptions { context: Some(context.clone()), ..Default::default() };
        let config = Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| ClusterError::Client { context: context.clone(), message: e.to_string() })?;
        Ok((config, context))
    }

    /// Refuses a cluster other than the one the drill names.
    pub fn expect_context(&self, expected: &str) -> Result<(), ClusterError> {
        if self.context != expected {
            return Err(ClusterError::WrongContext { expected: expected.into(), actual: self.context.clone() });
        }
        Ok(())
    }

    /// One cheap request that proves the API server answers, returning its version.
    pub async fn ping(&self) -> Result<String, ClusterError> {
        self.client.apiserver_version().await.map(|v| v.git_version).map_err(|e| ClusterError::Unreachable {
            context: self.context.clone(),
            server: self.server.clone(),
            message: first_line(&error_chain(&e)),
        })
    }

    /// The handle steps read through; it cannot write. Needs a Tokio runtime.
    pub fn reader(&self) -> Reader {
        Reader::new(self)
    }

    /// Whether this is the local lab, whose timings are shortened and are not a real cluster's.
    pub fn is_lab(&self) -> bool {
        self.context == LAB_CONTEXT
    }

    pub fn requests_sent(&self) -> u64 {
        self.requests.total()
    }

    pub fn requests_by_verb(&self) -> RequestsByVerb {
        self.requests.by_verb()
    }

    /// A cluster answered by kube's mock service, counting requests like a real one: the test plays the API server
    /// through the handle.
    #[cfg(test)]
    pub(crate) fn mock()
    -> (Cluster, tower_test::mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>) {
        let (service, handle) = tower_test::mock::pair();
        let requests = RequestTally::default();
        let client = Client::new(CountRequests { inner: service, tally: requests.clone() }, "default");
        let server = "http://mock".into();
        (Cluster { client, context: "mock".into(), server, in_cluster: false, requests }, handle)
    }
}

/// The kubeconfig context lab/ creates.
const LAB_CONTEXT: &str = "hybrid-lab";

/// The cluster a drill names, proven to answer and to be that cluster: the context checked, one request, then its
/// kube-system UID when the drill names it. Returns the server's version.
pub async fn connect(target: &Target, expected: &ExpectedCluster) -> Result<(Cluster, String), ClusterError> {
    let cluster = Cluster::connect(target).await?;
    if !cluster.in_cluster
        && let Some(context) = &expected.context
    {
        cluster.expect_context(context)?;
    }
    let version = cluster.ping().await?;
    cluster.expect(expected).await?;
    Ok((cluster, version))
}

/// An error with its causes, `outer: inner: root`, repeated causes folded.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

pub fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

/// Whether a kube error is the API server answering 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A Kubernetes timestamp on the chrono clock the timeline uses.
pub fn to_utc(t: &k8s_openapi::jiff::Timestamp) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32).unwrap_or_default()
}

/// A Role's or ClusterRole's rules as (API group, resource, verb), `resource[name]` where `resourceNames` limits them.
#[cfg(test)]
pub(crate) fn granted_by(role: &serde_json::Value) -> std::collections::BTreeSet<(String, String, String)> {
    let mut granted = std::collections::BTreeSet::new();
    let text = |v: &serde_json::Value| v.as_str().unwrap().to_string();
    for rule in role["rules"].as_array().unwrap() {
        let names: Vec<String> = match rule["resourceNames"].as_array() {
            Some(names) => names.iter().map(|n| format!("[{}]", text(n))).collect(),
            None => vec![String::new()],
        };
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                for name in &names {
                    for verb in rule["verbs"].as_array().unwrap() {
                        granted.insert((text(group), format!("{}{name}", text(resource)), text(verb)));
                    }
                }
            }
        }
    }
    granted
}

/// A permission table as the (API group, resource, verb) triples [`granted_by`] reads from a role.
#[cfg(test)]
pub(crate) fn used_by(table: &[(&str, &str, &[&str])]) -> std::collections::BTreeSet<(String, String, String)> {
    table
        .iter()
        .flat_map(|(g, r, verbs)| verbs.iter().map(move |v| (g.to_string(), r.to_string(), v.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{PERMISSIONS, granted_by, used_by};

    #[test]
    fn the_committed_role_grants_exactly_what_the_code_uses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/clusterrole.yaml");
        let role = crate::drill::parse::parse_document(&std::fs::read_to_string(path).unwrap()).unwrap().value;
        let (granted, used) = (granted_by(&role), used_by(PERMISSIONS));
        let missing: Vec<_> = used.difference(&granted).collect();
        let extra: Vec<_> = granted.difference(&used).collect();
        assert!(missing.is_empty(), "deploy/clusterrole.yaml lacks {missing:?}");
        assert!(extra.is_empty(), "deploy/clusterrole.yaml grants more than the tool uses: {extra:?}");
    }
}
