//! `hybrid-drill status`: connect, read what drills left (see `crate::status`), print it, exit 0 when clean.

use std::path::Path;

use crate::cluster::lease::LeaseRef;
use crate::cluster::{Cluster, KubeContext};
use crate::exit::{EXIT_LEFT_OVER, EXIT_PASSED};
use crate::status;

use super::args::OutputFormat;
use super::failure::{Failure, Outcome};

pub(super) async fn status_command(
    reports_dir: &Path,
    lock: Option<&str>,
    target: &KubeContext,
    output: OutputFormat,
) -> Outcome {
    let lease = lock.map(status::parse_lease).transpose().map_err(|e| Failure::invalid(format!("--lock {e}")))?;
    let lease = lease.unwrap_or_else(LeaseRef::default);
    let connected = async {
        let cluster = Cluster::connect(target).await?;
        cluster.ping().await?;
        Ok::<_, crate::cluster::ClusterError>(cluster)
    };
    let cluster = connected.await.map_err(Failure::invalid)?;
    let found = status::gather(&cluster.reader(), reports_dir, lease).await.map_err(Failure::invalid)?;
    match output {
        OutputFormat::Text => print!("{}", crate::secrets::redact(&status::text(&found))),
        OutputFormat::Json => println!(
            "{}",
            crate::secrets::redact(&serde_json::to_string_pretty(&status::json(&found)).unwrap_or_default())
        ),
    }
    Ok(if found.clean() { EXIT_PASSED } else { EXIT_LEFT_OVER })
}
