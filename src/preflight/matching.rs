//! Where a pod may run, decided the way the scheduler and the DaemonSet controller decide it: node selectors, node
//! affinity terms, taints and tolerations, label selectors; for real nodes and for nodes Karpenter has yet to create.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// What one label of a node can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelValue {
    /// One of these values (a real node: exactly one).
    OneOf(BTreeSet<String>),
    /// Present, value unknown until the node exists (an instance type, a zone).
    Any,
    /// Perhaps present, with any value: labels a node gains after it joins (NFD, GPU Feature Discovery, the GPU
    /// Operator) or from its cloud provider.
    Maybe,
}

/// A node as far as placement is concerned: a real one, or the shape of the nodes a NodePool would create.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeShape {
    pub name: String,
    pub labels: BTreeMap<String, LabelValue>,
    pub taints: Vec<Taint>,
    /// Not a node yet: a NodePool's template.
    pub prospective: bool,
    /// Label prefixes the node may carry with any value although nothing says so yet (see [`LabelValue::Maybe`]).
    pub maybe_prefixes: Vec<String>,
}

impl NodeShape {
    pub fn from_node(node: &Node) -> NodeShape {
        let labels = node
            .metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), LabelValue::OneOf(BTreeSet::from([v.clone()]))))
            .collect();
        NodeShape {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels,
            taints: node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default(),
            prospective: false,
            maybe_prefixes: Vec::new(),
        }
    }

    fn label(&self, key: &str) -> Option<LabelValue> {
        self.labels
            .get(key)
            .cloned()
            .or_else(|| self.maybe_prefixes.iter().any(|p| key.starts_with(p.as_str())).then_some(LabelValue::Maybe))
    }

    /// Whether the label may have one of `values`.
    fn may_be_in(&self, key: &str, values: &[String]) -> bool {
        match self.label(key) {
            None => false,
            Some(LabelValue::OneOf(have)) => values.iter().any(|v| have.contains(v)),
            Some(LabelValue::Any | LabelValue::Maybe) => true,
        }
    }

    fn may_be_outside(&self, key: &str, values: &[String]) -> bool {
        match self.label(key) {
            None | Some(LabelValue::Any | LabelValue::Maybe) => true,
            Some(LabelValue::OneOf(have)) => have.iter().any(|v| !values.contains(v)),
        }
    }

    fn may_compare(&self, key: &str, values: &[String], greater: bool) -> bool {
        let Some(bound) = values.first().and_then(|v| v.parse::<i64>().ok()) else {
            return false;
        };
        match self.label(key) {
            None => false,
            Some(LabelValue::Any | LabelValue::Maybe) => true,
            Some(LabelValue::OneOf(have)) => {
                have.iter().filter_map(|v| v.parse::<i64>().ok()).any(|v| if greater { v > bound } else { v < bound })
            }
        }
    }

    /// Whether the node may satisfy one requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`).
    pub fn may_satisfy(&self, key: &str, operator: &str, values: &[String]) -> bool {
        match operator {
            "In" => self.may_be_in(key, values),
            "NotIn" => self.may_be_outside(key, values),
            "Exists" => self.label(key).is_some(),
            "DoesNotExist" => matches!(self.label(key), None | Some(LabelValue::Maybe)),
            "Gt" => self.may_compare(key, values, true),
            "Lt" => self.may_compare(key, values, false),
            _ => false,
        }
    }

    fn may_satisfy_field(&self, req: &NodeSelectorRequirement) -> bool {
        let values = req.values.clone().unwrap_or_default();
        if req.key != "metadata.name" {
            return false;
        }
        if self.prospective {
            // A node that does not exist yet has no name to compare.
            return true;
        }
        match req.operator.as_str() {
            "In" => values.contains(&self.name),
            "NotIn" => !values.contains(&self.name),
            _ => false,
        }
    }

    /// A nodeSelectorTerm: all its expressions and fields; an empty term matches nothing.
    pub fn may_match_term(&self, term: &NodeSelectorTerm) -> bool {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if expressions.is_empty() && fields.is_empty() {
            return false;
        }
        expressions.iter().all(|r| self.may_satisfy(&r.key, &r.operator, r.values.as_deref().unwrap_or_default()))
            && fields.iter().all(|r| self.may_satisfy_field(r))
    }

    /// `nodeSelector` and required node affinity: where a pod of this spec may be placed at all, taints aside.
    pub fn may_be_selected_by(&self, spec: &PodSpec) -> bool {
        let selector_ok = spec.node_selector.iter().flatten().all(|(k, v)| self.may_be_in(k, std::slice::from_ref(v)));
        let required = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
        let affinity_ok = required.is_none_or(|r| r.node_selector_terms.iter().any(|t| self.may_match_term(t)));
        selector_ok && affinity_ok
    }

    /// The node's taints that keep a pod of these tolerations off it (`NoSchedule`, `NoExecute`), minus those
    /// `ignore` says to leave out.
    pub fn untolerated<'a>(&'a self, tolerations: &[Toleration], ignore: impl Fn(&Taint) -> bool) -> Vec<&'a Taint> {
        self.taints
            .iter()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .filter(|t| !ignore(t))
            .filter(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
            .collect()
    }
}

/// The DaemonSet controller adds tolerations for the node-condition taints (`node.kubernetes.io/*`) to every
/// DaemonSet pod, and Karpenter's own taints (`karpenter.sh/*`) are transient: neither decides where a DaemonSet runs.
pub fn daemonset_ignores(taint: &Taint) -> bool {
    taint.key.starts_with("node.kubernetes.io/") || taint.key.starts_with("karpenter.sh/")
}

/// Whether a DaemonSet with this pod spec runs on the node (or would, on a node of this shape).
pub fn daemonset_may_run_on(spec: &PodSpec, node: &NodeShape) -> bool {
    node.may_be_selected_by(spec)
        && node.untolerated(spec.tolerations.as_deref().unwrap_or_default(), daemonset_ignores).is_empty()
}

/// The toleration rule of the scheduler: an empty key with `Exists` tolerates everything.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let exists = toleration.operator.as_deref() == Some("Exists");
    if key.is_empty() {
        return exists;
    }
    key == taint.key
        && (exists || toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default())
}

/// A metav1 LabelSelector against a set of labels; an empty selector matches everything, as PDBs read it.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_label = selector.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let by_expression = selector.match_expressions.iter().flatten().all(|r| {
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" => labels.get(&r.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&r.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&r.key),
            "DoesNotExist" => !labels.contains_key(&r.key),
            _ => false,
        }
    });
    by_label && by_expression
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_yaml<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        serde_json::from_value(crate::drill::parse::parse_document(yaml).unwrap().value).unwrap()
    }

    fn hybrid() -> NodeShape {
        NodeShape::from_node(&from_yaml(
            "metadata: {name: h1, labels: {eks.amazonaws.com/compute-type: hybrid, gpu.model: h200}}\n\
             spec: {taints: [{key: nvidia.com/gpu, effect: NoSchedule}, {key: node.kubernetes.io/unreachable, effect: NoExecute}]}",
        ))
    }

    fn prospective() -> NodeShape {
        NodeShape {
            name: "gpu-fallback".into(),
            labels: BTreeMap::from([
                ("node-type".into(), LabelValue::OneOf(BTreeSet::from(["cloud-gpu-fallback".into()]))),
                ("topology.kubernetes.io/zone".into(), LabelValue::Any),
            ]),
            taints: vec![Taint { key: "nvidia.com/gpu".into(), effect: "NoSchedule".into(), ..Default::default() }],
            prospective: true,
            maybe_prefixes: vec!["nvidia.com/".into()],
        }
    }

    #[test]
    fn node_selectors_and_affinity_decide_placement() {
        let pinned: PodSpec = from_yaml(
            "containers: []\nnodeSelector: {eks.amazonaws.com/compute-type: hybrid}\ntolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]",
        );
        assert!(daemonset_may_run_on(&pinned, &hybrid()));
        assert!(!daemonset_may_run_on(&pinned, &prospective()));

        let by_gpu_label: PodSpec = from_yaml(
            "containers: []\naffinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: nvidia.com/gpu.present, operator: In, values: ['true']}]}]}}}\ntolerations: [{operator: Exists}]",
        );
        // NFD and GFD label a cloud GPU node after it joins, so such a selector may well land there.
        assert!(daemonset_may_run_on(&by_gpu_label, &prospective()));
        assert!(!daemonset_may_run_on(&by_gpu_label, &hybrid()), "a real node without the label is not matched");

        let untolerating: PodSpec = from_yaml("containers: []");
        assert!(!daemonset_may_run_on(&untolerating, &hybrid()), "the GPU taint keeps it off");
        let zone: PodSpec = from_yaml(
            "containers: []\ntolerations: [{key: nvidia.com/gpu, operator: Exists}]\naffinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: NotIn, values: [us-east-1a]}]}]}}}",
        );
        assert!(daemonset_may_run_on(&zone, &prospective()));
        assert!(daemonset_may_run_on(&zone, &hybrid()), "no zone label: NotIn holds");
    }

    #[test]
    fn empty_terms_match_nothing_and_requirements_follow_the_scheduler() {
        let h = hybrid();
        assert!(!h.may_match_term(&NodeSelectorTerm::default()));
        assert!(h.may_satisfy("gpu.model", "Exists", &[]));
        assert!(h.may_satisfy("absent", "DoesNotExist", &[]));
        assert!(!prospective().may_satisfy("topology.kubernetes.io/zone", "DoesNotExist", &[]));
        assert!(prospective().may_satisfy("nvidia.com/gpu.present", "DoesNotExist", &[]));
        let mut n = hybrid();
        n.labels.insert("gpus".into(), LabelValue::OneOf(BTreeSet::from(["8".into()])));
        assert!(n.may_satisfy("gpus", "Gt", &["4".into()]) && !n.may_satisfy("gpus", "Lt", &["4".into()]));
    }

    #[test]
    fn tolerations_follow_the_scheduler() {
        let taint = Taint {
            key: "nvidia.com/gpu".into(),
            value: Some("Exists".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let t = |yaml: &str| -> Toleration { from_yaml(yaml) };
        assert!(tolerates(&t("{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}"), &taint));
        assert!(tolerates(&t("{key: nvidia.com/gpu, operator: Exists}"), &taint));
        assert!(tolerates(&t("{key: nvidia.com/gpu, operator: Equal, value: Exists}"), &taint));
        assert!(!tolerates(&t("{key: nvidia.com/gpu, operator: Equal, value: 'true'}"), &taint));
        assert!(!tolerates(&t("{key: nvidia.com/gpu, operator: Exists, effect: NoExecute}"), &taint));
        assert!(tolerates(&t("{operator: Exists}"), &taint));
        assert!(!tolerates(&t("{key: other, operator: Exists}"), &taint));
    }

    #[test]
    fn label_selectors() {
        let labels = BTreeMap::from([("app".to_string(), "llm".to_string())]);
        let s = |yaml: &str| -> LabelSelector { from_yaml(yaml) };
        assert!(selector_matches(&s("{matchLabels: {app: llm}}"), &labels));
        assert!(!selector_matches(&s("{matchLabels: {app: other}}"), &labels));
        assert!(selector_matches(&s("{matchExpressions: [{key: app, operator: In, values: [llm]}]}"), &labels));
        assert!(selector_matches(&s("{matchExpressions: [{key: tier, operator: DoesNotExist}]}"), &labels));
        assert!(selector_matches(&s("{}"), &labels));
    }
}
