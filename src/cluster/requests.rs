//! What the tool asked of the API server: every request counted by verb (list, watch, get, create, patch, evict...)
//! and resource, so a report shows its load grows with the watches it holds, not with the time it waits.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

pub use crate::domain::RequestsByVerb;

/// The tally shared by every clone of a cluster's client.
#[derive(Clone, Default)]
pub struct RequestTally(Arc<Mutex<RequestsByVerb>>);

impl RequestTally {
    fn count(&self, method: &http::Method, uri: &http::Uri) {
        let (verb, resource) = classify(method, uri);
        let mut tally = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *tally.entry(verb.into()).or_default().entry(resource).or_default() += 1;
    }

    pub fn by_verb(&self) -> RequestsByVerb {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub fn total(&self) -> u64 {
        self.by_verb().values().flat_map(|r| r.values()).sum()
    }
}

/// The verb and resource of a request, as the API server's audit log would name them.
fn classify(method: &http::Method, uri: &http::Uri) -> (&'static str, String) {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return ("get", uri.path().to_string()),
    };
    let rest = match rest {
        ["namespaces", _ns, inner @ ..] if !inner.is_empty() => inner,
        other => other,
    };
    let Some(resource) = rest.first() else { return ("get", uri.path().to_string()) };
    let (name, subresource) = (rest.get(1), rest.get(2).copied());
    let resource = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
    let watching = uri.query().is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match *method {
        http::Method::GET if watching => "watch",
        http::Method::GET if name.is_some() => "get",
        http::Method::GET => "list",
        http::Method::POST if subresource == Some("eviction") => "evict",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if name.is_some() => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "other",
    };
    let resource = match subresource {
        Some(sub) if verb != "evict" => format!("{resource}/{sub}"),
        _ => resource,
    };
    (verb, resource)
}

/// Counts requests so a report can say how hard the drill leaned on the API server.
#[derive(Clone)]
pub(super) struct CountRequests<S> {
    pub(super) inner: S,
    pub(super) tally: RequestTally,
}

impl<S, B> tower::Service<http::Request<B>> for CountRequests<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.tally.count(request.method(), request.uri());
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(method: &str, uri: &str) -> (&'static str, String) {
        classify(&method.parse().unwrap(), &uri.parse().unwrap())
    }

    #[test]
    fn requests_are_named_by_verb_and_resource() {
        let cases = [
            ("GET", "/api/v1/nodes?labelSelector=a%3Db", "list", "nodes"),
            ("GET", "/api/v1/nodes?watch=true&resourceVersion=5", "watch", "nodes"),
            ("GET", "/api/v1/nodes/hybrid-gpu-1", "get", "nodes"),
            ("GET", "/api/v1/namespaces/inference/pods", "list", "pods"),
            ("GET", "/api/v1/namespaces", "list", "namespaces"),
            ("GET", "/api/v1/namespaces/kube-system", "get", "namespaces"),
            ("PATCH", "/api/v1/nodes/hybrid-gpu-1", "patch", "nodes"),
            ("POST", "/api/v1/namespaces/inference/pods/p-1/eviction", "evict", "pods"),
            (
                "POST",
                "/apis/cilium.io/v2/ciliumclusterwidenetworkpolicies",
                "create",
                "ciliumclusterwidenetworkpolicies.cilium.io",
            ),
            (
                "DELETE",
                "/apis/cilium.io/v2/ciliumclusterwidenetworkpolicies/cut-1",
                "delete",
                "ciliumclusterwidenetworkpolicies.cilium.io",
            ),
            ("GET", "/apis/karpenter.sh/v1/nodeclaims?watch=1", "watch", "nodeclaims.karpenter.sh"),
            ("PATCH", "/apis/apps/v1/namespaces/inference/deployments/llm/scale", "patch", "deployments.apps/scale"),
            ("GET", "/version", "get", "/version"),
        ];
        for (method, uri, verb, resource) in cases {
            assert_eq!(kind(method, uri), (verb, resource.to_string()), "{method} {uri}");
        }
    }

    #[test]
    fn the_tally_adds_up() {
        let tally = RequestTally::default();
        tally.count(&http::Method::GET, &"/api/v1/nodes".parse().unwrap());
        tally.count(&http::Method::GET, &"/api/v1/nodes?watch=true".parse().unwrap());
        tally.count(&http::Method::GET, &"/api/v1/nodes".parse().unwrap());
        assert_eq!(tally.total(), 3);
        assert_eq!(tally.by_verb()["list"]["nodes"], 2);
    }
}
