//! The safety nets on drill files read through the real parser and on synthetic timelines.

use std::time::Duration;

use chrono::{TimeZone, Utc};

use crate::drill::{Diagnostic, Drill};
use crate::timeline::{Event, Observation};

/// A drill with `spec` (indented two spaces) added to a minimal one, or its problems.
pub(super) fn drill(spec: &str) -> Result<Drill, Vec<Diagnostic>> {
    let source = format!(
        "apiVersion: hybrid-drill.io/v1alpha1\nkind: Drill\nmetadata: {{name: x}}\nspec:\n  cluster: {{context: c}}\n  targets:\n    onPrem: {{nodes: a=b}}\n    workload: {{namespace: n, selector: a=b, restoredWhen: {{readyPods: 1}}}}\n    fallback: {{nodePool: p}}\n{spec}  steps:\n    - {{id: d, drain: onPrem}}\n    - {{id: u, uncordon: onPrem}}\n"
    );
    crate::drill::from_source(std::path::Path::new("d.yaml"), source).map(|l| l.drill).map_err(|e| match e {
        crate::drill::DrillError::Invalid { diagnostics, .. } => diagnostics,
        e => panic!("{e}"),
    })
}

fn messages(spec: &str) -> Vec<String> {
    drill(spec).err().unwrap_or_default().into_iter().map(|d| d.message).collect()
}

#[test]
fn expected_alerts_and_warmers_are_read_and_each_mistake_is_named() {
    let d = drill(
        "  expectedAlerts:\n    alertmanager: http://am:9093\n    alerts:\n      - {name: FallbackActivated, within: 2m, matchers: ['nodepool=\"gpu-fallback\"']}\n  warmers:\n    - {name: img, kind: imageCache, pullUnder: 30s, withoutIt: 2m30s}\n    - {name: warm, kind: warmCapacity, priorityClass: low, withoutIt: 3m}\n",
    )
    .unwrap();
    let e = d.spec.expected_alerts.as_ref().unwrap();
    assert_eq!((e.alerts[0].within, e.interval), (Duration::from_secs(120), Duration::from_secs(2)));
    let matchers: Vec<String> = e.alerts[0].all_matchers().iter().map(ToString::to_string).collect();
    assert_eq!(matchers, ["alertname=\"FallbackActivated\"", "nodepool=\"gpu-fallback\""]);
    assert_eq!(d.spec.warmers[0].under, Some(Duration::from_secs(30)));
    assert_eq!(d.spec.warmers[1].under, None);

    assert_eq!(
        messages("  warmers:\n    - {name: img, kind: imageCache, withoutIt: 1m}\n"),
        ["a `imageCache` warmer needs `pullUnder`: the bound it must keep"]
    );
    assert_eq!(
        messages("  warmers:\n    - {name: w, kind: weightsCache, loadUnder: 1m, pullUnder: 1s, withoutIt: 1m}\n"),
        ["`pullUnder` does not apply to a `weightsCache` warmer"]
    );
    assert_eq!(
        messages("  expectedAlerts: {alertmanager: 'am:9093', alerts: [{name: A, within: 0s}]}\n").len(),
        2,
        "a bad URL and a zero deadline"
    );
    assert_eq!(
        messages("  expectedAlerts: {alertmanager: 'http://am:9093', alerts: []}\n"),
        ["name at least one alert, e.g. `{name: FallbackActivated, within: 2m}`"]
    );
}

fn at(t_ms: u64, event: Event) -> Observation {
    let start = Utc.with_ymd_and_hms(2026, 12, 7, 10, 0, 0).unwrap();
    Observation {
        seq: t_ms,
        t_ms,
        received: start + chrono::Duration::milliseconds(t_ms as i64),
        server_time: None,
        event,
    }
}

fn seen(t_ms: u64, alert: &str, starts_ms: u64, silenced: bool) -> Observation {
    let start = Utc.with_ymd_and_hms(2026, 12, 7, 10, 0, 0).unwrap();
    let starts_at = Some(start + chrono::Duration::milliseconds(starts_ms as i64));
    at(t_ms, Event::ExpectedAlertSeen { alert: alert.into(), starts_at, silenced, detail: alert.into() })
}

#[test]
fn an_alert_is_timed_from_the_fault_and_one_late_missing_or_firing_before_misses() {
    let d = drill(
        "  expectedAlerts:\n    alertmanager: http://am:9093\n    alerts:\n      - {name: OnTime, within: 1m}\n      - {name: Late, within: 10s}\n      - {name: Never, within: 1m}\n      - {name: Before, within: 1m}\n",
    )
    .unwrap();
    let fault = Event::FaultInjected { step: "d".into(), kind: crate::domain::FaultKind::Drain };
    let obs = vec![
        seen(1_000, "Before", 500, false),
        at(10_000, fault),
        seen(18_000, "OnTime", 17_500, true),
        seen(40_000, "Late", 38_000, false),
    ];
    let nets = super::judge(&d, &obs).unwrap();
    let verdict = |n: &str| nets.alerts.iter().find(|a| a.name == n).unwrap().clone();
    let on_time = verdict("OnTime");
    assert_eq!(on_time.verdict, super::AlertVerdict::Fired);
    assert_eq!((on_time.detect_seconds, on_time.seen_seconds, on_time.silenced), (Some(7.5), Some(8.0), true));
    assert_eq!(verdict("Late").verdict, super::AlertVerdict::Late);
    assert_eq!(verdict("Never").verdict, super::AlertVerdict::Missing);
    assert_eq!(verdict("Before").verdict, super::AlertVerdict::FiringBeforeFault);
    assert!(nets.missed());
    // No fault, nothing to time: not a miss.
    let none = super::judge(&d, &obs[..1]).unwrap();
    assert!(none.alerts.iter().all(|a| a.verdict == super::AlertVerdict::NotJudged) && !none.missed());
}

/// The realistic profile's drain (tests/fixtures/realistic-drain): every replacement on a new node, each pull 150 s
/// and each model download 45 s.
#[test]
fn warmers_are_credited_on_the_slowest_replacement_or_named_where_they_were_not_in_effect() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/realistic-drain");
    let obs = crate::timeline::read(&dir.join("timeline.jsonl")).unwrap();
    let d = drill(
        "  warmers:\n    - {name: img, kind: imageCache, pullUnder: 30s, withoutIt: 2m30s}\n    - {name: weights, kind: weightsCache, loadUnder: 1m, withoutIt: 5m}\n    - {name: warm, kind: warmCapacity, withoutIt: 3m}\n",
    )
    .unwrap();
    let nets = super::judge(&d, &obs).unwrap();
    let [img, weights, warm] = &nets.warmers[..] else { panic!("{nets:?}") };
    assert_eq!(img.verdict, super::WarmerVerdict::NotInEffect);
    assert!((149.0..151.0).contains(&img.measured_seconds.unwrap()) && img.saved_seconds.is_none(), "{img:?}");
    assert!(img.detail.contains("pulled on the fallback node") && img.on.contains(" on "), "{img:?}");
    assert_eq!(weights.verdict, super::WarmerVerdict::InEffect);
    let saved = weights.saved_seconds.unwrap();
    assert!((254.0..256.0).contains(&saved), "{weights:?}");
    assert_eq!(warm.verdict, super::WarmerVerdict::NotInEffect);
    assert!(warm.detail.starts_with("4 of 4 replacement pods waited for a new NodeClaim"), "{warm:?}");
    // Warmers never change the verdict: only expected alerts do.
    assert!(!nets.missed());
}
