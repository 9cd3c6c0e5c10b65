//! The drill file's types, every mistake at once: serde stops at the first wrong value, so each one found is told in
//! the user's words, taken out of the document, and the rest read again, until the rest reads. What was taken out is
//! remembered, so later findings are located in the file as written and validation does not judge what is missing.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::diagnostics::Diagnostic;
use super::duration;
use super::parse::{SpanMap, index, join, suggest};
use super::raw::Drill;

/// Bounds the passes on a file so broken that each pass finds one more thing: past it, what was found is told.
const MAX_PASSES: usize = 200;

/// A path in the document, segment by segment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Item(usize),
}

/// What the type check took out of the document, in the file's own paths (`spec.steps[2].timeout`).
#[derive(Debug, Default, Clone)]
pub struct Pruned {
    paths: Vec<String>,
    /// The file's indices taken out of each list, so an index in what is left maps back to the file's.
    removed: BTreeMap<String, BTreeSet<usize>>,
}

impl Pruned {
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// A path in what is left, as the file spells it.
    pub fn original(&self, path: &str) -> String {
        let mut out = String::new();
        let mut rest = path;
        while let Some(open) = rest.find('[') {
            let Some(close) = rest[open..].find(']').map(|c| c + open) else { break };
            out.push_str(&rest[..open]);
            let Ok(k) = rest[open + 1..close].parse::<usize>() else { break };
            out = index(&out, self.file_index(&out, k));
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        out
    }

    fn file_index(&self, list: &str, k: usize) -> usize {
        match self.removed.get(list) {
            None => k,
            Some(gone) => (0..).filter(|i| !gone.contains(i)).nth(k).unwrap_or(k),
        }
    }

    /// Whether a finding at `path` would judge something taken out: it lies inside or around a pruned node, or in the
    /// steps when a step lost its action (their order and pairing no longer what the file says).
    pub fn hides(&self, path: &str) -> bool {
        self.paths.iter().any(|p| related(p, path) || (steps_reshaped(p) && related("spec.steps", path)))
    }

    /// Whether any part of the sections cross-field checks compare was taken out.
    pub fn touches_any(&self, sections: &[&str]) -> bool {
        self.paths.iter().any(|p| sections.iter().any(|s| related(s, p)))
    }
}

/// One path inside (or equal to) the other, segment-wise: `spec.steps[1]` holds `spec.steps[1].id`, not `[10]`.
fn related(a: &str, b: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        inner.strip_prefix(outer).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    };
    within(a, b) || within(b, a)
}

/// A whole step, or a key of one that may have been its action (a misspelt `cutt` too), was taken out: the steps'
/// order and pairing (a cut and its restore) are no longer what the file says.
fn steps_reshaped(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("spec.steps") else { return false };
    let Some(after_index) = rest.strip_prefix('[').and_then(|r| r.split_once(']')).map(|(_, r)| r) else {
        return true;
    };
    match after_index.strip_prefix('.') {
        None => true,
        Some(key) => !key.contains(['.', '[']) && !NOT_ACTIONS.contains(&key),
    }
}

/// The keys of a step besides its action.
const NOT_ACTIONS: &[&str] = &["timeout", "onDeviation"];

/// The typed drill if what is left reads, every type mistake found, and what was taken out to find them.
pub(super) fn check(document: &Value, spans: &SpanMap) -> (Option<Drill>, Vec<Diagnostic>, Pruned) {
    let mut value = document.clone();
    let mut pruned = Pruned::default();
    let mut problems = Vec::new();
    for _ in 0..MAX_PASSES {
        let read: Result<Drill, _> = serde_path_to_error::deserialize(&value);
        let err = match read {
            Ok(drill) => return (Some(drill), problems, pruned),
            Err(err) => err,
        };
        let mut at = segments(&err);
        let message = serde_message(&err);
        match Finding::read(&message) {
            Finding::UnknownKey { field, .. } if !ends_at(&at, &field) => at.push(Segment::Key(field.clone())),
            Finding::Missing(field) if pruned.paths.contains(&join(&spelled(&at, &pruned), &field)) => {
                // Its value was wrong and taken out: already told. Take out what needed it, and go on.
                if !take_out(&mut value, &at, &mut pruned) {
                    break;
                }
                continue;
            }
            _ => {}
        }
        let path = spelled(&at, &pruned);
        problems.push(diagnose(&message, &path, spans));
        if !take_out(&mut value, &at, &mut pruned) {
            break;
        }
    }
    (None, problems, pruned)
}

/// The error's path in what is left of the document.
fn segments(err: &serde_path_to_error::Error<serde_json::Error>) -> Vec<Segment> {
    use serde_path_to_error::Segment as S;
    err.path()
        .iter()
        .filter_map(|s| match s {
            S::Seq { index } => Some(Segment::Item(*index)),
            S::Map { key } => Some(Segment::Key(key.clone())),
            S::Enum { variant } => Some(Segment::Key(variant.clone())),
            S::Unknown => None,
        })
        .collect()
}

fn ends_at(at: &[Segment], field: &str) -> bool {
    matches!(at.last(), Some(Segment::Key(k)) if k == field)
}

/// The path in the file's own indices.
fn spelled(at: &[Segment], pruned: &Pruned) -> String {
    let mut path = String::new();
    for s in at {
        path = match s {
            Segment::Key(k) => join(&path, k),
            Segment::Item(i) => index(&path, pruned.file_index(&path, *i)),
        };
    }
    path
}

/// Removes the node at `at` from what is left; false when there is nothing left to remove (the root).
fn take_out(value: &mut Value, at: &[Segment], pruned: &mut Pruned) -> bool {
    let Some((last, parent)) = at.split_last() else { return false };
    let parent_path = spelled(parent, pruned);
    let removed = match (last, node_at(value, parent)) {
        (Segment::Key(k), Some(Value::Object(m))) => m.remove(k).map(|_| join(&parent_path, k)),
        (Segment::Item(i), Some(Value::Array(a))) if *i < a.len() => {
            a.remove(*i);
            let file_index = pruned.file_index(&parent_path, *i);
            pruned.removed.entry(parent_path.clone()).or_default().insert(file_index);
            Some(index(&parent_path, file_index))
        }
        _ => None,
    };
    match (removed, last) {
        (Some(path), _) => {
            pruned.paths.push(path);
            true
        }
        // A key serde names but the document lacks: take out what holds it.
        (None, Segment::Key(_)) => take_out(value, parent, pruned),
        (None, Segment::Item(_)) => false,
    }
}

fn node_at<'v>(value: &'v mut Value, at: &[Segment]) -> Option<&'v mut Value> {
    at.iter().try_fold(value, |node, s| match (s, node) {
        (Segment::Key(k), Value::Object(m)) => m.get_mut(k),
        (Segment::Item(i), Value::Array(a)) => a.get_mut(*i),
        _ => None,
    })
}

/// serde_json appends " at line L column C" relative to its own input, which is not the user's file.
fn serde_message(err: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let raw = err.inner().to_string();
    raw.split(" at line ").next().unwrap_or(&raw).to_string()
}

/// serde's message, read.
enum Finding {
    UnknownKey { field: String, expected: Vec<String> },
    UnknownValue { word: String, expected: Vec<String> },
    Missing(String),
    WrongType { found: String, expected: String },
    Duration(String),
    Other(String),
}

impl Finding {
    fn read(message: &str) -> Finding {
        if let Some(rest) = message.strip_prefix("unknown field `") {
            let (field, expected) = split_backticked(rest);
            return Finding::UnknownKey { field, expected };
        }
        if let Some(rest) = message.strip_prefix("unknown variant `") {
            let (word, expected) = split_backticked(rest);
            return Finding::UnknownValue { word, expected };
        }
        if let Some(rest) = message.strip_prefix("missing field `") {
            return Finding::Missing(rest.split('`').next().unwrap_or_default().to_string());
        }
        if let Some(rest) = message.strip_prefix(duration::REFUSED) {
            return Finding::Duration(rest.to_string());
        }
        let typed = message.strip_prefix("invalid type: ").or_else(|| message.strip_prefix("invalid value: "));
        if let Some((found, expected)) = typed.and_then(|t| t.rsplit_once(", expected ")) {
            return Finding::WrongType { found: found.to_string(), expected: expected.to_string() };
        }
        Finding::Other(message.to_string())
    }
}

/// One finding located and worded for the person who wrote the file.
fn diagnose(message: &str, path: &str, spans: &SpanMap) -> Diagnostic {
    let parent = path.rfind(['.', '[']).map_or("", |cut| &path[..cut]);
    // `fail[1]` rather than `[1]`: the list an item belongs to names it.
    let key = path.rsplit('.').next().unwrap_or(path);
    let place = if parent.is_empty() { "the drill".to_string() } else { format!("`{parent}`") };
    match Finding::read(message) {
        Finding::UnknownKey { field, expected } => {
            let mut d = Diagnostic::new(format!("unknown key `{field}` in {place}"), spans.key(path));
            if let Some(s) = suggest(&field, &expected) {
                d = d.with_label(format!("did you mean `{s}`?"));
            }
            d.with_help(format!("valid keys here: {}", expected.join(", ")))
        }
        Finding::UnknownValue { word, expected } => {
            let mut d = Diagnostic::new(format!("unknown value `{word}` for `{key}`"), spans.value(path));
            if let Some(s) = suggest(&word, &expected) {
                d = d.with_label(format!("did you mean `{s}`?"));
            }
            d.with_help(format!("valid values: {}", expected.join(", ")))
        }
        Finding::Missing(field) => {
            let place = if path.is_empty() { "the drill".to_string() } else { format!("`{path}`") };
            Diagnostic::new(format!("missing key `{field}` in {place}"), spans.value(path))
                .with_label(format!("`{field}` is required here"))
        }
        Finding::Duration(why) => Diagnostic::new(why, spans.value(path))
            .with_label(format!("`{key}` takes a duration"))
            .with_help(format!("write {}", duration::EXAMPLE)),
        Finding::WrongType { found, expected } => {
            let d = Diagnostic::new(
                format!("`{key}` must be {}, not {}", in_words(&expected), found_words(&found)),
                spans.value(path),
            );
            let scalar = ["integer", "floating point", "boolean"].iter().any(|k| found.starts_with(k));
            if expected == "a string" && scalar { d.with_help("quote it to make it text: \"5\", \"true\"") } else { d }
        }
        Finding::Other(message) => Diagnostic::new(format!("{message} at `{path}`"), spans.value(path)),
    }
}

/// serde's name of what it expected, as the person writing the file would say it.
fn in_words(expected: &str) -> String {
    let expected = expected.trim_matches('`');
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number (0 or more)".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "`true` or `false`".into(),
        "a string" | "a borrowed string" => "text".into(),
        "a sequence" => "a list".into(),
        "a map" => "a mapping of keys to values".into(),
        e if e.starts_with("struct ") => "a mapping of keys to values".into(),
        e if e.starts_with("unit variant") || e.starts_with("variant identifier") => "one of the listed words".into(),
        other => other.into(),
    }
}

/// serde's description of the value found: `string "x"` is `x`, `integer `5`` is 5.
fn found_words(found: &str) -> String {
    if let Some(s) = found.strip_prefix("string ") {
        return format!("`{}`", s.trim_matches('"'));
    }
    for kind in ["integer ", "floating point ", "boolean "] {
        if let Some(v) = found.strip_prefix(kind) {
            return v.to_string();
        }
    }
    match found {
        "sequence" => "a list".into(),
        "map" => "a mapping".into(),
        "unit value" | "null" => "nothing".into(),
        other => other.into(),
    }
}

/// From "drian`, expected one of `a`, `b`" takes the word and the expected list.
fn split_backticked(rest: &str) -> (String, Vec<String>) {
    let mut parts = rest.splitn(2, '`');
    let word = parts.next().unwrap_or_default().to_string();
    let tail = parts.next().unwrap_or_default();
    let expected = tail.split('`').skip(1).step_by(2).map(str::to_string).collect();
    (word, expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::parse::parse_document;

    fn problems(source: &str) -> Vec<(usize, usize, String)> {
        let doc = parse_document(source).unwrap();
        let (_, problems, _) = check(&doc.value, &doc.spans);
        problems.into_iter().map(|d| (d.location.line, d.location.column, d.message)).collect()
    }

    #[test]
    fn every_wrong_value_is_found_and_located_in_one_pass() {
        let found = problems(
            "apiVersion: hybrid-drill.io/v1alpha1\nkind: Drill\nmetadata: {name: x, colour: red}\nspec:\n  cluster: {context: a}\n  targets:\n    onPrem: {nodes: a=b}\n    workload: {namespace: n, selector: a=b, restoredWhen: {readyPods: 1}}\n    fallback: {nodePool: p}\n  objectives: {rto: 15M}\n  guards: {maxNodes: four}\n  steps:\n    - {id: a, pause: 1.5h}\n    - {id: b, timeout: 600, drain: onPrem}\n",
        );
        let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
        assert!(
            found.iter().any(|(l, c, m)| (*l, *c) == (3, 21) && m == "unknown key `colour` in `metadata`"),
            "{found:?}"
        );
        assert!(found.iter().any(|(l, _, m)| *l == 10 && m.contains("`15M` is not a duration")), "{found:?}");
        assert!(messages.contains(&"`maxNodes` must be a whole number (0 or more), not `four`"), "{found:?}");
        assert!(found.iter().any(|(l, _, m)| *l == 13 && m.contains("whole numbers only")), "{found:?}");
        assert!(found.iter().any(|(l, _, m)| *l == 14 && m.contains("`600` has no unit")), "{found:?}");
        assert_eq!(found.len(), 5, "{found:?}");
    }

    #[test]
    fn a_list_item_taken_out_leaves_the_later_ones_at_their_own_index() {
        let doc = parse_document("a: [x, y, z]\n").unwrap();
        let mut value = doc.value.clone();
        let mut pruned = Pruned::default();
        assert!(take_out(&mut value, &[Segment::Key("a".into()), Segment::Item(1)], &mut pruned));
        assert!(take_out(&mut value, &[Segment::Key("a".into()), Segment::Item(1)], &mut pruned));
        assert_eq!(pruned.paths, ["a[1]", "a[2]"]);
        assert_eq!(pruned.original("a[0]"), "a[0]");
        assert!(pruned.hides("a[2].b") && !pruned.hides("a[0]") && pruned.hides("a"));
    }

    #[test]
    fn a_steps_lost_action_hides_every_step_finding_but_a_lost_timeout_only_its_own() {
        let action = Pruned { paths: vec!["spec.steps[2].restore".into()], ..Pruned::default() };
        assert!(action.hides("spec.steps[0].cut") && !action.hides("spec.guards.deadline"));
        let misspelt = Pruned { paths: vec!["spec.steps[2].cutt".into()], ..Pruned::default() };
        assert!(misspelt.hides("spec.steps[3].restore"));
        let deep = Pruned { paths: vec!["spec.steps[2].exec.env".into()], ..Pruned::default() };
        assert!(!deep.hides("spec.steps[3].restore") && deep.hides("spec.steps[2].exec"));
        let timeout = Pruned { paths: vec!["spec.steps[2].timeout".into()], ..Pruned::default() };
        assert!(!timeout.hides("spec.steps[0].cut") && timeout.hides("spec.steps[2]"));
        assert!(timeout.touches_any(&["spec.steps"]) && !timeout.touches_any(&["spec.guards"]));
    }
}
