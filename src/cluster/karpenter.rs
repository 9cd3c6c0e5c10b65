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
