//! Raw drill to validated drill: checks what types can't say (versions, unique ids, one action per step, selectors,
//! restart targets, phase names) and builds the `Drill` the rest of the crate sees, or every problem, located.
//! This file holds the document and its `spec.cluster`; each other section of the drill file has its own file:
//! `targets`, `notify` (notify and silences), `guards` (lock, guards and objectives), `gates`, `steps`,
//! `fallback_faults` (capacity faults and partial drains) and `last_tier`.

mod coverage;
mod fallback_faults;
mod gates;
mod gpu_fault;
mod guards;
mod last_tier;
mod nets;
mod notify;
mod slo;
mod steps;
mod targets;
#[cfg(test)]
mod tests;

use super::diagnostics::Diagnostic;
use super::model::{Drill, DrillSpec, EvidencePolicy, ExpectedCluster, Metadata, ParsedSelector};
use super::parse::{SpanMap, join};
use super::raw::{self, API_VERSION, KIND};
use super::typecheck::Pruned;
use crate::cluster::selector::SelectorError;

/// What validation found: the drill when nothing is wrong, the problems, and the warnings a valid drill may carry.
pub(super) struct Validated {
    pub drill: Option<Drill>,
    pub problems: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

/// What a drill is checked against besides itself: the kubeconfig context the command was given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expected<'a> {
    pub context: Option<&'a str>,
}

/// The validated drill, or every problem found in it. `pruned` is what the type check took out of the document: a
/// finding about it, or around it, is left out (it was told already, or would judge a gap the user did not write).
pub(super) fn validate(drill: &raw::Drill, spans: &SpanMap, pruned: &Pruned, expected: Expected) -> Validated {
    let mut v = Validator { spans, pruned, problems: Vec::new(), warnings: Vec::new() };
    let valid = v.drill(drill);
    v.coverage(drill, expected);
    let drill = valid.filter(|_| v.problems.is_empty() && pruned.is_empty());
    Validated { drill, problems: v.problems, warnings: v.warnings }
}

/// Collects problems while it builds; a builder that returns `None` has recorded why.
pub(super) struct Validator<'s> {
    spans: &'s SpanMap,
    pruned: &'s Pruned,
    problems: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

impl Validator<'_> {
    pub(super) fn problem(&mut self, path: &str, message: impl Into<String>) {
        let located = Diagnostic::new(message, self.spans.value(&self.pruned.original(path)));
        self.push(path, located);
    }

    /// A problem located by the caller (at a key, or with a label), unless it concerns what the type check took out.
    pub(super) fn push(&mut self, path: &str, diagnostic: Diagnostic) {
        if !self.pruned.hides(&self.pruned.original(path)) {
            self.problems.push(diagnostic);
        }
    }

    /// A warning: the drill runs, but not as its author expects.
    pub(super) fn warn(&mut self, path: &str, diagnostic: impl FnOnce(super::diagnostics::Location) -> Diagnostic) {
        let at = self.spans.value(&self.pruned.original(path));
        self.warnings.push(diagnostic(at).warning());
    }

    // Long: one validation call per section of the drill file and one line per field of the `Drill` it builds, in
    // the file's order; split, the struct literal would be split with it.
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
        let last_tier = self.last_tier(spec);
        let objectives = self.objectives(&spec.objectives);
        let lock = self.lock(spec.lock.as_ref());
        let steps = self.steps(&spec.steps);
        let notify = self.notify(&spec.notify);
        let silences = self.silences(&spec.silences);
        let gates = self.gates(spec.gates.as_ref());
        let slo = self.slo(spec.slo.as_ref());
        let evidence = self.evidence(spec.evidence.as_ref());
        self.across_sections(spec);
        let expected_alerts = self.expected_alerts(spec);
        let warmers = self.warmers(&spec.warmers);
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
                last_tier,
                steps: steps?,
                keep_changes: spec.keep_changes,
                lock,
                notify,
                silences,
                gates,
                slo,
                evidence,
                collateral_leave: spec.collateral.leave.clone(),
                expected_alerts,
                warmers,
            },
        })
    }

    fn evidence(&mut self, section: Option<&raw::EvidenceSection>) -> EvidencePolicy {
        let section = section.cloned().unwrap_or_default();
        if section.owner.as_deref().is_some_and(|o| o.trim().is_empty()) {
            self.problem("spec.evidence.owner", "the action items' owner must not be empty: name a team or a person");
        }
        let ship = section.ship.as_ref().and_then(|ship| self.ship(ship));
        EvidencePolicy {
            require_change: section.require_change,
            require_approver: section.require_approver,
            owner: section.owner,
            ship,
        }
    }

    /// `evidence.ship`: an `s3://` location, and an endpoint that is a URL.
    fn ship(&mut self, ship: &raw::ShipSection) -> Option<crate::store::ShipPolicy> {
        let location = ship.to.parse::<crate::store::Location>();
        if let Err(e) = &location {
            self.problem("spec.evidence.ship.to", e.to_string());
        }
        if let Some(endpoint) = &ship.endpoint
            && let Err(reason) = crate::http::service_url(endpoint)
        {
            self.problem("spec.evidence.ship.endpoint", format!("invalid endpoint URL `{endpoint}`: {reason}"));
        }
        if let Some(why) = ship.retention.and_then(|r| crate::store::retention::refuse(r.0)) {
            self.problem("spec.evidence.ship.retention", why);
        }
        Some(crate::store::ShipPolicy {
            location: location.ok()?,
            connection: crate::store::Connection {
                endpoint: ship.endpoint.clone(),
                region: ship.region.clone(),
                path_style: ship.path_style,
                credentials: ship.credentials.clone(),
            },
            retention: ship.retention.map(|r| r.0),
        })
    }

    /// The checks of one section that need another: a GPU fault's `detectedBy` asks `slo`'s Prometheus.
    fn across_sections(&mut self, spec: &raw::DrillSpec) {
        self.collateral(&spec.collateral);
        self.gpu_detection_source(spec);
    }

    /// `collateral.leave`: each a workload's `namespace/name`, once.
    fn collateral(&mut self, collateral: &super::raw::CollateralSection) {
        let mut seen = std::collections::BTreeSet::new();
        for (i, workload) in collateral.leave.iter().enumerate() {
            let path = format!("spec.collateral.leave[{i}]");
            let named = workload.split_once('/').is_some_and(|(ns, name)| {
                let ok = |s: &str| {
                    !s.is_empty()
                        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
                };
                ok(ns) && ok(name)
            });
            if !named {
                self.problem(
                    &path,
                    format!("`{workload}` must name a workload as `namespace/name`, e.g. `batch/embeddings`"),
                );
            } else if !seen.insert(workload) {
                self.problem(&path, format!("`{workload}` is listed twice"));
            }
        }
    }
}

/// A syntax check of a Kubernetes label selector given outside a drill (a flag), so a typo fails before the API
/// server sees it.
pub fn check_label_selector(selector: &str) -> Result<(), SelectorError> {
    ParsedSelector::parse(selector).map(|_| ())
}
