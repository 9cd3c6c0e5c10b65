//! What preflight reads of the cluster, taken once by `gather` and judged by the checks without a cluster.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::DynamicObject;

use crate::cluster::karpenter::{NodeClaim, NodePool};
use crate::cluster::zones::ZoneTally;

/// The fallback NodePool as found.
#[derive(Debug, Clone, Default)]
pub enum PoolLookup {
    Found(Box<NodePool>),
    Missing {
        existing: Vec<String>,
    },
    /// `karpenter.sh/v1` NodePools are not served: the CRD check says why.
    #[default]
    NotServed,
}

/// The NodeClass a NodePool's nodeClassRef names, as found.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum NodeClassLookup {
    /// No NodePool, or it names no NodeClass.
    #[default]
    NotLooked,
    /// No served resource of that group has that kind: its CRD is missing.
    NotServed,
    Missing,
    /// The role may not read it (hybrid-drill's role grants get on the NodeClasses it knows).
    Unreadable(String),
    Found(serde_json::Value),
}

/// The autoscalers of the workload's namespace, as read.
#[derive(Debug, Clone, Default)]
pub enum AutoscalerLookup {
    #[default]
    NotLooked,
    /// Its HPAs, and its KEDA ScaledObjects (none where KEDA's CRD is not installed).
    Read { hpas: Vec<HorizontalPodAutoscaler>, scaled_objects: Vec<DynamicObject> },
    /// The role may not list them.
    Unreadable(String),
}

/// A controller of the workload's pods, with the template its pods are made from.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// `Deployment`, `StatefulSet`, `ReplicaSet`, or `Pod` for a pod without a controller.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
    pub template: PodTemplateSpec,
    /// One of its pods as the API server admitted it, with whatever tolerations admission added.
    pub sample_pod: Option<Pod>,
}

impl Workload {
    pub fn object(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Everything the checks read, taken read-only in one pass.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The API server's minor version (node-monitor-grace-period's default changed in 1.32).
    pub server_minor: Option<u32>,
    /// Versions of `karpenter.sh` the API server serves (empty: Karpenter's CRDs are not installed).
    pub karpenter_versions: Vec<String>,
    /// Resources served at `karpenter.sh/v1`.
    pub karpenter_v1_resources: Vec<String>,
    /// The nodes a check reads (`checks::reads_node`): on-prem, with GPUs, or the fallback NodePool's.
    pub nodes: Vec<Node>,
    /// Every node of the cluster counted in its zone (`cluster::zones::zone_of`), kept or not: the node lifecycle
    /// controller judges a zone by all its nodes, the cloud ones without GPUs included.
    pub zones: BTreeMap<String, ZoneTally>,
    /// Names of the nodes the on-prem selector matches.
    pub on_prem: BTreeSet<String>,
    /// Pods bound to the on-prem nodes.
    pub pods_on_prem: Vec<Pod>,
    /// DaemonSets (`namespace/name`) that control pods on the on-prem nodes but no longer exist: a drain's orphans.
    pub missing_daemonsets: BTreeSet<String>,
    /// The DaemonSets of the NVIDIA device plugin's family (`checks::reads_daemonset`), from every namespace.
    pub daemonsets: Vec<DaemonSet>,
    pub pool: PoolLookup,
    /// The further fallback NodePools found (`PreflightTargets::more_pools`); a missing one is not here.
    pub more_pools: Vec<NodePool>,
    pub node_class: NodeClassLookup,
    /// The fallback NodePool's NodeClaims.
    pub claims: Vec<NodeClaim>,
    /// Pods bound to the fallback NodePool's nodes.
    pub pods_on_fallback: Vec<Pod>,
    pub workload_pods: usize,
    /// `namespace/name` of each of the workload's pods, to tell them from the other pods a fault displaces.
    pub workload_pod_names: BTreeSet<String>,
    pub workloads: Vec<Workload>,
    /// The PodDisruptionBudgets of the workload's namespace.
    pub budgets: Vec<PodDisruptionBudget>,
    pub autoscalers: AutoscalerLookup,
}
