//! Telling people: a message to each webhook of the drill (`spec.notify`, `--notify`) when it starts, for each
//! objective it missed or could not measure, when it aborts, and when it ends with its verdict, RTO and report. A
//! message that does not get through is a warning, never a failed drill, and waits at most the webhook's timeout.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::cluster::error_chain;
use crate::domain::PhaseId;
use crate::drill::{NotifyFormat, Webhook};
use crate::phases::Verdict;
use crate::report::{Outcome, Report, human_seconds};

/// The `schema` of a plain JSON event.
pub const EVENT_SCHEMA: &str = "hybrid-drill.io/event/v1";

/// One thing worth telling.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Notice {
    /// The drill is about to touch the cluster.
    Started { context: String, run_dir: String },
    /// A phase with an objective missed it, or was not measured (`incomplete`) or not measurable (`inconsistent`).
    ObjectiveMissed { phase: PhaseId, verdict: Verdict, seconds: Option<f64>, objective_seconds: Option<f64> },
    /// The drill stopped early; the cluster is being restored.
    Aborted { reason: String },
    /// The report is written.
    Finished {
        outcome: Outcome,
        exit_code: i32,
        rto_seconds: Option<f64>,
        rto_objective_seconds: Option<f64>,
        objectives_missed: Vec<PhaseId>,
        report: String,
        /// What was still different from before the fault at the end (report.json's `leftovers`), one line each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        leftovers: Vec<String>,
    },
}

/// The messages of a finished run: one per missed objective, then the end.
pub fn end_notices(report: &Report, report_path: &str) -> Vec<Notice> {
    let missed = report.objectives_missed.iter().filter_map(|id| report.phase(*id)).map(|p| Notice::ObjectiveMissed {
        phase: p.name,
        verdict: p.verdict,
        seconds: p.seconds,
        objective_seconds: p.objective_seconds,
    });
    let rto = report.phase(PhaseId::Rto);
    let end = Notice::Finished {
        outcome: report.outcome,
        exit_code: report.exit_code,
        rto_seconds: rto.and_then(|p| p.seconds),
        rto_objective_seconds: rto.and_then(|p| p.objective_seconds),
        objectives_missed: report.objectives_missed.clone(),
        report: report_path.into(),
        leftovers: report.leftovers.iter().map(|l| l.line()).collect(),
    };
    missed.chain(std::iter::once(end)).collect()
}

/// A plain JSON event: the notice with the drill, the run and the time.
#[derive(Serialize)]
struct JsonEvent<'a> {
    schema: &'static str,
    drill: &'a str,
    run_id: &'a str,
    at: DateTime<Utc>,
    #[serde(flatten)]
    notice: &'a Notice,
}

/// Slack's `mrkdwn` reserves these three.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn figure(seconds: Option<f64>) -> String {
    seconds.map(human_seconds).unwrap_or_else(|| "not measured".into())
}

/// The one line a person reads (Slack's `text`).
pub fn text(drill: &str, run_id: &str, notice: &Notice) -> String {
    let drill = format!("*{}*", escape(drill));
    match notice {
        Notice::Started { context, run_dir } => format!(
            "hybrid-drill: drill {drill} started against `{}` (run {run_id}); report in {}",
            escape(context),
            escape(run_dir)
        ),
        Notice::ObjectiveMissed { phase, verdict, seconds, objective_seconds } => {
            let how = match verdict {
                Verdict::Incomplete => "could not measure",
                Verdict::Inconsistent => "could not judge (its end came before its start)",
                _ => "missed",
            };
            format!(
                "hybrid-drill: drill {drill} {how} its {phase} objective: {} against {} (run {run_id})",
                figure(*seconds),
                figure(*objective_seconds)
            )
        }
        Notice::Aborted { reason } => {
            format!("hybrid-drill: drill {drill} ABORTED: {}; restoring the cluster (run {run_id})", escape(reason))
        }
        Notice::Finished {
            outcome,
            exit_code,
            rto_seconds,
            rto_objective_seconds,
            objectives_missed,
            report,
            leftovers,
        } => {
            let objective = rto_objective_seconds.map(|s| format!(" (objective {})", human_seconds(s)));
            let missed = if objectives_missed.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = objectives_missed.iter().map(|p| p.as_str()).collect();
                format!("; missed: {}", names.join(", "))
            };
            let left =
                if leftovers.is_empty() { String::new() } else { format!("; {}", escape(&leftovers.join("; "))) };
            format!(
                "hybrid-drill: drill {drill} finished: {} (exit {exit_code}); RTO {}{}{missed}{left}; report {} (run {run_id})",
                outcome.as_str(),
                figure(*rto_seconds),
                objective.unwrap_or_default(),
                escape(report)
            )
        }
    }
}

/// The body a webhook of `format` receives.
pub fn body(format: NotifyFormat, drill: &str, run_id: &str, at: DateTime<Utc>, notice: &Notice) -> serde_json::Value {
    match format {
        NotifyFormat::Slack => serde_json::json!({ "text": text(drill, run_id, notice) }),
        NotifyFormat::Json => {
            serde_json::to_value(JsonEvent { schema: EVENT_SCHEMA, drill, run_id, at, notice }).unwrap_or_default()
        }
    }
}

/// The webhooks of one run.
pub struct Notifier {
    drill: String,
    run_id: String,
    hooks: Vec<Webhook>,
}

impl Notifier {
    pub fn new(drill: &str, run_id: &str, hooks: Vec<Webhook>) -> Notifier {
        Notifier { drill: drill.into(), run_id: run_id.into(), hooks }
    }

    /// Sends `notice` to every webhook at once; a warning for each that did not take it.
    pub async fn send(&self, notice: &Notice) -> Vec<String> {
        let at = Utc::now();
        let sends = self.hooks.iter().map(|hook| async move {
            let body = body(hook.format, &self.drill, &self.run_id, at, notice);
            post(hook, &body).await.err().map(|why| {
                let event = serde_json::to_value(notice).ok().and_then(|v| v["event"].as_str().map(str::to_string));
                format!("notification `{}` to {} failed: {why}", event.unwrap_or_default(), hook.shown())
            })
        });
        futures::future::join_all(sends).await.into_iter().flatten().collect()
    }
}

/// Why a webhook did not take a message.
#[derive(Debug, thiserror::Error)]
enum PostError {
    #[error("{}", error_chain(.0))]
    Client(reqwest::Error),
    #[error("no answer within {}", humantime::format_duration(*.0))]
    Timeout(std::time::Duration),
    /// The request's causes only: reqwest's own message names the URL, which may hold the webhook's secret.
    #[error("{0}")]
    Send(String),
    #[error("answered {status}: {body}")]
    Answered { status: reqwest::StatusCode, body: String },
}

async fn post(hook: &Webhook, body: &serde_json::Value) -> Result<(), PostError> {
    let client = crate::http::client(hook.timeout).map_err(PostError::Client)?;
    let request = client.post(hook.url.clone()).header(reqwest::header::CONTENT_TYPE, "application/json");
    let response = request.body(body.to_string()).send().await.map_err(|e| {
        if e.is_timeout() {
            PostError::Timeout(hook.timeout)
        } else {
            PostError::Send(std::error::Error::source(&e).map(error_chain).unwrap_or_else(|| "request failed".into()))
        }
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    Err(PostError::Answered { status, body: text.trim().chars().take(200).collect() })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at() -> DateTime<Utc> {
        "2026-12-03T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_json_event_carries_the_drill_the_run_and_the_notice() {
        let notice = Notice::Started { context: "hybrid-lab".into(), run_dir: "reports/d/1".into() };
        assert_eq!(
            body(NotifyFormat::Json, "d", "d-1", at(), &notice),
            serde_json::json!({"schema": EVENT_SCHEMA, "drill": "d", "run_id": "d-1", "at": "2026-12-03T10:00:00Z",
                "event": "started", "context": "hybrid-lab", "run_dir": "reports/d/1"})
        );
        let end = Notice::Finished {
            outcome: Outcome::ObjectiveMissed,
            exit_code: 1,
            rto_seconds: Some(62.5),
            rto_objective_seconds: Some(900.0),
            objectives_missed: vec![PhaseId::Reclaim],
            report: "reports/d/1/report.md".into(),
            leftovers: vec![],
        };
        let event = body(NotifyFormat::Json, "d", "d-1", at(), &end);
        assert_eq!(event["event"], "finished");
        assert_eq!(event["outcome"], "objective-missed");
        assert_eq!(event["objectives_missed"], serde_json::json!(["reclaim"]));
        assert_eq!(event["rto_seconds"], 62.5);
    }

    #[test]
    fn a_slack_message_is_one_escaped_line() {
        let notice = Notice::Aborted { reason: "step drain failed: <429> & more".into() };
        assert_eq!(
            body(NotifyFormat::Slack, "onprem-gpu-drain", "r-1", at(), &notice),
            serde_json::json!({"text": "hybrid-drill: drill *onprem-gpu-drain* ABORTED: step drain failed: &lt;429&gt; &amp; more; restoring the cluster (run r-1)"})
        );
        let missed = Notice::ObjectiveMissed {
            phase: PhaseId::Rto,
            verdict: Verdict::Incomplete,
            seconds: None,
            objective_seconds: Some(900.0),
        };
        assert_eq!(
            text("d", "r-1", &missed),
            "hybrid-drill: drill *d* could not measure its rto objective: not measured against 15m 00.0s (run r-1)"
        );
        let end = Notice::Finished {
            outcome: Outcome::Passed,
            exit_code: 0,
            rto_seconds: Some(62.5),
            rto_objective_seconds: Some(900.0),
            objectives_missed: vec![],
            report: "reports/d/1/report.md".into(),
            leftovers: vec![],
        };
        assert_eq!(
            text("d", "r-1", &end),
            "hybrid-drill: drill *d* finished: passed (exit 0); RTO 1m 02.5s (objective 15m 00.0s); report reports/d/1/report.md (run r-1)"
        );
    }

    #[test]
    fn a_finished_run_tells_each_missed_objective_then_its_end() {
        let report = crate::report::sample::report();
        let notices = end_notices(&report, "r/report.md");
        assert_eq!(notices.len(), report.objectives_missed.len() + 1);
        for (notice, id) in notices.iter().zip(&report.objectives_missed) {
            assert!(matches!(notice, Notice::ObjectiveMissed { phase, .. } if phase == id), "{notice:?}");
        }
        assert!(matches!(notices.last(), Some(Notice::Finished { report, .. }) if report == "r/report.md"));
    }

    /// A webhook on 127.0.0.1 that answers each request with the next of `statuses` (or never, for `None`) and hands
    /// back every request it read: method and path, headers, body.
    async fn webhook(statuses: Vec<Option<u16>>) -> (reqwest::Url, tokio::sync::mpsc::UnboundedReceiver<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url =
            reqwest::Url::parse(&format!("http://{}/hooks/secret-token", listener.local_addr().unwrap())).unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut held = Vec::new();
            for status in statuses {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = stream.read(&mut buf).await.unwrap();
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    let done = text.split_once("\r\n\r\n").is_some_and(|(head, body)| {
                        let length = head.lines().find_map(|l| {
                            l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap())
                        });
                        body.len() >= length.unwrap_or(0)
                    });
                    if done || n == 0 {
                        break;
                    }
                }
                tx.send(String::from_utf8_lossy(&request).into_owned()).unwrap();
                match status {
                    Some(code) => {
                        let answer = format!("HTTP/1.1 {code} X\r\ncontent-length: 4\r\nconnection: close\r\n\r\nnope");
                        stream.write_all(answer.as_bytes()).await.unwrap();
                    }
                    // Never answers: the sender's timeout must end the wait.
                    None => held.push(stream),
                }
            }
            std::future::pending::<()>().await;
        });
        (url, rx)
    }

    fn body_of(request: &str) -> serde_json::Value {
        serde_json::from_str(request.split_once("\r\n\r\n").unwrap().1).unwrap()
    }

    #[tokio::test]
    async fn each_notice_reaches_each_webhook_in_its_format() {
        let (json_url, mut json_in) = webhook(vec![Some(200); 4]).await;
        let (slack_url, mut slack_in) = webhook(vec![Some(200); 4]).await;
        let hooks = vec![
            Webhook { url: json_url, format: NotifyFormat::Json, timeout: Webhook::DEFAULT_TIMEOUT },
            Webhook { url: slack_url, format: NotifyFormat::Slack, timeout: Webhook::DEFAULT_TIMEOUT },
        ];
        let notifier = Notifier::new("onprem-gpu-drain", "run-1", hooks);
        let mut notices = vec![
            Notice::Started { context: "hybrid-lab".into(), run_dir: "reports/x/1".into() },
            Notice::Aborted { reason: "interrupted by SIGINT".into() },
        ];
        notices.extend(end_notices(&crate::report::sample::report(), "reports/x/1/report.md").into_iter().skip(1));
        for notice in &notices {
            assert_eq!(notifier.send(notice).await, Vec::<String>::new());
        }
        for notice in &notices {
            let request = json_in.recv().await.unwrap();
            assert!(request.starts_with("POST /hooks/secret-token HTTP/1.1\r\n"), "{request}");
            assert!(request.to_lowercase().contains("content-type: application/json"), "{request}");
            let event = body_of(&request);
            assert_eq!(event["schema"], EVENT_SCHEMA);
            assert_eq!((event["drill"].as_str(), event["run_id"].as_str()), (Some("onprem-gpu-drain"), Some("run-1")));
            assert_eq!(event["event"], serde_json::to_value(notice).unwrap()["event"]);
            let slack = body_of(&slack_in.recv().await.unwrap());
            assert_eq!(slack, serde_json::json!({"text": text("onprem-gpu-drain", "run-1", notice)}));
        }
    }

    #[tokio::test]
    async fn a_webhook_that_fails_or_hangs_is_a_warning_without_its_secret() {
        let (failing, _requests) = webhook(vec![Some(500)]).await;
        let (hanging, _held) = webhook(vec![None]).await;
        let hooks = vec![
            Webhook { url: failing.clone(), format: NotifyFormat::Json, timeout: Webhook::DEFAULT_TIMEOUT },
            Webhook { url: hanging.clone(), format: NotifyFormat::Slack, timeout: Duration::from_millis(300) },
        ];
        let notifier = Notifier::new("d", "r", hooks);
        let warnings = notifier.send(&Notice::Aborted { reason: "x".into() }).await;
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let host = |u: &reqwest::Url| format!("http://127.0.0.1:{}/…", u.port().unwrap());
        assert_eq!(
            warnings[0],
            format!("notification `aborted` to {} failed: answered 500 Internal Server Error: nope", host(&failing))
        );
        assert_eq!(warnings[1], format!("notification `aborted` to {} failed: no answer within 300ms", host(&hanging)));
        assert!(warnings.iter().all(|w| !w.contains("secret-token")), "{warnings:?}");
    }
}
