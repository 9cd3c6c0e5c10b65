//! The run directory: created once per run, never reused; the files a run starts it with (the drill as it ran, the
//! cluster, who ran it, the timeline and the journal), the reports written into it, and reading one back (its id,
//! its journal).

use std::path::{Path, PathBuf};

use chrono::Utc;

use super::error::RecordError;
use crate::cluster::ObservedCluster;
use crate::drill::LoadedDrill;
use crate::report::provenance::{Provenance, RunRecord};
use crate::report::{self, Recovery, Report};
use crate::safety::journal::Journal;
use crate::timeline::{self, Event, Timeline};

/// The run directory's first files: the drill as it ran, the cluster it runs against, who ran it, the timeline, and
/// the journal the mutator writes before each change.
pub fn open_files(
    loaded: &LoadedDrill,
    dir: &Path,
    run_id: &str,
    observed: &ObservedCluster,
    provenance: &Provenance,
) -> Result<(Timeline, Journal), RecordError> {
    let io = |source| RecordError::Write { path: dir.display().to_string(), source };
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
    Ok((timeline, journal))
}

/// A new run directory `<base>/<drill>/<UTC stamp>/` and the run's id. Two runs started in the same second get two
/// directories (`-1` appended to the second): a directory is only ever created here, never reused.
pub fn run_dir(base: &Path, drill: &str) -> Result<(PathBuf, String), RecordError> {
    let stamp = Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let parent = base.join(drill);
    let failed = |dir: &Path, source| RecordError::Create { path: dir.display().to_string(), source };
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

/// The run id a run directory's timeline starts with.
pub fn run_id_of(dir: &Path) -> Option<String> {
    timeline::read(&dir.join("timeline.jsonl")).ok()?.into_iter().find_map(|o| match o.event {
        Event::DrillStarted { run_id, .. } => Some(run_id),
        _ => None,
    })
}

/// Every `journal.jsonl` of a run directory under `reports_dir` (`<drill>/<run>/`), sorted.
pub fn find_journals(reports_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(drills) = std::fs::read_dir(reports_dir) else {
        return found;
    };
    for drill in drills.flatten() {
        let Ok(runs) = std::fs::read_dir(drill.path()) else {
            continue;
        };
        for run in runs.flatten() {
            let journal = run.path().join("journal.jsonl");
            if journal.exists() {
                found.push(journal);
            }
        }
    }
    found.sort();
    found
}

/// Writes `recovered.json` into a crashed run's directory, then its manifest (signed with `key`): the one place
/// `recover` seals a run.
pub fn seal_crashed_run(
    dir: &Path,
    recovery: &Recovery,
    key: Option<&crate::evidence::SigningKey>,
) -> Result<(), crate::evidence::manifest::ManifestError> {
    let write_error = |cause| crate::evidence::manifest::ManifestError::Write {
        path: dir.join(crate::report::crashed::RECOVERY_FILE).display().to_string(),
        cause,
    };
    crate::report::crashed::write_recovery(dir, recovery).map_err(write_error)?;
    let run_id = run_id_of(dir).unwrap_or_else(|| dir.display().to_string());
    crate::evidence::seal(dir, &run_id, key).map(|_| ())
}
