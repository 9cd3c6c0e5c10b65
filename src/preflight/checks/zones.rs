//! zone-disruption: whether the node lifecycle controller would hold the evictions a lost on-prem node needs
//! (the rule: crate::cluster::zones).

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::cluster::readiness::is_not_ready;
use crate::cluster::zones::{LARGE_CLUSTER_SIZE_THRESHOLD, ZoneState, zone_of, zone_state};

use super::support::{Findings, names};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::Snapshot;
use crate::preflight::targets::Expectations;

/// zone-disruption: for a drill that loses nodes (a node failure, a host-level cut), each zone the lost on-prem nodes
/// are in, as the controller will judge it once they are NotReady.
pub(super) fn zone_disruption(s: &Snapshot, expect: &Expectations, out: &mut Findings) {
    let id = CheckId::ZoneDisruption;
    let object = "Zones of the on-prem nodes";
    if !expect.loses_nodes {
        return out.add(id, Status::Skip, object, "not checked: the drill loses no node (a drain keeps them Ready)");
    }
    // zone -> (nodes, NotReady once the fault lands, of them the drill's): every node of the zone counts, and the
    // on-prem nodes still Ready now go NotReady with the fault.
    let mut zones: BTreeMap<String, (usize, usize, Vec<String>)> =
        s.zones.iter().map(|(zone, t)| (zone.clone(), (t.size, t.not_ready, Vec::new()))).collect();
    // A partial node failure takes only its share of the on-prem nodes NotReady.
    let all: Vec<String> = s.on_prem.iter().cloned().collect();
    let lost = expect.lost_share.map_or_else(|| all.clone(), |share| share.of(&all));
    for node in s.nodes.iter().filter(|n| lost.contains(&n.name_any())) {
        let entry = zones.entry(zone_of(node)).or_default();
        if !is_not_ready(node) {
            entry.1 += 1;
        }
        entry.2.push(node.name_any());
    }
    let every_zone_full = zones.values().all(|(size, down, _)| zone_state(*down, *size) == ZoneState::Full);
    for (zone, (size, down, lost)) in zones.iter().filter(|(_, z)| !z.2.is_empty()) {
        let object = format!("Zone {zone}");
        let what = format!("the fault takes {down} of its {size} nodes NotReady ({})", names(lost));
        match zone_state(*down, *size) {
            ZoneState::Partial if *size <= LARGE_CLUSTER_SIZE_THRESHOLD => out.fix(
                id,
                Status::Warn,
                object,
                format!(
                    "{what}: a partial disruption (more than 2 and at least 55% NotReady) in a zone of at most 50 \
                     nodes, so the node lifecycle controller stops tainting there (eviction rate 0): evictions held by \
                     zone disruption, nothing falls back while it lasts; a node that went NotReady before the zone \
                     crossed the line may still be tainted"
                ),
                "to drill the fallback, fail at most 2 nodes or under 55% of the zone, or all of it; failing this many \
                 drills the zone rule itself (the report says `evictions held by zone disruption`)",
            ),
            ZoneState::Partial => out.fix(
                id,
                Status::Warn,
                object,
                format!(
                    "{what}: a partial disruption in a zone of over 50 nodes, so the controller taints at \
                     --secondary-node-eviction-rate (0.01 nodes/s by default): one node every 100 s"
                ),
                "expect evictions, and the fallback, to trail the failure by minutes per node",
            ),
            ZoneState::Full if every_zone_full => out.fix(
                id,
                Status::Warn,
                object,
                format!("{what}: every zone of the cluster fully disrupted, so the controller stops all evictions"),
                "keep a Ready node in some zone (the cloud nodes), or nothing falls back",
            ),
            ZoneState::Full => out.add(
                id,
                Status::Pass,
                object,
                format!(
                    "{what}: a full disruption of the zone while others are healthy: tainted at the normal rate \
                     (--node-eviction-rate, 0.1 nodes/s by default: one node every 10 s)"
                ),
            ),
            ZoneState::Normal => out.add(
                id,
                Status::Pass,
                object,
                format!("{what}: the zone stays normal (at most 2, or under 55%, NotReady): evicted as usual"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;

    use super::*;
    use crate::cluster::zones::ZONE_LABEL;

    fn node(name: &str, zone: Option<&str>) -> Node {
        let labels = zone.map(|z| format!("labels: {{topology.kubernetes.io/region: onprem, {ZONE_LABEL}: {z}}}"));
        let yaml = format!(
            "metadata: {{name: {name}, {}}}\nstatus: {{conditions: [{{type: Ready, status: 'True'}}]}}",
            labels.unwrap_or_default()
        );
        serde_json::from_value(crate::drill::parse::parse_document(&yaml).unwrap().value).unwrap()
    }

    /// Four hybrid nodes in one on-prem zone and a cloud node elsewhere, the first `lost` of them failed.
    fn lab(lost: usize) -> Snapshot {
        let hybrid = ["hybrid-gpu-1", "hybrid-gpu-2", "hybrid-gpu-3", "mi-0a1b2c3d4e5f67890"];
        let nodes: Vec<Node> = hybrid.iter().map(|n| node(n, Some("onprem-dc1"))).collect();
        let mut s = Snapshot { on_prem: hybrid[..lost].iter().map(|n| n.to_string()).collect(), ..Default::default() };
        // Every node counts in its zone; the cloud node, without GPUs, is not kept whole.
        for n in nodes.iter().chain([&node("cloud-system-1", None)]) {
            s.zones.entry(zone_of(n)).or_default().count(is_not_ready(n));
        }
        s.nodes = nodes;
        s
    }

    fn judge(s: &Snapshot, expect: &Expectations) -> Vec<(Status, String)> {
        let mut out = Findings::default();
        zone_disruption(s, expect, &mut out);
        out.0.into_iter().map(|f| (f.status, f.message)).collect()
    }

    #[test]
    fn the_controllers_zone_states() {
        assert_eq!(zone_state(2, 3), ZoneState::Normal, "2 NotReady is never partial");
        assert_eq!(zone_state(3, 4), ZoneState::Partial);
        assert_eq!(zone_state(3, 6), ZoneState::Normal, "50% is under 55%");
        assert_eq!(zone_state(4, 4), ZoneState::Full);
        assert_eq!(zone_state(0, 4), ZoneState::Normal);
    }

    #[test]
    fn three_of_four_on_prem_nodes_lost_hold_the_evictions_and_all_four_do_not() {
        let expect = Expectations::default();
        let three = judge(&lab(3), &expect);
        assert_eq!(three.len(), 1);
        assert_eq!(three[0].0, Status::Warn);
        assert!(three[0].1.contains("3 of its 4 nodes") && three[0].1.contains("evictions held by zone disruption"));
        let four = judge(&lab(4), &expect);
        assert_eq!(four[0].0, Status::Pass);
        assert!(four[0].1.contains("full disruption") && four[0].1.contains("normal rate"), "{}", four[0].1);
        assert_eq!(judge(&lab(2), &expect)[0].0, Status::Pass);
        let drain = judge(&lab(3), &Expectations { loses_nodes: false, ..Expectations::default() });
        assert_eq!(drain[0].0, Status::Skip);
    }

    #[test]
    fn every_zone_fully_disrupted_stops_all_evictions() {
        let mut s = lab(4);
        s.zones.remove("(no zone label)");
        let found = judge(&s, &Expectations::default());
        assert_eq!(found[0].0, Status::Warn);
        assert!(found[0].1.contains("stops all evictions"), "{}", found[0].1);
    }
}
