//! The autoscaler of a drilled workload (an HPA or a KEDA ScaledObject) as the timeline and the report name it.

use serde::{Deserialize, Serialize};

/// An autoscaler that sets the workload's replicas, as read before the fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Autoscaler {
    /// `HorizontalPodAutoscaler` or `ScaledObject`.
    pub kind: String,
    pub name: String,
    /// What it scales: `Deployment/llm-inference`.
    pub target: String,
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// The replicas it last asked for: its HPA's `status.desiredReplicas` (a ScaledObject's through the HPA KEDA made),
    /// when it has computed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<u32>,
    /// The HPA whose status follows it: the HPA itself, or the one KEDA made for the ScaledObject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpa: Option<String>,
}

impl Autoscaler {
    /// `HorizontalPodAutoscaler llm-inference (Deployment/llm-inference, 2-8 replicas)`.
    pub fn describe(&self) -> String {
        format!("{} {} ({}, {}-{} replicas)", self.kind, self.name, self.target, self.min_replicas, self.max_replicas)
    }
}
