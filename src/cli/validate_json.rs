//! `validate -o json`: every file's verdict, its problems located and its warnings, in one stable object
//! (`schema: hybrid-drill.io/validate/v1`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::drill::{self, Diagnostic, DrillError, LoadedDrill, Severity};

/// The whole answer: `valid` when every file is.
pub(super) fn render(checked: &[(&PathBuf, Result<LoadedDrill, DrillError>)]) -> Value {
    let files: Vec<Value> = checked.iter().map(|(file, loaded)| one(file, loaded)).collect();
    json!({
        "schema": "hybrid-drill.io/validate/v1",
        "valid": checked.iter().all(|(_, loaded)| loaded.is_ok()),
        "files": files,
    })
}

fn one(file: &Path, loaded: &Result<LoadedDrill, DrillError>) -> Value {
    let path = file.display().to_string();
    match loaded {
        Ok(d) => {
            // The located warnings (an objective no step waits for) first, then what the drill leaves in place.
            let left = drill::left_in_place::warnings(&d.drill).into_iter().map(|message| unlocated(&message));
            let warnings: Vec<Value> = d.warnings.iter().map(located).chain(left).collect();
            json!({
                "file": path,
                "valid": true,
                "drill": d.drill.metadata.name,
                "steps": d.drill.spec.steps.len(),
                "warnings": warnings,
                "errors": [],
            })
        }
        Err(DrillError::Invalid { diagnostics, .. }) => {
            let (errors, warnings): (Vec<&Diagnostic>, Vec<&Diagnostic>) =
                diagnostics.iter().partition(|d| d.severity == Severity::Error);
            let errors: Vec<Value> = errors.into_iter().map(located).collect();
            let warnings: Vec<Value> = warnings.into_iter().map(located).collect();
            json!({"file": path, "valid": false, "drill": null, "steps": null, "warnings": warnings, "errors": errors})
        }
        Err(e @ DrillError::Read { .. }) => json!({
            "file": path,
            "valid": false,
            "drill": null,
            "steps": null,
            "warnings": [],
            "errors": [unlocated(&e.to_string())],
        }),
    }
}

fn located(d: &Diagnostic) -> Value {
    json!({"message": d.message, "line": d.location.line, "column": d.location.column, "label": d.label,
           "help": d.help})
}

fn unlocated(message: &str) -> Value {
    json!({"message": message, "line": null, "column": null, "label": null, "help": null})
}
