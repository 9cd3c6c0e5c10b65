//! `spec.slo`: the SLIs' names and objectives, the stop conditions and the Prometheus endpoint.

use std::time::Duration;

use super::Validator;

use crate::drill::parse::{index, join};
use crate::drill::raw_slo as raw;
use crate::drill::slo::{
    Bound, Credential, ErrorBudget, PrometheusEndpoint, RequestCounters, Sli, SloSpec, StopCondition,
};

const PATH: &str = "spec.slo";

impl Validator<'_> {
    pub(super) fn slo(&mut self, slo: Option<&raw::SloSection>) -> Option<SloSpec> {
        let slo = slo?;
        let prometheus = self.prometheus(&slo.prometheus);
        let interval = slo.interval.map_or(Duration::from_secs(15), |d| d.0);
        if interval < Duration::from_secs(1) {
            self.problem(&join(PATH, "interval"), "the SLIs' interval must be at least 1s");
        }
        let error_budget = match &slo.error_budget {
            None => ErrorBudget::default(),
            Some(b) => {
                if !(b.objective > 0.0 && b.objective < 1.0) {
                    self.problem(&join(PATH, "errorBudget.objective"), "the objective is a share between 0 and 1");
                }
                let window = b.window.map_or(ErrorBudget::default().window, |w| w.0);
                if window.is_zero() {
                    self.problem(&join(PATH, "errorBudget.window"), "the error budget's window must be more than 0s");
                }
                ErrorBudget { objective: b.objective, window }
            }
        };
        let slis = self.slis(&slo.slis);
        let stop_when = self.stop_conditions(&slo.stop_when, &slis);
        Some(SloSpec {
            prometheus: prometheus?,
            interval,
            on_error: slo.on_error,
            error_budget,
            slis,
            requests: slo.requests.as_ref().and_then(|r| self.requests(r)),
            first_good_answer: slo.first_good_answer.as_ref().map(|q| q.trim().to_string()),
            stop_when,
        })
    }

    /// The request counters, each one Prometheus can count per window (a counter, alone or summed).
    fn requests(&mut self, r: &raw::RequestsSection) -> Option<RequestCounters> {
        let mut counter = |key: &str, query: &str| match crate::drill::counter::selector(query.trim()) {
            Ok(selector) => Some(selector),
            // Invalid PromQL is located and reported with every other query's (drill/promql.rs).
            Err(crate::drill::counter::NotACounter::Invalid(_)) => None,
            Err(e) => {
                self.problem(&join(PATH, &format!("requests.{key}")), e.to_string());
                None
            }
        };
        let (total, failed) = (counter("total", &r.total), counter("failed", &r.failed));
        Some(RequestCounters {
            total: r.total.trim().into(),
            failed: r.failed.trim().into(),
            total_counter: total?,
            failed_counter: failed?,
        })
    }

    fn prometheus(&mut self, p: &raw::PrometheusSection) -> Option<PrometheusEndpoint> {
        let path = join(PATH, "prometheus");
        let url = match crate::http::service_url(&p.url) {
            Ok(url) => Some(url),
            Err(reason) => {
                self.problem(&join(&path, "url"), format!("invalid Prometheus URL `{}`: {reason}", p.url));
                None
            }
        };
        if p.bearer_token.is_some() && p.basic_auth.is_some() {
            self.problem(&path, "give `bearerToken` or `basicAuth`, not both");
        }
        let tls = p.tls.clone().unwrap_or(raw::TlsSection { ca_file: None, cert_file: None, key_file: None });
        let client_cert = match (tls.cert_file, tls.key_file) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => {
                self.problem(&join(&path, "tls"), "a client certificate needs both `certFile` and `keyFile`");
                None
            }
        };
        Some(PrometheusEndpoint {
            url: url?,
            bearer_token: p.bearer_token.as_ref().map(credential),
            basic_auth: p.basic_auth.as_ref().map(|b| (b.username.clone(), credential(&b.password))),
            ca_file: tls.ca_file,
            client_cert,
            timeout: p.timeout.map_or(Duration::from_secs(5), |t| t.0),
        })
    }

    fn slis(&mut self, slis: &[raw::SliSection]) -> Vec<Sli> {
        let mut valid: Vec<Sli> = Vec::new();
        if slis.is_empty() {
            self.problem(&join(PATH, "slis"), "name at least one SLI");
        }
        for (i, sli) in slis.iter().enumerate() {
            let path = index(&join(PATH, "slis"), i);
            if !is_name(&sli.name) {
                self.problem(
                    &join(&path, "name"),
                    format!("invalid SLI name `{}`: lowercase letters, digits and `-`", sli.name),
                );
            }
            if valid.iter().any(|s| s.name == sli.name) {
                self.problem(&join(&path, "name"), format!("SLI `{}` is named twice", sli.name));
            }
            if sli.query.trim().is_empty() {
                self.problem(&join(&path, "query"), "the SLI's query must not be empty");
            }
            let Some(objective) = self.bound(&path, sli.at_least, sli.at_most, "atLeast", "atMost") else { continue };
            valid.push(Sli {
                name: sli.name.clone(),
                query: sli.query.trim().into(),
                objective,
                unit: sli.unit.clone(),
            });
        }
        valid
    }

    fn bound(
        &mut self,
        path: &str,
        low: Option<f64>,
        high: Option<f64>,
        low_key: &str,
        high_key: &str,
    ) -> Option<Bound> {
        match (low, high) {
            (Some(t), None) if t.is_finite() => Some(Bound::AtLeast(t)),
            (None, Some(t)) if t.is_finite() => Some(Bound::AtMost(t)),
            _ => {
                self.problem(path, format!("give one finite number: `{low_key}` or `{high_key}`"));
                None
            }
        }
    }

    fn stop_conditions(&mut self, stops: &[raw::StopSection], slis: &[Sli]) -> Vec<StopCondition> {
        let mut valid = Vec::new();
        for (i, stop) in stops.iter().enumerate() {
            let path = index(&join(PATH, "stopWhen"), i);
            if let Some(alert) = &stop.alert {
                let by_query = stop.sli.is_some()
                    || stop.query.is_some()
                    || stop.below.is_some()
                    || stop.above.is_some()
                    || stop.on_no_data.is_some();
                if by_query {
                    self.problem(&path, "an `alert` stop condition takes only `alertmanager` besides it");
                }
                let Some(text) = &stop.alertmanager else {
                    self.problem(&path, "name the Alertmanager the alert fires in: `alertmanager: http://...`");
                    continue;
                };
                match crate::http::service_url(text) {
                    Ok(alertmanager) => valid.push(StopCondition::Alert { name: alert.clone(), alertmanager }),
                    Err(reason) => self
                        .problem(&join(&path, "alertmanager"), format!("invalid Alertmanager URL `{text}`: {reason}")),
                }
                continue;
            }
            let (name, query) = match (&stop.sli, &stop.query) {
                (Some(name), None) => match slis.iter().find(|s| &s.name == name) {
                    Some(sli) => (name.clone(), sli.query.clone()),
                    None => {
                        self.problem(&join(&path, "sli"), format!("no SLI named `{name}` in spec.slo.slis"));
                        continue;
                    }
                },
                (None, Some(query)) => (format!("stopWhen[{i}]"), query.trim().to_string()),
                _ => {
                    self.problem(&path, "give one of `sli`, `query` or `alert`");
                    continue;
                }
            };
            let Some(breached) = self.bound(&path, stop.above, stop.below, "above", "below") else { continue };
            // Read as when the condition holds: `above: x` is a value of at least x, `below: x` at most x.
            let (hold, on_no_data) = (stop.for_.map_or(Duration::ZERO, |d| d.0), stop.on_no_data.unwrap_or_default());
            valid.push(StopCondition::Query { name, query, breached, hold, on_no_data });
        }
        valid
    }
}

fn credential(c: &raw::CredentialSection) -> Credential {
    match c {
        raw::CredentialSection::Reference(text) => Credential::Reference(text.clone()),
        raw::CredentialSection::Secret { secret } => Credential::Secret {
            namespace: secret.namespace.clone(),
            name: secret.name.clone(),
            key: secret.key.clone(),
        },
    }
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}
