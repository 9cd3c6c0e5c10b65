//! `hybrid-drill evidence`: every drill and incident of a period gathered for an auditor into one directory (and
//! optionally one tar.gz): each run directory as it is, its manifest verified, and an index in Markdown and HTML with
//! the verdicts, the RTO trend, the deviations, the action items (open, or closed by a later run) and a table of the
//! controls the bundle supports.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Serialize;

use super::keys::TrustedKeys;
use super::manifest::{self, Verification};
use crate::domain::PhaseId;
use crate::report::deviations::{ActionItem, Deviation};
use crate::report::history;
use crate::report::{Report, RunKind, human_seconds};

/// What to gather and where to write it.
#[derive(Debug, Clone)]
pub struct BundleOptions {
    pub reports_dir: PathBuf,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub out: PathBuf,
    /// Also write `<out>.tar.gz`.
    pub archive: bool,
    pub trusted: TrustedKeys,
    /// Count a run whose files match its manifest as intact though no trusted key signed it.
    pub allow_unsigned: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(transparent)]
    History(#[from] history::HistoryError),
    #[error("cannot write {path}: {cause}")]
    Write { path: String, cause: std::io::Error },
    #[error("{0} already exists and is not empty: name a new directory with --out")]
    Exists(String),
}

/// One run in the bundle.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Where the run is in the bundle, relative to its index: `runs/<drill>/<stamp>`, both the names of the
    /// directories it was found in (never what its report says); empty when those names are not a run's.
    pub path: String,
    /// The run directory it was copied from.
    pub source: String,
    pub report: Report,
    /// The manifest checked in the reports directory; `None` for a run that has none.
    pub verification: Option<Verification>,
    /// Why the manifest could not be checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
    /// The report the index links to, relative to it, by format (`md`, `html`): the run's own, or for a crashed run,
    /// which wrote none, the one rebuilt from its directory into `rebuilt/`, beside the untouched copy.
    pub report_md: String,
    pub report_html: String,
    /// Its files match its manifest and the manifest is signed by a trusted key (or `--allow-unsigned` settled for
    /// the files alone).
    pub intact: bool,
    /// Signed by a trusted key.
    pub authentic: bool,
    /// The action items with whether a later run of the same drill closed them.
    pub action_items: Vec<TrackedItem>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrackedItem {
    #[serde(flatten)]
    pub item: ActionItem,
    /// The later run that met the objective (or no longer raised the finding); `None` while open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<String>,
}

/// What the bundle holds, as `evidence.json` and both indexes say it.
#[derive(Debug, Clone, Serialize)]
pub struct Bundle {
    pub schema: &'static str,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub generated: DateTime<Utc>,
    pub tool: String,
    pub runs: Vec<Entry>,
    /// Reports that could not be read.
    pub warnings: Vec<String>,
}

pub const BUNDLE_SCHEMA: &str = "hybrid-drill.io/evidence/v1";

/// Gathers the period's runs and writes the bundle; returns it, and the archive's path when one was written.
pub fn write(opts: &BundleOptions) -> Result<(Bundle, Option<PathBuf>), BundleError> {
    let failed = |path: &Path| {
        let path = path.display().to_string();
        move |cause| BundleError::Write { path, cause }
    };
    if std::fs::read_dir(&opts.out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(BundleError::Exists(opts.out.display().to_string()));
    }
    let bundle = gather(opts)?;
    std::fs::create_dir_all(&opts.out).map_err(failed(&opts.out))?;
    for entry in bundle.runs.iter().filter(|e| !e.path.is_empty()) {
        let from = PathBuf::from(&entry.source);
        copy_dir(&from, &opts.out.join(&entry.path)).map_err(failed(&from))?;
        if entry.report_md.starts_with("rebuilt/") {
            write_rebuilt(&opts.out, entry).map_err(failed(&opts.out.join(&entry.report_md)))?;
        }
    }
    let json = serde_json::to_string_pretty(&bundle).unwrap_or_default() + "\n";
    let files = [("evidence.json", json), ("index.md", markdown(&bundle)), ("index.html", html_index(&bundle))];
    for (name, text) in files {
        let path = opts.out.join(name);
        std::fs::write(&path, crate::secrets::redact(&text).as_bytes()).map_err(failed(&path))?;
    }
    let archive = if opts.archive {
        let path = PathBuf::from(format!("{}.tar.gz", opts.out.display()));
        tar_gz(&opts.out, &path).map_err(failed(&path))?;
        Some(path)
    } else {
        None
    };
    Ok((bundle, archive))
}

/// A crashed run's report, rebuilt, where its index links it: outside the run's copy, whose manifest it would break.
fn write_rebuilt(out: &Path, entry: &Entry) -> std::io::Result<()> {
    use crate::report::Format;
    for (format, path) in [(Format::Md, &entry.report_md), (Format::Html, &entry.report_html)] {
        let path = out.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let text = format.render(&entry.report).map_err(std::io::Error::other)?;
        std::fs::write(&path, crate::secrets::redact(&text).as_bytes())?;
    }
    Ok(())
}

/// Where the index links a run's report: its own when it wrote one, else the rebuilt one.
fn report_links(dir: &Path, path: &str, report: &Report) -> (String, String) {
    let own = |name: &str| dir.join(name).is_file().then(|| format!("{path}/{name}"));
    let rebuilt = |name: &str| format!("rebuilt/{}/{name}", path.trim_start_matches("runs/"));
    let link = |name: &str| match own(name) {
        Some(link) if report.crashed.is_none() => link,
        _ => rebuilt(name),
    };
    (link("report.md"), link("report.html"))
}

impl Entry {
    pub fn intact(&self) -> bool {
        self.intact
    }
}

/// What the bundle proves of who wrote its runs, for the end of `evidence`'s output.
pub fn authenticity_line(b: &Bundle, allow_unsigned: bool) -> String {
    let failed = b.runs.iter().filter(|e| !e.intact).count();
    let unproven = b.runs.iter().filter(|e| e.intact && !e.authentic).count();
    let mut line = String::new();
    if failed > 0 {
        line = format!("error: {failed} of {} runs are not intact: see the index", b.runs.len());
    }
    if allow_unsigned && unproven > 0 {
        let sep = if line.is_empty() { "warning: " } else { "; " };
        line.push_str(&format!(
            "{sep}{unproven} runs are intact under --allow-unsigned only: their authenticity is NOT proven"
        ));
    }
    line
}

/// A run directory's name as a path component of the bundle: letters, digits, `.`, `_` and `-`, not starting with
/// `.`, so no name read from the reports directory can climb out of `--out`.
fn component(name: &std::ffi::OsStr) -> Option<&str> {
    let name = name.to_str()?;
    let safe = !name.is_empty()
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    safe.then_some(name)
}

/// `runs/<drill>/<stamp>` from the names of the run directory and its parent.
fn bundle_path(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let stamp = component(dir.file_name()?)?;
    let drill = component(dir.parent()?.file_name()?)?;
    Some(format!("runs/{drill}/{stamp}"))
}

/// The runs of the period, oldest first, each verified, with its action items tracked against later runs.
fn gather(opts: &BundleOptions) -> Result<Bundle, BundleError> {
    let (runs, warnings) = history::collect(&opts.reports_dir)?;
    let mut runs: Vec<(PathBuf, Report)> =
        runs.into_iter().filter(|(_, r)| r.started >= opts.since && r.started <= opts.until).collect();
    runs.sort_by_key(|(_, r)| r.started);
    let mut taken = std::collections::BTreeSet::new();
    let entries = runs
        .iter()
        .enumerate()
        .map(|(i, (dir, report))| {
            let (verification, mut unverified) = match manifest::verify(dir, &opts.trusted) {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(unverified(dir, report, &e))),
            };
            let path = match bundle_path(dir) {
                Some(path) if taken.insert(path.clone()) => path,
                Some(path) => {
                    unverified = Some(format!("another run of the period is also at {path}: not copied"));
                    String::new()
                }
                None => {
                    unverified = Some("its directory's names are not a run's <drill>/<stamp>: not copied".to_string());
                    String::new()
                }
            };
            let authentic = verification.as_ref().is_some_and(Verification::authentic);
            let intact = !path.is_empty() && verification.as_ref().is_some_and(|v| v.intact(opts.allow_unsigned));
            // A run left out of the bundle has no copy to link to.
            let (report_md, report_html) =
                if path.is_empty() { Default::default() } else { report_links(dir, &path, report) };
            Entry {
                path,
                report_md,
                report_html,
                source: dir.display().to_string(),
                action_items: track(report, &runs[i + 1..]),
                report: report.clone(),
                verification,
                unverified,
                intact,
                authentic,
            }
        })
        .collect();
    Ok(Bundle {
        schema: BUNDLE_SCHEMA,
        since: opts.since,
        until: opts.until,
        generated: Utc::now(),
        tool: format!("hybrid-drill {} (commit {})", env!("CARGO_PKG_VERSION"), super::provenance::GIT_COMMIT),
        runs: entries,
        warnings,
    })
}

/// Why a run's manifest could not be checked, in words an auditor can act on rather than an OS error.
fn unverified(dir: &Path, report: &Report, error: &manifest::ManifestError) -> String {
    let missing = !dir.join(manifest::MANIFEST_FILE).exists();
    match &report.crashed {
        Some(_) if missing => crate::report::crashed::unsealed(&crate::report::headline::verdict(report)),
        None if missing => "the run directory has no manifest.json (a run made before runs wrote one, or it was \
                            removed): nothing proves its files are as the run wrote them"
            .into(),
        _ => error.to_string(),
    }
}

/// Each action item of `report`, closed by the first later run of the same drill that no longer raises it.
fn track(report: &Report, later: &[(PathBuf, Report)]) -> Vec<TrackedItem> {
    report
        .action_items
        .iter()
        .map(|item| TrackedItem {
            item: item.clone(),
            closed_by: later
                .iter()
                .map(|(_, r)| r)
                .filter(|r| r.drill.name == report.drill.name && r.kind == RunKind::Drill)
                .find(|r| !r.action_items.iter().any(|i| i.objective == item.objective))
                .map(|r| r.run_id.clone()),
        })
        .collect()
}

/// Copies the directories and regular files under `from`; a symbolic link, a FIFO or any other entry is left out
/// (never followed nor read: `verify` names it in the run's integrity line).
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn tar_gz(dir: &Path, path: &Path) -> std::io::Result<()> {
    let file = std::fs::File::create(path)?;
    let mut archive = tar::Builder::new(flate2::write::GzEncoder::new(file, flate2::Compression::default()));
    archive.follow_symlinks(false);
    let name = dir.file_name().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("evidence"));
    archive.append_dir_all(name, dir)?;
    archive.into_inner()?.finish()?.sync_all()
}

/// The controls a year of drills is commonly asked to show, and what this bundle puts forward for each. Worded as
/// support: a bundle is evidence an assessor weighs, never a certification.
pub const CONTROLS: [(&str, &str, &str); 3] = [
    (
        "DORA (Regulation (EU) 2022/2554), Art. 11(6) and Art. 12: ICT business continuity and response and recovery \
         plans tested at least yearly",
        "the ICT business continuity plan is tested, at least yearly, with results recorded and deficiencies acted on",
        "supports: each drill's plan (drill file and its digest), who initiated and approved it under which change, \
         the measured recovery against objectives, every deviation, the action items with owners, integrity proof",
    ),
    (
        "SOC 2 (AICPA Trust Services Criteria), A1.3",
        "recovery plan procedures supporting system recovery are tested",
        "supports: dated recovery tests with their procedure, results against the RTO, restore verification, \
         remediation items tracked from open to closed",
    ),
    (
        "ISO 22301:2019, 8.5 Exercise programme",
        "exercises consistent with the continuity objectives, with post-exercise reports and actions for improvement",
        "supports: the exercise record per run, its objectives and measured results, the deviations and action items \
         that feed improvement, the trend across exercises",
    ),
];

const DISCLAIMER: &str = "This bundle supports evidence for the controls below. It is not a certification, an \
attestation or an opinion of compliance: an assessor judges whether it suffices.";

fn verdict(report: &Report) -> String {
    crate::report::headline::verdict(report)
}

fn rto(report: &Report) -> String {
    let phase = report.phase(PhaseId::Rto);
    let measured = phase.and_then(|p| p.seconds).map(human_seconds).unwrap_or_else(|| "not measured".into());
    match phase.and_then(|p| p.objective_seconds) {
        Some(o) => format!("{measured} (objective {})", human_seconds(o)),
        None => measured,
    }
}

fn integrity(entry: &Entry) -> String {
    match (&entry.verification, &entry.unverified) {
        (_, Some(why)) => format!("FAILED: {why}"),
        (Some(v), None) if entry.intact && v.authentic() => format!("intact; signature {}", v.signature.describe()),
        (Some(v), None) if entry.intact => {
            format!("intact files, authenticity NOT proven (--allow-unsigned); signature {}", v.signature.describe())
        }
        (Some(v), None) => {
            let mut problems: Vec<String> = Vec::new();
            problems.extend(v.tampered.iter().map(|f| format!("tampered {f}")));
            problems.extend(v.missing.iter().map(|f| format!("missing {f}")));
            problems.extend(v.added.iter().map(|f| format!("added {f}")));
            problems.extend(v.not_files.iter().map(|f| format!("not a regular file {f}")));
            problems.extend(v.moved.iter().cloned());
            if problems.is_empty() {
                problems.push("not signed by a trusted key".into());
            }
            format!("FAILED: {}; signature {}", problems.join(", "), v.signature.describe())
        }
        (None, None) => "FAILED: no manifest".into(),
    }
}

fn who(report: &Report) -> [String; 3] {
    let none = || "not recorded".to_string();
    match &report.provenance {
        Some(p) => [
            p.initiator_line(),
            p.change.clone().unwrap_or_else(|| "none given".into()),
            p.approved_by.clone().unwrap_or_else(|| "none given".into()),
        ],
        None => [none(), none(), none()],
    }
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn deviation_line(d: &Deviation) -> String {
    let at = d.t_seconds.map(|t| format!(" at t+{}", human_seconds(t))).unwrap_or_default();
    format!("{}{at}: {}", d.kind.label(), d.what)
}

/// The line both indexes open with: how many drills and incidents, and how many of their run directories are intact.
fn summary(b: &Bundle) -> String {
    let drills = b.runs.iter().filter(|e| e.report.kind == RunKind::Drill).count();
    let intact = b.runs.iter().filter(|e| e.intact()).count();
    format!(
        "{} and {}; {intact} of {} run directories verified intact against their manifests.",
        count(drills, "drill"),
        count(b.runs.len() - drills, "incident"),
        b.runs.len()
    )
}

fn markdown(b: &Bundle) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Resilience testing evidence, {} to {}\n", b.since.date_naive(), b.until.date_naive());
    let _ = writeln!(out, "Generated {} by {}. {DISCLAIMER}\n", b.generated.format("%Y-%m-%d %H:%M UTC"), b.tool);
    let _ = writeln!(out, "{}\n", summary(b));
    out.push_str("## Runs\n\n| Started (UTC) | Kind | Drill | Run | Verdict | RTO | Change | Approved by | Initiated by | Deviations | Action items | Integrity |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for e in &b.runs {
        let r = &e.report;
        let [initiator, change, approver] = who(r);
        let cells = [
            r.started.format("%Y-%m-%d %H:%M").to_string(),
            r.kind.as_str().into(),
            r.drill.name.clone(),
            if e.report_md.is_empty() { r.run_id.clone() } else { format!("[{}]({})", r.run_id, e.report_md) },
            verdict(r),
            rto(r),
            change,
            approver,
            initiator,
            r.deviations.len().to_string(),
            e.action_items.len().to_string(),
            integrity(e),
        ];
        let cells: Vec<String> = cells.iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    markdown_details(b, &mut out);
    out
}

fn markdown_details(b: &Bundle, out: &mut String) {
    out.push_str("\n## RTO trend\n\n");
    for (drill, points) in trend(b) {
        let line: Vec<String> = points.iter().map(|(date, rto)| format!("{date}: {rto}")).collect();
        let _ = writeln!(out, "- **{drill}**: {}", line.join(" → "));
    }
    out.push_str("\n## Deviations\n\n");
    for e in b.runs.iter().filter(|e| !e.report.deviations.is_empty()) {
        let _ = writeln!(out, "### {}\n", e.report.run_id);
        for d in &e.report.deviations {
            let _ = writeln!(out, "- {}", deviation_line(d));
        }
        out.push('\n');
    }
    out.push_str("\n## Action items\n\n| Run | Objective | Measured | Likely cause | Owner | Status |\n|---|---|---|---|---|---|\n");
    for e in &b.runs {
        for t in &e.action_items {
            let status = t.closed_by.as_ref().map_or_else(|| "open".to_string(), |r| format!("closed by {r}"));
            let cells = [&e.report.run_id, &t.item.objective, &t.item.measured, &t.item.cause, &t.item.owner, &status];
            let cells: Vec<String> = cells.iter().map(|c| md_cell(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
    }
    out.push_str("\n## Manifests and their verification\n\nEach run directory is copied whole; check one again with `hybrid-drill verify runs/<drill>/<stamp>`.\n\n");
    for e in &b.runs {
        let _ = writeln!(out, "- `{}/manifest.json`: {}", e.path, integrity(e));
    }
    out.push_str("\n## Controls this evidence supports\n\n| Control | What it asks | What this bundle supplies |\n|---|---|---|\n");
    for (control, asks, supplies) in CONTROLS {
        let _ = writeln!(out, "| {} | {} | {} |", md_cell(control), md_cell(asks), md_cell(supplies));
    }
    let _ = writeln!(out, "\n{DISCLAIMER}");
    for w in &b.warnings {
        let _ = writeln!(out, "\nwarning: {w}");
    }
}

/// Per drill, its runs' RTO in order: (date, RTO).
fn trend(b: &Bundle) -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for e in &b.runs {
        let point = (
            e.report.started.format("%Y-%m-%d").to_string(),
            format!("{} ({})", rto(&e.report), e.report.kind.as_str()),
        );
        match out.iter_mut().find(|(d, _)| *d == e.report.drill.name) {
            Some((_, points)) => points.push(point),
            None => out.push((e.report.drill.name.clone(), vec![point])),
        }
    }
    out
}

fn html_index(b: &Bundle) -> String {
    let title = format!("Resilience testing evidence, {} to {}", b.since.date_naive(), b.until.date_naive());
    let body = html! {
        header {
            h1 { (title) }
            p class="muted" { "Generated " (b.generated.format("%Y-%m-%d %H:%M UTC")) " by " (b.tool) ". " (DISCLAIMER) }
            @let failed = b.runs.iter().filter(|e| !e.intact()).count();
            p id="intact" class=(if failed > 0 { "callout" } else { "qualifier" }) {
                @if failed > 0 {
                    strong { (if failed == 1 { "1 run directory".to_string() } else { format!("{failed} run directories") }) " NOT intact. " }
                }
                (summary(b))
            }
        }
        h2 { "Runs" }
        div class="scroll" { table class="runs" {
            thead { tr { @for h in ["Started (UTC)", "Kind", "Drill", "Run", "Verdict", "RTO", "Change", "Approved by", "Initiated by", "Deviations", "Action items", "Integrity"] { th { (h) } } } }
            tbody { @for e in &b.runs { (html_row(e)) } }
        } }
        h2 { "RTO trend" }
        ul { @for (drill, points) in trend(b) { li { strong { (drill) } ": " (points.iter().map(|(d, r)| format!("{d}: {r}")).collect::<Vec<_>>().join(" → ")) } } }
        (html_details(b))
    };
    crate::report::page::page(&title, body)
}

fn html_row(e: &Entry) -> Markup {
    let r = &e.report;
    let [initiator, change, approver] = who(r);
    html! {
        tr data-run=(r.run_id) {
            td { (r.started.format("%Y-%m-%d %H:%M")) }
            td { (r.kind.as_str()) }
            td { (r.drill.name) }
            td {
                @if e.report_html.is_empty() { (r.run_id) } @else { a href=(e.report_html) { (r.run_id) } }
            }
            td { (verdict(r)) }
            td { (rto(r)) }
            td { (change) }
            td { (approver) }
            td { (initiator) }
            td class="num" { (r.deviations.len()) }
            td class="num" { (e.action_items.len()) }
            @if e.intact() { td class="passed" { (integrity(e)) } } @else { td class="failed" { strong { (integrity(e)) } } }
        }
    }
}

fn html_details(b: &Bundle) -> Markup {
    html! {
        h2 { "Deviations" }
        @for e in b.runs.iter().filter(|e| !e.report.deviations.is_empty()) {
            h3 { (e.report.run_id) }
            ul { @for d in &e.report.deviations { li { (deviation_line(d)) } } }
        }
        h2 { "Action items" }
        table {
            thead { tr { @for h in ["Run", "Objective", "Measured", "Likely cause", "Owner", "Status"] { th { (h) } } } }
            tbody { @for e in &b.runs { @for t in &e.action_items { tr {
                td { (e.report.run_id) } td { (t.item.objective) } td { (t.item.measured) } td { (t.item.cause) }
                td { (t.item.owner) }
                td { (t.closed_by.as_ref().map_or_else(|| "open".to_string(), |r| format!("closed by {r}"))) }
            } } } }
        }
        h2 { "Manifests and their verification" }
        ul { @for e in &b.runs { li class=(if e.intact() { "passed" } else { "failed" }) { code { (e.path) "/manifest.json" } ": " (integrity(e)) } } }
        h2 { "Controls this evidence supports" }
        table {
            thead { tr { th { "Control" } th { "What it asks" } th { "What this bundle supplies" } } }
            tbody { @for (control, asks, supplies) in CONTROLS { tr { td { (control) } td { (asks) } td { (supplies) } } } }
        }
        p class="muted" { (DISCLAIMER) }
        @for w in &b.warnings { p class="muted" { "warning: " (w) } }
    }
}
