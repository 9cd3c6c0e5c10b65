//! Kubernetes scheduling semantics in one place: label selectors, taints and tolerations, and where a pod may run,
//! decided the way the scheduler and the DaemonSet controller decide it (node selectors, node affinity terms), for
//! real nodes and for the nodes a Karpenter NodePool has yet to create.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};

use super::karpenter::{CAPACITY_TYPE_LABEL, HYBRID_LABEL, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, NodePool};

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

/// Labels whose values are known, as a node shape holds them.
fn known<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> BTreeMap<String, LabelValue> {
    labels.into_iter().map(|(k, v)| (k.clone(), LabelValue::OneOf(BTreeSet::from([v.clone()])))).collect()
}

/// Labels every Karpenter node carries, whatever its NodePool's requirements say.
const WELL_KNOWN_LABELS: &[&str] = &[
    INSTANCE_TYPE_LABEL,
    CAPACITY_TYPE_LABEL,
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

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
        NodeShape {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: known(node.metadata.labels.iter().flatten()),
            taints: node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default(),
            prospective: false,
            maybe_prefixes: Vec::new(),
        }
    }

    /// The nodes `pool` would create: its template's labels narrowed by its `In` requirements, Karpenter's
    /// well-known labels with values known only at launch, and its template's taints.
    pub fn of_pool(pool: &NodePool) -> NodeShape {
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        let template = pool.spec.template.clone().unwrap_or_default();
        let mut labels = known(&template.metadata.labels);
        labels.insert(NODEPOOL_LABEL.into(), LabelValue::OneOf(BTreeSet::from([pool_name.clone()])));
        let group = template.spec.node_class_ref.as_ref().map(|r| r.group.clone()).unwrap_or_default();
        if group == "eks.amazonaws.com" {
            labels.insert(HYBRID_LABEL.into(), LabelValue::OneOf(BTreeSet::from(["auto".to_string()])));
        }
        for r in &template.spec.requirements {
            match r.operator.as_str() {
                "In" => {
                    let values: BTreeSet<String> = r.values.iter().cloned().collect();
                    let narrowed = match labels.get(&r.key) {
                        Some(LabelValue::OneOf(have)) => have.intersection(&values).cloned().collect(),
                        _ => values,
                    };
                    labels.insert(r.key.clone(), LabelValue::OneOf(narrowed));
                }
                "Exists" => {
                    labels.entry(r.key.clone()).or_insert(LabelValue::Any);
                }
                _ => {}
            }
        }
        for key in WELL_KNOWN_LABELS {
            labels.entry(key.to_string()).or_insert(LabelValue::Any);
        }
        // NFD, GPU Feature Discovery and the GPU Operator label a GPU node after it joins; the provider adds its own.
        let mut maybe_prefixes = vec!["nvidia.com/".to_string(), "feature.node.kubernetes.io/".to_string()];
        if !group.is_empty() {
            maybe_prefixes.push(format!("{group}/"));
        }
        NodeShape {
            name: format!("new nodes of NodePool {pool_name}"),
            labels,
            taints: template.spec.taints,
            prospective: true,
            maybe_prefixes,
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
fn daemonset_ignores(taint: &Taint) -> bool {
    taint.key.starts_with("node.kubernetes.io/") || taint.key.starts_with("karpenter.sh/")
}

/// Whether a DaemonSet with this pod spec runs on the node (or would, on a node of this shape).
pub fn daemonset_may_run_on(spec: &PodSpec, node: &NodeShape) -> bool {
    node.may_be_selected_by(spec)
        && node.untolerated(spec.tolerations.as_deref().unwrap_or_default(), daemonset_ignores).is_empty()
}

/// Whether `toleration` tolerates `taint`, as the scheduler and the taint eviction controller read it
/// (`Toleration.ToleratesTaint` in k8s.io/api): an empty effect matches every effect, an empty key matches every
/// key (the API server admits that only with `Exists`), and the operator defaults to `Equal`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        "Exists" => true,
        _ => false,
    }
}

/// A metav1 LabelSelector (`matchLabels` and `matchExpressions`) against a set of labels, by kube-core's rules: an
/// empty selector matches everything, as PodDisruptionBudgets read it; an invalid one (an unknown operator, `In`
/// without values) matches nothing.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    Selector::try_from(selector.clone()).is_ok_and(|s| s.matches(labels))
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
        assert!(tolerates(&t("{key: nvidia.com/gpu, value: Exists}"), &taint), "the operator defaults to Equal");
        assert!(!tolerates(&t("{key: nvidia.com/gpu}"), &taint), "Equal compares the value, empty included");
        assert!(!tolerates(&t("{key: nvidia.com/gpu, operator: Near}"), &taint));
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
        assert!(!selector_matches(&s("{matchExpressions: [{key: app, operator: Near, values: [llm]}]}"), &labels));
        assert!(!selector_matches(&s("{matchExpressions: [{key: app, operator: In}]}"), &labels));
    }

    /// A PodDisruptionBudget written with `matchExpressions` (alone or with `matchLabels`) covers the pods it names.
    #[test]
    fn budgets_selecting_by_expressions_are_matched() {
        let pod = BTreeMap::from([("app".to_string(), "llm".to_string()), ("tier".to_string(), "gpu".to_string())]);
        let other = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let budget = |yaml: &str| -> LabelSelector {
            from_yaml::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(yaml).spec.unwrap().selector.unwrap()
        };
        let by_expression = budget(
            "metadata: {name: llm}
spec: {maxUnavailable: 1, selector: {matchExpressions: [{key: app, operator: In, values: [llm, chat]}]}}",
        );
        assert!(selector_matches(&by_expression, &pod));
        assert!(!selector_matches(&by_expression, &other));
        let both = budget(
            "metadata: {name: llm}
spec: {maxUnavailable: 1, selector: {matchLabels: {tier: gpu},
             matchExpressions: [{key: app, operator: NotIn, values: [web]}, {key: legacy, operator: DoesNotExist}]}}",
        );
        assert!(selector_matches(&both, &pod));
        assert!(!selector_matches(&both, &other), "matchLabels must hold too");
        let mut legacy = pod.clone();
        legacy.insert("legacy".into(), "yes".into());
        assert!(!selector_matches(&both, &legacy), "every expression must hold");
    }

    #[test]
    fn a_nodepool_shape_holds_its_template_and_the_labels_karpenter_adds() {
        let pool: NodePool = from_yaml(
            "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu-fallback}
spec:
  template:
    metadata: {labels: {node-type: cloud-gpu-fallback}}
    spec:
      nodeClassRef: {group: eks.amazonaws.com, kind: NodeClass, name: default}
      requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [g6.12xlarge]}]
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
",
        );
        let shape = NodeShape::of_pool(&pool);
        assert_eq!(shape.name, "new nodes of NodePool gpu-fallback");
        assert!(shape.prospective);
        assert!(shape.may_satisfy(NODEPOOL_LABEL, "In", &["gpu-fallback".into()]));
        assert!(shape.may_satisfy(HYBRID_LABEL, "In", &["auto".into()]), "EKS Auto Mode labels its nodes");
        assert!(!shape.may_satisfy(INSTANCE_TYPE_LABEL, "In", &["p5.48xlarge".into()]));
        assert!(shape.may_satisfy("topology.kubernetes.io/zone", "Exists", &[]));
        assert!(shape.may_satisfy("eks.amazonaws.com/instance-gpu-count", "Exists", &[]), "the provider's own labels");
        assert_eq!(shape.taints.len(), 1);
    }
}
