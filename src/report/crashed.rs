//! The report of a run that stopped without writing one (the process killed, the host lost): rebuilt from the
//! drill, timeline and journal its run directory kept, and marked `crashed: incomplete`.

use std::path::Path;

use super::build::{LoadError, RunMeta, build};
use super::headline::{self, Crashed};
use super::model::Report;
use crate::domain::Outcome;
use crate::timeline::Event;

/// What stands in for a fact only report.json would have held.
const UNKNOWN: &str = "unknown (the run wrote no report)";

/// Whether `dir` is the directory of a run that left a timeline but no report.json.
pub fn is_crashed_run(dir: &Path) -> bool {
    dir.join("timeline.jsonl").is_file() && !dir.join("report.json").exists()
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
    let meta = RunMeta {
        tool_version: UNKNOWN.into(),
        drill_file: drill_file.display().to_string(),
        drill_source: crate::secrets::redact(&source).into_owned(),
        cluster_server: cluster.map_or_else(|| UNKNOWN.into(), |c| c.server),
        cluster_version: UNKNOWN.into(),
        // Who ran it and why was written with the report the crash prevented.
        provenance: None,
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
    report.crashed = Some(Crashed { last_seen, outstanding });
    report.headline = headline::qualifiers(&report, headline::on_prem_nodes(&observations));
    Ok(report)
}
