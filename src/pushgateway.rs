//! Pushes a run's metrics to a Prometheus Pushgateway: one PUT per run, replacing the group `job="hybrid-drill",
//! drill="<name>"` so a phase the last run did not reach does not keep an older run's value. The network side of
//! `metrics.prom`, kept out of `report`, whose renderers are pure.

use std::time::Duration;

use crate::report::{Report, prometheus};
// reqwest's own message names only the request; the reason (refused, timed out, DNS) is down its source chain.
use crate::cluster::error_chain;

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("invalid Pushgateway URL `{url}`: {reason}")]
    Url { url: String, reason: crate::http::UrlError },
    #[error("cannot reach the Pushgateway at {url}: {reason}")]
    Send { url: String, reason: String },
    #[error("the Pushgateway at {url} answered {status}: {body}")]
    Rejected { url: String, status: reqwest::StatusCode, body: String },
    #[error("cannot encode the metrics: {0}")]
    Encode(std::fmt::Error),
}

/// The group URL of a drill's metrics under a Pushgateway base URL.
fn group_url(base: &str, drill: &str) -> Result<reqwest::Url, PushError> {
    job_url(base, "hybrid-drill", drill)
}

/// The group URL of one job's metrics for a drill: the drills' own (`hybrid-drill`) or the canary's, so a canary
/// never replaces the last drill's figures.
fn job_url(base: &str, job: &str, drill: &str) -> Result<reqwest::Url, PushError> {
    let invalid = |reason| PushError::Url { url: base.into(), reason };
    let mut url = crate::http::service_url(base).map_err(invalid)?;
    url.path_segments_mut()
        .map_err(|()| invalid(crate::http::UrlError::NotBase))?
        .pop_if_empty()
        .extend(["metrics", "job", job, "drill", drill]);
    Ok(url)
}

pub async fn push(base: &str, report: &Report) -> Result<(), PushError> {
    let url = group_url(base, &report.drill.name)?;
    let metrics = prometheus::render(report).map_err(PushError::Encode)?;
    put(url, metrics).await
}

/// Pushes metrics already rendered in Prometheus's text format as the group `job="<job>", drill="<drill>"`.
pub async fn push_text(base: &str, job: &str, drill: &str, metrics: String) -> Result<(), PushError> {
    put(job_url(base, job, drill)?, metrics).await
}

async fn put(url: reqwest::Url, metrics: String) -> Result<(), PushError> {
    let shown = crate::http::bare(&url);
    let client = crate::http::client(Duration::from_secs(10))
        .map_err(|e| PushError::Send { url: shown.clone(), reason: error_chain(&e) })?;
    let response = client
        .put(url)
        .header(reqwest::header::CONTENT_TYPE, prometheus::CONTENT_TYPE)
        .body(metrics)
        .send()
        .await
        .map_err(|e| PushError::Send { url: shown.clone(), reason: error_chain(&e) })?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(PushError::Rejected { url: shown, status, body: body.trim().chars().take(300).collect() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_is_the_job_and_the_drill() {
        assert_eq!(
            group_url("http://pushgateway:9091", "onprem-gpu-drain").unwrap().as_str(),
            "http://pushgateway:9091/metrics/job/hybrid-drill/drill/onprem-gpu-drain"
        );
        assert_eq!(
            group_url("http://pg/base/", "a b/c").unwrap().as_str(),
            "http://pg/base/metrics/job/hybrid-drill/drill/a%20b%2Fc"
        );
        assert!(group_url("pushgateway:9091", "x").is_err());
    }
}
