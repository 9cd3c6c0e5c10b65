//! The one duration grammar of drill files and command-line flags: whole numbers with a unit, one or more (`90s`,
//! `10m`, `1h30m`, `1h 30m`). The parser, the JSON Schema's pattern and the fix every refusal shows are all made from
//! the unit table below, so what validation accepts is what editors accept.

use std::time::Duration;

/// The units, each with its length. Longest spelling first, so `ms` is never read as `m` then `s`.
const UNITS: &[(&str, Duration)] = &[
    ("ms", Duration::from_millis(1)),
    ("s", Duration::from_secs(1)),
    ("m", Duration::from_secs(60)),
    ("h", Duration::from_secs(3600)),
    ("d", Duration::from_secs(86_400)),
];

/// What every refusal of a duration suggests instead.
pub const EXAMPLE: &str = "a duration such as 10m, 90s or 1h30m";

/// Starts the deserialiser's refusal, so the type check tells it with the fix rather than as serde's message.
pub(super) const REFUSED: &str = "duration: ";

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("`{0}` is not a duration: it is empty")]
    Empty(String),
    #[error("`{text}` is not a duration: `{number}` has no unit (units: {})", unit_list())]
    NoUnit { text: String, number: String },
    #[error("`{text}` is not a duration: `{unit}` is not a unit (units: {})", unit_list())]
    UnknownUnit { text: String, unit: String },
    #[error("`{0}` is not a duration: whole numbers only (1h30m, not 1.5h)")]
    Fraction(String),
    #[error("`{0}` is not a duration: it must start with a number")]
    NoNumber(String),
    #[error("`{0}` is too long a duration")]
    TooLong(String),
}

fn unit_list() -> String {
    let names: Vec<&str> = UNITS.iter().map(|(u, _)| *u).collect();
    let (last, rest) = names.split_last().unwrap_or((&"", &[]));
    format!("{} and {last}", rest.join(", "))
}

/// The JSON Schema pattern of a duration, made from the unit table: the parser accepts exactly what it matches.
pub fn pattern() -> String {
    let units: Vec<&str> = UNITS.iter().map(|(u, _)| *u).collect();
    let unit = units.join("|");
    format!("^[0-9]+({unit})( ?[0-9]+({unit}))*$")
}

/// Reads a duration; anything the schema's pattern refuses is refused here too, with the reason.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    if text.is_empty() {
        return Err(DurationError::Empty(text.into()));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    let mut first = true;
    while !rest.is_empty() {
        // One space between parts, as in `1h 30m`, and none before the first.
        if !first && let Some(after) = rest.strip_prefix(' ') {
            rest = after;
        }
        first = false;
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(DurationError::NoNumber(text.into()));
        }
        let (number, after) = rest.split_at(digits);
        if after.starts_with(['.', ',']) {
            return Err(DurationError::Fraction(text.into()));
        }
        let unit_len = after.len() - after.trim_start_matches(|c: char| c.is_ascii_alphabetic()).len();
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::NoUnit { text: text.into(), number: number.into() });
        }
        let Some((_, length)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Err(DurationError::UnknownUnit { text: text.into(), unit: unit.into() });
        };
        let part = number
            .parse::<u32>()
            .ok()
            .and_then(|n| length.checked_mul(n))
            .ok_or_else(|| DurationError::TooLong(text.into()))?;
        total = total.checked_add(part).ok_or_else(|| DurationError::TooLong(text.into()))?;
        rest = after;
    }
    Ok(total)
}

/// The canonical spelling, which [`parse`] reads back: `1h30m`, `90s` is `1m30s`, `500ms`, `0s`.
pub fn format(duration: Duration) -> String {
    let mut left = duration.as_millis();
    let mut out = String::new();
    for (unit, length) in UNITS.iter().rev() {
        let n = left / length.as_millis();
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
            left -= n * length.as_millis();
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

/// For clap: a flag's duration in the same grammar, the refusal with the fix.
pub fn parse_flag(text: &str) -> Result<Duration, String> {
    parse(text).map_err(|e| format!("{e}; write {EXAMPLE}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_reads_units_and_sums_parts() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn what_the_issue_found_accepted_is_refused_with_the_reason() {
        assert!(matches!(parse("15M"), Err(DurationError::UnknownUnit { unit, .. }) if unit == "M"));
        assert_eq!(parse("1.5h"), Err(DurationError::Fraction("1.5h".into())));
        assert!(matches!(parse("100y"), Err(DurationError::UnknownUnit { unit, .. }) if unit == "y"));
        assert!(matches!(parse("15 minutes"), Err(DurationError::NoUnit { .. })));
        assert!(matches!(parse("15min"), Err(DurationError::UnknownUnit { .. })));
        assert!(matches!(parse("600"), Err(DurationError::NoUnit { .. })));
        assert!(matches!(parse("m"), Err(DurationError::NoNumber(_))));
        assert!(matches!(parse("99999999999d"), Err(DurationError::TooLong(_))));
        assert!(parse("").is_err() && parse(" 5m").is_err() && parse("5m ").is_err() && parse("1h  30m").is_err());
        assert_eq!(
            parse("15M").unwrap_err().to_string(),
            "`15M` is not a duration: `M` is not a unit (units: ms, s, m, h and d)"
        );
    }

    #[test]
    fn the_canonical_spelling_reads_back() {
        for secs in [0, 1, 59, 60, 90, 3600, 5400, 86_400, 90_061] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse(&format(d)), Ok(d), "{}", format(d));
        }
        assert_eq!(format(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format(Duration::from_millis(1500)), "1s500ms");
    }

    /// The schema's pattern and the parser are one grammar: each accepts exactly what the other does.
    #[test]
    fn the_schema_pattern_and_the_parser_agree() {
        let pattern = regex::Regex::new(&pattern()).unwrap();
        for text in [
            "90s",
            "10m",
            "1h30m",
            "1h 30m",
            "500ms",
            "2d",
            "0s",
            "15M",
            "1.5h",
            "100y",
            "15 minutes",
            "15min",
            "600",
            "m",
            "",
            " 5m",
            "5m ",
            "1h  30m",
            "1hm",
            "5 m",
            "1h30",
            "ms5",
            "5sm",
            "10m5s",
            "1d 2h 3m 4s 5ms",
        ] {
            assert_eq!(pattern.is_match(text), parse(text).is_ok(), "{text:?}");
        }
    }
}
