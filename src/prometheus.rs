//! Prometheus's HTTP API (instant and range queries) with the credentials a drill names. Credentials are read once,
//! when the client is made, and masked from then on. (Alertmanager's alerts, for the `alert` stop conditions, are
//! read through `crate::alertmanager`.)

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

use crate::cluster::{Reader, error_chain};
use crate::drill::slo::{Credential, PrometheusEndpoint};

#[derive(Debug, Clone, thiserror::Error)]
pub enum QueryError {
    #[error("cannot read the Prometheus credential: {0}")]
    Credential(String),
    #[error("cannot set up TLS to Prometheus: {0}")]
    Tls(String),
    #[error("cannot reach {url}: {reason}")]
    Send { url: String, reason: String },
    #[error("{url} answered {status}: {body}")]
    Rejected { url: String, status: u16, body: String },
    #[error("{url} answered something that is not a query result: {reason}")]
    Answer { url: String, reason: String },
}

/// One series of a result: its labels and its points (unix seconds, value).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub labels: std::collections::BTreeMap<String, String>,
    pub points: Vec<(f64, f64)>,
}

/// A Prometheus to query, with its credentials already read.
#[derive(Clone)]
pub struct Prometheus {
    base: reqwest::Url,
    client: reqwest::Client,
    authorization: Option<String>,
}

impl Prometheus {
    /// Reads the credentials (from the environment, a file or a Secret) and builds the client.
    pub async fn connect(endpoint: &PrometheusEndpoint, reader: &Reader) -> Result<Prometheus, QueryError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().timeout(endpoint.timeout);
        if let Some(ca) = &endpoint.ca_file {
            let pem = read_file(ca)?;
            let cert = reqwest::Certificate::from_pem(&pem).map_err(|e| QueryError::Tls(error_chain(&e)))?;
            builder = builder.add_root_certificate(cert);
        }
        if let Some((cert, key)) = &endpoint.client_cert {
            let mut pem = read_file(cert)?;
            pem.extend(read_file(key)?);
            let identity = reqwest::Identity::from_pem(&pem).map_err(|e| QueryError::Tls(error_chain(&e)))?;
            builder = builder.identity(identity);
        }
        let client = builder.build().map_err(|e| QueryError::Tls(error_chain(&e)))?;
        let authorization = match (&endpoint.bearer_token, &endpoint.basic_auth) {
            (Some(token), _) => Some(format!("Bearer {}", read(token, reader).await?)),
            (None, Some((user, password))) => {
                let pair = format!("{user}:{}", read(password, reader).await?);
                Some(format!("Basic {}", base64(pair.as_bytes())))
            }
            (None, None) => None,
        };
        if let Some(a) = &authorization {
            crate::secrets::remember(a);
        }
        Ok(Prometheus { base: endpoint.url.clone(), client, authorization })
    }

    /// The URL as reports show it: no credentials, no path secrets.
    pub fn shown(&self) -> String {
        crate::http::bare(&self.base)
    }

    /// One number: the first series of an instant query at `at`; `None` when the result is empty or not a number.
    pub async fn instant(&self, query: &str, at: DateTime<Utc>) -> Result<Option<f64>, QueryError> {
        let series = self.instant_vector(query, at).await?;
        Ok(series.first().and_then(|s| s.points.first()).map(|p| p.1).filter(|v| v.is_finite()))
    }

    /// Every series of an instant query at `at`.
    pub async fn instant_vector(&self, query: &str, at: DateTime<Utc>) -> Result<Vec<Series>, QueryError> {
        let time = unix(at).to_string();
        self.get("api/v1/query", &[("query", query), ("time", &time)]).await
    }

    /// A range query from `start` to `end` every `step`.
    pub async fn range(
        &self,
        query: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        step: Duration,
    ) -> Result<Vec<Series>, QueryError> {
        let (start, end, step) = (unix(start).to_string(), unix(end).to_string(), step.as_secs_f64().to_string());
        self.get("api/v1/query_range", &[("query", query), ("start", &start), ("end", &end), ("step", &step)]).await
    }

    async fn get(&self, path: &str, params: &[(&str, &str)]) -> Result<Vec<Series>, QueryError> {
        let (shown, body) = self.text(path, params).await?;
        parse_result(&body).map_err(|reason| QueryError::Answer { url: shown, reason: reason.to_string() })
    }

    /// The body of a successful GET of `path` under the base URL, with the URL as shown.
    pub(crate) async fn text(&self, path: &str, params: &[(&str, &str)]) -> Result<(String, String), QueryError> {
        let mut url = self.base.clone();
        if !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        let mut url = url.join(path).map_err(|e| QueryError::Answer { url: self.shown(), reason: e.to_string() })?;
        let shown = crate::http::bare(&url);
        url.query_pairs_mut().extend_pairs(params);
        let mut request = self.client.get(url);
        if let Some(a) = &self.authorization {
            request = request.header(reqwest::header::AUTHORIZATION, a);
        }
        let response =
            request.send().await.map_err(|e| QueryError::Send { url: shown.clone(), reason: error_chain(&e) })?;
        let status = response.status();
        let body =
            response.text().await.map_err(|e| QueryError::Send { url: shown.clone(), reason: error_chain(&e) })?;
        if !status.is_success() {
            let body = crate::secrets::redact(body.trim()).chars().take(300).collect();
            return Err(QueryError::Rejected { url: shown, status: status.as_u16(), body });
        }
        Ok((shown, body))
    }
}

fn unix(at: DateTime<Utc>) -> f64 {
    at.timestamp_millis() as f64 / 1000.0
}

fn read_file(path: &str) -> Result<Vec<u8>, QueryError> {
    std::fs::read(path).map_err(|e| QueryError::Tls(format!("cannot read {path}: {e}")))
}

async fn read(credential: &Credential, reader: &Reader) -> Result<String, QueryError> {
    let value = match credential {
        Credential::Reference(text) => {
            crate::secrets::resolve(text).map_err(|e| QueryError::Credential(e.to_string()))?
        }
        Credential::Secret { namespace, name, key } => {
            let api: kube::Api<Secret> = kube::Api::namespaced(reader.client().clone(), namespace);
            let secret = api
                .get(name)
                .await
                .map_err(|e| QueryError::Credential(format!("Secret {namespace}/{name}: {}", error_chain(&e))))?;
            let bytes = secret
                .data
                .and_then(|mut d| d.remove(key))
                .ok_or_else(|| QueryError::Credential(format!("Secret {namespace}/{name} has no key `{key}`")))?;
            String::from_utf8_lossy(&bytes.0).trim_end_matches(['\n', '\r']).to_string()
        }
    };
    crate::secrets::remember(&value);
    Ok(value)
}

/// Standard base64 with padding, for HTTP basic auth.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Why an answer is not a query result.
#[derive(Debug, thiserror::Error)]
enum AnswerError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// Prometheus's own error, or the status it gave without one.
    #[error("{0}")]
    Failed(String),
    #[error("no data")]
    NoData,
    #[error("a result of type {0}")]
    ResultType(String),
}

/// Reads `{"status": "success", "data": {"resultType": ..., "result": ...}}` into series.
fn parse_result(body: &str) -> Result<Vec<Series>, AnswerError> {
    #[derive(Deserialize)]
    struct Answer {
        status: String,
        #[serde(default)]
        data: Option<Data>,
        #[serde(default)]
        error: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Data {
        result_type: String,
        result: serde_json::Value,
    }
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default)]
        metric: std::collections::BTreeMap<String, String>,
        #[serde(default)]
        value: Option<(f64, String)>,
        #[serde(default)]
        values: Vec<(f64, String)>,
    }
    let answer: Answer = serde_json::from_str(body)?;
    if answer.status != "success" {
        return Err(AnswerError::Failed(answer.error.unwrap_or_else(|| format!("status {}", answer.status))));
    }
    let data = answer.data.ok_or(AnswerError::NoData)?;
    let number = |v: &str| v.parse::<f64>().unwrap_or(f64::NAN);
    match data.result_type.as_str() {
        "scalar" => {
            let (t, v): (f64, String) = serde_json::from_value(data.result)?;
            Ok(vec![Series { labels: Default::default(), points: vec![(t, number(&v))] }])
        }
        "vector" | "matrix" => {
            let raw: Vec<Raw> = serde_json::from_value(data.result)?;
            Ok(raw
                .into_iter()
                .map(|r| Series {
                    labels: r.metric,
                    points: r.value.into_iter().chain(r.values).map(|(t, v)| (t, number(&v))).collect(),
                })
                .collect())
        }
        other => Err(AnswerError::ResultType(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_is_standard_base64() {
        assert_eq!(base64(b"user:pass"), "dXNlcjpwYXNz");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
    }

    #[test]
    fn vectors_matrices_and_scalars_are_read() {
        let vector = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"p"},"value":[1.5,"0.25"]}]}}"#;
        assert_eq!(parse_result(vector).unwrap()[0].points, vec![(1.5, 0.25)]);
        let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"NaN"]]}]}}"#;
        let m = parse_result(matrix).unwrap();
        assert_eq!(m[0].points.len(), 2);
        assert!(m[0].points[1].1.is_nan());
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[3,"7"]}}"#;
        assert_eq!(parse_result(scalar).unwrap()[0].points, vec![(3.0, 7.0)]);
        let error = r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(parse_result(error).unwrap_err().to_string(), "parse error");
    }
}
