//! Every request to the API server within a bounded deadline, so a half-open connection (a dropped link, an API
//! server gone without a reset) fails the request rather than hanging the step that made it. A request's answer
//! must begin within the deadline, and for anything but a watch its body must have arrived by then too; a watch's
//! stream runs on (kube's watcher restarts one that goes quiet past the server's watch timeout).

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response};
use http_body_util::Either;
use tokio::time::Instant;
use tower::{BoxError, Service};
use tower_http::timeout::DeadlineBody;

/// The deadline of every request: ample for a page of a list or an eviction, short against a step's timeout.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// A request that got no answer in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer from the API server within {} ({method} {path})", humantime::format_duration(*.after))]
pub struct NoAnswer {
    pub method: http::Method,
    pub path: String,
    pub after: Duration,
}

/// Bounds each request to `limit` (see the module's documentation).
#[derive(Clone)]
pub(super) struct Deadline<S> {
    pub(super) inner: S,
    pub(super) limit: Duration,
}

fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Deadline<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Either<DeadlineBody<ResBody>, ResBody>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (limit, watch) = (self.limit, is_watch(request.uri()));
        let (method, path) = (request.method().clone(), request.uri().path().to_string());
        let ends = Instant::now() + limit;
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = match tokio::time::timeout_at(ends, answer).await {
                Ok(answered) => answered.map_err(Into::into)?,
                Err(_) => return Err(Box::new(NoAnswer { method, path, after: limit }) as BoxError),
            };
            Ok(response.map(|body| {
                if watch {
                    Either::Right(body)
                } else {
                    Either::Left(DeadlineBody::new(ends.saturating_duration_since(Instant::now()), body))
                }
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures::StreamExt;
    use http_body_util::{BodyExt, StreamBody};
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;

    use super::*;

    type Frames = futures::stream::BoxStream<'static, Result<http_body::Frame<Bytes>, std::io::Error>>;

    type Stalling = tower::util::BoxCloneService<Request<kube::client::Body>, Response<StreamBody<Frames>>, BoxError>;

    /// An API server that answers after `head` (never, when none) with a body whose first bytes arrive and then
    /// nothing more, as over a half-open connection.
    fn stalling(head: Option<Duration>) -> Stalling {
        Stalling::new(tower::service_fn(move |_request: Request<kube::client::Body>| async move {
            match head {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending::<()>().await,
            }
            let first = futures::stream::once(async { Ok(http_body::Frame::data(Bytes::from_static(b"{\"items\""))) });
            let frames: Frames = Box::pin(first.chain(futures::stream::pending()));
            Ok::<_, BoxError>(Response::new(StreamBody::new(frames)))
        }))
    }

    fn nodes(head: Option<Duration>) -> Api<Node> {
        let service = Deadline { inner: stalling(head), limit: REQUEST_DEADLINE };
        Api::all(kube::Client::new(service, "default"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_with_no_answer_fails_at_its_deadline() {
        let started = Instant::now();
        let error = nodes(None).list(&Default::default()).await.unwrap_err();
        assert_eq!(started.elapsed(), REQUEST_DEADLINE);
        assert!(error.to_string().contains("no answer from the API server within 30s (GET /api/v1/nodes)"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_fails_the_request_at_its_deadline() {
        let started = Instant::now();
        let error = nodes(Some(Duration::from_secs(10))).list(&Default::default()).await.unwrap_err();
        assert_eq!(started.elapsed(), REQUEST_DEADLINE, "the answer's 10 s count against the same deadline: {error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_must_answer_within_the_deadline_but_its_stream_runs_on() {
        let mut service = Deadline { inner: stalling(Some(Duration::from_secs(1))), limit: REQUEST_DEADLINE };
        let watch =
            |query: &str| Request::get(format!("/api/v1/nodes?{query}")).body(kube::client::Body::empty()).unwrap();
        let response = service.call(watch("watch=true&resourceVersion=1")).await.unwrap();
        let mut body = std::pin::pin!(response.into_body());
        assert!(body.frame().await.unwrap().is_ok(), "the first event");
        let quiet = tokio::time::timeout(REQUEST_DEADLINE * 10, body.frame()).await;
        assert!(quiet.is_err(), "a quiet watch is not cut at the request deadline: {quiet:?}");
        let mut silent = Deadline { inner: stalling(None), limit: REQUEST_DEADLINE };
        let Err(error) = silent.call(watch("watch=1")).await else { panic!("a watch with no answer was answered") };
        assert!(error.to_string().starts_with("no answer from the API server within 30s"), "{error}");
    }
}
