//! The drill's PromQL queries tried once, read-only, for `plan` and `preflight`: a query Prometheus refuses, or one
//! that returns nothing now, found before the change window rather than at the steady-state check inside it.

use chrono::Utc;

use super::client::Prometheus;
use crate::cluster::Reader;
use crate::drill::slo::{SloSpec, StopCondition};
use crate::preflight::{CheckId, Finding, Status};

/// One finding per query of `spec.slo`: its value now, or why a run would stop on it.
pub async fn try_queries(spec: &SloSpec, reader: &Reader) -> Vec<Finding> {
    let finding = |object: String, status, message: String, fix: Option<&str>| Finding {
        check: CheckId::SliQueries,
        status,
        object,
        message,
        fix: fix.map(str::to_string),
    };
    let prometheus = match Prometheus::connect(&spec.prometheus, reader).await {
        Ok(p) => p,
        Err(e) => {
            let fix = "check spec.slo.prometheus (its URL, credentials and TLS files) from where the tool runs";
            return vec![finding(
                "Prometheus".into(),
                Status::Warn,
                crate::secrets::redact(&e.to_string()).into(),
                Some(fix),
            )];
        }
    };
    let mut queries: Vec<(String, &str)> =
        spec.slis.iter().map(|s| (format!("SLI {}", s.name), s.query.as_str())).collect();
    if let Some(r) = &spec.requests {
        queries.push(("requests.total".into(), &r.total));
        queries.push(("requests.failed".into(), &r.failed));
    }
    for stop in &spec.stop_when {
        if let StopCondition::Query { name, query, .. } = stop
            && !spec.slis.iter().any(|s| &s.query == query)
        {
            queries.push((format!("stop condition {name}"), query));
        }
    }
    let now = Utc::now();
    let mut out = Vec::new();
    for (object, query) in queries {
        out.push(match prometheus.instant(query, now).await {
            Ok(Some(value)) => {
                finding(object, Status::Pass, format!("returns {}", crate::domain::impact::round(value)), None)
            }
            Ok(None) => finding(
                object,
                Status::Warn,
                format!("`{query}` returns no data now: a run would be refused at its steady-state check"),
                Some("run the query in Prometheus; check the metric's name, its labels and that it is scraped"),
            ),
            Err(e) => finding(
                object,
                Status::Warn,
                format!("`{query}` failed: {}", crate::secrets::redact(&e.to_string())),
                Some("run the query in Prometheus and fix it in the drill file"),
            ),
        });
    }
    out
}
