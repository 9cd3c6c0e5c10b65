//! What `preflight FILE` and `plan` note of a drill's safety nets: a drill that declares no expected alert or no
//! warmer (nothing proves the fallback pages anyone, or what the RTO relies on), and an expected alert Prometheus has
//! no rule for (it can never fire, and the drill would miss its objective).

use std::collections::BTreeSet;

use crate::drill::Drill;
use crate::preflight::{CheckId, Finding, Status};

/// The findings for a drill, reading Prometheus's rules when it expects alerts.
pub async fn findings(drill: &Drill) -> Vec<Finding> {
    let rules = match drill.spec.expected_alerts.as_ref().and_then(|e| e.prometheus.as_deref()) {
        Some(url) => Some(super::rules::alert_names(url).await),
        None => None,
    };
    judge(drill, rules)
}

/// The findings, given the alert rules read (`None`: no Prometheus to read them from).
fn judge(drill: &Drill, rules: Option<Result<BTreeSet<String>, super::rules::RulesError>>) -> Vec<Finding> {
    let finding = |check, status, object: &str, message: String, fix: Option<&str>| Finding {
        check,
        status,
        object: object.into(),
        message,
        fix: fix.map(String::from),
    };
    let mut out = Vec::new();
    if drill.spec.warmers.is_empty() {
        out.push(finding(
            CheckId::Warmers,
            Status::Info,
            "spec.warmers",
            "the drill declares no warmer: nothing checks the image cache, weights cache or warm capacity the RTO \
             relies on"
                .into(),
            Some("declare them in spec.warmers (runbooks/warmers-and-alerts.md)"),
        ));
    }
    let Some(expected) = &drill.spec.expected_alerts else {
        out.push(finding(
            CheckId::ExpectedAlerts,
            Status::Info,
            "spec.expectedAlerts",
            "the drill declares no expected alert: nothing proves the fallback's activation pages anyone".into(),
            Some("declare FallbackActivated and the NodePool limit alerts in spec.expectedAlerts (deploy/prometheusrule.yaml has rules)"),
        ));
        return out;
    };
    match rules {
        None => out.push(finding(
            CheckId::ExpectedAlerts,
            Status::Info,
            "spec.expectedAlerts",
            "no Prometheus to read the alert rules from: whether each expected alert has a rule is not checked".into(),
            Some("name spec.expectedAlerts.prometheus"),
        )),
        Some(Err(e)) => out.push(finding(
            CheckId::ExpectedAlerts,
            Status::Warn,
            "Prometheus",
            crate::secrets::redact(&e.to_string()).into(),
            Some("check spec.expectedAlerts.prometheus from where the tool runs"),
        )),
        Some(Ok(names)) => {
            for alert in &expected.alerts {
                let object = format!("alert {}", alert.name);
                out.push(if names.contains(&alert.name) {
                    finding(CheckId::ExpectedAlerts, Status::Pass, &object, "Prometheus has a rule for it".into(), None)
                } else {
                    finding(
                        CheckId::ExpectedAlerts,
                        Status::Warn,
                        &object,
                        "Prometheus has no alerting rule of this name: it can never fire, and the drill would miss its \
                         objective"
                            .into(),
                        Some("add the rule (deploy/prometheusrule.yaml) or correct the name"),
                    )
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::Status;

    fn drill(extra: &str) -> Drill {
        super::super::tests::drill(extra).expect("valid")
    }

    #[test]
    fn a_drill_without_nets_is_noted_and_a_missing_rule_is_a_warning() {
        let bare = judge(&drill(""), None);
        assert!(bare.iter().all(|f| f.status == Status::Info), "{bare:?}");
        assert_eq!(bare.len(), 2, "{bare:?}");
        let with = drill(
            "  expectedAlerts:\n    alertmanager: http://am:9093\n    prometheus: http://prom:9090\n    alerts:\n      - {name: FallbackActivated, within: 2m}\n      - {name: Typo, within: 1m}\n",
        );
        let names = BTreeSet::from(["FallbackActivated".to_string()]);
        let found = judge(&with, Some(Ok(names)));
        let status = |o: &str| found.iter().find(|f| f.object == o).map(|f| f.status);
        assert_eq!(status("alert FallbackActivated"), Some(Status::Pass));
        assert_eq!(status("alert Typo"), Some(Status::Warn));
        assert_eq!(status("spec.warmers"), Some(Status::Info));
    }
}
