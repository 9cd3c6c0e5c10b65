//! `spec.lock`, `spec.guards` and `spec.objectives`: the drill lock's Lease, what aborts a drill, and the budget of
//! each phase.

use super::Validator;
use std::collections::BTreeMap;

use crate::cluster::lease::LeaseRef;
use crate::domain::PhaseId;
use crate::drill::diagnostics::Diagnostic;
use crate::drill::model::{Guards, Objectives};
use crate::drill::parse::{join, suggest};
use crate::drill::raw::{self};

impl Validator<'_> {
    pub(super) fn lock(&mut self, lock: Option<&raw::LockSection>) -> LeaseRef {
        let mut lease = LeaseRef::default();
        let Some(lock) = lock else { return lease };
        for (key, value, target) in
            [("namespace", &lock.namespace, &mut lease.namespace), ("name", &lock.name, &mut lease.name)]
        {
            match value {
                Some(v) if v.trim().is_empty() => {
                    self.problem(&join("spec.lock", key), format!("the lock's {key} must not be empty"))
                }
                Some(v) => *target = v.clone(),
                None => {}
            }
        }
        if let Some(duration) = lock.duration {
            // Renewed every third: under 3s a renewal would be due before a busy API server answers the last one.
            if duration.0 < std::time::Duration::from_secs(3) {
                self.problem("spec.lock.duration", "the lock's duration must be at least 3s");
            }
            lease.duration = duration.0;
        }
        lease
    }

    pub(super) fn guards(&mut self, guards: &raw::Guards) -> Guards {
        if guards.max_nodes == 0 {
            self.problem("spec.guards.maxNodes", "maxNodes must be at least 1");
        }
        Guards {
            max_nodes: guards.max_nodes,
            max_fallback_gpus: guards.max_fallback_gpus,
            deadline: guards.deadline.0,
            max_service_down: guards.max_service_down.map(|d| d.0),
            protected_namespaces: with_tool_namespace(&guards.protected_namespaces),
        }
    }

    /// Each key of `objectives.phases` must name a phase; the RTO has its own key.
    pub(super) fn objectives(&mut self, objectives: &raw::Objectives) -> Objectives {
        let mut phases = BTreeMap::new();
        for (key, budget) in &objectives.phases.0 {
            let path = join("spec.objectives.phases", key);
            match key.parse::<PhaseId>() {
                Ok(PhaseId::Rto) => {
                    self.problem(&path, "the RTO objective is `objectives.rto`, not a phase objective");
                }
                Ok(phase) => {
                    if let Some(budget) = budget {
                        phases.insert(phase, budget.0);
                    }
                }
                Err(_) => {
                    let expected: Vec<String> = raw::phases_with_objectives().map(|p| p.to_string()).collect();
                    let mut d = Diagnostic::new(
                        format!("unknown key `{key}` in `spec.objectives.phases`: no phase is called `{key}`"),
                        self.spans.key(&self.pruned.original(&path)),
                    );
                    if let Some(s) = suggest(key, &expected) {
                        d = d.with_label(format!("did you mean `{s}`?"));
                    }
                    self.push(&path, d.with_help(format!("valid phases: {}", expected.join(", "))));
                }
            }
        }
        Objectives { rto: objectives.rto.map(|d| d.0), phases }
    }
}

/// The declared protected namespaces and the tool's own: a drain that evicted the scheduled drill's pod (or the
/// watch's) would stop the run mid-fault, so no drill file can leave it out.
fn with_tool_namespace(declared: &[String]) -> Vec<String> {
    let mut namespaces = declared.to_vec();
    if !namespaces.iter().any(|n| n == crate::drill::TOOL_NAMESPACE) {
        namespaces.push(crate::drill::TOOL_NAMESPACE.to_string());
    }
    namespaces
}
