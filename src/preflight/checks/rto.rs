//! rto-floor: the eviction delay a node failure adds before any fallback starts, against the drill's RTO objective.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Toleration};

use super::support::{Findings, names, tolerations};
use crate::cluster::tolerations::{NOT_READY, UNREACHABLE, eviction_wait};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{Snapshot, Workload};

pub(super) fn rto_floor(s: &Snapshot, w: &Workload, rto_objective: Option<Duration>, out: &mut Findings) {
    let id = CheckId::RtoFloor;
    let object = w.object();
    let template = tolerations(w.template.spec.as_ref());
    let admitted = tolerations(w.sample_pod.as_ref().and_then(|p| p.spec.as_ref()));
    // What applies is what the API server admitted; the template alone when no pod runs.
    let pod = w.sample_pod.clone().unwrap_or_else(|| Pod { spec: w.template.spec.clone(), ..Default::default() });
    // The default node-monitor-grace-period: 50s since Kubernetes 1.32, 40s before. The API does not expose it.
    let grace: i64 = if s.server_minor.is_none_or(|m| m >= 32) { 50 } else { 40 };
    let mut parts = Vec::new();
    let mut shortest: Option<i64> = None;
    for (key, what) in [(UNREACHABLE, "unreachable"), (NOT_READY, "not-ready")] {
        let declares = |ts: &[Toleration]| ts.iter().any(|t| t.key.as_deref() == Some(key));
        let source = if declares(template) {
            "set in its pod template"
        } else if declares(admitted) {
            "added by the API server's DefaultTolerationSeconds"
        } else {
            "no toleration: evicted as soon as the taint lands"
        };
        match eviction_wait(&pod, key) {
            Some(secs) => {
                parts.push(format!("{what} {secs}s ({source})"));
                shortest = Some(shortest.map_or(secs, |s| s.min(secs)));
            }
            None => {
                out.fix(
                    id,
                    Status::Warn,
                    &object,
                    format!(
                        "tolerates {key} forever ({source}): its pods never leave a failed node, so no fallback starts"
                    ),
                    format!("set tolerationSeconds on the {key} toleration, e.g. 60"),
                );
                parts.push(format!("{what} forever"));
            }
        }
    }
    let Some(wait) = shortest else {
        return;
    };
    let floor = grace + wait;
    let message = format!(
        "a node failure evicts its pods about {floor}s after the fault: node-monitor-grace-period {grace}s (the \
         default; not readable through the API) + tolerationSeconds {}; a drain evicts at once",
        names(&parts)
    );
    let fix = "to shorten it, set tolerationSeconds for node.kubernetes.io/unreachable and not-ready in the pod \
               template (at the cost of evicting on brief network blips)";
    match rto_objective {
        Some(rto) if rto.as_secs() <= floor as u64 => out.fix(
            id,
            Status::Warn,
            &object,
            format!(
                "{message}; the RTO objective of {} cannot be met by a node failure",
                humantime::format_duration(rto)
            ),
            fix,
        ),
        _ => out.fix(id, Status::Info, &object, message, fix),
    }
}
