//! The drill's PromQL queries tried once, read-only, for `plan` and `preflight`: a query Prometheus refuses, or one
//! that returns nothing now, found before the change window rather than at the steady-state check inside it.

use chrono::Utc;

use crate::cluster::Reader;
use crate::drill::slo::{SloSpec, StopCondition};
use crate::preflight::{CheckId, Finding, Status};
use crate::prometheus::Prometheus;

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
    out.extend(window_findings(spec, &prometheus).await);
    out
}

/// Each rate window against its targets' scrape interval: fewer than two scrapes fails (the query is empty and the
/// steady state refused), fewer than four warns (one missed scrape empties it).
async fn window_findings(spec: &SloSpec, prometheus: &Prometheus) -> Vec<Finding> {
    let fix = "widen the window to at least four scrape intervals (`[2m]` at a 30s scrape); the report states the \
               detection lag it adds";
    let checks = match super::scrape::windows(spec, prometheus).await {
        Ok(checks) => checks,
        Err(e) => {
            return vec![Finding {
                check: CheckId::SliQueries,
                status: Status::Warn,
                object: "scrape intervals".into(),
                message: format!(
                    "the targets' scrape intervals could not be read ({}): the SLIs' windows are not checked",
                    crate::secrets::redact(&e.to_string())
                ),
                fix: Some("allow GET /api/v1/targets for the drill's Prometheus credentials".into()),
            }];
        }
    };
    checks
        .iter()
        .map(|c| {
            let (status, says) = match c.fit() {
                super::scrape::Fit::Fits => (Status::Pass, "enough to spare a missed scrape".to_string()),
                super::scrape::Fit::Tight => (Status::Warn, "one missed or late scrape empties it".to_string()),
                super::scrape::Fit::TooShort => (
                    Status::Fail,
                    "rate() needs two samples in its window: the query is empty and a run is refused".to_string(),
                ),
            };
            Finding {
                check: CheckId::SliQueries,
                status,
                object: c.object.clone(),
                message: format!(
                    "{}: {says}; detection lag about {}",
                    c.describe(),
                    humantime::format_duration(c.lag())
                ),
                fix: (status != Status::Pass).then(|| fix.to_string()),
            }
        })
        .collect()
}
