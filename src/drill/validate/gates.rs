//! `spec.gates`: the alerts, incidents and change freezes that keep a drill from starting.

use super::Validator;

use crate::alertmanager::Matcher;
use crate::drill::freeze::{self, FreezeWindow, Recurrence, Zone};
use crate::drill::model::{AlertGate, Gates};
use crate::drill::parse::{index, join};
use crate::drill::raw::{self};

impl Validator<'_> {
    pub(super) fn gates(&mut self, gates: Option<&raw::GatesSection>) -> Gates {
        let Some(gates) = gates else { return Gates::default() };
        let alerts = gates.alerts.iter().enumerate();
        let alerts = alerts.filter_map(|(i, a)| self.alert_gate(&index("spec.gates.alerts", i), a)).collect();
        let windows = gates.freeze_windows.iter().enumerate();
        let windows = windows.filter_map(|(i, w)| self.freeze_window(&index("spec.gates.freezeWindows", i), w));
        let freeze_windows = windows.collect();
        Gates {
            alerts,
            incidents: gates.incidents.unwrap_or(true),
            freeze_windows,
            cluster_freeze: gates.cluster_freeze.unwrap_or(true),
        }
    }

    fn alert_gate(&mut self, path: &str, gate: &raw::AlertGateSection) -> Option<AlertGate> {
        if let Err(reason) = crate::http::service_url(&gate.alertmanager) {
            let url = &gate.alertmanager;
            self.problem(&join(path, "alertmanager"), format!("invalid Alertmanager URL `{url}`: {reason}"));
        }
        let mut matchers = Vec::new();
        match Matcher::parse(&format!("alertname={:?}", gate.alert.trim())) {
            Ok(m) if !gate.alert.trim().is_empty() => matchers.push(m),
            _ => self.problem(&join(path, "alert"), "name the alert (its `alertname` label), e.g. `GPUNodeDown`"),
        }
        for (j, text) in gate.matchers.iter().enumerate() {
            match Matcher::parse(text) {
                Ok(m) => matchers.push(m),
                Err(e) => self.problem(&index(&join(path, "matchers"), j), format!("invalid matcher `{text}`: {e}")),
            }
        }
        Some(AlertGate {
            alertmanager: gate.alertmanager.trim().to_string(),
            alert: gate.alert.trim().into(),
            matchers,
        })
    }

    fn freeze_window(&mut self, path: &str, window: &raw::FreezeWindowSection) -> Option<FreezeWindow> {
        let zone =
            Zone::load(window.timezone.trim()).map_err(|e| self.problem(&join(path, "timezone"), e.to_string())).ok();
        let once = window.start.is_some() || window.end.is_some();
        let weekly = !window.days.is_empty() || window.from.is_some() || window.until.is_some();
        let when = match (once, weekly) {
            (true, false) => self.once(path, window),
            (false, true) => self.weekly(path, window),
            _ => {
                self.problem(
                    path,
                    "a freeze window is either one span (`start` and `end`) or a weekly one (`days`, `from` and \
                     `until`)",
                );
                None
            }
        };
        if window.name.trim().is_empty() {
            self.problem(&join(path, "name"), "name the freeze window, e.g. `year-end`");
        }
        Some(FreezeWindow { name: window.name.trim().into(), zone: zone?, when: when?, reason: window.reason.clone() })
    }

    fn once(&mut self, path: &str, window: &raw::FreezeWindowSection) -> Option<Recurrence> {
        let mut local = |key: &str, value: &Option<String>| match value {
            Some(text) => freeze::parse_local(text).map_err(|e| self.problem(&join(path, key), e.to_string())).ok(),
            None => {
                self.problem(path, format!("a one-off freeze window needs `{key}` too"));
                None
            }
        };
        let (start, end) = (local("start", &window.start), local("end", &window.end));
        let (start, end) = (start?, end?);
        if end <= start {
            self.problem(&join(path, "end"), "a freeze window must end after it starts");
        }
        Some(Recurrence::Once { start, end })
    }

    fn weekly(&mut self, path: &str, window: &raw::FreezeWindowSection) -> Option<Recurrence> {
        let mut days = Vec::new();
        for (i, day) in window.days.iter().enumerate() {
            match freeze::parse_day(day) {
                Ok(d) => days.push(d),
                Err(e) => self.problem(&index(&join(path, "days"), i), e.to_string()),
            }
        }
        if window.days.is_empty() {
            self.problem(path, "a weekly freeze window needs `days`, e.g. [fri, sat]");
        }
        let mut time = |key: &str, value: &Option<String>| match value {
            Some(text) => freeze::parse_time(text).map_err(|e| self.problem(&join(path, key), e.to_string())).ok(),
            None => {
                self.problem(path, format!("a weekly freeze window needs `{key}` too"));
                None
            }
        };
        let (from, until) = (time("from", &window.from), time("until", &window.until));
        Some(Recurrence::Weekly { days, from: from?, until: until? })
    }
}
