//! The client for the chosen kubeconfig context (or the pod's ServiceAccount): the one `Cluster` handle every
//! request goes through, each within its deadline and counted by verb, and how setting it up fails.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::deadline::{Deadline, REQUEST_DEADLINE};
use super::requests::{CountRequests, RequestTally, RequestsByVerb};
use super::source::{self, KubeContext};
use super::{error_chain, first_line, retry};

/// What the API server's audit log names as the requests' client.
pub const USER_AGENT: &str = concat!("hybrid-drill/", env!("CARGO_PKG_VERSION"));

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
    /// The API server's answer kept whole (a 403 wants the grant the message names); its first line is shown.
    #[error(
        "cannot read the kube-system namespace of context `{context}` to check the cluster's identity: {}; grant get on namespaces/kube-system (deploy/clusterrole.yaml)",
        first_line(&error_chain(.error))
    )]
    Identity { context: String, error: kube::Error },
    #[error(
        "cannot read the kube-system namespace of context `{context}` to check the cluster's identity: the kube-system namespace has no uid; grant get on namespaces/kube-system (deploy/clusterrole.yaml)"
    )]
    NoUid { context: String },
    /// The request that got no answer, or the answer, kept whole: a timeout, a refused connection and a 401 differ.
    #[error(
        "cannot reach the API server of context `{context}` at {server}: {}; check the cluster is up and the kubeconfig is current",
        first_line(&error_chain(.error))
    )]
    Unreachable { context: String, server: String, error: kube::Error },
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

impl Cluster {
    pub async fn connect(target: &KubeContext) -> Result<Cluster, ClusterError> {
        let source = source::select(target, &source::Environment::current());
        let in_cluster = source == source::Source::InCluster;
        let (config, context) = match source {
            source::Source::Kubeconfig(path) => Self::kubeconfig(path.as_deref(), target.context.clone()).await?,
            source::Source::InCluster => {
                let context = source::IN_CLUSTER_CONTEXT.to_string();
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
            .map_err(|e| ClusterError::Client { context: context.clone(), message: e.to_string() })?
            // Below the retry: each attempt has a deadline of its own.
            .with_layer(&tower::layer::layer_fn(|inner| Deadline { inner, limit: REQUEST_DEADLINE }));
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
        self.client.apiserver_version().await.map(|v| v.git_version).map_err(|error| ClusterError::Unreachable {
            context: self.context.clone(),
            server: self.server.clone(),
            error,
        })
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
