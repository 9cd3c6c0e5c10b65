//! Preflight: the fallback design checked read-only against the seed's recommendations (GPU taint, device plugin
//! scope, fallback NodePool, workloads, Karpenter's CRDs, the RTO floor), each check ending pass, warn or fail with
//! the object it names and the fix.

pub mod checks;
mod finding;
pub mod gather;
pub mod render;
pub mod snapshot;
mod targets;

use serde::{Deserialize, Serialize};

use crate::cluster::Reader;
use crate::drill::{Action, Check, Drill, OnDeviation};

pub use finding::{CheckId, Finding, Status};
pub use gather::{PreflightError, gather};
pub use snapshot::Snapshot;
pub use targets::{Expectations, PreflightTargets, TargetFlags, TargetsError};

/// Bumped on any change a consumer of `preflight --output json` could notice.
pub const PREFLIGHT_SCHEMA: &str = "hybrid-drill.io/preflight/v1";

/// For `hybrid-drill plan`: what the verdict means for a run of this drill.
pub fn plan_note(drill: &Drill, report: &PreflightReport) -> String {
    let step = drill.spec.steps.iter().find_map(|s| match s.action {
        Action::Check(Check::Preflight, on_deviation) => Some((s, on_deviation)),
        _ => None,
    });
    let failed = report.count(Status::Fail);
    match step {
        None => "the drill has no `check: preflight` step: a run would not stop on these findings".into(),
        Some((s, on_deviation)) if failed > 0 && on_deviation != OnDeviation::Warn => {
            format!("a run would be refused at step `{}` (exit 5) before anything is touched", s.id)
        }
        Some((s, _)) if failed > 0 => format!("step `{}` has onDeviation: warn: a run would go on despite these", s.id),
        Some((s, _)) => format!("step `{}` would let the run go on", s.id),
    }
}

/// The findings of one preflight run and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreflightReport {
    pub schema: String,
    pub context: String,
    pub server: String,
    pub targets: PreflightTargets,
    /// `pass`, `warn` or `fail`: the worst status found.
    pub verdict: Status,
    pub findings: Vec<Finding>,
}

impl PreflightReport {
    pub fn new(context: &str, server: &str, targets: PreflightTargets, findings: Vec<Finding>) -> PreflightReport {
        let verdict = findings.iter().map(|f| f.status).filter(|s| *s >= Status::Warn).max().unwrap_or(Status::Pass);
        PreflightReport {
            schema: PREFLIGHT_SCHEMA.into(),
            context: context.into(),
            server: server.into(),
            targets,
            verdict,
            findings,
        }
    }

    /// The report with findings made outside the snapshot (the SLI queries tried against Prometheus) added, and its
    /// verdict judged again.
    pub fn with_findings(self, more: Vec<Finding>) -> PreflightReport {
        let mut findings = self.findings;
        findings.extend(more);
        PreflightReport::new(&self.context, &self.server, self.targets, findings)
    }

    pub fn with_status(&self, status: Status) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.status == status)
    }

    pub fn count(&self, status: Status) -> usize {
        self.with_status(status).count()
    }

    /// Whether the design passes: no fail, and with `strict` no warning either.
    pub fn passed(&self, strict: bool) -> bool {
        self.count(Status::Fail) == 0 && (!strict || self.count(Status::Warn) == 0)
    }

    /// One line per failed (or warned) check: `check: object: message; fix: ...`, for a step's message.
    pub fn summary(&self, status: Status) -> Vec<String> {
        self.with_status(status)
            .map(|f| {
                let fix = f.fix.as_ref().map(|x| format!("; fix: {x}")).unwrap_or_default();
                format!("{}: {}: {}{fix}", f.check.as_str(), f.object, f.message)
            })
            .collect()
    }
}

/// Reads the cluster (never changes it) and checks the design against the targets.
pub async fn run(
    reader: &Reader,
    targets: &PreflightTargets,
    expect: &Expectations,
) -> Result<PreflightReport, PreflightError> {
    let snapshot = gather(reader.client(), targets).await?;
    let findings = checks::evaluate(&snapshot, targets, expect);
    Ok(PreflightReport::new(reader.context(), reader.server(), targets.clone(), findings))
}
