//! Karpenter's `karpenter.sh/v1` NodePool and NodeClaim, typed for the fields a drill reads.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// The label Karpenter puts on every NodeClaim and Node it creates for a NodePool.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
pub const CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";
/// The label EKS puts on hybrid nodes (`hybrid`) and on EKS Auto Mode nodes (`auto`).
pub const HYBRID_LABEL: &str = "eks.amazonaws.com/compute-type";

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    schema = "disabled",
    status = "NodePoolStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<NodeClaimTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

// The NodePool's template and disruption below are typed for reading: every field optional or defaulted and no
// `deny_unknown_fields`, so a Karpenter release that adds a field does not stop a drill from reading its pools.

/// What every NodeClaim (and so every node) of a NodePool is made from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default)]
    pub metadata: TemplateMetadata,
    #[serde(default)]
    pub spec: NodeClaimTemplateSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeRequirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints the node starts with and something on it (a driver installer, a CNI) removes once it is ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// A duration such as `720h`, or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
}

/// A NodePool's `nodeClassRef`: the provider's NodeClass its nodes are launched with.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeClassReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// One scheduling requirement of a NodePool: a node selector requirement Karpenter may also bound by `minValues`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeRequirement {
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt` or `Lt`.
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

/// When Karpenter may take a NodePool's nodes away.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// `WhenEmpty` or `WhenEmptyOrUnderutilized`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation_policy: Option<String>,
    /// A duration such as `5m`, or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidate_after: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<DisruptionBudget>,
}

/// How many of a NodePool's nodes may be disrupted at once, perhaps only on a schedule or for some reasons.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionBudget {
    /// A count or a percentage, such as `10%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// A cron schedule when the budget is active, for `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// `Underutilized`, `Empty`, `Drifted`; none: every reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<String>>,
}

impl NodeClassReference {
    /// `Kind.group name`, the way preflight names it.
    pub fn object(&self) -> String {
        format!("{}.{} {}", self.kind, self.group, self.name)
    }
}

impl NodePool {
    /// The values the template's `In` requirement on `key` allows; `None` when no such requirement bounds them (the
    /// provider's whole offer, or a `NotIn`/`Exists` the provider resolves).
    pub fn allowed(&self, key: &str) -> Option<Vec<String>> {
        let template = self.spec.template.as_ref()?;
        let req = template.spec.requirements.iter().find(|r| r.key == key && r.operator == "In")?;
        Some(req.values.clone())
    }

    /// The template's `nodeClassRef`, if it names one.
    pub fn node_class_ref(&self) -> Option<&NodeClassReference> {
        self.spec.template.as_ref().and_then(|t| t.spec.node_class_ref.as_ref())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    #[serde(default)]
    pub resources: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub conditions: Vec<KarpenterCondition>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    schema = "disabled",
    status = "NodeClaimStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default)]
    pub capacity: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub conditions: Vec<KarpenterCondition>,
}

/// Karpenter's status conditions; unlike meta/v1 Condition, message and reason may be absent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KarpenterCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The NodeClaim lifecycle conditions a drill times, in the order Karpenter sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ClaimCondition {
    Launched,
    Registered,
    Initialized,
    Ready,
}

impl ClaimCondition {
    pub const ALL: [ClaimCondition; 4] =
        [ClaimCondition::Launched, ClaimCondition::Registered, ClaimCondition::Initialized, ClaimCondition::Ready];

    /// The condition's `type` as Karpenter writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimCondition::Launched => "Launched",
            ClaimCondition::Registered => "Registered",
            ClaimCondition::Initialized => "Initialized",
            ClaimCondition::Ready => "Ready",
        }
    }

    pub fn parse(type_: &str) -> Option<ClaimCondition> {
        ClaimCondition::ALL.into_iter().find(|c| c.as_str() == type_)
    }
}

impl std::fmt::Display for ClaimCondition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The same conditions as text, for code that still matches on Karpenter's spelling.
pub const NODECLAIM_CONDITIONS: &[&str] = &["Launched", "Registered", "Initialized", "Ready"];

#[cfg(test)]
mod tests {
    use super::*;

    fn from_yaml<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        serde_json::from_value(crate::drill::parse::parse_document(yaml).unwrap().value).unwrap()
    }

    #[test]
    fn the_labs_nodepool_is_read_in_full() {
        let manifests = include_str!("../../lab/manifests/10-karpenter.yaml");
        let pool: NodePool = manifests
            .split("\n---\n")
            .find(|doc| doc.contains("kind: NodePool"))
            .map(from_yaml)
            .expect("lab/manifests/10-karpenter.yaml defines a NodePool");
        let template = pool.spec.template.as_ref().unwrap();
        assert_eq!(template.metadata.labels["node-type"], "cloud-gpu-fallback");
        assert_eq!(
            pool.node_class_ref(),
            Some(&NodeClassReference {
                group: "karpenter.kwok.sh".into(),
                kind: "KWOKNodeClass".into(),
                name: "default".into()
            })
        );
        let capacity = template.spec.requirements.iter().find(|r| r.key == CAPACITY_TYPE_LABEL).unwrap();
        assert_eq!(
            (capacity.operator.as_str(), capacity.values.as_slice()),
            ("In", ["on-demand".to_string()].as_slice())
        );
        assert_eq!(template.spec.taints.len(), 1);
        assert_eq!(
            (template.spec.taints[0].key.as_str(), template.spec.taints[0].effect.as_str()),
            (GPU_RESOURCE, "NoSchedule")
        );
        assert_eq!(template.spec.expire_after.as_deref(), Some("720h"));
        let disruption = pool.spec.disruption.as_ref().unwrap();
        assert_eq!(disruption.consolidation_policy.as_deref(), Some("WhenEmptyOrUnderutilized"));
        assert_eq!(disruption.consolidate_after.as_deref(), Some("10s"));
        assert_eq!(disruption.budgets, [DisruptionBudget { nodes: Some("100%".into()), ..Default::default() }]);
        assert_eq!(pool.spec.limits.as_ref().unwrap()[GPU_RESOURCE].0, "16");
    }

    #[test]
    fn a_minimal_nodepool_and_fields_not_modelled_are_read() {
        let pool: NodePool = from_yaml("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {}");
        assert!(pool.spec.template.is_none() && pool.spec.disruption.is_none() && pool.node_class_ref().is_none());
        let pool: NodePool = from_yaml(
            "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: p}
spec:
  template: {spec: {requirements: [{key: k, operator: Exists, minValues: 2}], futureField: 1}}
  disruption: {budgets: [{nodes: '0', schedule: '@daily', duration: 10m, reasons: [Drifted]}]}
  replicas: 3
",
        );
        let template = pool.spec.template.unwrap();
        assert_eq!(template.metadata, TemplateMetadata::default());
        assert_eq!(template.spec.requirements[0].min_values, Some(2));
        let budget = &pool.spec.disruption.unwrap().budgets[0];
        assert_eq!(
            (budget.schedule.as_deref(), budget.reasons.as_deref()),
            (Some("@daily"), Some(["Drifted".to_string()].as_slice()))
        );
    }
}
