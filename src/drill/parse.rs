//! YAML to typed drill, keeping the line and column of every key and value so errors can point at them.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, SpannedEventReceiver};
use serde_json::{Map, Number, Value};

use super::diagnostics::{Diagnostic, Location};
use super::raw::Drill;

/// Where each node of the document sits: the value's span and, for mapping entries, the key's.
#[derive(Debug, Default, Clone)]
pub struct SpanMap {
    values: HashMap<String, Location>,
    keys: HashMap<String, Location>,
}

impl SpanMap {
    /// The value at `path` (`spec.steps[1].drain`), or the nearest enclosing node that has one.
    pub fn value(&self, path: &str) -> Location {
        let mut p = path.to_string();
        loop {
            if let Some(l) = self.values.get(&p) {
                return *l;
            }
            match parent(&p) {
                Some(up) => p = up,
                None => return self.values.get("").copied().unwrap_or_default(),
            }
        }
    }

    /// The key of the entry at `path`, falling back to its value.
    pub fn key(&self, path: &str) -> Location {
        self.keys.get(path).copied().unwrap_or_else(|| self.value(path))
    }
}

fn parent(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(path[..cut].to_string())
}

pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A parsed document: its JSON value and where every part of it came from.
#[derive(Debug)]
pub struct Document {
    pub value: Value,
    pub spans: SpanMap,
}

enum Frame {
    Map { path: String, map: Map<String, Value>, pending_key: Option<(String, Location)>, start: Location },
    Seq { path: String, items: Vec<Value>, start: Location },
}

struct Builder<'s> {
    source: &'s str,
    stack: Vec<Frame>,
    root: Option<Value>,
    spans: SpanMap,
    error: Option<Diagnostic>,
    documents: usize,
}

impl Builder<'_> {
    fn location(&self, span: Span) -> Location {
        Location::from_line_col(self.source, span.start.line(), span.start.col(), span.end.line(), span.end.col())
    }

    fn current_path(&self) -> String {
        match self.stack.last() {
            None => String::new(),
            Some(Frame::Map { path, pending_key: Some((k, _)), .. }) => join(path, k),
            Some(Frame::Map { path, .. }) => path.clone(),
            Some(Frame::Seq { path, items, .. }) => index(path, items.len()),
        }
    }

    /// Places a finished node in its parent, or as the document root.
    fn place(&mut self, value: Value, loc: Location) {
        let path = self.current_path();
        match self.stack.last_mut() {
            None => {
                self.spans.values.insert(String::new(), loc);
                self.root = Some(value);
            }
            Some(Frame::Seq { items, .. }) => {
                self.spans.values.insert(path, loc);
                items.push(value);
            }
            Some(Frame::Map { map, pending_key, .. }) => match pending_key.take() {
                None => {
                    let key = match &value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    if map.contains_key(&key) && self.error.is_none() {
                        self.error = Some(Diagnostic::new(format!("duplicate key `{key}`"), loc));
                    }
                    *pending_key = Some((key, loc));
                }
                Some((key, key_loc)) => {
                    self.spans.keys.insert(path.clone(), key_loc);
                    self.spans.values.insert(path, loc);
                    map.insert(key, value);
                }
            },
        }
    }

    fn is_key_position(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { pending_key: None, .. }))
    }
}

impl<'input> SpannedEventReceiver<'input> for Builder<'_> {
    fn on_event(&mut self, event: Event<'input>, span: Span) {
        if self.error.is_some() {
            return;
        }
        let loc = self.location(span);
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    self.error = Some(Diagnostic::new("a drill file holds one YAML document; found a second", loc));
                }
            }
            Event::Alias(_) => {
                self.error =
                    Some(Diagnostic::new("YAML aliases are not supported in drill files; write the value out", loc));
            }
            Event::Scalar(text, style, _, _) => {
                let value =
                    if self.is_key_position() { Value::String(text.to_string()) } else { resolve_scalar(&text, style) };
                self.place(value, loc);
            }
            Event::MappingStart(..) => {
                if self.is_key_position() {
                    self.error = Some(Diagnostic::new("mapping keys must be plain words", loc));
                    return;
                }
                let path = self.current_path();
                self.stack.push(Frame::Map { path, map: Map::new(), pending_key: None, start: loc });
            }
            Event::SequenceStart(..) => {
                if self.is_key_position() {
                    self.error = Some(Diagnostic::new("mapping keys must be plain words", loc));
                    return;
                }
                let path = self.current_path();
                self.stack.push(Frame::Seq { path, items: Vec::new(), start: loc });
            }
            Event::MappingEnd => {
                if let Some(Frame::Map { map, start, .. }) = self.stack.pop() {
                    let whole = start.through(loc);
                    self.place(Value::Object(map), whole);
                }
            }
            Event::SequenceEnd => {
                if let Some(Frame::Seq { items, start, .. }) = self.stack.pop() {
                    let whole = start.through(loc);
                    self.place(Value::Array(items), whole);
                }
            }
            _ => {}
        }
    }
}

/// YAML 1.2 core schema resolution of a scalar: quoted scalars are always strings.
fn resolve_scalar(text: &str, style: ScalarStyle) -> Value {
    if style != ScalarStyle::Plain {
        return Value::String(text.to_string());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = text.parse::<i64>() {
        return Value::Number(i.into());
    }
    if text.chars().any(|c| c.is_ascii_digit())
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_string())
}

/// Parses YAML text into a JSON value with a location for every node.
pub fn parse_document(source: &str) -> Result<Document, Diagnostic> {
    let mut builder =
        Builder { source, stack: Vec::new(), root: None, spans: SpanMap::default(), error: None, documents: 0 };
    let mut parser = Parser::new_from_str(source);
    if let Err(e) = parser.load(&mut builder, true) {
        let m = e.marker();
        let loc = Location::from_line_col(source, m.line(), m.col(), m.line(), m.col() + 1);
        return Err(Diagnostic::new(format!("invalid YAML: {}", e.info()), loc));
    }
    if let Some(e) = builder.error {
        return Err(e);
    }
    match builder.root {
        Some(value) => Ok(Document { value, spans: builder.spans }),
        None => Err(Diagnostic::new("the drill file is empty", Location::default())),
    }
}

/// Parses and type-checks a drill file; semantic checks come after, in `validate`.
pub(super) fn parse_drill(source: &str) -> Result<(Drill, SpanMap), Vec<Diagnostic>> {
    let doc = parse_document(source).map_err(|d| vec![d])?;
    let result: Result<Drill, _> = serde_path_to_error::deserialize(&doc.value);
    match result {
        Ok(drill) => Ok((drill, doc.spans)),
        Err(err) => Err(vec![type_error(&err, &doc.spans)]),
    }
}

fn error_path(err: &serde_path_to_error::Error<serde_json::Error>) -> String {
    use serde_path_to_error::Segment;
    let mut path = String::new();
    for seg in err.path().iter() {
        match seg {
            Segment::Seq { index: i } => path = index(&path, *i),
            Segment::Map { key } => path = join(&path, key),
            Segment::Enum { variant } => path = join(&path, variant),
            Segment::Unknown => {}
        }
    }
    path
}

/// Turns serde's message into one that names the place, and suggests the nearest word where one was misspelt.
fn type_error(err: &serde_path_to_error::Error<serde_json::Error>, spans: &SpanMap) -> Diagnostic {
    let path = error_path(err);
    let raw = err.inner().to_string();
    // serde_json appends " at line L column C" relative to its own input, which is not the user's file.
    let message = raw.split(" at line ").next().unwrap_or(&raw).to_string();

    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, expected) = split_backticked(rest);
        // serde_path_to_error's path already ends at the unknown key.
        let (key_path, path) = match parent(&path) {
            Some(up) if last_key(&path) == field => (path.clone(), up),
            _ => (join(&path, &field), path.clone()),
        };
        let loc = spans.key(&key_path);
        let context = if path.is_empty() { "the drill".to_string() } else { format!("`{path}`") };
        let mut d = Diagnostic::new(format!("unknown key `{field}` in {context}"), loc);
        if let Some(s) = suggest(&field, &expected) {
            d = d.with_label(format!("did you mean `{s}`?"));
        }
        return d.with_help(format!("valid keys here: {}", expected.join(", ")));
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (word, expected) = split_backticked(rest);
        let loc = spans.value(&path);
        let mut d = Diagnostic::new(format!("unknown value `{word}` for `{}`", last_key(&path)), loc);
        if let Some(s) = suggest(&word, &expected) {
            d = d.with_label(format!("did you mean `{s}`?"));
        }
        return d.with_help(format!("valid values: {}", expected.join(", ")));
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or_default();
        let loc = spans.value(&path);
        let place = if path.is_empty() { "the drill".to_string() } else { format!("`{path}`") };
        return Diagnostic::new(format!("missing key `{field}` in {place}"), loc)
            .with_label(format!("`{field}` is required here"));
    }
    Diagnostic::new(format!("{message} at `{path}`"), spans.value(&path))
}

fn last_key(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// From "drian`, expected one of `a`, `b`" takes the word and the expected list.
fn split_backticked(rest: &str) -> (String, Vec<String>) {
    let mut parts = rest.splitn(2, '`');
    let word = parts.next().unwrap_or_default().to_string();
    let tail = parts.next().unwrap_or_default();
    let expected = tail.split('`').skip(1).step_by(2).map(str::to_string).collect();
    (word, expected)
}

/// The nearest expected word, if it is close enough to be a typo of it.
pub fn suggest(word: &str, expected: &[String]) -> Option<String> {
    let lower = word.to_lowercase();
    expected
        .iter()
        .map(|e| (strsim::damerau_levenshtein(&lower, &e.to_lowercase()), e))
        .filter(|(d, e)| *d <= 2.max(e.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, e)| e.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_resolve_as_yaml_core_schema() {
        assert_eq!(resolve_scalar("4", ScalarStyle::Plain), Value::from(4));
        assert_eq!(resolve_scalar("4", ScalarStyle::DoubleQuoted), Value::from("4"));
        assert_eq!(resolve_scalar("on", ScalarStyle::Plain), Value::from("on"));
        assert_eq!(resolve_scalar("true", ScalarStyle::Plain), Value::from(true));
        assert_eq!(resolve_scalar("15m", ScalarStyle::Plain), Value::from("15m"));
        assert_eq!(resolve_scalar("4.5", ScalarStyle::Plain), Value::from(4.5));
    }

    #[test]
    fn spans_point_at_keys_and_values() {
        let doc = parse_document("a:\n  b: [1, {c: x}]\n").unwrap();
        let c = doc.spans.value("a.b[1].c");
        assert_eq!((c.line, c.column), (2, 14));
        let b = doc.spans.key("a.b");
        assert_eq!((b.line, b.column), (2, 3));
        // an unknown path falls back to its nearest parent
        assert_eq!(doc.spans.value("a.b[1].zzz"), doc.spans.value("a.b[1]"));
    }

    #[test]
    fn duplicate_keys_and_second_documents_are_errors() {
        assert!(parse_document("a: 1\na: 2\n").unwrap_err().message.contains("duplicate key `a`"));
        assert!(parse_document("a: 1\n---\nb: 2\n").unwrap_err().message.contains("second"));
    }

    #[test]
    fn suggestions_catch_typos_only() {
        let expected: Vec<String> = ["drain", "cordon", "waitFor"].iter().map(|s| s.to_string()).collect();
        assert_eq!(suggest("drian", &expected).as_deref(), Some("drain"));
        assert_eq!(suggest("waitfor", &expected).as_deref(), Some("waitFor"));
        assert_eq!(suggest("teleport", &expected), None);
    }
}
