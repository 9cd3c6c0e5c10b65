//! `spec.targets`: the on-prem nodes, the workload and how it counts as restored, the fallback NodePools.

use super::Validator;

use crate::drill::model::{
    DrillTargets, FallbackTarget, HttpProbe, OnPremTarget, ParsedSelector, RestoredWhen, WorkloadTarget,
};
use crate::drill::parse::join;
use crate::drill::raw::{self};
use crate::drill::ready::ReadyPods;

impl Validator<'_> {
    pub(super) fn selector(&mut self, path: &str, text: &str) -> Option<ParsedSelector> {
        ParsedSelector::parse(text)
            .map_err(|e| self.problem(path, format!("invalid label selector `{text}`: {e}")))
            .ok()
    }

    pub(super) fn targets(&mut self, spec: &raw::DrillSpec) -> Option<DrillTargets> {
        let targets = &spec.targets;
        let nodes = self.selector("spec.targets.onPrem.nodes", &targets.on_prem.nodes);
        let selector = self.selector("spec.targets.workload.selector", &targets.workload.selector);
        let namespace = &targets.workload.namespace;
        if namespace.trim().is_empty() {
            self.problem("spec.targets.workload.namespace", "the workload namespace must not be empty");
        }
        let restored = &targets.workload.restored_when;
        let ready_pods = self.ready_pods(&restored.ready_pods);
        if let Some(http) = &restored.http {
            if !(http.url.starts_with("http://") || http.url.starts_with("https://")) {
                self.problem(
                    "spec.targets.workload.restoredWhen.http.url",
                    format!("probe url `{}` must start with http:// or https://", http.url),
                );
            }
            if http.consecutive == 0 {
                self.problem("spec.targets.workload.restoredWhen.http.consecutive", "consecutive must be at least 1");
            }
        }
        if spec.guards.protected_namespaces.contains(namespace) {
            self.problem(
                "spec.targets.workload.namespace",
                format!(
                    "the workload namespace `{namespace}` is in guards.protectedNamespaces, which the drill never touches"
                ),
            );
        }
        let http = restored.http.as_ref().map(|h| HttpProbe {
            url: h.url.clone(),
            expect_status: h.expect_status,
            consecutive: h.consecutive,
            interval: h.interval.0,
            timeout: h.timeout.0,
        });
        Some(DrillTargets {
            on_prem: OnPremTarget { nodes: nodes?, addresses: targets.on_prem.addresses.clone() },
            workload: WorkloadTarget {
                namespace: namespace.clone(),
                selector: selector?,
                restored_when: RestoredWhen { ready_pods: ready_pods?, http },
            },
            fallback: self.fallback(&targets.fallback)?,
        })
    }

    /// `readyPods: 4` or `readyPods: "75%"`.
    fn ready_pods(&mut self, written: &raw::ReadyPodsText) -> Option<ReadyPods> {
        let path = "spec.targets.workload.restoredWhen.readyPods";
        match written {
            raw::ReadyPodsText::Count(0) => {
                self.problem(path, "readyPods must be at least 1");
                None
            }
            raw::ReadyPodsText::Count(n) => Some(ReadyPods::Count(*n)),
            raw::ReadyPodsText::Text(text) => {
                ReadyPods::parse_share(text).map_err(|e| self.problem(path, e.to_string())).ok()
            }
        }
    }

    /// `nodePool: NAME` or `nodePools: [NAME, ...]`, exactly one of them.
    pub(super) fn fallback(&mut self, fallback: &raw::FallbackTarget) -> Option<FallbackTarget> {
        let path = "spec.targets.fallback";
        let pools = match (&fallback.node_pool, &fallback.node_pools) {
            (Some(one), None) => vec![one.clone()],
            (None, Some(many)) => many.clone(),
            (Some(_), Some(_)) => {
                self.problem(path, "set nodePool (one NodePool) or nodePools (a list), not both");
                return None;
            }
            (None, None) => {
                self.problem(path, "name the fallback: nodePool: NAME, or nodePools: [NAME, ...] for several");
                return None;
            }
        };
        let mut seen = std::collections::BTreeSet::new();
        let mut ok = !pools.is_empty();
        if pools.is_empty() {
            self.problem(&join(path, "nodePools"), "nodePools must name at least one NodePool");
        }
        for pool in &pools {
            if pool.trim().is_empty() || pool.contains([',', ' ', '(', ')', '=']) {
                self.problem(path, format!("`{pool}` is not a NodePool name"));
                ok = false;
            } else if !seen.insert(pool.as_str()) {
                self.problem(&join(path, "nodePools"), format!("NodePool `{pool}` is named twice"));
                ok = false;
            }
        }
        ok.then(|| FallbackTarget::new(pools))
    }
}
