//! The reads behind the start gates: Alertmanager's firing alerts, the watch's open-episode markers, the cluster's
//! freeze marker, and who the API server says the tool runs as. Each returns a reading; none fails the drill itself.

use std::path::Path;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;

use super::{FREEZE_MARKER, GateState, Reading};
use crate::alertmanager::Alertmanager;
use crate::cluster::{Cluster, first_line, is_not_found};
use crate::domain::GateKind;
use crate::drill::AlertGate;
use crate::report::open_episode;

/// Closed while the alert fires; closed too when Alertmanager cannot say.
pub async fn alert(gate: &AlertGate) -> Reading {
    let what = format!("alert {} in {}", gate.alert, gate.alertmanager);
    let fired = match Alertmanager::new(&gate.alertmanager) {
        Ok(am) => am.firing(&gate.matchers).await,
        Err(e) => Err(e),
    };
    let state = match fired {
        Ok(alerts) if alerts.is_empty() => GateState::Open,
        Ok(alerts) => {
            let shown: Vec<String> = alerts.iter().take(3).map(|a| a.describe()).collect();
            let more = alerts.len().saturating_sub(3);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            GateState::Closed {
                why: format!("{} fires in {}: {}{more}", gate.alert, gate.alertmanager, shown.join(", ")),
                fix: "start once it resolves".into(),
            }
        }
        Err(e) => GateState::Closed {
            why: format!("cannot tell whether {} fires: {e}", gate.alert),
            fix: "make Alertmanager reachable from here".into(),
        },
    };
    Reading { gate: GateKind::Alert, what, state }
}

/// Closed while any drill's watch has an episode open in the reports directory.
pub fn incidents(reports_dir: &Path) -> Reading {
    let what = format!("no incident open in {}", reports_dir.display());
    let open = open_episode::open_in(reports_dir);
    let state = if open.is_empty() {
        GateState::Open
    } else {
        let shown: Vec<String> = open
            .iter()
            .map(|(drill, e)| {
                format!(
                    "{drill} since {} (run directory {})",
                    e.opened.format("%Y-%m-%d %H:%M UTC"),
                    e.run_dir.display()
                )
            })
            .collect();
        GateState::Closed {
            why: format!("`hybrid-drill watch` has an incident open: {}", shown.join(", ")),
            fix: "start once the watch closes it (the workload back on-prem and the fallback reclaimed)".into(),
        }
    };
    Reading { gate: GateKind::Incident, what, state }
}

/// Closed while the ConfigMap `hybrid-drill-freeze` exists in `namespace`; a missing namespace is no marker.
pub async fn cluster_freeze(cluster: &Cluster, namespace: &str) -> Reading {
    let what = format!("no freeze marker (ConfigMap {namespace}/{FREEZE_MARKER})");
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), namespace);
    let state = match api.get_opt(FREEZE_MARKER).await {
        Ok(None) => GateState::Open,
        Err(e) if is_not_found(&e) => GateState::Open,
        Ok(Some(marker)) => {
            let data = marker.data.unwrap_or_default();
            let reason = data.get("reason").map_or("no reason given", String::as_str);
            let since = marker.metadata.creation_timestamp.map(|t| crate::cluster::to_utc(&t.0));
            let since = since.map(|t| format!(" since {}", t.format("%Y-%m-%d %H:%M UTC"))).unwrap_or_default();
            GateState::Closed {
                why: format!("the cluster is frozen (ConfigMap {namespace}/{FREEZE_MARKER}{since}): {reason}"),
                fix: format!(
                    "start once the freeze is lifted (`kubectl -n {namespace} delete configmap {FREEZE_MARKER}`)"
                ),
            }
        }
        Err(e) => GateState::Closed {
            why: format!("cannot read the freeze marker {namespace}/{FREEZE_MARKER}: {}", first_line(&e.to_string())),
            fix: format!("grant get on configmaps/{FREEZE_MARKER} in namespace {namespace} (deploy/roles.yaml)"),
        },
    };
    Reading { gate: GateKind::ClusterFreeze, what, state }
}

/// The user name the API server authenticates the tool as (a SelfSubjectReview, which needs no grant); `None` when
/// it does not say.
pub async fn username(cluster: &Cluster) -> Option<String> {
    let api: Api<SelfSubjectReview> = Api::all(cluster.client.clone());
    let review = api.create(&PostParams::default(), &SelfSubjectReview::default()).await.ok()?;
    review.status?.user_info?.username.filter(|u| !u.is_empty())
}
