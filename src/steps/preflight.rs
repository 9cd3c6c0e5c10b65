//! The preflight step: the fallback design checked read-only before the drill touches anything; a failed check
//! refuses the drill.

use super::{StepContext, StepError, StepSuccess};
use crate::drill::OnDeviation;
use crate::preflight::{self, Expectations, PreflightTargets, Status};

pub async fn preflight(ctx: &StepContext<'_>, on_deviation: OnDeviation) -> Result<StepSuccess, StepError> {
    ctx.progress.waiting("checking the fallback design (preflight)");
    let report = preflight::run(ctx.reader, &PreflightTargets::of(ctx.drill), &Expectations::of(ctx.drill))
        .await
        .map_err(|e| StepError::Failed(e.to_string()))?;
    let failed = report.summary(Status::Fail);
    let warned = report.summary(Status::Warn);
    let counts = format!("{} failed, {} warnings, {} passed", failed.len(), warned.len(), report.count(Status::Pass));
    if !failed.is_empty() && on_deviation == OnDeviation::Fail {
        return Err(StepError::Refused(format!("preflight: {counts}: {}", failed.join(" | "))));
    }
    let mut notes = failed;
    notes.extend(warned);
    if notes.is_empty() {
        return Ok(StepSuccess::ok(format!("preflight: {counts}")));
    }
    Ok(StepSuccess {
        message: format!("preflight: {counts}: {}", notes.join(" | ")),
        warning: true,
        skip_to_restore: false,
    })
}
