//! `hybrid-drill history`: every past run of each drill side by side (date, verdict, RTO and every phase), each
//! figure's change against the previous run and against its objective, and regressions flagged. Runs are compared
//! only within a series: one drill on one cluster (and lab profile).

mod baseline;
pub mod html;
mod series;
mod text;

pub use series::{Join, Series, environment, sha256_hex};
pub use text::{render_text, terminal_width};

use std::fmt::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Outcome, Report, RunKind, counted, human_seconds, load};
use crate::phases::{PhaseId, Verdict};

pub const HISTORY_SCHEMA: &str = "hybrid-drill.io/history/v1";

/// A phase is flagged when it is this much slower than in the previous run that measured it...
pub const REGRESSION_RATIO: f64 = 0.20;
/// ...and slower by at least this much: the lab's phases last seconds, and sub-second jitter in when the watches
/// deliver an event would otherwise flag a regression on most runs.
pub const REGRESSION_MIN_SECONDS: f64 = 1.0;
/// A phase with an objective is flagged for a slowdown only when the slowdown is at least this share of the
/// objective (run-to-run variation of a 20-minute reclaim is minutes, of a 10-second startup a second)...
pub const REGRESSION_MIN_SHARE_OF_OBJECTIVE: f64 = 0.05;
/// ...and the phase now uses more than this share of its objective: one still far under it (a reclaim 19 minutes
/// under its 20-minute objective) has the headroom the objective promised, whatever the previous run took.
pub const REGRESSION_HEADROOM_SHARE: f64 = 0.5;

/// The rule in words, for every rendering's legend: `more than 20% (and 1.0s) slower than the previous run, ...`.
pub fn rule_text(ratio: f64) -> String {
    format!(
        "more than {:.0}% (and {}) slower than the previous run and, against an objective, slower by at least {:.0}% of \
         it and past {:.0}% of it; over its objective; or not measured",
        ratio * 100.0,
        human_seconds(REGRESSION_MIN_SECONDS),
        REGRESSION_MIN_SHARE_OF_OBJECTIVE * 100.0,
        REGRESSION_HEADROOM_SHARE * 100.0
    )
}

/// Whether a slowdown from `before` to `now` is a regression rather than run-to-run noise: more than `ratio` and
/// [`REGRESSION_MIN_SECONDS`] slower, and, against an objective, a slowdown of at least
/// [`REGRESSION_MIN_SHARE_OF_OBJECTIVE`] of it that leaves the phase past [`REGRESSION_HEADROOM_SHARE`] of it.
pub fn is_regression(now: f64, before: f64, objective: Option<f64>, ratio: f64) -> bool {
    let slower = now - before;
    if slower <= ratio * before || slower < REGRESSION_MIN_SECONDS {
        return false;
    }
    match objective {
        Some(o) if o > 0.0 => slower >= REGRESSION_MIN_SHARE_OF_OBJECTIVE * o && now > REGRESSION_HEADROOM_SHARE * o,
        _ => true,
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub schema: &'static str,
    /// A phase this much slower than in the previous run is a regression (0.2: 20%).
    pub regression_ratio: f64,
    pub drills: Vec<DrillHistory>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DrillHistory {
    pub drill: String,
    /// The drill file and where it ran: runs of another file or profile are another series.
    pub series: Series,
    /// The columns: every phase any run measured, RTO first, then in the order the runs list them.
    pub phases: Vec<PhaseColumn>,
    /// Oldest first.
    pub runs: Vec<RunRow>,
    /// For a drill that fails the fallback too, the plain drain drill of the same cluster it is set against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<baseline::Baseline>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseColumn {
    pub name: PhaseId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<PhaseId>,
    /// The objective of the latest run that had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective_seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// A drill, or an incident `hybrid-drill watch` measured against the same drill's targets.
    pub kind: RunKind,
    pub run_id: String,
    pub dir: String,
    pub started: DateTime<Utc>,
    pub outcome: Outcome,
    pub exit_code: i32,
    /// The run stopped without writing its report; this row comes from its timeline and journal.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub crashed: bool,
    /// The verdict as every command says it (`crashed; restored by recover at T` for a crashed run).
    pub verdict: String,
    /// The drill file as it ran.
    pub drill_sha256: String,
    /// The drill file differs from the previous run's in this series.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub drill_changed: bool,
    /// One per column of [`DrillHistory::phases`].
    pub phases: Vec<Change>,
    /// One line per flagged phase.
    pub regressions: Vec<String>,
}

/// One phase of one run, against the previous run that measured it and against its objective.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Change {
    pub seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_seconds: Option<f64>,
    /// (this - previous) / previous.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_ratio: Option<f64>,
    /// objective - this: negative when over the objective.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective_margin_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regression: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot read the reports directory {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("no run reports (report.json) under {0}; runs are written to reports/<drill>/<timestamp>/")]
    NoRuns(String),
}

/// Run reports with the directory each was read from.
pub type Runs = Vec<(PathBuf, Report)>;

/// Every readable run report under `dir` (a reports directory, one drill's directory, or one run), crashed runs
/// (a timeline and no report.json) rebuilt, with a warning for each run that could not be read.
pub fn collect(dir: &Path) -> Result<(Runs, Vec<String>), HistoryError> {
    let mut files = Vec::new();
    find_reports(dir, 0, &mut files).map_err(|cause| HistoryError::Read { path: dir.display().to_string(), cause })?;
    files.sort();
    let mut runs = Vec::new();
    let mut warnings = Vec::new();
    for file in files {
        let run_dir = if file.is_dir() { file.as_path() } else { file.parent().unwrap_or(dir) };
        match load(&file) {
            Ok(report) => runs.push((run_dir.to_path_buf(), report)),
            Err(e) => warnings.push(format!("skipped: {e}")),
        }
    }
    if runs.is_empty() {
        return Err(HistoryError::NoRuns(dir.display().to_string()));
    }
    Ok((runs, warnings))
}

fn find_reports(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let report = dir.join("report.json");
    if report.is_file() {
        found.push(report);
        return Ok(());
    }
    if super::crashed::is_crashed_run(dir) {
        found.push(dir.to_path_buf());
        return Ok(());
    }
    // reports/<drill>/<run>/report.json is two levels down; one more tolerates a directory of reports directories.
    if depth >= 3 {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            find_reports(&entry.path(), depth + 1, found)?;
        }
    }
    Ok(())
}

/// Groups runs by series (drill file and where it ran), oldest first, and compares each phase with the previous run
/// that measured it; a phase more than `ratio` slower is a regression. A drill that fails the fallback too is set
/// against the plain drain drill of the same cluster.
pub fn build(runs: Runs, ratio: f64, joins: &[Join]) -> History {
    let mut split = series::split(runs, joins);
    for (_, runs) in &mut split {
        runs.sort_by_key(|(_, r)| r.started);
    }
    let latest: Vec<&Report> = split.iter().filter_map(|(_, runs)| runs.last().map(|(_, r)| r)).collect();
    let drills = split
        .iter()
        .map(|(series, runs)| {
            let mut history = drill_history(series.clone(), runs, ratio);
            history.against = runs.last().and_then(|(_, r)| baseline::baseline(r, &latest));
            history
        })
        .collect();
    History { schema: HISTORY_SCHEMA, regression_ratio: ratio, drills }
}

/// The regressions of the latest run of each series: what a CI job that just ran a drill fails on.
pub fn latest_regressions(h: &History) -> Vec<String> {
    h.drills
        .iter()
        .filter_map(|d| d.runs.last().map(|r| (d, r)))
        .flat_map(|(d, r)| r.regressions.iter().map(move |g| format!("{} ({}): {g}", d.drill, r.run_id)))
        .collect()
}

fn drill_history(series: Series, runs: &[(PathBuf, Report)], ratio: f64) -> DrillHistory {
    let mut phases: Vec<PhaseColumn> = Vec::new();
    for (_, report) in runs {
        for p in &report.phases {
            match phases.iter_mut().find(|c| c.name == p.name) {
                Some(c) => c.objective_seconds = p.objective_seconds.or(c.objective_seconds),
                None => {
                    phases.push(PhaseColumn { name: p.name, parent: p.parent, objective_seconds: p.objective_seconds })
                }
            }
        }
    }
    if let Some(i) = phases.iter().position(|c| c.name == PhaseId::Rto) {
        let rto = phases.remove(i);
        phases.insert(0, rto);
    }
    let mut rows: Vec<RunRow> = Vec::new();
    for (dir, report) in runs {
        let sha = sha256_hex(&report.drill.source);
        let drill_changed = rows.last().is_some_and(|r: &RunRow| r.drill_sha256 != sha);
        let mut cells = Vec::new();
        let mut regressions = Vec::new();
        for (column, c) in phases.iter().enumerate() {
            let phase = report.phases.iter().find(|p| p.name == c.name);
            // A drill against the drills before it; an incident against the latest drill: does it still predict?
            let previous =
                rows.iter().rev().filter(|r| r.kind == RunKind::Drill).find_map(|r: &RunRow| r.phases[column].seconds);
            let cell = change(phase, previous, report.kind, ratio);
            if let Some(why) = &cell.regression {
                regressions.push(format!("{}: {why}", c.name.title()));
            }
            cells.push(cell);
        }
        rows.push(RunRow {
            kind: report.kind,
            run_id: report.run_id.clone(),
            dir: dir.display().to_string(),
            started: report.started,
            outcome: report.outcome,
            exit_code: report.exit_code,
            crashed: report.crashed.is_some(),
            verdict: row_verdict(report),
            drill_sha256: sha,
            drill_changed,
            phases: cells,
            regressions,
        });
    }
    DrillHistory { drill: series.drill.clone(), series, phases, runs: rows, against: None }
}

/// A phase's change against the previous run as a share of it, when the previous figure is large enough for one to
/// mean something: 0.0s to 1.0s is one second more, not an infinite or a 101700% slowdown.
fn ratio_of(now: f64, before: f64) -> Option<f64> {
    (before >= REGRESSION_MIN_SECONDS).then(|| (now - before) / before)
}

fn change(phase: Option<&crate::phases::Phase>, previous: Option<f64>, kind: RunKind, ratio: f64) -> Change {
    let Some(p) = phase else {
        return Change { previous_seconds: previous, ..Change::default() };
    };
    let mut c = Change {
        seconds: p.seconds,
        verdict: Some(p.verdict),
        objective_seconds: p.objective_seconds,
        previous_seconds: previous,
        ..Change::default()
    };
    if let (Some(now), Some(before)) = (p.seconds, previous) {
        c.change_seconds = Some(now - before);
        c.change_ratio = ratio_of(now, before);
    }
    if let (Some(now), Some(objective)) = (p.seconds, p.objective_seconds) {
        c.objective_margin_seconds = Some(objective - now);
    }
    let mut reasons = Vec::new();
    match (p.seconds, p.objective_seconds) {
        (Some(now), Some(objective)) if now > objective => reasons.push(format!(
            "over its objective of {} by {}",
            human_seconds(objective),
            human_seconds(now - objective)
        )),
        (None, Some(_)) => reasons.push("not measured".to_string()),
        _ => {}
    }
    if let (Some(now), Some(before)) = (p.seconds, previous)
        && is_regression(now, before, p.objective_seconds, ratio)
    {
        let by = match c.change_ratio {
            Some(r) => format!("{:.0}%", r * 100.0),
            None => human_seconds(now - before),
        };
        reasons.push(match kind {
            RunKind::Drill => {
                format!("{by} slower than the previous run ({} → {})", human_seconds(before), human_seconds(now))
            }
            RunKind::Incident => format!(
                "the drill no longer predicts reality: the incident took {by} longer than the latest drill ({} → {})",
                human_seconds(before),
                human_seconds(now)
            ),
        });
    }
    if !reasons.is_empty() {
        c.regression = Some(reasons.join("; "));
    }
    c
}

/// A drill's verdict, or `incident: <verdict>`: incidents sit among the drills of the same targets.
pub fn verdict_text(r: &RunRow) -> String {
    r.verdict.clone()
}

fn row_verdict(report: &Report) -> String {
    if report.crashed.is_some() {
        return super::headline::verdict(report);
    }
    match report.kind {
        RunKind::Drill => report.outcome.short().to_string(),
        RunKind::Incident => format!("incident: {}", report.outcome.short()),
    }
}

pub fn date(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

/// `+2.0s (+6%)`, `-1m 02.0s (-30%)`, `±0`, or nothing for a first measurement.
pub fn change_text(c: &Change) -> String {
    match (c.change_seconds, c.change_ratio) {
        // Below the tenth of a second the figures show, a change is no change.
        (Some(d), _) if d.abs() < 0.05 => "±0".into(),
        (Some(d), Some(r)) => format!("{}{} ({:+.0}%)", sign(d), human_seconds(d.abs()), r * 100.0),
        (Some(d), None) => format!("{}{}", sign(d), human_seconds(d.abs())),
        (None, _) => String::new(),
    }
}

fn sign(d: f64) -> &'static str {
    if d < 0.0 { "-" } else { "+" }
}

/// `4m 12.0s under objective`, `12.0s over objective`, `not measured`, or nothing without an objective.
pub fn objective_text(c: &Change) -> String {
    match (c.objective_margin_seconds, c.objective_seconds) {
        (Some(m), _) if m >= 0.0 => format!("{} under objective", human_seconds(m)),
        (Some(m), _) => format!("{} OVER objective", human_seconds(-m)),
        (None, Some(_)) if c.verdict.is_some() => "not measured".into(),
        _ => String::new(),
    }
}

pub(super) fn value_text(c: &Change) -> String {
    let flag = if c.regression.is_some() { " ⚠" } else { "" };
    match c.seconds {
        Some(s) => format!("{}{flag}", human_seconds(s)),
        None if c.verdict.is_some() => format!("-{flag}"),
        None => String::new(),
    }
}

pub(super) fn header(c: &PhaseColumn) -> String {
    let name = match &c.parent {
        Some(_) => format!("└ {}", c.name),
        None => c.name.title().into(),
    };
    match c.objective_seconds {
        Some(o) => format!("{name} (obj {})", human_seconds(o)),
        None => name,
    }
}

/// The lines of one cell: the duration, its change against the previous run, and against the objective.
fn cell_lines(c: &Change) -> Vec<String> {
    [value_text(c), change_text(c), objective_text(c)].into_iter().filter(|l| !l.is_empty()).collect()
}

fn regressions_list(out: &mut String, d: &DrillHistory, bullet: &str) {
    let flagged: Vec<(&RunRow, &String)> =
        d.runs.iter().flat_map(|r| r.regressions.iter().map(move |g| (r, g))).collect();
    if flagged.is_empty() {
        let _ = writeln!(out, "{bullet}no regressions");
    }
    for (run, what) in flagged {
        let _ = writeln!(out, "{bullet}{} ({}): {what}", date(&run.started), run.run_id);
    }
}

pub fn render_markdown(h: &History) -> String {
    let md_cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from("# Drill history\n\n");
    let _ = writeln!(
        out,
        "Each cell: the duration (tool clock), its change against the previous run that measured it, and its margin against the objective. ⚠ marks a regression: {}.\n",
        rule_text(h.regression_ratio)
    );
    for d in &h.drills {
        let _ = writeln!(out, "## {}\n\n{}.\n", d.series.title(), counted(d.runs.len(), "run"));
        let mut head = vec!["Run (UTC)".to_string(), "Verdict".to_string()];
        head.extend(d.phases.iter().map(header));
        let _ = writeln!(out, "| {} |", head.iter().map(|h| md_cell(h)).collect::<Vec<_>>().join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(head.len()));
        for r in &d.runs {
            let changed = if r.drill_changed {
                format!("<br>◆ drill file changed: sha256 `{}`", &r.drill_sha256[..12])
            } else {
                String::new()
            };
            let mut cells = vec![format!("{}<br>`{}`", date(&r.started), r.run_id), verdict_text(r) + &changed];
            cells.extend(r.phases.iter().map(|c| md_cell(&cell_lines(c).join("<br>"))));
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        if let Some(b) = &d.against {
            let _ = writeln!(out, "\n{}", b.sentence());
        }
        let _ = writeln!(out, "\n### Regressions\n");
        regressions_list(&mut out, d, "- ");
        out.push('\n');
    }
    out
}

pub fn render_json(h: &History) -> String {
    serde_json::to_string_pretty(h).unwrap_or_default() + "\n"
}

#[cfg(test)]
pub(crate) mod tests {
    #[test]
    fn noise_far_under_an_objective_is_not_a_regression() {
        // The reclaim 56% slower but 19 minutes under its 20-minute objective: variation.
        assert!(!is_regression(64.0, 41.0, Some(1200.0), REGRESSION_RATIO));
        // Past half the objective and slower by more than 5% of it: a regression.
        assert!(is_regression(900.0, 600.0, Some(1200.0), REGRESSION_RATIO));
        // With `--fail-on-regression=5`: past half, 6% slower, but only 40s against a 20-minute objective: noise.
        assert!(!is_regression(700.0, 660.0, Some(1200.0), 0.05));
        // No objective: the ratio and the second decide.
        assert!(is_regression(3.0, 2.0, None, REGRESSION_RATIO) && !is_regression(1.5, 1.0, None, REGRESSION_RATIO));
    }

    use super::*;
    use crate::report::sample;

    /// Three quarterly runs of the sample drill: provisioning gets slower, then the RTO is missed.
    pub fn three_runs() -> Runs {
        let mut runs = Vec::new();
        for (i, (provisioning, rto)) in [(6.0, 11.6), (9.0, 12.0), (9.5, 75.0)].into_iter().enumerate() {
            let mut r = sample::report();
            r.started += chrono::Duration::days(91 * i as i64);
            r.run_id = format!("run-{i}");
            for p in &mut r.phases {
                match p.name {
                    PhaseId::Provisioning => p.seconds = Some(provisioning),
                    PhaseId::Rto => {
                        p.seconds = Some(rto);
                        p.verdict = if rto <= 60.0 { Verdict::Met } else { Verdict::Missed };
                    }
                    _ => {}
                }
            }
            runs.push((PathBuf::from(format!("reports/onprem-gpu-drain/{i}")), r));
        }
        // given out of order: the history sorts by start time
        runs.swap(0, 2);
        runs
    }

    #[test]
    fn rows_are_runs_oldest_first_with_changes_and_regressions() {
        let h = build(three_runs(), REGRESSION_RATIO, &[]);
        assert_eq!(h.drills.len(), 1);
        let d = &h.drills[0];
        assert_eq!(d.phases[0].name, PhaseId::Rto);
        let ids: Vec<&str> = d.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["run-0", "run-1", "run-2"]);
        let col = d.phases.iter().position(|c| c.name == PhaseId::Provisioning).unwrap();
        let second = &d.runs[1].phases[col];
        assert_eq!(second.change_seconds, Some(3.0));
        assert!((second.change_ratio.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(second.objective_margin_seconds, Some(-4.0));
        let why = second.regression.as_deref().unwrap();
        assert!(why.contains("over its objective of 5.0s by 4.0s") && why.contains("50% slower"), "{why}");
        // +0.5s is under the 1s floor: only the objective flags it
        let third = &d.runs[2].phases[col];
        assert!(!third.regression.as_deref().unwrap().contains("slower"));
        assert!(d.runs[2].regressions.iter().any(|r| r.starts_with("RTO: over its objective of 1m 00.0s")));
        assert!(d.runs[0].phases[0].regression.is_none(), "the first run's RTO met its objective");
        assert_eq!(change_text(&d.runs[0].phases[0]), "");
        assert_eq!(change_text(&d.runs[1].phases[1]), "±0");
        assert_eq!(change_text(&d.runs[2].phases[0]), "+1m 03.0s (+525%)");
    }

    #[test]
    fn an_incident_slower_than_the_latest_drill_says_the_drill_no_longer_predicts_reality() {
        let mut runs = three_runs();
        let mut incident = sample::report();
        incident.kind = RunKind::Incident;
        incident.run_id = "incident".into();
        incident.started += chrono::Duration::days(200);
        for p in &mut incident.phases {
            if p.name == PhaseId::Provisioning {
                p.seconds = Some(12.0);
            }
        }
        runs.push((PathBuf::from("reports/onprem-gpu-drain/incident"), incident));
        let mut later_drill = sample::report();
        later_drill.started += chrono::Duration::days(300);
        later_drill.run_id = "run-3".into();
        runs.push((PathBuf::from("reports/onprem-gpu-drain/3"), later_drill));
        let h = build(runs, REGRESSION_RATIO, &[]);
        let d = &h.drills[0];
        let col = d.phases.iter().position(|c| c.name == PhaseId::Provisioning).unwrap();
        let row = d.runs.iter().find(|r| r.run_id == "incident").unwrap();
        let why = row.phases[col].regression.as_deref().unwrap();
        assert!(why.contains("the drill no longer predicts reality") && why.contains("9.5s → 12.0s"), "{why}");
        assert_eq!(verdict_text(row), format!("incident: {}", row.outcome.short()));
        // the next drill compares with the drill before it, not with the incident
        let next = d.runs.iter().find(|r| r.run_id == "run-3").unwrap();
        assert_eq!(next.phases[col].previous_seconds, Some(9.5));
    }

    #[test]
    fn text_and_markdown_show_a_row_per_run() {
        let h = build(three_runs(), REGRESSION_RATIO, &[]);
        let text = render_text(&h, 200);
        assert!(text.contains("onprem-gpu-drain · context hybrid-lab: 3 runs"), "{text}");
        for day in ["2026-01-05 09:30", "2026-04-06 09:30", "2026-07-06 09:30"] {
            assert!(text.contains(day), "{day} missing:\n{text}");
        }
        assert!(text.contains("50% slower than the previous run (6.0s → 9.0s)"), "{text}");
        let md = render_markdown(&h);
        assert_eq!(md.lines().filter(|l| l.starts_with("| 2026-")).count(), 3, "{md}");
        assert!(md.contains("| RTO (obj 1m 00.0s) |"), "{md}");
        assert!(md.contains("9.0s ⚠<br>+3.0s (+50%)<br>4.0s OVER objective"), "{md}");
        let json: serde_json::Value = serde_json::from_str(&render_json(&h)).unwrap();
        assert_eq!(json["schema"], HISTORY_SCHEMA);
        assert_eq!(json["drills"][0]["runs"].as_array().unwrap().len(), 3);
    }
}
