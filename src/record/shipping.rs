//! A finished run shipped to object storage. Made ready before the reports are written, so what the bucket cannot
//! do (retention without object lock, a server that does not answer) is in the report the bucket receives; uploaded
//! once the manifest is sealed. An upload that fails is a warning and a deviation: the reports and the manifest are
//! written again with it, so the local run directory stays whole and verifiable.

use std::path::Path;

use super::RecordError;
use crate::evidence::SigningKey;
use crate::report::Report;
use crate::store::{Prepared, ShipPolicy};
use crate::timeline::Timeline;

/// A shipment about to be made: its policy and, unless preparing it failed, the ready client.
pub(super) struct Shipping<'a> {
    policy: &'a ShipPolicy,
    prepared: Option<Prepared>,
}

/// Prepares the shipment; each problem found is recorded in the timeline and the report as it is.
pub(super) async fn prepare<'a>(
    policy: Option<&'a ShipPolicy>,
    report: &mut Report,
    timeline: &Timeline,
) -> Option<Shipping<'a>> {
    let policy = policy?;
    let prepared = match crate::store::prepare(policy).await {
        Ok(prepared) => {
            for w in &prepared.warnings {
                super::late_warning(report, timeline, w.clone());
            }
            Some(prepared)
        }
        Err(e) => {
            super::late_warning(report, timeline, not_shipped(policy, &e));
            None
        }
    };
    Some(Shipping { policy, prepared })
}

/// Uploads the sealed run directory; a failure is recorded, then the reports and the manifest are written again.
pub(super) async fn ship(
    shipping: Option<Shipping<'_>>,
    dir: &Path,
    report: &mut Report,
    timeline: &Timeline,
    key: Option<&SigningKey>,
) -> Result<(), RecordError> {
    let Some(Shipping { policy, prepared: Some(prepared) }) = shipping else { return Ok(()) };
    let error = match crate::store::upload(dir, policy, &prepared).await {
        Ok(shipment) => {
            let kept = shipment
                .retained_until
                .map(|t| format!(", retained until {}", t.format("%Y-%m-%d")))
                .unwrap_or_default();
            eprintln!(
                "hybrid-drill: shipped {} files ({} bytes) to {}{kept}",
                shipment.objects, shipment.bytes, shipment.location
            );
            return Ok(());
        }
        Err(e) => e,
    };
    super::late_warning(report, timeline, not_shipped(policy, &error));
    super::write_reports(dir, report).map_err(RecordError::write(dir))?;
    crate::evidence::seal(dir, &report.run_id, key).map_err(RecordError::seal(dir))?;
    Ok(())
}

fn not_shipped(policy: &ShipPolicy, error: &crate::store::StoreError) -> String {
    let message = format!(
        "the run directory was not shipped to {}: {error}; it is kept here, whole (copy it there once the storage answers)",
        policy.location
    );
    crate::secrets::redact(&message).into_owned()
}
