//! Reading a run directory back into its report: measured again from its timeline where it can be, kept as recorded
//! where it cannot, rebuilt when the run crashed before writing one.

use std::path::Path;

use super::build::{LoadError, RunMeta, build, notable, overlap};
use super::model::{REPORT_SCHEMA, Report};
use super::{autoscaling, blockers, crashed, deviations, headline};
use crate::timeline::{Event, Observation};

/// Whether a timeline holds every fact a report needs: runs recorded before the report's facts were timeline
/// events lack the request count, written once at the end of every run since.
fn holds_the_report(observations: &[Observation]) -> bool {
    let has = |f: fn(&Event) -> bool| observations.iter().any(|o| f(&o.event));
    has(|e| matches!(e, Event::DrillStarted { .. }))
        && has(|e| matches!(e, Event::DrillFinished { .. }))
        && has(|e| matches!(e, Event::RequestsSent { .. }))
}

/// Reads a run directory. The report is computed again from its `drill.yaml` and `timeline.jsonl`, with the meta
/// `report.json` kept, so an old run re-renders with today's logic. A run whose timeline lacks what [`build`] needs
/// (recorded by an older hybrid-drill) keeps its recorded report, with markers and the overlap window derived again
/// where its timeline is there. A run directory with a timeline and no report.json (the run crashed) gets its report
/// rebuilt, marked as such.
pub fn load(run_dir: &Path) -> Result<Report, LoadError> {
    if crashed::is_crashed_run(run_dir) {
        return crashed::rebuild(run_dir);
    }
    let mut report = load_recorded(run_dir)?;
    let observations =
        crate::timeline::read(&report_file(run_dir).with_file_name("timeline.jsonl")).unwrap_or_default();
    report.headline = headline::qualifiers(&report, headline::on_prem_nodes(&observations));
    super::forecast::attach(run_dir, &mut report);
    Ok(report)
}

fn report_file(run_dir: &Path) -> std::path::PathBuf {
    if run_dir.is_file() { run_dir.to_path_buf() } else { run_dir.join("report.json") }
}

/// A run directory's report.json, measured again from its timeline where that holds what [`build`] needs.
fn load_recorded(run_dir: &Path) -> Result<Report, LoadError> {
    let path = report_file(run_dir);
    let text =
        std::fs::read_to_string(&path).map_err(|cause| LoadError::Read { path: path.display().to_string(), cause })?;
    let mut report: Report =
        serde_json::from_str(&text).map_err(|cause| LoadError::Parse { path: path.display().to_string(), cause })?;
    if report.schema != REPORT_SCHEMA {
        return Err(LoadError::Schema { path: path.display().to_string(), found: report.schema });
    }
    let observations = crate::timeline::read(&path.with_file_name("timeline.jsonl")).unwrap_or_default();
    let drill_file = path.with_file_name("drill.yaml");
    let source = std::fs::read_to_string(&drill_file).unwrap_or_else(|_| report.drill.source.clone());
    let drill = crate::drill::from_source(&drill_file, source).ok().map(|l| l.drill);
    if let Some(drill) = &drill
        && holds_the_report(&observations)
    {
        return Ok(build(drill, &observations, &RunMeta::recorded(&report)));
    }
    if !observations.is_empty() {
        report.notable_events = notable(&observations);
        report.overlap = overlap(&observations);
        report.reclaim_blockers = blockers::reclaim_blockers(&observations, super::build::reclaim_from(&report.phases));
        report.blast_radius = super::leftovers::blast_radius(&observations);
        report.collateral = super::leftovers::collateral(&observations);
        report.leftovers = super::leftovers::leftovers(&observations);
        report.autoscaler = autoscaling::autoscaling(&observations);
    }
    // A report recorded before deviations and action items were: derived from what it kept.
    if let Some(drill) = drill.filter(|_| report.deviations.is_empty() && report.action_items.is_empty()) {
        deviations::fill(&drill, &observations, &mut report);
    }
    Ok(report)
}
