//! Secret references in a drill file (`${env:NAME}`, `${file:/path}`): where they may stand, whether they can be read
//! now, and secrets written in the file itself (a token, a password, credentials in a URL, a webhook URL that is its
//! own secret), each located like any other mistake: the drill file is copied into every run directory and report.

use serde_json::Value;

use super::diagnostics::{Diagnostic, Location};
use super::parse::{SpanMap, index, join};
use crate::secrets;

/// Keys whose values are URLs the tool sends requests to, or files it reads credentials from: a reference there is
/// read when the value is used.
const URL_KEYS: [&str; 3] = ["url", "alertmanager", "credentials"];
/// Keys whose values are hook commands: a reference in an argument is read when the hook starts.
const HOOK_KEYS: [&str; 4] = ["command", "undo", "fail", "recover"];
/// Keys whose values are secrets themselves (Prometheus's `bearerToken`, `basicAuth.password`): only a reference, or
/// a Kubernetes Secret's key (`{secret: {namespace, name, key}}`), may stand there.
const SECRET_KEYS: [&str; 2] = ["bearerToken", "password"];

/// Where a secret reference may stand, for the error that finds one elsewhere.
pub const WHERE_READ: &str = "a secret reference is read only in a URL (`url`, `alertmanager`), a credentials file \
                              (`credentials`), a secret (`bearerToken`, `basicAuth.password`) or a hook's arguments";

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
    Secret,
}

fn walk(value: &Value, path: &str, place: Option<Place>, spans: &SpanMap, source: &str, out: &mut Vec<Diagnostic>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let place = if URL_KEYS.contains(&key.as_str()) {
                    Some(Place::Url)
                } else if HOOK_KEYS.contains(&key.as_str()) {
                    Some(Place::Hook)
                } else if SECRET_KEYS.contains(&key.as_str()) {
                    Some(Place::Secret)
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
            out.push(Diagnostic::new(WHERE_READ, at));
            return;
        }
        for problem in secrets::check(text) {
            out.push(Diagnostic::new(problem.error.to_string(), narrow(at, source, text, problem.start, problem.end)));
        }
        return;
    }
    if place == Some(Place::Secret) {
        let key = path.rsplit('.').next().unwrap_or(path);
        let example = if key == "password" { "${env:PROM_PASSWORD}" } else { "${env:PROM_TOKEN}" };
        out.push(
            Diagnostic::new(
                format!(
                    "a secret written into the drill file (`{key}`): it is copied into every run directory and report"
                ),
                at,
            )
            .with_help(format!(
                "read it when the drill runs: `{key}: {example}`, `${{file:/path}}` or \
                 `{{secret: {{namespace: NS, name: NAME, key: KEY}}}}`"
            )),
        );
        return;
    }
    if place == Some(Place::Url) && path.starts_with("spec.notify") && secret_webhook(text) {
        out.push(
            Diagnostic::new(
                "a webhook URL that is its own secret written into the drill file: it is copied into every run \
                 directory and report",
                at,
            )
            .with_help("read it when the drill runs: `url: ${env:SLACK_WEBHOOK_URL}`, or pass it with `--notify`"),
        );
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

/// Whether a webhook URL is a secret by itself: a chat service's incoming webhook (Slack, Discord, Microsoft Teams,
/// Mattermost, Google Chat) carries its token in the path, so anyone holding the URL can post as the drill.
fn secret_webhook(text: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(text.trim()) else { return false };
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let path = url.path();
    let known = host == "hooks.slack.com"
        || host.ends_with(".webhook.office.com")
        || host == "chat.googleapis.com"
        || ((host == "discord.com" || host == "discordapp.com") && path.starts_with("/api/webhooks/"))
        || path.starts_with("/webhookb2/");
    // Mattermost and self-hosted services: `/hooks/` followed by a long random key.
    known || path.split('/').skip_while(|s| *s != "hooks").nth(1).is_some_and(token_like)
}

/// A path segment that reads as a generated key: long, letters and digits mixed.
fn token_like(segment: &str) -> bool {
    segment.len() >= 20
        && segment.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && segment.chars().any(|c| c.is_ascii_digit())
        && segment.chars().any(|c| c.is_ascii_alphabetic())
}

/// The part of a scalar at `at` from byte `start` to `end` of its text, when the text stands in the file as written
/// (a plain or quoted scalar on one line); the whole scalar otherwise.
pub(super) fn narrow(at: Location, source: &str, text: &str, start: usize, end: usize) -> Location {
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
                (WHERE_READ.into(), 6, 16),
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

    #[test]
    fn secrets_take_references_or_a_kubernetes_secret_and_never_their_value() {
        let yaml = "spec:\n  slo:\n    prometheus:\n      bearerToken: ${env:PATH}\n      basicAuth: {username: u, password: {secret: {namespace: m, name: p, key: k}}}\n  other:\n    bearerToken: eyJhbGciOi\n    basicAuth: {username: u, password: hunter2}\n";
        let found = problems(yaml);
        let mut keys: Vec<_> = found.iter().map(|(m, l, _)| (m.split(':').next().unwrap().to_string(), *l)).collect();
        keys.sort_by_key(|(_, line)| *line);
        assert_eq!(
            keys,
            [
                ("a secret written into the drill file (`bearerToken`)".to_string(), 7),
                ("a secret written into the drill file (`password`)".to_string(), 8)
            ]
        );
    }

    #[test]
    fn a_webhook_url_that_is_its_own_secret_is_refused_and_a_plain_one_is_not() {
        for url in [
            "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "https://discord.com/api/webhooks/123/abc",
            "https://chat.example.com/hooks/3x9k2m8q7w1e5r4t6y0u2i8o9p",
        ] {
            let yaml = format!("spec:\n  notify:\n    - url: {url}\n");
            assert_eq!(problems(&yaml).len(), 1, "{url}");
        }
        for url in ["http://127.0.0.1:8080/hook", "https://ops.example.com/hooks/drills"] {
            assert!(problems(&format!("spec:\n  notify:\n    - url: {url}\n")).is_empty(), "{url}");
        }
    }
}
