//! What the tool's HTTP clients of other services (Pushgateway, Alertmanager, notification webhooks) share: the check
//! of a URL a user gives, and a client bounded by a timeout.

use std::time::Duration;

/// Why a URL given for a service was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not a URL at all: the parser's own words (its error type is not part of reqwest's API).
    #[error("{0}")]
    Syntax(String),
    #[error("use http:// or https://")]
    Scheme,
    #[error("not a base URL")]
    NotBase,
    #[error("{0}")]
    Secret(#[from] crate::secrets::SecretError),
}

/// A URL given for a service: absolute, http or https, able to take a path below it. Its secret references are read
/// (`http://am:${env:AM_PASSWORD}@alertmanager:9093`), and its credentials remembered so that no report or log shows
/// them.
pub fn service_url(text: &str) -> Result<reqwest::Url, UrlError> {
    let text = crate::secrets::resolve(text)?;
    let url = reqwest::Url::parse(text.trim()).map_err(|e| UrlError::Syntax(e.to_string()))?;
    crate::secrets::remember_url(&url);
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlError::Scheme);
    }
    if url.cannot_be_a_base() || url.host_str().is_none() {
        return Err(UrlError::NotBase);
    }
    Ok(url)
}

/// A client whose every request gives up after `timeout`.
pub fn client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    // reqwest is built without a TLS provider of its own; the binary installs ring's at start, a test may not have.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().timeout(timeout).build()
}

/// Whether a probe's answer is the one expected, and the timeline's words for it.
pub fn judge_answer(shown: &str, status: u16, expected: u16) -> (bool, String) {
    if status == expected {
        (true, format!("{shown} answered {status}"))
    } else {
        (false, format!("{shown} answered {status}, expected {expected}"))
    }
}

/// A URL as an error names it: without its userinfo and query, which may hold its credentials.
pub fn bare(url: &reqwest::Url) -> String {
    let mut bare = url.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    bare.set_query(None);
    bare.to_string()
}

/// A URL as warnings and reports show it: scheme, host and port only, as a webhook's path is often its secret.
pub fn shown(url: &reqwest::Url) -> String {
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let path = if url.path().len() > 1 { "/…" } else { "" };
    format!("{}://{}{port}{path}", url.scheme(), url.host_str().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_url_is_http_and_absolute() {
        assert_eq!(service_url(" http://pg:9091 ").unwrap().as_str(), "http://pg:9091/");
        assert_eq!(service_url("pushgateway:9091").unwrap_err().to_string(), "use http:// or https://");
        assert!(service_url("/api/v2").is_err());
        assert!(service_url("mailto:ops@example.com").is_err());
    }

    #[test]
    fn a_shown_url_keeps_its_secret_path_out() {
        let url = reqwest::Url::parse("https://hooks.example.com/services/T0/B0/secret").unwrap();
        assert_eq!(shown(&url), "https://hooks.example.com/…");
        assert_eq!(shown(&reqwest::Url::parse("http://127.0.0.1:9/").unwrap()), "http://127.0.0.1:9");
        let with_credentials = reqwest::Url::parse("http://u:p4ss@am:9093/api/v2/silences?token=t0k").unwrap();
        assert_eq!(bare(&with_credentials), "http://am:9093/api/v2/silences");
    }
}
