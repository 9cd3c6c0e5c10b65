//! Secret references in a drill file (`${env:NAME}`, `${file:/path}`): where they may stand, whether they can be read
//! now, and credentials written in the file itself, each located like any other mistake.

use serde_json::Value;

use super::diagnostics::{Diagnostic, Location};
use super::parse::{SpanMap, index, join};
use crate::secrets;

/// Keys whose values are URLs the tool sends requests to, or files it reads credentials from: a reference there is
/// read when the value is used.
const URL_KEYS: [&str; 3] = ["url", "alertmanager", "credentials"];
/// Keys whose values are hook commands: a reference in an argument is read when the hook starts.
const HOOK_KEYS: [&str; 4] = ["command", "undo", "fail", "recover"];

/// Every problem with the document's secret references and written-in credentials.
pub(super) fn check(value: &Value, spans: &SpanMap, source: &str) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    walk(value, "", None, spans, source, &mut problems);
    problems
}

/// Where a string sits: under a URL key, an argument of a hook, or elsewhere.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    Url,
    Hook,
}

fn walk(value: &Value, path: &str, place: Option<Place>, spans: &SpanMap, source: &str, out: &mut Vec<Diagnostic>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let place = if URL_KEYS.contains(&key.as_str()) {
                    Some(Place::Url)
                } else if HOOK_KEYS.contains(&key.as_str()) {
                    Some(Place::Hook)
                } else {
                    None
                };
                walk(v, &join(path, key), place, spans, source, out);
            }
        }
        Value::Array(items) => {
            let inner = place.filter(|p| *p == Place::Hook);
            for (i, v) in items.iter().enumerate() {
                walk(v, &index(path, i), inner, spans, source, out);
            }
        }
        Value::String(text) => string(text, path, place, spans, source, out),
        _ => {}
    }
}

fn string(text: &str, path: &str, place: Option<Place>, spans: &SpanMap, source: &str, out: &mut Vec<Diagnostic>) {
    let at = spans.value(path);
    if secrets::has_reference(text) {
        if place.is_none() {
            let message = "a secret reference is read only in a URL (`url`, `alertmanager`), a credentials file \
                           (`credentials`) or a hook's arguments";
            out.push(Diagnostic::new(message, at));
            return;
        }
        for problem in secrets::check(text) {
            out.push(Diagnostic::new(problem.error.to_string(), narrow(at, source, text, problem.start, problem.end)));
        }
        return;
    }
    if place == Some(Place::Url) && written_credentials(text) {
        out.push(
            Diagnostic::new(
                "credentials written into the drill file: it is copied into every run directory and report",
                at,
            )
            .with_help("read them when the drill runs: `http://user:${env:AM_PASSWORD}@host:9093` or `${file:/path}`"),
        );
    }
}

/// Whether a URL carries a user, a password or a token parameter as written.
fn written_credentials(text: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(text.trim()) else { return false };
    !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some_and(|q| secrets::redact(&format!("?{q}")).contains(secrets::MASK))
}

/// The part of a scalar at `at` from byte `start` to `end` of its text, when the text stands in the file as written
/// (a plain or quoted scalar on one line); the whole scalar otherwise.
fn narrow(at: Location, source: &str, text: &str, start: usize, end: usize) -> Location {
    let Some(rest) = source.get(at.start..) else { return at };
    let skip = usize::from(rest.starts_with(['"', '\'']));
    if !rest[skip..].starts_with(text) {
        return at;
    }
    let from = at.start + skip + start;
    let column = at.column + source[at.start..from].chars().count();
    Location { line: at.line, column, start: from, end: at.start + skip + end }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(yaml: &str) -> Vec<(String, usize, usize)> {
        let doc = super::super::parse::parse_document(yaml).unwrap();
        check(&doc.value, &doc.spans, yaml)
            .into_iter()
            .map(|d| (d.message, d.location.line, d.location.column))
            .collect()
    }

    #[test]
    fn references_are_located_to_the_reference_and_allowed_in_urls_and_hooks_only() {
        let yaml = "spec:\n  notify:\n    - url: 'http://u:${env:HD_SURELY_UNSET}@h/'\n  steps:\n    - exec: {command: [ipmitool, -P, \"${vault:x}\"]}\n  description: ${env:PATH}\n  ok: {command: [a, '${env:PATH}'], url: 'https://${file:/dev/null}@h'}\n";
        assert_eq!(
            problems(yaml),
            [
                (
                    "a secret reference is read only in a URL (`url`, `alertmanager`), a credentials file \
                     (`credentials`) or a hook's arguments"
                        .into(),
                    6,
                    16
                ),
                ("environment variable `HD_SURELY_UNSET` is not set".into(), 3, 22),
                ("unknown secret source `vault`: use `${env:NAME}` or `${file:/path}`".into(), 5, 39),
            ]
        );
    }

    #[test]
    fn credentials_written_into_a_url_are_refused() {
        let yaml = "silences:\n  - alertmanager: http://admin:hunter2@am:9093\nnotify:\n  - url: https://h/x?token=abc\n  - url: https://h/x?room=1\n";
        let found = problems(yaml);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|(m, _, _)| m.starts_with("credentials written into the drill file")));
    }
}
