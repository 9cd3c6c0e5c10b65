//! workload-autoscaler: the HPA or KEDA ScaledObject scaling the workload's controller, named, and how the drill's
//! `readyPods` will be judged against it.

use super::support::Findings;
use crate::cluster::autoscaler::find;
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{AutoscalerLookup, Snapshot};
use crate::preflight::targets::Expectations;

/// One row per controller of the workload (a bare pod has no scale to set).
pub(super) fn workload_autoscaler(s: &Snapshot, expect: &Expectations, out: &mut Findings) {
    let id = CheckId::WorkloadAutoscaler;
    let (hpas, scaled) = match &s.autoscalers {
        AutoscalerLookup::Read { hpas, scaled_objects } => (hpas, scaled_objects),
        AutoscalerLookup::Unreadable(why) => {
            out.fix(
                id,
                Status::Warn,
                "HorizontalPodAutoscalers",
                format!("cannot read the workload namespace's autoscalers: {why}"),
                "grant list and watch on horizontalpodautoscalers (autoscaling) and list on scaledobjects (keda.sh)",
            );
            return;
        }
        AutoscalerLookup::NotLooked => return,
    };
    for w in s.workloads.iter().filter(|w| w.kind != "Pod") {
        let object = w.object();
        let (found, others) = find(&w.kind, &w.name, hpas, scaled);
        let Some(a) = found else {
            out.add(
                id,
                Status::Pass,
                &object,
                "no HPA or KEDA ScaledObject scales it: readyPods counts pods as written",
            );
            continue;
        };
        let desired = a.desired_replicas.unwrap_or(w.replicas.max(0) as u32);
        let named = format!("{}, desired {desired} now", a.describe());
        if !others.is_empty() {
            out.fix(
                id,
                Status::Warn,
                &object,
                format!("{named}; also scaled by {}: they fight over its replicas", others.join(", ")),
                "keep one autoscaler per workload",
            );
        } else if desired == 0 {
            out.fix(
                id,
                Status::Warn,
                &object,
                format!("{named}: scaled to zero, there is nothing on-prem for a drill to move"),
                "drill it while the autoscaler holds at least one replica",
            );
        } else if let Some(count) = expect.ready_pods_count.filter(|n| *n != desired) {
            out.fix(
                id,
                Status::Warn,
                &object,
                format!(
                    "{named}: restoration is judged against the desired replicas at the fault, so readyPods: {count} \
                     counts as 100% of them ({desired} if the fault began now)"
                ),
                "write the share of the desired replicas that restores the service, e.g. readyPods: \"75%\"",
            );
        } else {
            out.add(
                id,
                Status::Info,
                &object,
                format!("{named}: restoration is judged against the desired replicas at the fault"),
            );
        }
    }
}
