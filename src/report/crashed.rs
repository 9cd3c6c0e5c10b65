//! The report of a run that stopped without writing one (the process killed, the host lost): rebuilt from the
//! drill, timeline, journal and provenance its run directory kept, and the one way every command names such a run:
//! `crashed; restored by recover at T` once `recover` has restored the cluster and sealed the directory, else
//! `crashed; not yet recovered`.

use std::path::Path;

use super::build::{LoadError, RunMeta, build};
use super::headline::{self, Crashed};
use super::model::{Recovery, Report};
use super::provenance::RunRecord;
use crate::domain::Outcome;
use crate::timeline::Event;

/// What stands in for a fact only report.json would have held.
const UNKNOWN: &str = "unknown (the run wrote no report)";

/// Where `recover` records what it did for a crashed run, before it seals the run directory.
pub const RECOVERY_FILE: &str = "recovered.json";

/// Whether `dir` is the directory of a run that left a timeline but no report.json. A canary's directory
/// (`canary.json`, written from its start: `crate::canary`) is never a drill's.
pub fn is_crashed_run(dir: &Path) -> bool {
    dir.join("timeline.jsonl").is_file() && !dir.join("report.json").exists() && !dir.join("canary.json").exists()
}

/// What `recover` recorded for the crashed run in `dir`; `None` while it is not recovered.
pub fn recovery(dir: &Path) -> Option<Recovery> {
    serde_json::from_slice(&std::fs::read(dir.join(RECOVERY_FILE)).ok()?).ok()
}

pub fn write_recovery(dir: &Path, recovery: &Recovery) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(recovery).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(RECOVERY_FILE), json + "\n")
}

pub use super::model::{NOT_RECOVERED, crashed_verdict as verdict};

/// A crashed run's verdict, read from its directory; `None` for any other directory.
pub fn state(dir: &Path) -> Option<String> {
    is_crashed_run(dir).then(|| verdict(recovery(dir).as_ref()))
}

/// Why a crashed run has no manifest, and what follows: said by `verify` and `evidence` instead of a missing file.
pub fn unsealed(verdict: &str) -> String {
    format!(
        "{verdict}: the run was killed before writing its report and manifest (a run writes its manifest last), so \
         nothing proves its files are as the run left them; `hybrid-drill recover RUN_DIR` restores the cluster, \
         records what it undid and seals the directory as it then stands"
    )
}

/// The report of a crashed run, from `drill.yaml`, `timeline.jsonl`, `journal.jsonl` and `cluster.json`.
pub fn rebuild(dir: &Path) -> Result<Report, LoadError> {
    let timeline = dir.join("timeline.jsonl");
    let observations = crate::timeline::read(&timeline)
        .map_err(|cause| LoadError::Read { path: timeline.display().to_string(), cause })?;
    let drill_file = dir.join("drill.yaml");
    let source = std::fs::read_to_string(&drill_file)
        .map_err(|cause| LoadError::Read { path: drill_file.display().to_string(), cause })?;
    let loaded = crate::drill::from_source(&drill_file, source.clone()).map_err(|e| LoadError::Read {
        path: drill_file.display().to_string(),
        cause: std::io::Error::other(e.to_string()),
    })?;
    let cluster = crate::cluster::ObservedCluster::read(dir);
    // Written before the first change; a run made before runs wrote it has none, and says so.
    let record = RunRecord::read(dir);
    let meta = RunMeta {
        tool_version: record.as_ref().map_or_else(|| UNKNOWN.into(), |r| r.provenance.tool_version.clone()),
        drill_file: drill_file.display().to_string(),
        drill_source: crate::secrets::redact(&source).into_owned(),
        cluster_server: cluster.map_or_else(|| UNKNOWN.into(), |c| c.server),
        cluster_version: UNKNOWN.into(),
        provenance: record.map(|r| r.provenance),
    };
    let mut report = build(&loaded.drill, &observations, &meta);
    let outstanding: Vec<String> = crate::safety::journal::read(&dir.join("journal.jsonl"))
        .map(|c| {
            crate::safety::journal::outstanding(&c.entries)
                .into_iter()
                .map(|(_, m)| {
                    let (action, target) = m.describe();
                    format!("{action} {target}")
                })
                .collect()
        })
        .unwrap_or_default();
    let finished = observations.iter().any(|o| matches!(o.event, Event::DrillFinished { .. }));
    if !finished {
        // Nothing says the cluster was restored: what the journal still holds decides how bad it is.
        report.outcome = if outstanding.is_empty() { Outcome::Aborted } else { Outcome::RestoreFailed };
        report.exit_code = crate::exit::exit_code(report.outcome);
    }
    let last_seen = observations.last().map_or_else(
        || "nothing".to_string(),
        |o| format!("{} at {}", o.event.describe(), crate::timeline::rfc3339(&o.received)),
    );
    report.crashed = Some(Crashed { last_seen, outstanding, recovered: recovery(dir) });
    report.headline = headline::qualifiers(&report, headline::on_prem_nodes(&observations));
    Ok(report)
}
