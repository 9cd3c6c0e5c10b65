//! `validate -o json`: every file's verdict, its problems located and its warnings, in one stable object
//! (`schema: hybrid-drill.io/validate/v1`).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::drill::{self, DrillError, LoadedDrill};

/// The whole answer: `valid` when every file is.
pub(super) fn render(checked: &[(&PathBuf, Result<LoadedDrill, DrillError>)]) -> Value {
    let files: Vec<Value> = checked.iter().map(|(file, loaded)| one(file, loaded)).collect();
    json!({
        "schema": "hybrid-drill.io/validate/v1",
        "valid": checked.iter().all(|(_, loaded)| loaded.is_ok()),
        "files": files,
    })
}

fn one(file: &PathBuf, loaded: &Result<LoadedDrill, DrillError>) -> Value {
    let path = file.display().to_string();
    match loaded {
        Ok(d) => json!({
            "file": path,
            "valid": true,
            "drill": d.drill.metadata.name,
            "steps": d.drill.spec.steps.len(),
            "warnings": drill::left_in_place::warnings(&d.drill),
            "errors": [],
        }),
        Err(DrillError::Invalid { diagnostics, .. }) => {
            let errors: Vec<Value> = diagnostics
                .iter()
                .map(|d| {
                    json!({"message": d.message, "line": d.location.line, "column": d.location.column,
                           "label": d.label, "help": d.help})
                })
                .collect();
            json!({"file": path, "valid": false, "drill": null, "steps": null, "warnings": [], "errors": errors})
        }
        Err(e @ DrillError::Read { .. }) => json!({
            "file": path,
            "valid": false,
            "drill": null,
            "steps": null,
            "warnings": [],
            "errors": [{"message": e.to_string(), "line": null, "column": null, "label": null, "help": null}],
        }),
    }
}
