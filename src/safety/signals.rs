//! The signals that stop a drill or a watch: SIGINT and SIGTERM, listened for before anything is touched.

use tokio::signal::unix::{SignalKind, signal};

/// The first SIGINT or SIGTERM to arrive, by name; never, when they cannot be listened for.
pub async fn interrupted() -> &'static str {
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}
