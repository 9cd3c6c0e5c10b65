//! The alert rules Prometheus evaluates (`/api/v1/rules?type=alert`), read for `preflight`: an expected alert with no
//! rule can never fire, which is better found before the change window than as a miss inside it.

use std::collections::BTreeSet;

/// Why the rules could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("invalid Prometheus URL `{url}`: {reason}")]
    Url { url: String, reason: crate::http::UrlError },
    #[error("cannot read the rules from {url}: {reason}")]
    Read { url: String, reason: String },
}

/// The names of every alerting rule Prometheus has loaded.
pub async fn alert_names(prometheus: &str) -> Result<BTreeSet<String>, RulesError> {
    let base =
        crate::http::service_url(prometheus).map_err(|reason| RulesError::Url { url: prometheus.into(), reason })?;
    let url = base.join("api/v1/rules?type=alert").unwrap_or(base);
    let shown = crate::http::bare(&url);
    let read = |reason: String| RulesError::Read { url: shown.clone(), reason };
    let client = crate::http::client(std::time::Duration::from_secs(10)).map_err(|e| read(e.to_string()))?;
    let response = client.get(url.clone()).send().await.map_err(|e| read(crate::cluster::error_chain(&e)))?;
    if !response.status().is_success() {
        return Err(read(format!("answered {}", response.status())));
    }
    let text = response.text().await.map_err(|e| read(e.to_string()))?;
    let body: serde_json::Value = serde_json::from_str(&text).map_err(|e| read(e.to_string()))?;
    Ok(names(&body))
}

/// The alert names of a `/api/v1/rules` answer.
fn names(body: &serde_json::Value) -> BTreeSet<String> {
    let groups = body["data"]["groups"].as_array().cloned().unwrap_or_default();
    groups
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["type"] == "alerting")
        .filter_map(|r| r["name"].as_str().map(String::from))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn alert_names_are_read_from_every_group() {
        let body = serde_json::json!({"status": "success", "data": {"groups": [
            {"name": "a", "rules": [{"type": "alerting", "name": "FallbackActivated"}, {"type": "recording", "name": "x:y"}]},
            {"name": "b", "rules": [{"type": "alerting", "name": "FallbackNodePoolLimitNear"}]}
        ]}});
        let names = super::names(&body);
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["FallbackActivated", "FallbackNodePoolLimitNear"]);
    }
}
