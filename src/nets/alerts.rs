//! The expected alerts read from Alertmanager while a drill runs: every alert of the drill's list that fires (silenced
//! or inhibited too, since the drill silences what its fault sets off) is recorded once per start on the timeline.

use std::collections::BTreeSet;

use tokio::task::JoinHandle;

use crate::alertmanager::Alertmanager;
use crate::drill::nets::ExpectedAlerts;
use crate::timeline::{Event, Timeline};

/// Starts reading Alertmanager every interval until the returned task is aborted (the run's finish does).
pub fn start(spec: &ExpectedAlerts, timeline: &Timeline) -> JoinHandle<()> {
    let (spec, timeline) = (spec.clone(), timeline.clone());
    tokio::spawn(async move {
        let am = match Alertmanager::new(&spec.alertmanager) {
            Ok(am) => am,
            Err(e) => {
                timeline.record(Event::Warning { message: format!("expected alerts cannot be read: {e}") });
                return;
            }
        };
        let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
        let mut failing = false;
        loop {
            let mut failure = None;
            for expected in &spec.alerts {
                match am.firing_even_if_silenced(&expected.all_matchers()).await {
                    Ok(alerts) => {
                        for alert in alerts {
                            let start = alert.starts_at.map(|t| t.to_rfc3339()).unwrap_or_default();
                            if seen.insert((expected.name.clone(), start)) {
                                timeline.record_at(
                                    Event::ExpectedAlertSeen {
                                        alert: expected.name.clone(),
                                        starts_at: alert.starts_at,
                                        silenced: alert.muted(),
                                        detail: alert.describe(),
                                    },
                                    alert.starts_at,
                                );
                            }
                        }
                    }
                    Err(e) => failure = Some(e.to_string()),
                }
            }
            // Said when reading starts failing and when it recovers, not every round: a drill can outlast an outage.
            match (failure, failing) {
                (Some(e), false) => {
                    timeline
                        .record(Event::Warning { message: format!("expected alerts not read from Alertmanager: {e}") });
                    failing = true;
                }
                (None, true) => {
                    timeline.record(Event::Warning { message: "expected alerts read from Alertmanager again".into() });
                    failing = false;
                }
                _ => {}
            }
            tokio::time::sleep(spec.interval).await;
        }
    })
}
