//! fallback-diversity: what the fallback NodePool may launch (instance types, zones, capacity types), where a
//! capacity shortage leaves it, and what the drill's capacity fault takes away.

use crate::cluster::karpenter::{CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NodePool};
use crate::cluster::zones::ZONE_LABEL;
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{PoolLookup, Snapshot};
use crate::preflight::targets::{Expectations, PreflightTargets};

use super::support::{Findings, names};

/// The values a NodePool allows for `key`, in words.
fn allowed(pool: &NodePool, key: &str, unbounded: &str) -> String {
    pool.allowed(key).map_or_else(|| unbounded.to_string(), |v| names(&v))
}

pub(super) fn fallback_diversity(s: &Snapshot, targets: &PreflightTargets, expect: &Expectations, out: &mut Findings) {
    let id = CheckId::FallbackDiversity;
    let object = format!("NodePool {}", targets.node_pool);
    let PoolLookup::Found(pool) = &s.pool else {
        return out.skip(&[id], &object, "the NodePool cannot be read (see nodepool-ready)");
    };
    let types = pool.allowed(INSTANCE_TYPE_LABEL);
    let diversity = format!(
        "allows instance types {}, zones {}, capacity types {}",
        types
            .as_deref()
            .map_or_else(|| "not bounded by name (the NodeClass and other requirements decide)".into(), names),
        allowed(pool, ZONE_LABEL, "any its NodeClass's subnets offer"),
        allowed(pool, CAPACITY_TYPE_LABEL, "on-demand (Karpenter's default)")
    );
    let Some(removed) = &expect.capacity_removed else {
        let single = types.as_ref().is_some_and(|t| t.len() < 2);
        return if single {
            out.fix(
                id,
                Status::Warn,
                object,
                format!("{diversity}: one type, so one InsufficientInstanceCapacity stops the fallback"),
                "allow several GPU instance types (and zones) the workload fits, so a launch can fall through",
            )
        } else {
            out.add(id, Status::Info, object, diversity)
        };
    };
    let (taken, left): (Vec<String>, Vec<String>) = match (removed, &types) {
        (None, Some(all)) => (all.clone(), Vec::new()),
        (None, None) => (vec!["every type the NodePool allows".into()], Vec::new()),
        (Some(listed), Some(all)) => (listed.clone(), all.iter().filter(|t| !listed.contains(t)).cloned().collect()),
        (Some(listed), None) => (listed.clone(), vec!["whatever else the NodePool allows".into()]),
    };
    if left.is_empty() {
        out.fix(
            id,
            Status::Warn,
            object,
            format!(
                "{diversity}; the drill takes away {}: nothing is left to launch, so the fallback waits out its \
                 timeout and the drill aborts and restores, naming the refused launches",
                names(&taken)
            ),
            "that is the drill's purpose when it measures a total shortage; to measure the move to another type, \
             leave one",
        )
    } else {
        out.add(
            id,
            Status::Info,
            object,
            format!("{diversity}; the drill takes away {}, leaving {}", names(&taken), names(&left)),
        )
    }
}
