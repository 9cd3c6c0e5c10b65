//! The run record: what a drill and an incident both leave behind. The run directory (created once, never reused),
//! the end of the timeline and the report built from it once, the reports written in every format, the manifest and
//! its signature, and the shipment to object storage; and reading a run directory's id and journal back.

mod directory;
mod error;
mod seal;
mod shipping;

use std::path::Path;

use crate::evidence::SigningKey;
use crate::report::Report;
use crate::report::deviations::{Deviation, DeviationKind};
use crate::store::ShipPolicy;
use crate::timeline::{Event, Timeline};

pub use directory::{find_journals, open_files, run_dir, run_id_of, seal_crashed_run, write_reports};
pub use error::RecordError;
pub use seal::{Closing, Ended, run_meta};

/// Writes the finished report into the run directory, seals it (manifest, and signature with `key`) and ships it
/// when a policy says where. What the bucket cannot do, and a shipment that fails, are late warnings: the reports
/// and the manifest then say so, and the local directory stays whole and verifiable.
pub async fn persist(
    dir: &Path,
    report: &mut Report,
    timeline: &Timeline,
    policy: Option<&ShipPolicy>,
    key: Option<&SigningKey>,
) -> Result<(), RecordError> {
    let shipping = shipping::prepare(policy, report, timeline).await;
    write_reports(dir, report).map_err(RecordError::write(dir))?;
    // Last: every file of the run is written, and none is written after (but what a failed shipment adds).
    crate::evidence::seal(dir, &report.run_id, key).map_err(RecordError::seal(dir))?;
    shipping::ship(shipping, dir, report, timeline, key).await
}

/// A warning raised once the report is built (a push, a notification, a shipment that failed): said now, and kept in
/// the timeline, the report's warnings and its deviations, as a warning raised during the drill is.
pub fn late_warning(report: &mut Report, timeline: &Timeline, message: String) {
    eprintln!("hybrid-drill: warning: {message}");
    timeline.record(Event::Warning { message: message.clone() });
    report.warnings.push(message.clone());
    report.deviations.push(Deviation { kind: DeviationKind::Warning, t_seconds: None, what: message });
}
