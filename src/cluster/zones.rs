//! Zones as kube-controller-manager's node lifecycle controller judges them, for the eviction it holds or allows.
//!
//! kube-controller-manager's node lifecycle controller groups nodes by zone (`topology.kubernetes.io/region` and
//! `zone`; nodes without them share one) and, on each pass, judges every zone (`ComputeZoneState`): no Ready node
//! left is a full disruption; more than 2 NotReady and at least `--unhealthy-zone-threshold` (0.55) of the zone is a
//! partial one. In a partial disruption the zone's tainting rate becomes `ReducedQPSFunc`: 0 in a zone of at most
//! `--large-cluster-size-threshold` (50) nodes, `--secondary-node-eviction-rate` (0.01/s) above. At rate 0 no
//! `node.kubernetes.io/unreachable` NoExecute taint is added: nothing is evicted, nothing falls back. A fully
//! disrupted zone keeps the normal rate (`--node-eviction-rate`, 0.1 nodes/s) unless every zone is fully disrupted,
//! when the controller stops all evictions. None of these flags can be read through the API: the defaults are used.

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

/// The words a step, a report and a test name held evictions by.
pub const HELD_BY_ZONE_DISRUPTION: &str = "evictions held by zone disruption";

/// `--unhealthy-zone-threshold`'s default.
pub const UNHEALTHY_ZONE_THRESHOLD: f64 = 0.55;
/// `--large-cluster-size-threshold`'s default.
pub const LARGE_CLUSTER_SIZE_THRESHOLD: usize = 50;

pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";

/// How the controller judges a zone with `down` of its `size` nodes NotReady.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    Normal,
    /// More than 2 and at least 55% NotReady: tainting stops in a small zone, slows in a large one.
    Partial,
    /// No Ready node left.
    Full,
}

pub fn zone_state(down: usize, size: usize) -> ZoneState {
    if down > 0 && down == size {
        ZoneState::Full
    } else if down > 2 && down as f64 / size as f64 >= UNHEALTHY_ZONE_THRESHOLD {
        ZoneState::Partial
    } else {
        ZoneState::Normal
    }
}

/// A zone's nodes as the controller counts them: how many, and how many are NotReady.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZoneTally {
    pub size: usize,
    pub not_ready: usize,
}

impl ZoneTally {
    pub fn count(&mut self, not_ready: bool) {
        self.size += 1;
        self.not_ready += usize::from(not_ready);
    }
}

/// The zone a node counts in, as the controller names it for people: `region/zone`, `zone`, or none.
pub fn zone_of(node: &Node) -> String {
    let labels = node.labels();
    match (labels.get(REGION_LABEL), labels.get(ZONE_LABEL)) {
        (Some(r), Some(z)) => format!("{r}/{z}"),
        (None, Some(z)) => z.clone(),
        (Some(r), None) => format!("{r}/"),
        (None, None) => "(no zone label)".into(),
    }
}
