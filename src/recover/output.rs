//! What `recover` says it did: each change restored, each check of the restored state that held, each change left,
//! each crashed run sealed, as lines while it works (text) or as one object at its end for scripts (`-o json`,
//! `schema: hybrid-drill.io/recover/v1`), so a CI step or the in-cluster schedule can read what a recovery left.

use serde::Serialize;

/// One change or check and the journal (or `marks in the cluster`) it came from.
#[derive(Debug, Serialize)]
struct Item {
    what: String,
    from: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

/// A crashed run's directory sealed once its restore held.
#[derive(Debug, Serialize)]
struct Sealed {
    run_dir: String,
    verdict: String,
}

/// Everything `recover` says, printed as it happens in text, collected for the one JSON object in JSON.
#[derive(Debug, Default, Serialize)]
pub struct Said {
    #[serde(skip)]
    json: bool,
    restored: Vec<Item>,
    verified: Vec<Item>,
    not_restored: Vec<Item>,
    not_verified: Vec<String>,
    sealed: Vec<Sealed>,
    errors: Vec<String>,
}

impl Said {
    pub fn new(json: bool) -> Said {
        Said { json, ..Said::default() }
    }

    fn line(&self, text: &str) {
        if !self.json {
            println!("{text}");
        }
    }

    pub fn restored(&mut self, what: &str, from: &str) {
        self.line(&format!("restored: {what} (from {from})"));
        self.restored.push(Item { what: what.into(), from: from.into(), why: None });
    }

    pub fn verified(&mut self, what: &str, from: &str) {
        self.line(&format!("verified: {what} (from {from})"));
        self.verified.push(Item { what: what.into(), from: from.into(), why: None });
    }

    pub fn not_restored(&mut self, what: &str, why: &str, from: &str) {
        let why = crate::secrets::redact(why).to_string();
        self.line(&format!("NOT RESTORED: {what}: {why} (from {from})"));
        self.not_restored.push(Item { what: what.into(), from: from.into(), why: Some(why) });
    }

    pub fn not_verified(&mut self, why: &str) {
        self.line(&format!("NOT VERIFIED: {why}; run `hybrid-drill recover` again once they can be listed"));
        self.not_verified.push(why.into());
    }

    pub fn sealed(&mut self, run_dir: &str, verdict: &str) {
        self.line(&format!("sealed: {run_dir} ({verdict})"));
        self.sealed.push(Sealed { run_dir: run_dir.into(), verdict: verdict.into() });
    }

    /// An error is said on stderr in both formats (a person watching a JSON run still sees it), and kept for JSON.
    pub fn error(&mut self, message: &str) {
        let message = crate::secrets::redact(message).to_string();
        eprintln!("error: {message}");
        self.errors.push(message);
    }

    /// Whether anything was restored or failed: else the text says `nothing to recover`.
    pub fn acted(&self) -> bool {
        !(self.restored.is_empty() && self.not_restored.is_empty() && self.errors.is_empty())
    }

    pub fn nothing(&self) {
        self.line("nothing to recover");
    }

    /// The end: in JSON, the one object with the exit code; in text, the lines were said already.
    pub fn finish(&self, exit_code: u8) {
        if !self.json {
            return;
        }
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert("schema".into(), "hybrid-drill.io/recover/v1".into());
            object.insert("exit_code".into(), exit_code.into());
            object.insert("nothing_to_recover".into(), (!self.acted()).into());
        }
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        println!("{}", crate::secrets::redact(&text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_collects_what_text_prints() {
        let mut said = Said::new(true);
        assert!(!said.acted());
        said.restored("cordon node/hybrid-gpu-1", "reports/x/journal.jsonl");
        said.not_restored("label node/hybrid-gpu-2", "403 Forbidden", "marks in the cluster");
        said.sealed("reports/x", "crashed; restored by recover");
        let value = serde_json::to_value(&said).unwrap();
        assert_eq!(value["restored"][0]["what"], "cordon node/hybrid-gpu-1");
        assert_eq!(value["not_restored"][0]["why"], "403 Forbidden");
        assert_eq!(value["sealed"][0]["run_dir"], "reports/x");
        assert!(value.get("json").is_none() && value["restored"][0].get("why").is_none());
        assert!(said.acted());
    }
}
