//! The drill file: parsing with locations, validation into the typed model, JSON Schema and diagnostics. The raw
//! form serde reads stays in here; the crate sees only the validated [`Drill`].

pub mod commands;
pub mod counter;
pub mod diagnostics;
pub mod duration;
pub mod freeze;
pub mod left_in_place;
mod model;
pub mod nets;
pub mod parse;
pub mod placeholders;
pub mod promql;
mod raw;
mod raw_gpu_fault;
mod raw_nets;
mod raw_slo;
pub mod ready;
mod references;
pub mod slo;
mod typecheck;
pub mod validate;
pub mod windows;

use std::path::{Path, PathBuf};

pub use crate::domain::{Cni, CutFidelity, RestoreTarget};
pub use diagnostics::{Diagnostic, Location, Severity};
pub use model::*;
pub use ready::{ReadyPods, ReplicaBasis};

/// The namespace deploy/ runs the scheduled drill and the watch in: protected in every drill, so a drain never evicts
/// the tool's own pod.
pub const TOOL_NAMESPACE: &str = "hybrid-drill";

/// A drill read from disk and proven valid; nothing invalid gets past this type.
#[derive(Debug, Clone)]
pub struct LoadedDrill {
    pub drill: Drill,
    pub path: PathBuf,
    pub source: String,
    /// What the drill will not do as written (an objective no step waits for), each located.
    pub warnings: Vec<Diagnostic>,
}

impl LoadedDrill {
    /// The warnings rendered like errors, with their source line; empty when there are none.
    pub fn render_warnings(&self) -> String {
        let name = self.path.display().to_string();
        self.warnings.iter().map(|d| d.render(&name, &self.source)).collect::<Vec<_>>().join("\n")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    #[error("cannot read drill file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} in {}", tally(.diagnostics), .path.display())]
    Invalid { path: PathBuf, source_text: String, diagnostics: Vec<Diagnostic> },
}

/// `3 errors`, or `2 errors and 1 warning` when warnings were found beside them.
fn tally(diagnostics: &[Diagnostic]) -> String {
    let count = |severity, word: &str| {
        let n = diagnostics.iter().filter(|d| d.severity == severity).count();
        (n, if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") })
    };
    match (count(Severity::Error, "error"), count(Severity::Warning, "warning")) {
        ((_, errors), (0, _)) => errors,
        ((_, errors), (_, warnings)) => format!("{errors} and {warnings}"),
    }
}

impl DrillError {
    /// Every diagnostic rendered with its source line and caret.
    pub fn render(&self) -> String {
        match self {
            DrillError::Read { .. } => format!("error: {self}\n"),
            DrillError::Invalid { path, source_text, diagnostics } => {
                let name = path.display().to_string();
                let mut out: String =
                    diagnostics.iter().map(|d| d.render(&name, source_text)).collect::<Vec<_>>().join("\n");
                out.push_str(&format!("\nerror: {self}\n"));
                out
            }
        }
    }
}

pub fn load(path: &Path) -> Result<LoadedDrill, DrillError> {
    load_expecting(path, validate::Expected::default())
}

/// Loads a drill and checks it against what the command was given (`--context`).
pub fn load_expecting(path: &Path, expected: validate::Expected) -> Result<LoadedDrill, DrillError> {
    let source =
        std::fs::read_to_string(path).map_err(|source| DrillError::Read { path: path.to_path_buf(), source })?;
    check(path, source, expected)
}

pub fn from_source(path: &Path, source: String) -> Result<LoadedDrill, DrillError> {
    check(path, source, validate::Expected::default())
}

/// Every problem in the file in one pass, in the order of its lines: syntax first (the parser stops at the first),
/// then every wrong type, then what the types cannot say.
fn check(path: &Path, source: String, expected: validate::Expected) -> Result<LoadedDrill, DrillError> {
    let invalid = |mut diagnostics: Vec<Diagnostic>, source_text: &str| {
        diagnostics.sort_by_key(|d| d.location.line);
        DrillError::Invalid { path: path.to_path_buf(), source_text: source_text.to_string(), diagnostics }
    };
    let doc = parse::parse_document(&source).map_err(|d| invalid(vec![d], &source))?;
    // Secret references first: one that cannot be read is named where it stands, before anything reads the file.
    let problems = references::check(&doc.value, &doc.spans, &source);
    if !problems.is_empty() {
        return Err(invalid(problems, &source));
    }
    let (raw, mut problems, pruned) = typecheck::check(&doc.value, &doc.spans);
    problems.extend(promql::check_document(&doc.value, &doc.spans, &source));
    let Some(raw) = raw else { return Err(invalid(problems, &source)) };
    let validated = validate::validate(&raw, &doc.spans, &pruned, expected);
    problems.extend(validated.problems);
    if !problems.is_empty() {
        problems.extend(validated.warnings.iter().cloned());
    }
    match validated.drill {
        Some(drill) if problems.is_empty() => {
            Ok(LoadedDrill { drill, path: path.to_path_buf(), source, warnings: validated.warnings })
        }
        _ => Err(invalid(problems, &source)),
    }
}

/// The JSON Schema of the drill format, for editors.
pub fn json_schema() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(raw::Drill)).unwrap_or_default();
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("$id".into(), "https://hybrid-drill.io/schemas/drill-v1alpha1.json".into());
    }
    schema
}
