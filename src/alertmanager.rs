//! Alertmanager through its API v2: the matchers a drill file writes; creating, finding and expiring the silence a
//! drill holds while it causes the alerts (the journal and the undo that call it are in `safety`); and the alerts
//! firing that a start gate refuses on.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::cluster::error_chain;

/// Who creates every silence of a drill: how a silence of a run is found again without its id.
pub const CREATED_BY: &str = "hybrid-drill";

/// Bound on one request to Alertmanager.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// One matcher of a silence, as Alertmanager's API v2 spells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Matcher {
    pub name: String,
    pub value: String,
    pub is_regex: bool,
    /// False for `!=` and `!~`.
    #[serde(default = "yes")]
    pub is_equal: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatcherError {
    #[error("expected NAME=\"VALUE\" (or !=, =~, !~), e.g. alertname=\"KubeNodeNotReady\"")]
    Shape,
    #[error("invalid label name `{0}`: letters, digits and `_`, not starting with a digit")]
    Name(String),
    #[error("unterminated quote in the value")]
    Quote,
    #[error("invalid regular expression: {0}")]
    Regex(String),
}

impl Matcher {
    /// Parses Alertmanager's (and amtool's) matcher syntax: `name="value"`, `name!="value"`, `name=~"regex"`,
    /// `name!~"regex"`; the value may be left unquoted when it has no spaces or quotes.
    pub fn parse(text: &str) -> Result<Matcher, MatcherError> {
        let text = text.trim();
        let at = text.find(['=', '!']).ok_or(MatcherError::Shape)?;
        let name = text[..at].trim();
        let rest = &text[at..];
        let (is_equal, is_regex, value) = if let Some(v) = rest.strip_prefix("=~") {
            (true, true, v)
        } else if let Some(v) = rest.strip_prefix("!~") {
            (false, true, v)
        } else if let Some(v) = rest.strip_prefix("!=") {
            (false, false, v)
        } else if let Some(v) = rest.strip_prefix('=') {
            (true, false, v)
        } else {
            return Err(MatcherError::Shape);
        };
        let valid_name = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid_name {
            return Err(if name.is_empty() { MatcherError::Shape } else { MatcherError::Name(name.into()) });
        }
        let value = unquote(value.trim())?;
        if is_regex {
            regex::Regex::new(&format!("^(?:{value})$")).map_err(|e| MatcherError::Regex(first_line(&e)))?;
        }
        Ok(Matcher { name: name.into(), value, is_regex, is_equal })
    }

    /// Whether an alert without this label (an empty value) matches: Alertmanager refuses a silence whose every
    /// matcher does, as it would silence every alert.
    pub fn matches_empty(&self) -> bool {
        let empty = if self.is_regex {
            regex::Regex::new(&format!("^(?:{})$", self.value)).is_ok_and(|r| r.is_match(""))
        } else {
            self.value.is_empty()
        };
        empty == self.is_equal
    }
}

fn first_line(e: &regex::Error) -> String {
    e.to_string().lines().last().unwrap_or_default().trim().to_string()
}

fn unquote(v: &str) -> Result<String, MatcherError> {
    let Some(inner) = v.strip_prefix('"') else { return Ok(v.to_string()) };
    let inner = inner.strip_suffix('"').ok_or(MatcherError::Quote)?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().ok_or(MatcherError::Quote)?),
            '"' => return Err(MatcherError::Quote),
            c => out.push(c),
        }
    }
    Ok(out)
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match (self.is_equal, self.is_regex) {
            (true, false) => "=",
            (false, false) => "!=",
            (true, true) => "=~",
            (false, true) => "!~",
        };
        write!(f, "{}{op}{:?}", self.name, self.value)
    }
}

/// The comment that marks a silence as this run's: the drill's own comment, then the run id, which finds it again.
pub fn run_comment(comment: Option<&str>, run_id: &str) -> String {
    match comment {
        Some(c) if !c.trim().is_empty() => format!("{} [hybrid-drill run {run_id}]", c.trim()),
        _ => format!("failure drill in progress [hybrid-drill run {run_id}]"),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AlertmanagerError {
    #[error("invalid Alertmanager URL `{url}`: {reason}")]
    Url { url: String, reason: crate::http::UrlError },
    #[error("cannot reach Alertmanager at {url}: {reason}")]
    Send { url: String, reason: String },
    #[error("Alertmanager at {url} answered {status}: {body}")]
    Rejected { url: String, status: reqwest::StatusCode, body: String },
    #[error("Alertmanager at {url} answered something that is not a silence: {reason}")]
    Answer { url: String, reason: String },
}

impl AlertmanagerError {
    /// Whether asking again may help: Alertmanager could not be reached, or answered 5xx or 429.
    pub fn is_transient(&self) -> bool {
        match self {
            AlertmanagerError::Send { .. } => true,
            AlertmanagerError::Rejected { status, .. } => {
                status.is_server_error() || *status == reqwest::StatusCode::TOO_MANY_REQUESTS
            }
            AlertmanagerError::Url { .. } | AlertmanagerError::Answer { .. } => false,
        }
    }
}

/// A silence as Alertmanager's API v2 sends and receives it (the fields this tool reads and writes).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiSilence {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub matchers: Vec<Matcher>,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub created_by: String,
    pub comment: String,
    #[serde(default, skip_serializing)]
    pub status: Option<SilenceStatus>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SilenceStatus {
    /// `active`, `pending` or `expired`.
    pub state: String,
}

impl ApiSilence {
    fn is_expired(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.state == "expired")
    }
}

/// An alert as Alertmanager's API v2 lists it (the fields a start gate reads).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiAlert {
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    pub starts_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub status: Option<AlertStatus>,
}

/// Whether Alertmanager mutes an alert: `active`, or `suppressed` by a silence or an inhibition.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertStatus {
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub silenced_by: Vec<String>,
    #[serde(default)]
    pub inhibited_by: Vec<String>,
}

impl ApiAlert {
    /// Silenced or inhibited: it fired, but nobody was paged for it.
    pub fn muted(&self) -> bool {
        self.status.as_ref().is_some_and(|s| !s.silenced_by.is_empty() || !s.inhibited_by.is_empty())
    }
}

impl ApiAlert {
    /// `NAME{label="value", ...} since HH:MM UTC`, its alertname first.
    pub fn describe(&self) -> String {
        let name = self.labels.get("alertname").map_or("(unnamed)", String::as_str);
        let labels: Vec<String> =
            self.labels.iter().filter(|(k, _)| *k != "alertname").map(|(k, v)| format!("{k}={v:?}")).collect();
        let since = self.starts_at.map(|t| format!(" since {}", t.format("%Y-%m-%d %H:%M UTC"))).unwrap_or_default();
        format!("{name}{{{}}}{since}", labels.join(", "))
    }
}

/// Alertmanager at a base URL (`http://alertmanager.monitoring:9093`).
pub struct Alertmanager {
    base: reqwest::Url,
    client: reqwest::Client,
}

impl Alertmanager {
    pub fn new(base: &str) -> Result<Alertmanager, AlertmanagerError> {
        let invalid = |reason| AlertmanagerError::Url { url: base.into(), reason };
        let mut url = crate::http::service_url(base).map_err(invalid)?;
        url.path_segments_mut().map_err(|()| invalid(crate::http::UrlError::NotBase))?.pop_if_empty().push("");
        let client = crate::http::client(REQUEST_TIMEOUT)
            .map_err(|e| AlertmanagerError::Send { url: base.into(), reason: error_chain(&e) })?;
        Ok(Alertmanager { base: url, client })
    }

    fn url(&self, path: &str) -> reqwest::Url {
        self.base.join(path).unwrap_or_else(|_| self.base.clone())
    }

    async fn send(&self, request: reqwest::RequestBuilder, url: &reqwest::Url) -> Result<String, AlertmanagerError> {
        let shown = crate::http::bare(url);
        let response = request
            .send()
            .await
            .map_err(|e| AlertmanagerError::Send { url: shown.clone(), reason: error_chain(&e) })?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(AlertmanagerError::Rejected {
                url: shown,
                status,
                body: body.trim().chars().take(300).collect(),
            });
        }
        Ok(body)
    }

    /// Creates a silence from now until `until`; its id.
    pub async fn create(
        &self,
        matchers: &[Matcher],
        comment: &str,
        until: DateTime<Utc>,
    ) -> Result<String, AlertmanagerError> {
        let silence = ApiSilence {
            id: None,
            matchers: matchers.to_vec(),
            starts_at: Utc::now(),
            ends_at: until,
            created_by: CREATED_BY.into(),
            comment: comment.into(),
            status: None,
        };
        let url = self.url("api/v2/silences");
        let request = self.client.post(url.clone()).header(reqwest::header::CONTENT_TYPE, "application/json");
        let json = serde_json::to_vec(&silence).unwrap_or_default();
        let body = self.send(request.body(json), &url).await?;
        #[derive(Deserialize)]
        struct Created {
            #[serde(rename = "silenceID")]
            silence_id: String,
        }
        serde_json::from_str::<Created>(&body)
            .map(|c| c.silence_id)
            .map_err(|e| AlertmanagerError::Answer { url: crate::http::bare(&url), reason: e.to_string() })
    }

    /// Every silence Alertmanager holds, expired ones included.
    pub async fn list(&self) -> Result<Vec<ApiSilence>, AlertmanagerError> {
        let url = self.url("api/v2/silences");
        let body = self.send(self.client.get(url.clone()), &url).await?;
        serde_json::from_str(&body)
            .map_err(|e| AlertmanagerError::Answer { url: crate::http::bare(&url), reason: e.to_string() })
    }

    /// Expires one silence; one already gone or expired counts as expired.
    pub async fn expire(&self, id: &str) -> Result<(), AlertmanagerError> {
        let url = self.url(&format!("api/v2/silence/{id}"));
        match self.send(self.client.delete(url.clone()), &url).await {
            Err(AlertmanagerError::Rejected { status, .. }) if status == reqwest::StatusCode::NOT_FOUND => Ok(()),
            // Alertmanager answers 500 "silence ... already expired" for an expired one.
            Err(AlertmanagerError::Rejected { body, .. }) if body.contains("already expired") => Ok(()),
            result => result.map(drop),
        }
    }

    /// The alerts firing now that meet every matcher: active, neither silenced nor inhibited (API v2's own filter,
    /// so the answer holds only what is asked for).
    pub async fn firing(&self, matchers: &[Matcher]) -> Result<Vec<ApiAlert>, AlertmanagerError> {
        self.alerts(matchers, false).await
    }

    /// The alerts firing now that meet every matcher, silenced or inhibited ones included: a drill silences the
    /// alerts its fault sets off, and a stop condition on one of them must still see it fire.
    pub async fn firing_even_if_silenced(&self, matchers: &[Matcher]) -> Result<Vec<ApiAlert>, AlertmanagerError> {
        self.alerts(matchers, true).await
    }

    async fn alerts(&self, matchers: &[Matcher], muted_too: bool) -> Result<Vec<ApiAlert>, AlertmanagerError> {
        let mut url = self.url("api/v2/alerts");
        {
            let mut query = url.query_pairs_mut();
            let muted = if muted_too { "true" } else { "false" };
            query.append_pair("active", "true").append_pair("silenced", muted).append_pair("inhibited", muted);
            for matcher in matchers {
                query.append_pair("filter", &matcher.to_string());
            }
        }
        let body = self.send(self.client.get(url.clone()), &url).await?;
        serde_json::from_str(&body)
            .map_err(|e| AlertmanagerError::Answer { url: crate::http::bare(&url), reason: e.to_string() })
    }

    /// Expires every silence not yet expired that carries `comment` with these matchers: the silences of one run,
    /// found again whether or not its journal holds their ids (a crash between the request and its record). The
    /// ids expired.
    pub async fn expire_matching(&self, matchers: &[Matcher], comment: &str) -> Result<Vec<String>, AlertmanagerError> {
        let mut wanted = matchers.to_vec();
        wanted.sort_by_key(Matcher::to_string);
        let mut expired = Vec::new();
        for mut silence in self.list().await? {
            silence.matchers.sort_by_key(Matcher::to_string);
            let ours = silence.created_by == CREATED_BY && silence.comment == comment && silence.matchers == wanted;
            if let (true, false, Some(id)) = (ours, silence.is_expired(), &silence.id) {
                self.expire(id).await?;
                expired.push(id.clone());
            }
        }
        Ok(expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Matcher {
        Matcher::parse(text).unwrap()
    }

    #[test]
    fn matchers_read_alertmanagers_syntax() {
        assert_eq!(
            m(r#"alertname="KubeNodeNotReady""#),
            Matcher { name: "alertname".into(), value: "KubeNodeNotReady".into(), is_regex: false, is_equal: true }
        );
        assert_eq!(
            m(r#"node=~"mi-.*""#),
            Matcher { name: "node".into(), value: "mi-.*".into(), is_regex: true, is_equal: true }
        );
        assert_eq!(
            m("severity!=info"),
            Matcher { name: "severity".into(), value: "info".into(), is_regex: false, is_equal: false }
        );
        assert_eq!(
            m(r#" job !~ "a|b" "#),
            Matcher { name: "job".into(), value: "a|b".into(), is_regex: true, is_equal: false }
        );
        assert_eq!(m(r#"summary="say \"hi\"""#).value, r#"say "hi""#);
        assert_eq!(m(r#"node=~"mi-.*""#).to_string(), r#"node=~"mi-.*""#);
    }

    #[test]
    fn a_bad_matcher_says_what_is_wrong() {
        assert_eq!(Matcher::parse("alertname"), Err(MatcherError::Shape));
        assert_eq!(Matcher::parse(r#"="x""#), Err(MatcherError::Shape));
        assert_eq!(Matcher::parse(r#"1node="x""#), Err(MatcherError::Name("1node".into())));
        assert_eq!(Matcher::parse(r#"node="x"#), Err(MatcherError::Quote));
        assert!(matches!(Matcher::parse(r#"node=~"(""#), Err(MatcherError::Regex(_))));
    }

    #[test]
    fn a_matcher_that_an_alert_without_the_label_meets_is_known() {
        assert!(m(r#"node=~".*""#).matches_empty());
        assert!(m(r#"node!="x""#).matches_empty());
        assert!(m(r#"node="""#).matches_empty());
        assert!(!m(r#"node=~".+""#).matches_empty());
        assert!(!m(r#"alertname="KubeNodeNotReady""#).matches_empty());
        assert!(!m(r#"node!~".*""#).matches_empty());
    }

    #[test]
    fn a_runs_comment_carries_its_id() {
        assert_eq!(run_comment(Some(" Q3 drill "), "d-1"), "Q3 drill [hybrid-drill run d-1]");
        assert_eq!(run_comment(None, "d-1"), "failure drill in progress [hybrid-drill run d-1]");
    }

    /// A live Alertmanager when `HYBRID_DRILL_TEST_ALERTMANAGER` names one (the lab's: http://127.0.0.1:29093).
    #[tokio::test]
    async fn a_silence_is_created_found_and_expired_when_an_alertmanager_is_given() {
        let Ok(url) = std::env::var("HYBRID_DRILL_TEST_ALERTMANAGER") else { return };
        let am = Alertmanager::new(&url).unwrap();
        let matchers = vec![m(r#"node=~"hybrid-gpu-.*""#), m(r#"alertname="KubeNodeNotReady""#)];
        let comment = format!("unit test [hybrid-drill run {}]", std::process::id());
        let id = am.create(&matchers, &comment, Utc::now() + chrono::Duration::hours(1)).await.unwrap();
        let reversed: Vec<Matcher> = matchers.iter().rev().cloned().collect();
        assert_eq!(am.expire_matching(&reversed, &comment).await.unwrap(), std::slice::from_ref(&id));
        assert_eq!(am.expire_matching(&matchers, &comment).await.unwrap(), Vec::<String>::new());
        am.expire(&id).await.unwrap();
    }

    #[test]
    fn the_api_paths_sit_under_the_base_url() {
        let am = Alertmanager::new("http://am:9093/prefix").unwrap();
        assert_eq!(am.url("api/v2/silences").as_str(), "http://am:9093/prefix/api/v2/silences");
        let am = Alertmanager::new("http://am:9093/").unwrap();
        assert_eq!(am.url("api/v2/silence/abc").as_str(), "http://am:9093/api/v2/silence/abc");
        assert!(Alertmanager::new("am:9093").is_err());
    }

    #[test]
    fn a_silence_is_sent_as_the_api_spells_it() {
        let s = ApiSilence {
            id: None,
            matchers: vec![m(r#"node=~"mi-.*""#)],
            starts_at: "2026-12-03T10:00:00Z".parse().unwrap(),
            ends_at: "2026-12-03T11:00:00Z".parse().unwrap(),
            created_by: CREATED_BY.into(),
            comment: "c".into(),
            status: None,
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({"matchers": [{"name": "node", "value": "mi-.*", "isRegex": true, "isEqual": true}],
                "startsAt": "2026-12-03T10:00:00Z", "endsAt": "2026-12-03T11:00:00Z",
                "createdBy": "hybrid-drill", "comment": "c"})
        );
    }
}
