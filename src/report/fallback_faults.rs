//! The fallback's own failures and a partial loss in words (phases/fallback_faults.rs measures them): one set of
//! lines every renderer shows.

use super::human_seconds;
use crate::phases::fallback_faults::{CapacityOutcome, FallbackFaults, PartialLoss, SecondRecovery};

fn or_dash(s: Option<f64>) -> String {
    s.map_or_else(|| "not observed".into(), human_seconds)
}

impl FallbackFaults {
    /// The section as lines: each renderer lays them out its own way.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = &self.capacity {
            out.extend(c.lines());
        }
        if let Some(l) = &self.lost_node {
            out.extend(l.lines());
        }
        if let Some(p) = &self.partial {
            out.extend(p.lines());
        }
        out
    }
}

impl CapacityOutcome {
    fn lines(&self) -> Vec<String> {
        let back = self
            .given_back_at_seconds
            .map_or_else(|| "until the end of the run".into(), |t| format!("until {}", human_seconds(t)));
        let mut out = vec![format!(
            "Capacity taken away at {}: {} ({back})",
            human_seconds(self.removed_at_seconds),
            self.instance_types.join(", ")
        )];
        for f in &self.failed_launches {
            let pools =
                if f.pools.is_empty() { "every allowed type already known out".into() } else { f.pools.join(", ") };
            out.push(format!(
                "failed launch at {} ({}): NodeClaim {}, {}: {pools}",
                human_seconds(f.t_seconds),
                f.at.format("%H:%M:%S"),
                f.nodeclaim,
                f.reason
            ));
        }
        for l in &self.launches {
            let launched = l
                .launched_seconds
                .map_or_else(|| "never launched".into(), |t| format!("launched at {}", human_seconds(t)));
            let on = match &l.instance_type {
                Some(t) if self.instance_types.contains(t) => format!("on {t}"),
                Some(t) => format!("on {t}, skipping {} (out of capacity)", self.instance_types.join(", ")),
                None => "no node".into(),
            };
            out.push(format!(
                "NodeClaim {} created at {}, {launched} {on}",
                l.nodeclaim,
                human_seconds(l.created_seconds)
            ));
        }
        if let Some(m) = self.move_seconds {
            out.push(format!(
                "Karpenter moved to a type with capacity {} after its first launch attempt",
                human_seconds(m)
            ));
        }
        out.push(format!(
            "RTO with the failure {}; without it (estimated: the refused launches' time taken off) {}",
            or_dash(self.rto_seconds),
            or_dash(self.rto_without_seconds)
        ));
        if let Some(cause) = &self.cause {
            out.push(format!("cause: {cause}"));
        }
        out
    }
}

impl SecondRecovery {
    fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "Fallback node lost at {}: NodeClaim {} deleted (node {}, {} workload pods)",
            human_seconds(self.lost_at_seconds),
            self.nodeclaim,
            self.node,
            self.pods
        )];
        match self.service_lost_seconds {
            Some(t) => out.push(format!("service below its restoredWhen criterion +{}", human_seconds(t))),
            None => out.push("the service stayed restored: the other nodes carried it".into()),
        }
        out.push(self.replacement_line());
        out.push(format!("second recovery (loss to service restored again): {}", or_dash(self.recovery_seconds)));
        out
    }
}

impl SecondRecovery {
    /// Who took the lost node's pods, and when, each since the loss; a time before it (negative) is capacity that was
    /// already on its way or there.
    fn replacement_line(&self) -> String {
        let Some(replacement) = &self.replacement else {
            return "no replacement pod was bound to a node".into();
        };
        let signed = |t: Option<f64>| match t {
            Some(t) if t < 0.0 => format!("{} before the loss", human_seconds(-t)),
            Some(t) => format!("+{}", human_seconds(t)),
            None => "not observed".into(),
        };
        let node = self.replacement_node.as_deref().filter(|n| *n != replacement.as_str());
        let pool = self.replacement_node_pool.as_deref().map(|p| format!(" of NodePool {p}")).unwrap_or_default();
        let what = match (node, self.replacement_new) {
            (Some(n), true) => format!("new NodeClaim {replacement}{pool} (node {n})"),
            (Some(n), false) => format!("NodeClaim {replacement}{pool} (node {n}), created before the loss"),
            (None, _) => format!("node {replacement}{pool}"),
        };
        format!(
            "replacement: {what}; NodeClaim created {}, launched {}, node Ready {}; first pod bound {}",
            signed(self.replacement_created_seconds),
            signed(self.replacement_launched_seconds),
            signed(self.replacement_ready_seconds),
            signed(self.replacement_scheduled_seconds)
        )
    }
}

impl PartialLoss {
    fn lines(&self) -> Vec<String> {
        let who = if self.fallback_nodeclaims == 0 {
            "the remaining on-prem nodes took the workload: no fallback node was launched".to_string()
        } else {
            format!("Karpenter filled the gap with {} NodeClaims", self.fallback_nodeclaims)
        };
        let (verb, zone_rule) = if self.lost {
            (
                "failed",
                "the node lifecycle controller's zone-disruption rule applies: with more than 2 and at least 55% of a \
                 zone NotReady, a zone of at most 50 nodes stops evicting (nothing falls back while it lasts); \
                 preflight's zone-disruption finding says whether this share crosses it",
            )
        } else {
            (
                "drained",
                "a drain keeps the nodes Ready, so the node lifecycle controller's zone-disruption rule does not apply",
            )
        };
        vec![
            format!(
                "Partial loss: {} of {} on-prem nodes {verb} ({})",
                self.nodes.len(),
                self.of,
                self.nodes.join(", ")
            ),
            format!("{who}; RTO {}", or_dash(self.rto_seconds)),
            zone_rule.into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::phases::fallback_faults::{CapacityOutcome, FallbackFaults, Launch};

    #[test]
    fn a_launch_on_another_type_says_which_it_skipped() {
        let faults = FallbackFaults {
            capacity: Some(CapacityOutcome {
                instance_types: vec!["g6.12xlarge".into()],
                removed_at_seconds: 1.0,
                given_back_at_seconds: None,
                failed_launches: Vec::new(),
                launches: vec![Launch {
                    nodeclaim: "b".into(),
                    created_seconds: 2.0,
                    launched_seconds: Some(2.5),
                    instance_type: Some("g6e.12xlarge".into()),
                }],
                move_seconds: Some(0.5),
                rto_seconds: Some(9.0),
                rto_without_seconds: Some(9.0),
                cause: None,
            }),
            ..Default::default()
        };
        let text = faults.lines().join("\n");
        assert!(text.contains("on g6e.12xlarge, skipping g6.12xlarge (out of capacity)"), "{text}");
        assert!(text.contains("RTO with the failure 9.0s"), "{text}");
    }
}
