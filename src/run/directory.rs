//! The run directory: created once per run, with the drill as it ran, the timeline, the journal and the reports.

use std::path::{Path, PathBuf};

use chrono::Utc;

use super::error::SetupError;
use crate::cluster::{Cluster, ObservedCluster};
use crate::drill::LoadedDrill;
use crate::plan::Plan;
use crate::report::provenance::{Provenance, RunRecord};
use crate::report::{self, Report};
use crate::safety::Mutator;
use crate::safety::journal::Journal;
use crate::timeline::Timeline;

/// The run directory's files: the drill as it ran, the cluster it runs against, the timeline, and the journal the
/// mutator writes before each change.
pub(super) fn open_run_files(
    loaded: &LoadedDrill,
    dir: &Path,
    run_id: &str,
    cluster: &Cluster,
    observed: &ObservedCluster,
    plan: &Plan,
    provenance: &Provenance,
) -> Result<(Timeline, Mutator), SetupError> {
    let io = |source| SetupError::RunDir { path: dir.display().to_string(), source };
    std::fs::write(dir.join("drill.yaml"), crate::secrets::redact(&loaded.source).as_bytes()).map_err(io)?;
    // Before the journal: whatever a run journals, `recover` finds the cluster it belongs to, and a run that crashes
    // keeps who ran it, under which change and approved by whom.
    observed.write(dir).map_err(io)?;
    let record = RunRecord {
        run_id: run_id.into(),
        drill: loaded.drill.metadata.name.clone(),
        provenance: provenance.clone(),
        cluster: observed.clone(),
    };
    record.write(dir).map_err(io)?;
    let timeline = Timeline::create(&dir.join("timeline.jsonl")).map_err(io)?;
    let journal = Journal::create(&dir.join("journal.jsonl")).map_err(io)?;
    let mutator =
        Mutator::new(cluster.clone(), journal, timeline.clone(), run_id.into()).with_on_prem_nodes(&plan.on_prem_nodes);
    Ok((timeline, mutator))
}

/// A new run directory `<base>/<drill>/<UTC stamp>/` and the run's id. Two runs started in the same second get two
/// directories (`-1` appended to the second): a directory is only ever created here, never reused.
pub(crate) fn run_dir(base: &Path, drill: &str) -> Result<(PathBuf, String), SetupError> {
    let stamp = Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let parent = base.join(drill);
    let failed = |dir: &Path, source| SetupError::RunDir { path: dir.display().to_string(), source };
    std::fs::create_dir_all(&parent).map_err(|e| failed(&parent, e))?;
    let mut n = 0;
    loop {
        let name = if n == 0 { stamp.clone() } else { format!("{stamp}-{n}") };
        let dir = parent.join(&name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((dir, format!("{drill}-{}", name.to_lowercase()))),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(e) => return Err(failed(&dir, e)),
        }
    }
}

/// Writes report.json, report.md, report.html, junit.xml and metrics.prom into the run directory.
pub fn write_reports(dir: &Path, report: &Report) -> std::io::Result<()> {
    report::write_all(dir, report).map(|_| ())
}
