//! `spec.expectedAlerts` and `spec.warmers`: the alerts the design relies on and the warmers its RTO relies on.

use super::Validator;

use crate::alertmanager::Matcher;
use crate::drill::nets::{ExpectedAlert, ExpectedAlerts, Warmer, WarmerKind};
use crate::drill::parse::{index, join};
use crate::drill::raw::{self};

impl Validator<'_> {
    pub(super) fn expected_alerts(&mut self, spec: &raw::DrillSpec) -> Option<ExpectedAlerts> {
        let section = spec.expected_alerts.as_ref()?;
        let path = "spec.expectedAlerts";
        if let Err(reason) = crate::http::service_url(&section.alertmanager) {
            let url = &section.alertmanager;
            self.problem(&join(path, "alertmanager"), format!("invalid Alertmanager URL `{url}`: {reason}"));
        }
        if let Some(url) = &section.prometheus
            && let Err(reason) = crate::http::service_url(url)
        {
            self.problem(&join(path, "prometheus"), format!("invalid Prometheus URL `{url}`: {reason}"));
        }
        if section.interval.is_some_and(|i| i.0.is_zero()) {
            self.problem(&join(path, "interval"), "Alertmanager's reading interval must be more than 0s");
        }
        if section.alerts.is_empty() {
            self.problem(
                &join(path, "alerts"),
                "name at least one alert, e.g. `{name: FallbackActivated, within: 2m}`",
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut alerts = Vec::new();
        for (i, alert) in section.alerts.iter().enumerate() {
            let at = index(&join(path, "alerts"), i);
            if Matcher::parse(&format!("alertname={:?}", alert.name)).is_err() || alert.name.trim().is_empty() {
                self.problem(&join(&at, "name"), format!("invalid alert name `{}`", alert.name));
            }
            if !seen.insert((alert.name.clone(), alert.matchers.clone())) {
                self.problem(
                    &join(&at, "name"),
                    format!("alert `{}` is expected twice with the same matchers", alert.name),
                );
            }
            if alert.within.0.is_zero() {
                self.problem(&join(&at, "within"), "an alert's deadline must be more than 0s after the fault");
            }
            let mut matchers = Vec::new();
            for (j, text) in alert.matchers.iter().enumerate() {
                match Matcher::parse(text) {
                    Ok(m) => matchers.push(m),
                    Err(e) => self.problem(&index(&join(&at, "matchers"), j), format!("invalid matcher `{text}`: {e}")),
                }
            }
            alerts.push(ExpectedAlert { name: alert.name.clone(), within: alert.within.0, matchers });
        }
        let prometheus = section.prometheus.clone().or_else(|| spec.slo.as_ref().map(|s| s.prometheus.url.clone()));
        Some(ExpectedAlerts {
            alertmanager: section.alertmanager.trim().to_string(),
            prometheus,
            interval: section.interval.map_or(ExpectedAlerts::DEFAULT_INTERVAL, |i| i.0),
            alerts,
        })
    }

    pub(super) fn warmers(&mut self, warmers: &[crate::drill::raw_nets::WarmerSection]) -> Vec<Warmer> {
        let mut seen = std::collections::BTreeSet::new();
        let mut valid = Vec::new();
        for (i, w) in warmers.iter().enumerate() {
            let path = index("spec.warmers", i);
            if w.name.trim().is_empty() {
                self.problem(&join(&path, "name"), "name the warmer, e.g. `llm-image-prepull`");
            } else if !seen.insert(w.name.clone()) {
                self.problem(&join(&path, "name"), format!("warmer `{}` is declared twice", w.name));
            }
            let (wanted, other) = match w.kind {
                WarmerKind::ImageCache => (Some(("pullUnder", w.pull_under)), [("loadUnder", w.load_under.is_some())]),
                WarmerKind::WeightsCache => {
                    (Some(("loadUnder", w.load_under)), [("pullUnder", w.pull_under.is_some())])
                }
                WarmerKind::WarmCapacity => (None, [("pullUnder", w.pull_under.is_some() || w.load_under.is_some())]),
            };
            if let Some((key, None)) = wanted {
                self.problem(&path, format!("a `{}` warmer needs `{key}`: the bound it must keep", w.kind.as_str()));
            }
            for (key, given) in other {
                if given {
                    let which = if w.kind == WarmerKind::WarmCapacity { "pullUnder and loadUnder" } else { key };
                    self.problem(&path, format!("`{which}` does not apply to a `{}` warmer", w.kind.as_str()));
                }
            }
            if w.priority_class.is_some() && w.kind != WarmerKind::WarmCapacity {
                self.problem(&join(&path, "priorityClass"), "`priorityClass` applies to a `warmCapacity` warmer only");
            }
            if w.without_it.0.is_zero() {
                self.problem(&join(&path, "withoutIt"), "what the step takes without the warmer must be more than 0s");
            }
            valid.push(Warmer {
                name: w.name.clone(),
                kind: w.kind,
                under: wanted.and_then(|(_, d)| d).map(|d| d.0),
                priority_class: w.priority_class.clone(),
                without_it: w.without_it.0,
            });
        }
        valid
    }
}
