//! The drill's PromQL queries, parsed when the drill is validated (with GreptimeTeam's `promql-parser`, the grammar
//! Prometheus's own parser is written from), so a query Prometheus would refuse is found before the change window,
//! located to its bracket or its misspelt function.

use serde_json::Value;

use super::diagnostics::{Diagnostic, Location};
use super::parse::SpanMap;

/// Every query of `spec.slo` and every `gpuFault.detectedBy` that Prometheus would refuse, located in the file.
pub(super) fn check_document(value: &Value, spans: &SpanMap, source: &str) -> Vec<Diagnostic> {
    let mut found: Vec<(String, Option<&Value>)> = Vec::new();
    if let Some(slo) = value.pointer("/spec/slo") {
        for (i, sli) in slo.get("slis").and_then(Value::as_array).into_iter().flatten().enumerate() {
            found.push((format!("spec.slo.slis[{i}].query"), sli.get("query")));
        }
        for key in ["total", "failed"] {
            found.push((format!("spec.slo.requests.{key}"), slo.get("requests").and_then(|r| r.get(key))));
        }
        found.push(("spec.slo.firstGoodAnswer".into(), slo.get("firstGoodAnswer")));
        for (i, stop) in slo.get("stopWhen").and_then(Value::as_array).into_iter().flatten().enumerate() {
            found.push((format!("spec.slo.stopWhen[{i}].query"), stop.get("query")));
        }
    }
    let steps = value.pointer("/spec/steps").and_then(Value::as_array).into_iter().flatten().enumerate();
    let detections: Vec<(String, Option<&Value>)> = steps
        .map(|(i, step)| (format!("spec.steps[{i}].gpuFault.detectedBy"), step.pointer("/gpuFault/detectedBy")))
        .filter(|(_, v)| v.is_some())
        .collect();
    let detection_paths: Vec<String> = detections.iter().map(|(p, _)| p.clone()).collect();
    found.extend(detections);
    let queries = found.into_iter().filter_map(|(path, v)| Some((path, v?.as_str()?)));
    queries
        .filter_map(|(path, query)| {
            let problem = if detection_paths.contains(&path) { check_detection(query) } else { check(query) };
            let problem = problem.err()?;
            let at: Location = spans.value(&path);
            let at = match problem.span {
                Some((start, end)) => super::references::narrow(at, source, query, start, end),
                None => at,
            };
            let mut d = Diagnostic::new(problem.message, at);
            if let Some(s) = problem.suggestion {
                d = d.with_label(format!("did you mean `{s}`?"));
            }
            Some(d)
        })
        .collect()
}

/// What is wrong with a query: the parser's words, where in the query (bytes) when that can be told, and a
/// suggestion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryProblem {
    pub message: String,
    pub span: Option<(usize, usize)>,
    pub suggestion: Option<String>,
}

/// The functions and aggregations Prometheus knows, for "did you mean" on an unknown one.
const KNOWN: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg",
    "avg_over_time",
    "bottomk",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count",
    "count_over_time",
    "count_values",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "deg",
    "delta",
    "deriv",
    "double_exponential_smoothing",
    "exp",
    "first_over_time",
    "floor",
    "group",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "hour",
    "idelta",
    "increase",
    "info",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "limitk",
    "limit_ratio",
    "ln",
    "log10",
    "log2",
    "mad_over_time",
    "max",
    "max_over_time",
    "min",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile",
    "quantile_over_time",
    "rad",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_by_label",
    "sort_by_label_desc",
    "sort_desc",
    "sqrt",
    "stddev",
    "stddev_over_time",
    "stdvar",
    "stdvar_over_time",
    "sum",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "topk",
    "vector",
    "year",
];

/// A `detectedBy` query: its only placeholder is `{nodes}` (stood in by a name of the same length, so a problem's
/// place in the query holds), and the rest as `check`.
fn check_detection(query: &str) -> Result<(), QueryProblem> {
    let mut from = 0;
    while let Some(open) = query[from..].find('{').map(|at| from + at) {
        let word_end = query[open + 1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(query.len(), |at| open + 1 + at);
        let closes = query[word_end..].starts_with('}') && word_end > open + 1;
        if closes && &query[open..=word_end] != super::placeholders::NODES {
            return Err(QueryProblem {
                message: format!(
                    "unknown placeholder `{}`: a detectedBy query knows only `{{nodes}}`",
                    &query[open..=word_end]
                ),
                span: Some((open, word_end + 1)),
                suggestion: Some("{nodes}".into()),
            });
        }
        from = open + 1;
    }
    check(&query.replace(super::placeholders::NODES, "nodes__"))
}

/// Checks one query; the first problem, as Prometheus would refuse it.
pub fn check(query: &str) -> Result<(), QueryProblem> {
    if query.trim().is_empty() {
        return Err(QueryProblem { message: "the query is empty".into(), span: None, suggestion: None });
    }
    if let Some(problem) = unbalanced(query) {
        return Err(problem);
    }
    let Err(message) = promql_parser::parser::parse(query) else { return Ok(()) };
    if let Some(name) = message.strip_prefix("unknown function with name '").and_then(|m| m.strip_suffix('\'')) {
        let span = call_of(query, name);
        let known: Vec<String> = KNOWN.iter().map(|k| k.to_string()).collect();
        let suggestion = super::parse::suggest(name, &known).map(|s| format!("{s}("));
        return Err(QueryProblem { message: format!("unknown function `{name}`"), span, suggestion });
    }
    let span = message
        .strip_prefix("bad number or duration syntax: ")
        .and_then(|bad| query.find(bad).map(|at| (at, at + bad.len())));
    let message = if message == "invalid promql query" { "not a PromQL expression".to_string() } else { message };
    Err(QueryProblem { message: format!("invalid PromQL: {message}"), span, suggestion: None })
}

/// The first bracket left open or closed without its pair, outside quoted strings: the parser itself only says that
/// the query is invalid.
fn unbalanced(query: &str) -> Option<QueryProblem> {
    let mut open: Vec<(char, usize)> = Vec::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (at, c) in query.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q != '`' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => quote = Some(c),
            '(' | '[' | '{' => open.push((c, at)),
            ')' | ']' | '}' => {
                let pair = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                match open.pop() {
                    Some((o, _)) if o == pair => {}
                    Some((o, from)) => {
                        return Some(QueryProblem {
                            message: format!("invalid PromQL: `{o}` closed by `{c}`"),
                            span: Some((from, at + 1)),
                            suggestion: None,
                        });
                    }
                    None => {
                        return Some(QueryProblem {
                            message: format!("invalid PromQL: `{c}` closes nothing"),
                            span: Some((at, at + 1)),
                            suggestion: None,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    let (o, from) = open.pop()?;
    Some(QueryProblem {
        message: format!("invalid PromQL: `{o}` is never closed"),
        span: Some((from, from + 1)),
        suggestion: None,
    })
}

/// Where `name(` is called in the query.
fn call_of(query: &str, name: &str) -> Option<(usize, usize)> {
    query
        .match_indices(name)
        .map(|(at, _)| at)
        .find(|&at| {
            let before = query[..at].chars().next_back();
            let after = query[at + name.len()..].trim_start();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') && after.starts_with('(')
        })
        .map(|at| (at, at + name.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_kinds_of_query_parse() {
        for q in [
            r#"sum(rate(inference_gateway_requests_total{code!~"5.."}[20s])) / sum(rate(inference_gateway_requests_total[20s]))"#,
            "histogram_quantile(0.99, sum by (le) (rate(inference_gateway_request_duration_seconds_bucket[20s])))",
            "inference_gateway_ready_to_first_good_answer_seconds",
            r#"sum(up{job="a(b"})"#,
        ] {
            assert_eq!(check(q), Ok(()), "{q}");
        }
    }

    #[test]
    fn mistakes_are_located_and_a_misspelt_function_suggested() {
        let p = check("sum(rate(requests_total[1m])").unwrap_err();
        assert_eq!((p.message.as_str(), p.span), ("invalid PromQL: `(` is never closed", Some((3, 4))));
        let p = check("sum(rate(requests_total[20x]))").unwrap_err();
        assert_eq!(p.message, "invalid PromQL: bad number or duration syntax: 20x");
        assert_eq!(p.span, Some((24, 27)));
        let p = check("sum(rtae(requests_total[1m]))").unwrap_err();
        assert_eq!(
            (p.message.as_str(), p.span, p.suggestion.as_deref()),
            ("unknown function `rtae`", Some((4, 8)), Some("rate("))
        );
        assert_eq!(check("sum(x])").unwrap_err().message, "invalid PromQL: `(` closed by `]`");
    }
}
