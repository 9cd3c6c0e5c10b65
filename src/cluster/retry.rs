//! kube's retry of transient answers (429, 503, 504) for every request but an eviction's 429. That 429 is a
//! PodDisruptionBudget's refusal (or throttling, which says when to come back): the drain asks again the moment the
//! budget's status allows it (see [`super::budgets`]), which kube's retry, backing off from 5 ms to seconds inside
//! the one request, would hold up (measured on the lab: 1.2 s median from the budget allowing to the eviction
//! accepted). An eviction answered 503 or 504 is still retried here.

use http::{Method, Request, Response, StatusCode};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder};
use tower::buffer::{Buffer, BufferLayer};
use tower::retry::{Policy, Retry, RetryLayer};
use tower::{BoxError, Service};

/// kube's own server-aware policy (`RetryPolicy::server_retry`), an eviction's 429 left to the caller.
#[derive(Clone)]
pub struct ExceptEvictions(RetryPolicy);

impl Default for ExceptEvictions {
    fn default() -> Self {
        ExceptEvictions(RetryPolicy::server_retry())
    }
}

fn is_eviction(request: &Request<Body>) -> bool {
    request.method() == Method::POST && request.uri().path().ends_with("/eviction")
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for ExceptEvictions {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        let refused = matches!(result, Ok(response) if response.status() == StatusCode::TOO_MANY_REQUESTS);
        if refused && is_eviction(request) { None } else { self.0.retry(request, result) }
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        Policy::<Request<Body>, Response<Res>, BoxError>::clone_request(&mut self.0, request)
    }
}

/// A client's service `S` behind [`with_retry`].
pub type Retrying<S> = Retry<ExceptEvictions, Buffer<Request<Body>, <S as Service<Request<Body>>>::Future>>;

/// The service behind the retry (kube's own is switched off, `Config::default_retry`); the buffer makes it cloneable,
/// as a retry needs, with one task in front of the connection pool.
pub fn with_retry<S>(builder: ClientBuilder<S>, policy: ExceptEvictions) -> ClientBuilder<Retrying<S>>
where
    S: Service<Request<Body>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send + Sync,
{
    builder.with_layer(&BufferLayer::new(1024)).with_layer(&RetryLayer::new(policy))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::api::EvictParams;
    use tower::util::BoxService;

    use super::*;

    /// An API server that answers `code` to everything, counting the requests by path.
    fn always(code: u16) -> (kube::Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            log.lock().unwrap().push(format!("{} {}", req.method(), req.uri().path()));
            let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                "reason": "TooManyRequests", "message": "Cannot evict pod as it would violate the pod's disruption budget."});
            let response = Response::builder().status(code).body(Body::from(serde_json::to_vec(&body).unwrap()));
            async move { Ok::<_, BoxError>(response.unwrap()) }
        });
        let quick = RetryPolicy::new(Duration::from_millis(1), Duration::from_millis(2), 3, false).unwrap();
        let builder = with_retry(ClientBuilder::new(BoxService::new(service), "default"), ExceptEvictions(quick));
        (builder.build(), seen)
    }

    #[tokio::test]
    async fn a_refused_eviction_is_answered_at_once_and_other_requests_are_retried() {
        let (client, seen) = always(429);
        let pods: Api<Pod> = Api::namespaced(client, "inference");
        assert!(pods.evict("gpu-0", &EvictParams::default()).await.is_err());
        assert_eq!(*seen.lock().unwrap(), ["POST /api/v1/namespaces/inference/pods/gpu-0/eviction"]);
        seen.lock().unwrap().clear();
        assert!(pods.get("gpu-0").await.is_err());
        assert_eq!(seen.lock().unwrap().len(), 4, "the first answer and 3 retries");
    }

    #[tokio::test]
    async fn an_eviction_the_server_could_not_serve_is_retried() {
        let (client, seen) = always(503);
        let pods: Api<Pod> = Api::namespaced(client, "inference");
        assert!(pods.evict("gpu-0", &EvictParams::default()).await.is_err());
        assert_eq!(seen.lock().unwrap().len(), 4, "the first answer and 3 retries");
    }
}
