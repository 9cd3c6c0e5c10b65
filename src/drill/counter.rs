//! `spec.slo.requests`: which counter a request total reads, so the count is Prometheus's own `increase()` per
//! window. A client-side increase of `sum(counter)` reads a pod's series leaving the sum (its pod evicted) as a
//! counter reset and adds the whole remaining sum again; Prometheus's `increase()` works per series, so a series
//! that leaves only stops adding.

use promql_parser::parser::{Expr, VectorSelector, parse, token::T_SUM};

/// Why a request query cannot be counted per window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotACounter {
    #[error("invalid PromQL: {0}")]
    Invalid(String),
    #[error(
        "`{0}` cannot be counted per window: give the counter, alone or summed (`sum(http_requests_total)`, \
         `http_requests_total{{code=~\"5..\"}}`); the tool reads `sum(increase(counter[window]))` for the drill and \
         each phase"
    )]
    Shape(String),
    #[error("`{0}`: an `offset` or `@` modifier would count another time than the drill's")]
    Shifted(String),
}

/// The counter selector of a request query: the query itself when it is one, or the one inside its plain `sum(...)`.
pub fn selector(query: &str) -> Result<String, NotACounter> {
    let expr = parse(query).map_err(NotACounter::Invalid)?;
    let selector = match unparen(&expr) {
        Expr::VectorSelector(s) => s,
        Expr::Aggregate(a) if a.op.id() == T_SUM && a.param.is_none() && a.modifier.is_none() => match unparen(&a.expr)
        {
            Expr::VectorSelector(s) => s,
            _ => return Err(NotACounter::Shape(query.into())),
        },
        _ => return Err(NotACounter::Shape(query.into())),
    };
    plain(selector, query)
}

fn unparen(expr: &Expr) -> &Expr {
    match expr {
        Expr::Paren(p) => unparen(&p.expr),
        other => other,
    }
}

fn plain(selector: &VectorSelector, query: &str) -> Result<String, NotACounter> {
    if selector.offset.is_some() || selector.at.is_some() {
        return Err(NotACounter::Shifted(query.into()));
    }
    Ok(selector.to_string())
}

/// The requests a counter counted in the `seconds` before the query's evaluation time, by Prometheus per series.
pub fn increase(selector: &str, seconds: f64) -> String {
    format!("sum(increase({selector}[{}ms]))", (seconds * 1000.0).round().max(1.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_alone_or_summed_is_counted_per_window() {
        assert_eq!(selector("sum(http_requests_total)").unwrap(), "http_requests_total");
        let failed = selector(r#"sum(x_total{code=~"5.."})"#).unwrap();
        assert_eq!(failed, r#"x_total{code=~"5.."}"#);
        assert_eq!(selector("(x_total)").unwrap(), "x_total");
        assert_eq!(increase("x_total", 12.3456), "sum(increase(x_total[12346ms]))");
    }

    #[test]
    fn what_cannot_be_counted_is_refused() {
        for query in ["sum(rate(x_total[1m]))", "sum by (code) (x_total)", "x_total / 2", "max(x_total)"] {
            assert!(matches!(selector(query), Err(NotACounter::Shape(_))), "{query}");
        }
        assert!(matches!(selector("sum(x_total offset 5m)"), Err(NotACounter::Shifted(_))));
        assert!(matches!(selector("sum(("), Err(NotACounter::Invalid(_))));
    }
}
