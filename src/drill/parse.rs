//! YAML to typed drill, keeping the line and column of every key and value so errors can point at them.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, SpannedEventReceiver};
use serde_json::{Map, Number, Value};

use super::diagnostics::{Diagnostic, Location};

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

    /// Whether the file writes a value at `path` (rather than leaving it to a default).
    pub fn has(&self, path: &str) -> bool {
        self.values.contains_key(path)
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
        return Err(syntax_error(source, &e));
    }
    if let Some(e) = builder.error {
        return Err(e);
    }
    match builder.root {
        Some(value) => Ok(Document { value, spans: builder.spans }),
        None => Err(Diagnostic::new("the drill file is empty", Location::default())),
    }
}

/// A YAML syntax error where the mistake is, not where the parser gave up: the tab itself, the bracket left open.
fn syntax_error(source: &str, e: &saphyr_parser::ScanError) -> Diagnostic {
    let m = e.marker();
    let at = Location::from_line_col(source, m.line(), m.col(), m.line(), m.col() + 1);
    let info = e.info();
    if info.contains("tab")
        && let Some(tab) = tab_near(source, at)
    {
        return Diagnostic::new("invalid YAML: a tab; YAML indents with spaces only", tab)
            .with_label("tab")
            .with_help("replace the tab with spaces");
    }
    if let Some((open, close, bracket)) = unclosed_bracket(source, at.start)
        && bracket.line < at.line
    {
        return Diagnostic::new(format!("invalid YAML: `{open}` is never closed"), bracket)
            .with_label(format!("opened here; close it with `{close}`"))
            .with_help(format!("the parser found this where it expected `,` or `{close}`: {info}"));
    }
    Diagnostic::new(format!("invalid YAML: {info}"), at)
}

/// The tab the parser means: on its line before where it stopped (a block's indentation), else the next one after
/// (a plain scalar it was reading when the next line began with a tab).
fn tab_near(source: &str, at: Location) -> Option<Location> {
    let line_start = source[..at.start].rfind('\n').map_or(0, |n| n + 1);
    let offset = source[line_start..at.start]
        .rfind('\t')
        .map(|i| line_start + i)
        .or_else(|| source[at.start..].find('\t').map(|i| at.start + i))?;
    Some(location_of(source, offset))
}

/// The last flow bracket (`[` or `{`) before `before` that nothing in the whole file closes, outside quotes and
/// comments: a bracket closed further on (a list over several lines) is not the mistake.
fn unclosed_bracket(source: &str, before: usize) -> Option<(char, char, Location)> {
    let mut open: Vec<(usize, char)> = Vec::new();
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut previous = '\n';
    for (i, c) in source.char_indices() {
        match (quote, c) {
            _ if comment => comment = c != '\n',
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '#') if previous.is_whitespace() => comment = true,
            // A quote opens a scalar only where a token starts: the apostrophe in `don't` opens nothing.
            (None, '\'' | '"') if previous.is_whitespace() || "[{,:".contains(previous) => quote = Some(c),
            (None, '[' | '{') => open.push((i, c)),
            (None, ']' | '}') => {
                open.pop();
            }
            _ => {}
        }
        previous = c;
    }
    let (offset, c) = open.into_iter().rev().find(|(offset, _)| *offset < before)?;
    Some((c, if c == '[' { ']' } else { '}' }, location_of(source, offset)))
}

/// The location of one character, from its byte offset.
fn location_of(source: &str, offset: usize) -> Location {
    let line_start = source[..offset].rfind('\n').map_or(0, |n| n + 1);
    let line = source[..offset].matches('\n').count() + 1;
    let col = source[line_start..offset].chars().count();
    Location::from_line_col(source, line, col, line, col + 1)
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
    fn a_tab_is_located_where_it_is() {
        let after_scalar = parse_document("a: 1\nb:\n  c: 2\n\td: 3\n").unwrap_err();
        assert_eq!((after_scalar.location.line, after_scalar.location.column), (4, 1), "{after_scalar:?}");
        let indent = parse_document("a: 1\nb:\n\tc: 2\n").unwrap_err();
        assert_eq!((indent.location.line, indent.location.column), (3, 1), "{indent:?}");
        assert!(indent.message.contains("a tab"), "{indent:?}");
    }

    #[test]
    fn an_unclosed_bracket_is_located_at_the_bracket() {
        let closed_later = parse_document("a: [1,\n  2,, 3]\n").unwrap_err();
        assert!(!closed_later.message.contains("never closed"), "{closed_later:?}");
        for source in ["a: 1\nb: [1, 2\nc: 3\n", "a: 1\nb: [1, 2\n", "a: {x: '[', y: 1\nb: 2\n"] {
            let e = parse_document(source).unwrap_err();
            let expected = if source.starts_with("a: {") { (1, 4) } else { (2, 4) };
            assert_eq!((e.location.line, e.location.column), expected, "{source:?}: {e:?}");
            assert!(e.message.contains("is never closed"), "{e:?}");
        }
    }

    #[test]
    fn suggestions_catch_typos_only() {
        let expected: Vec<String> = ["drain", "cordon", "waitFor"].iter().map(|s| s.to_string()).collect();
        assert_eq!(suggest("drian", &expected).as_deref(), Some("drain"));
        assert_eq!(suggest("waitfor", &expected).as_deref(), Some("waitFor"));
        assert_eq!(suggest("teleport", &expected), None);
    }
}
