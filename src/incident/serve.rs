//! The watch's metrics endpoint: Prometheus text on every path, served by hyper's HTTP/1 server (already built for
//! kube's client), one task per connection.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::report::prometheus::{self, WatchState};

/// The state the watch updates and the endpoint renders.
pub type Shared = Arc<Mutex<WatchState>>;

/// Binds `addr` (failing at once if it cannot), then serves until the process ends.
pub async fn start(addr: SocketAddr, drill: String, state: Shared) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (drill, state) = (drill.clone(), state.clone());
            tokio::spawn(async move {
                let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                    let snapshot = state.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let body = prometheus::render_watch(&drill, &snapshot).unwrap_or_default();
                    async move {
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", prometheus::CONTENT_TYPE)
                                .body(Full::new(Bytes::from(body)))
                                .unwrap_or_default(),
                        )
                    }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(bound)
}
