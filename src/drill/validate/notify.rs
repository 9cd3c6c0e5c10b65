//! `spec.notify` and `spec.silences`: the webhooks told of a drill and the alerts it silences while it runs.

use super::Validator;

use crate::alertmanager::Matcher;
use crate::drill::model::{SilenceSpec, Webhook};
use crate::drill::parse::{index, join};
use crate::drill::raw::{self};

/// The longest a drill may wait for one webhook: a notification must never hold a drill up for long.
const MAX_NOTIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Validator<'_> {
    pub(super) fn notify(&mut self, hooks: &[raw::WebhookSection]) -> Vec<Webhook> {
        let mut valid = Vec::new();
        for (i, hook) in hooks.iter().enumerate() {
            let path = index("spec.notify", i);
            match crate::http::service_url(&hook.url) {
                Ok(url) => valid.push(Webhook {
                    url,
                    format: hook.format,
                    timeout: hook.timeout.map_or(Webhook::DEFAULT_TIMEOUT, |t| t.0),
                }),
                Err(reason) => {
                    self.problem(&join(&path, "url"), format!("invalid webhook URL `{}`: {reason}", hook.url))
                }
            }
            if hook.timeout.is_some_and(|t| t.0.is_zero() || t.0 > MAX_NOTIFY_TIMEOUT) {
                self.problem(&join(&path, "timeout"), "a webhook's timeout must be more than 0s and at most 1m");
            }
        }
        valid
    }

    pub(super) fn silences(&mut self, silences: &[raw::SilenceSection]) -> Vec<SilenceSpec> {
        let mut valid = Vec::new();
        for (i, silence) in silences.iter().enumerate() {
            let path = index("spec.silences", i);
            if let Err(reason) = crate::http::service_url(&silence.alertmanager) {
                let url = &silence.alertmanager;
                self.problem(&join(&path, "alertmanager"), format!("invalid Alertmanager URL `{url}`: {reason}"));
            }
            let mut matchers = Vec::new();
            for (j, text) in silence.matchers.iter().enumerate() {
                match Matcher::parse(text) {
                    Ok(m) => matchers.push(m),
                    Err(e) => {
                        self.problem(&index(&join(&path, "matchers"), j), format!("invalid matcher `{text}`: {e}"))
                    }
                }
            }
            if matchers.len() == silence.matchers.len() && matchers.iter().all(Matcher::matches_empty) {
                self.problem(
                    &join(&path, "matchers"),
                    "a silence needs at least one matcher that an alert without the label does not meet \
                     (e.g. alertname=\"KubeNodeNotReady\"): Alertmanager refuses one that would silence every alert",
                );
            }
            valid.push(SilenceSpec {
                alertmanager: silence.alertmanager.trim().to_string(),
                matchers,
                comment: silence.comment.clone(),
            });
        }
        valid
    }
}
