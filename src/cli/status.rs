//! `hybrid-drill status`: connect, read what drills left (see `crate::status`), print it, exit 0 when clean.

use std::path::Path;

use crate::cluster::lease::LeaseRef;
use crate::cluster::{Cluster, KubeContext};
use crate::exit::{EXIT_INVALID, EXIT_LEFT_OVER, EXIT_PASSED};
use crate::status;

use super::args::OutputFormat;

pub(super) async fn status_command(
    reports_dir: &Path,
    lock: Option<&str>,
    target: &KubeContext,
    output: OutputFormat,
) -> u8 {
    let lease = match lock.map(status::parse_lease).transpose() {
        Ok(lease) => lease.unwrap_or_else(LeaseRef::default),
        Err(e) => {
            eprintln!("error: --lock {e}");
            return EXIT_INVALID;
        }
    };
    let connected = async {
        let cluster = Cluster::connect(target).await?;
        cluster.ping().await?;
        Ok::<_, crate::cluster::ClusterError>(cluster)
    };
    let cluster = match connected.await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {}", crate::secrets::redact(&e.to_string()));
            return EXIT_INVALID;
        }
    };
    let found = match status::gather(&cluster.reader(), reports_dir, lease).await {
        Ok(found) => found,
        Err(e) => {
            eprintln!("error: {}", crate::secrets::redact(&e.to_string()));
            return EXIT_INVALID;
        }
    };
    match output {
        OutputFormat::Text => print!("{}", crate::secrets::redact(&status::text(&found))),
        OutputFormat::Json => println!(
            "{}",
            crate::secrets::redact(&serde_json::to_string_pretty(&status::json(&found)).unwrap_or_default())
        ),
    }
    if found.clean() { EXIT_PASSED } else { EXIT_LEFT_OVER }
}
