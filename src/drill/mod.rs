//! The drill file: parsing with locations, validation into the typed model, JSON Schema and diagnostics. The raw
//! form serde reads stays in here; the crate sees only the validated [`Drill`].

pub mod diagnostics;
pub mod left_in_place;
mod model;
pub mod parse;
pub mod placeholders;
mod raw;
mod raw_slo;
pub mod ready;
mod references;
pub mod slo;
pub mod validate;

use std::path::{Path, PathBuf};

pub use crate::domain::{Cni, CutFidelity, RestoreTarget};
pub use diagnostics::{Diagnostic, Location};
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
}

#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    #[error("cannot read drill file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} in {}", plural(&.diagnostics.len()), .path.display())]
    Invalid { path: PathBuf, source_text: String, diagnostics: Vec<Diagnostic> },
}

fn plural(n: &usize) -> String {
    if *n == 1 { "1 error".into() } else { format!("{n} errors") }
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
    let source =
        std::fs::read_to_string(path).map_err(|source| DrillError::Read { path: path.to_path_buf(), source })?;
    from_source(path, source)
}

pub fn from_source(path: &Path, source: String) -> Result<LoadedDrill, DrillError> {
    let invalid = |diagnostics: Vec<Diagnostic>, source_text: &str| DrillError::Invalid {
        path: path.to_path_buf(),
        source_text: source_text.to_string(),
        diagnostics,
    };
    // Secret references first: one that cannot be read is named where it stands, before anything reads the file.
    if let Ok(doc) = parse::parse_document(&source) {
        let problems = references::check(&doc.value, &doc.spans, &source);
        if !problems.is_empty() {
            return Err(invalid(problems, &source));
        }
    }
    let (raw, spans) = parse::parse_drill(&source).map_err(|d| invalid(d, &source))?;
    let drill = validate::validate(&raw, &spans).map_err(|problems| invalid(problems, &source))?;
    Ok(LoadedDrill { drill, path: path.to_path_buf(), source })
}

/// The JSON Schema of the drill format, for editors.
pub fn json_schema() -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(raw::Drill)).unwrap_or_default();
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("$id".into(), "https://hybrid-drill.io/schemas/drill-v1alpha1.json".into());
    }
    schema
}
