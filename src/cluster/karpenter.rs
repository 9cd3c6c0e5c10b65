//! Karpenter's `karpenter.sh/v1` NodePool and NodeClaim, typed for the fields a drill reads.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// The label Karpenter puts on every NodeClaim and Node it creates for a NodePool.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

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
    pub disruption: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<serde_json::Value>,
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
pub const NODECLAIM_CONDITIONS: &[&str] = &["Launched", "Registered", "Initialized", "Ready"];
