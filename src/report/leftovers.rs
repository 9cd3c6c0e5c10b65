//! The report's `blast_radius`, `collateral` and `leftovers`: the other workloads the fault displaced, read before it, and what was
//! still different from then at the drill's end, as the run recorded them.

use crate::cluster::collateral::{BlastGroup, Bystander, Leftover};
use crate::timeline::{Event, Observation};

/// The workloads besides the drilled one that were on the on-prem nodes before the fault.
pub fn collateral(observations: &[Observation]) -> Vec<Bystander> {
    observations
        .iter()
        .find_map(|o| match &o.event {
            Event::CollateralBefore { workloads, .. } => Some(workloads.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Every workload the fault displaced, by owner, and where each could land, as the plan read them before the fault.
pub fn blast_radius(observations: &[Observation]) -> Vec<BlastGroup> {
    observations
        .iter()
        .find_map(|o| match &o.event {
            Event::CollateralBefore { blast_radius, .. } => Some(blast_radius.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The leftovers the end of the run recorded, in the order recorded.
pub fn leftovers(observations: &[Observation]) -> Vec<Leftover> {
    observations
        .iter()
        .filter_map(|o| match &o.event {
            Event::Leftover { leftover } => Some(leftover.clone()),
            _ => None,
        })
        .collect()
}
