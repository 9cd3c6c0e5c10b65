//! workload-pdb: one PodDisruptionBudget covers the workload and allows a disruption now.

use kube::ResourceExt;

use super::support::{Findings, names};
use crate::cluster::scheduling::selector_matches;
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{Snapshot, Workload};

pub(super) fn workload_budget(s: &Snapshot, w: &Workload, object: &str, drains: bool, out: &mut Findings) {
    let id = CheckId::WorkloadPdb;
    // A budget in the way blocks a drain; a lost node's pods are evicted by its taint, which ignores budgets.
    let (blocking, but) = if drains {
        (Status::Fail, "")
    } else {
        (Status::Warn, " (this drill does not drain: a lost node's taint evicts regardless of budgets)")
    };
    let labels = w.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
    let covering: Vec<_> = s
        .budgets
        .iter()
        .filter(|b| b.spec.as_ref().and_then(|s| s.selector.as_ref()).is_some_and(|sel| selector_matches(sel, &labels)))
        .collect();
    match covering.as_slice() {
        [] => out.fix(
            id,
            Status::Warn,
            object,
            "no PodDisruptionBudget covers it: a drain may take every replica at once",
            "add a PodDisruptionBudget with maxUnavailable sized to one on-prem node's worth of replicas",
        ),
        [b] => {
            let name = format!("PodDisruptionBudget {}/{}", b.namespace().unwrap_or_default(), b.name_any());
            let status = b.status.as_ref();
            let allowed = status.map(|s| s.disruptions_allowed).unwrap_or(0);
            if allowed > 0 {
                out.add(id, Status::Pass, name, format!("covers {object} and allows {allowed} disruptions now"));
            } else {
                out.fix(
                    id,
                    blocking,
                    name,
                    format!(
                        "allows no disruption now ({} healthy, {} required): a drain of {object} would block{but}",
                        status.map(|s| s.current_healthy).unwrap_or(0),
                        status.map(|s| s.desired_healthy).unwrap_or(0)
                    ),
                    "raise maxUnavailable (or lower minAvailable), or wait until its pods are healthy",
                );
            }
        }
        many => out.fix(
            id,
            Status::Fail,
            object,
            format!(
                "{} PodDisruptionBudgets cover it ({}): the Eviction API refuses to evict its pods",
                many.len(),
                names(many.iter().map(|b| b.name_any()))
            ),
            "keep exactly one PodDisruptionBudget per workload",
        ),
    }
}
