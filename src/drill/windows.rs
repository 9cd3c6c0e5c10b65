//! The range windows of a PromQL query (`rate(x[20s])`, subqueries), each with the selector it reads: what a
//! window must be measured against, the target's scrape interval, since a `rate()` needs two samples in it.

use std::time::Duration;

use promql_parser::parser::{Expr, parse};

/// Each range window of `query` with the selector it applies to (`name{matchers}`); a subquery's window with the
/// selectors inside it. Empty for a query Prometheus would refuse (validate reports it) or one without a window.
pub fn of(query: &str) -> Vec<(Duration, String)> {
    let mut out = Vec::new();
    if let Ok(expr) = parse(query) {
        walk(&expr, None, &mut out);
    }
    out
}

fn walk(expr: &Expr, outer: Option<Duration>, out: &mut Vec<(Duration, String)>) {
    match expr {
        Expr::MatrixSelector(m) => {
            let mut vs = m.vs.clone();
            (vs.offset, vs.at) = (None, None);
            out.push((m.range, vs.to_string()));
        }
        Expr::VectorSelector(vs) => {
            if let Some(range) = outer {
                let mut vs = vs.clone();
                (vs.offset, vs.at) = (None, None);
                out.push((range, vs.to_string()));
            }
        }
        Expr::Subquery(s) => walk(&s.expr, Some(s.range), out),
        Expr::Aggregate(a) => {
            walk(&a.expr, outer, out);
            if let Some(p) = &a.param {
                walk(p, outer, out);
            }
        }
        Expr::Unary(u) => walk(&u.expr, outer, out),
        Expr::Binary(b) => {
            walk(&b.lhs, outer, out);
            walk(&b.rhs, outer, out);
        }
        Expr::Paren(p) => walk(&p.expr, outer, out),
        Expr::Call(c) => c.args.args.iter().for_each(|a| walk(a, outer, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_window_with_its_selector() {
        let q = r#"sum(rate(a_total{code!~"5.."}[20s])) / sum(rate(a_total[1m] offset 5m))"#;
        let found = of(q);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0], (Duration::from_secs(20), r#"a_total{code!~"5.."}"#.to_string()));
        assert_eq!(found[1], (Duration::from_secs(60), "a_total".to_string()));
        assert_eq!(of("max_over_time(up[5m:30s])"), vec![(Duration::from_secs(300), "up".to_string())]);
        assert!(of("sum(up)").is_empty());
    }
}
