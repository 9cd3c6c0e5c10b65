//! `spec.lastTier`: the service's last tier (its URL, probe and prices), and the steps that wait for it to serve.

use super::Validator;
use crate::drill::model::{LastTier, WaitCondition};
use crate::drill::parse::{index, join};
use crate::drill::raw;

/// Probing faster than this measures the probe, not the gateway.
const MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

impl Validator<'_> {
    pub(super) fn last_tier(&mut self, spec: &raw::DrillSpec) -> Option<LastTier> {
        self.waits_need_a_last_tier(spec);
        let tier = spec.last_tier.as_ref()?;
        let at = "spec.lastTier";
        if let Err(reason) = crate::http::service_url(&tier.url) {
            self.problem(&join(at, "url"), format!("invalid last tier URL `{}`: {reason}", tier.url));
        }
        if tier.interval.0 < MIN_INTERVAL {
            self.problem(&join(at, "interval"), "probe the last tier at most every 100ms");
        }
        if tier.timeout.0.is_zero() {
            self.problem(&join(at, "timeout"), "the probe's timeout must be more than 0s");
        }
        for (key, value) in [("pricePerRequest", tier.price_per_request), ("requestsPerHour", tier.requests_per_hour)] {
            if value.is_some_and(|v| !v.is_finite() || v <= 0.0) {
                self.problem(&join(at, key), format!("`{key}` must be a positive number"));
            }
        }
        if tier.price_per_request.is_some() != tier.requests_per_hour.is_some() {
            self.problem(
                at,
                "give `pricePerRequest` and `requestsPerHour` together: the last tier's cost per hour is their product",
            );
        }
        if tier.fallback_nodes == Some(0) {
            self.problem(&join(at, "fallbackNodes"), "the fallback runs at least one node to carry the service");
        }
        Some(LastTier {
            name: tier.name.clone().filter(|n| !n.trim().is_empty()),
            url: tier.url.trim().to_string(),
            expect_status: tier.expect_status,
            interval: tier.interval.0,
            timeout: tier.timeout.0,
            price_per_request: tier.price_per_request,
            requests_per_hour: tier.requests_per_hour,
            fallback_nodes: tier.fallback_nodes,
        })
    }

    /// `waitFor: last-tier-serving` waits on the last tier's probe: without `spec.lastTier` it would wait forever.
    fn waits_need_a_last_tier(&mut self, spec: &raw::DrillSpec) {
        if spec.last_tier.is_some() {
            return;
        }
        for (i, step) in spec.steps.iter().enumerate() {
            if step.wait_for == Some(WaitCondition::LastTierServing) {
                self.problem(
                    &join(&index("spec.steps", i), "waitFor"),
                    "`last-tier-serving` waits on the last tier's probe: declare `spec.lastTier` with its URL",
                );
            }
        }
    }
}
