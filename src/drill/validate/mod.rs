//! Raw drill to validated drill: checks what types can't say (versions, unique ids, one action per step, selectors,
//! restart targets, phase names) and builds the `Drill` the rest of the crate sees, or every problem, located.
//! This file holds the document and its `spec.cluster`; each other section of the drill file has its own file:
//! `targets`, `notify` (notify and silences), `guards` (lock, guards and objectives), `steps`, and `fallback_faults`
//! (capacity faults and partial drains).

mod fallback_faults;
mod guards;
mod notify;
mod steps;
mod targets;
#[cfg(test)]
mod tests;

use super::diagnostics::Diagnostic;
use super::model::{Drill, DrillSpec, ExpectedCluster, Metadata, ParsedSelector};
use super::parse::{SpanMap, join};
use super::raw::{self, API_VERSION, KIND};
use crate::cluster::selector::SelectorError;

/// The validated drill, or every problem found in it.
pub(super) fn validate(drill: &raw::Drill, spans: &SpanMap) -> Result<Drill, Vec<Diagnostic>> {
    let mut v = Validator { spans, problems: Vec::new() };
    match v.drill(drill) {
        Some(valid) if v.problems.is_empty() => Ok(valid),
        _ => Err(v.problems),
    }
}

/// Collects problems while it builds; a builder that returns `None` has recorded why.
pub(super) struct Validator<'s> {
    spans: &'s SpanMap,
    problems: Vec<Diagnostic>,
}

impl Validator<'_> {
    pub(super) fn problem(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(Diagnostic::new(message, self.spans.value(path)));
    }

    fn drill(&mut self, drill: &raw::Drill) -> Option<Drill> {
        if drill.api_version != API_VERSION {
            self.problem(
                "apiVersion",
                format!("unsupported apiVersion `{}`; this tool reads `{API_VERSION}`", drill.api_version),
            );
        }
        if drill.kind != KIND {
            self.problem("kind", format!("unsupported kind `{}`; expected `{KIND}`", drill.kind));
        }
        let name = &drill.metadata.name;
        if name.is_empty()
            || name.len() > 48
            || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            || name.starts_with('-')
        {
            self.problem(
                "metadata.name",
                format!("invalid drill name `{name}`: use 1 to 48 lowercase letters, digits and `-`"),
            );
        }
        let spec = &drill.spec;
        let cluster = &spec.cluster;
        if cluster.context.as_deref().is_some_and(|c| c.trim().is_empty()) {
            self.problem("spec.cluster.context", "the expected kubeconfig context must not be empty");
        }
        if cluster.kube_system_uid.as_deref().is_some_and(|u| u.trim().is_empty()) {
            self.problem("spec.cluster.kubeSystemUID", "the kube-system namespace's UID must not be empty");
        }
        if cluster.context.is_none() && cluster.kube_system_uid.is_none() {
            self.problem(
                "spec.cluster",
                "name the drill's cluster by `context` (its kubeconfig context), `kubeSystemUID` (the UID of its \
                 kube-system namespace: `hybrid-drill identify` prints it) or both",
            );
        }
        let targets = self.targets(spec);
        let guards = self.guards(&spec.guards);
        for (instance, price) in &spec.pricing {
            if !price.is_finite() || *price < 0.0 {
                self.problem(
                    &join("spec.pricing", instance),
                    format!("price of `{instance}` must be a positive number of dollars per hour"),
                );
            }
        }
        let objectives = self.objectives(&spec.objectives);
        let lock = self.lock(spec.lock.as_ref());
        let steps = self.steps(&spec.steps);
        let notify = self.notify(&spec.notify);
        let silences = self.silences(&spec.silences);
        Some(Drill {
            metadata: Metadata { name: name.clone(), description: drill.metadata.description.clone() },
            spec: DrillSpec {
                cluster: ExpectedCluster {
                    context: cluster.context.clone(),
                    kube_system_uid: cluster.kube_system_uid.clone(),
                },
                targets: targets?,
                objectives,
                guards,
                pricing: spec.pricing.clone(),
                steps: steps?,
                keep_changes: spec.keep_changes,
                lock,
                notify,
                silences,
            },
        })
    }
}

/// A syntax check of a Kubernetes label selector given outside a drill (a flag), so a typo fails before the API
/// server sees it.
pub fn check_label_selector(selector: &str) -> Result<(), SelectorError> {
    ParsedSelector::parse(selector).map(|_| ())
}
