//! Errors in a drill file, located to the line and column and printed like a compiler's.

use codespan_reporting::diagnostic::{Diagnostic as Report, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Chars, Config};
use serde::Serialize;

/// A place in the drill file: 1-based line and column, and the byte range it covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Location {
    pub line: usize,
    pub column: usize,
    #[serde(skip)]
    pub start: usize,
    #[serde(skip)]
    pub end: usize,
}

impl Location {
    /// From the parser's 1-based lines and 0-based character columns.
    pub fn from_line_col(source: &str, line: usize, col: usize, end_line: usize, end_col: usize) -> Location {
        let start = byte_offset(source, line, col);
        let mut end = byte_offset(source, end_line, end_col).max(start);
        // A multi-line node (a block mapping) is underlined on its first line only.
        if let Some(nl) = source[start..end].find('\n') {
            end = start + nl;
        }
        if end == start && start < source.len() {
            end = start + source[start..].chars().next().map_or(1, char::len_utf8);
        }
        Location { line: line.max(1), column: col + 1, start, end }
    }

    /// From this node's start to the end of `other`.
    pub fn through(self, other: Location) -> Location {
        Location { end: other.end.max(self.end), ..self }
    }
}

fn byte_offset(source: &str, line: usize, col: usize) -> usize {
    let line_start: usize = source.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
    let rest = &source[line_start.min(source.len())..];
    let within: usize = rest.chars().take_while(|c| *c != '\n').take(col).map(char::len_utf8).sum();
    (line_start + within).min(source.len())
}

/// An error refuses the drill; a warning lets it run but says what it will not do as written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    #[default]
    Error,
    Warning,
}

/// One problem in a drill file.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub location: Location,
    /// Shown under the caret, e.g. "did you mean `drain`?".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn new(message: impl Into<String>, location: Location) -> Diagnostic {
        Diagnostic { severity: Severity::Error, message: message.into(), location, label: None, help: None }
    }

    pub fn warning(mut self) -> Diagnostic {
        self.severity = Severity::Warning;
        self
    }

    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = Some(label.into());
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// `error: ...`, `--> file:line:col`, the line with carets under the span, then any help.
    pub fn render(&self, file_name: &str, source: &str) -> String {
        let file = SimpleFile::new(file_name, source);
        let range = self.location.start.min(source.len())..self.location.end.min(source.len());
        let report = match self.severity {
            Severity::Error => Report::error(),
            Severity::Warning => Report::warning(),
        };
        let mut report = report
            .with_message(&self.message)
            .with_labels(vec![Label::primary((), range).with_message(self.label.clone().unwrap_or_default())]);
        if let Some(help) = &self.help {
            report = report.with_notes(vec![format!("help: {help}")]);
        }
        let config = Config { chars: Chars::ascii(), ..Config::default() };
        term::emit_into_string(&config, &file, &report).unwrap_or_else(|_| {
            let severity = if self.severity == Severity::Error { "error" } else { "warning" };
            format!(
                "{severity}: {}\n --> {}:{}:{}\n",
                self.message, file_name, self.location.line, self.location.column
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_file_line_column_and_caret() {
        let source = "a: 1\nsteps:\n  - drian: x\n";
        let loc = Location::from_line_col(source, 3, 4, 3, 9);
        let text =
            Diagnostic::new("unknown key `drian`", loc).with_label("did you mean `drain`?").render("d.yaml", source);
        assert!(text.contains("error: unknown key `drian`"), "{text}");
        assert!(text.contains("--> d.yaml:3:5"), "{text}");
        assert!(text.contains("^^^^^ did you mean `drain`?"), "{text}");
    }

    #[test]
    fn offsets_handle_multibyte_text() {
        let source = "é: x\nb: y\n";
        let loc = Location::from_line_col(source, 2, 3, 2, 4);
        assert_eq!(&source[loc.start..loc.end], "y");
    }
}
