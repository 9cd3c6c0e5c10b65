//! Karpenter's NodePool disruption budgets evaluated at any moment: how many of a pool's nodes consolidation may take
//! for a reason, which budget sets that number, and when a window that allows none ends. Preflight judges a planned
//! drill's reclaim with it, and the reclaim wait names a budget that holds fallback nodes back.
//!
//! Karpenter's own rules (`NodePool.GetAllowedDisruptionsByReason`): a budget counts when its `reasons` are absent
//! or name the reason, and it is active always without a `schedule`, or for `duration` after each time its schedule
//! (standard five-field cron or a `@daily`-style alias, in UTC) fires. A percentage is of the pool's nodes, rounded
//! up. The pool allows the smallest number any counting active budget allows, and without one, any number.
//! Karpenter also subtracts the nodes it is disrupting already; a reclaim starts from none, so that is left out.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::karpenter::{Disruption, DisruptionBudget};

/// Why Karpenter disrupts a node; a budget's `reasons` limit it to some.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Empty,
    Drifted,
    Underutilized,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Empty => "Empty",
            Reason::Drifted => "Drifted",
            Reason::Underutilized => "Underutilized",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error("budget {index}: nodes {value:?} is neither a count nor a percentage")]
    Nodes { index: usize, value: String },
    #[error("budget {index}: schedule {schedule:?}: {reason}")]
    Schedule { index: usize, schedule: String, reason: String },
    #[error("budget {index}: duration {value:?}: {reason}")]
    Duration { index: usize, value: String, reason: String },
    #[error("budget {index}: a schedule needs a duration, and a duration a schedule")]
    Unpaired { index: usize },
}

/// How many nodes a pool may lose at one moment, and the budget (by its index in `spec.disruption.budgets`) that
/// sets the number; `allowed: None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    pub allowed: Option<u32>,
    pub binding: Option<usize>,
}

impl Allowance {
    pub fn blocks(&self) -> bool {
        self.allowed == Some(0)
    }
}

/// When a blocked pool allows a disruption again, and when that ends (`None`: not within the horizon looked at).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub opens: DateTime<Utc>,
    pub closes: Option<DateTime<Utc>>,
}

/// One budget, parsed once.
struct Parsed {
    index: usize,
    nodes: Nodes,
    schedule: Option<(Cron, TimeDelta)>,
    reasons: Option<Vec<String>>,
}

enum Nodes {
    Count(u32),
    Percent(u32),
}

/// A pool's budgets parsed, to evaluate at many moments.
pub struct Budgets(Vec<Parsed>);

impl Budgets {
    pub fn parse(disruption: Option<&Disruption>) -> Result<Budgets, BudgetError> {
        let budgets = disruption.map(|d| d.budgets.as_slice()).unwrap_or_default();
        budgets.iter().enumerate().map(|(index, b)| parse_one(index, b)).collect::<Result<_, _>>().map(Budgets)
    }

    /// What the budgets allow at `at` for `reason`, in a pool of `nodes` nodes.
    pub fn allowed(&self, nodes: u32, reason: Reason, at: DateTime<Utc>) -> Allowance {
        let mut out = Allowance { allowed: None, binding: None };
        for b in self.0.iter().filter(|b| b.counts_for(reason) && b.active(at)) {
            let n = match b.nodes {
                Nodes::Count(n) => n,
                Nodes::Percent(p) => (u64::from(p) * u64::from(nodes)).div_ceil(100) as u32,
            };
            if out.allowed.is_none_or(|m| n < m) {
                out = Allowance { allowed: Some(n), binding: Some(b.index) };
            }
        }
        out
    }

    /// From `from`, the first moment within `horizon` the budgets allow a disruption, and when that stops. Only a
    /// schedule's firing or the end of its duration changes what a pool allows, so those moments are all it reads.
    pub fn next_opening(&self, nodes: u32, reason: Reason, from: DateTime<Utc>, horizon: Duration) -> Option<Window> {
        let until = from + TimeDelta::from_std(horizon).unwrap_or(TimeDelta::MAX);
        let mut moments = vec![from];
        for (cron, duration) in self.0.iter().filter(|b| b.counts_for(reason)).filter_map(|b| b.schedule.as_ref()) {
            let mut hit = cron.find_next_occurrence(&(from - *duration), false).ok();
            while let Some(h) = hit.filter(|h| *h <= until) {
                moments.extend([h, h + *duration].into_iter().filter(|m| *m > from && *m <= until));
                hit = cron.find_next_occurrence(&h, false).ok();
            }
        }
        moments.sort();
        moments.dedup();
        let open = |t: &DateTime<Utc>| !self.allowed(nodes, reason, *t).blocks();
        let opens = *moments.iter().find(|t| open(t))?;
        let closes = moments.iter().find(|t| **t > opens && !open(t)).copied();
        Some(Window { opens, closes })
    }

    /// The budget at `index` in the words of the NodePool's spec, for a message.
    pub fn describe(disruption: Option<&Disruption>, index: usize) -> String {
        let Some(b) = disruption.and_then(|d| d.budgets.get(index)) else { return format!("budget {index}") };
        let mut text = format!("budget {index} (nodes: {}", b.nodes.as_deref().unwrap_or("10%"));
        if let (Some(s), Some(d)) = (&b.schedule, &b.duration) {
            text.push_str(&format!(", schedule: {s:?} for {d}"));
        }
        if let Some(r) = &b.reasons {
            text.push_str(&format!(", reasons: {}", r.join(", ")));
        }
        text + ")"
    }
}

impl Parsed {
    fn counts_for(&self, reason: Reason) -> bool {
        self.reasons.as_ref().is_none_or(|r| r.is_empty() || r.iter().any(|x| x == reason.as_str()))
    }

    /// Active when the schedule fired within the last `duration` (the end excluded), as Karpenter's `IsActive`.
    fn active(&self, at: DateTime<Utc>) -> bool {
        let Some((cron, duration)) = &self.schedule else { return true };
        cron.find_next_occurrence(&(at - *duration), false).is_ok_and(|hit| hit <= at)
    }
}

fn parse_one(index: usize, b: &DisruptionBudget) -> Result<Parsed, BudgetError> {
    // Karpenter's CRD defaults `nodes` to 10%.
    let value = b.nodes.as_deref().unwrap_or("10%").trim();
    let bad = || BudgetError::Nodes { index, value: value.to_string() };
    let nodes = match value.strip_suffix('%') {
        Some(p) => Nodes::Percent(p.parse().map_err(|_| bad())?),
        None => Nodes::Count(value.parse().map_err(|_| bad())?),
    };
    let schedule = match (&b.schedule, &b.duration) {
        (None, None) => None,
        (Some(schedule), Some(duration)) => {
            // Karpenter parses with robfig/cron's standard parser: five fields or an alias, no seconds or years.
            let parser = CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build();
            let cron = parser.parse(schedule).map_err(|e| BudgetError::Schedule {
                index,
                schedule: schedule.clone(),
                reason: e.to_string().to_lowercase(),
            })?;
            let bad_duration = |reason: String| BudgetError::Duration { index, value: duration.clone(), reason };
            let d = humantime::parse_duration(duration).map_err(|e| bad_duration(e.to_string()))?;
            Some((cron, TimeDelta::from_std(d).map_err(|e| bad_duration(e.to_string()))?))
        }
        _ => return Err(BudgetError::Unpaired { index }),
    };
    Ok(Parsed { index, nodes, schedule, reasons: b.reasons.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn budgets(yaml: &str) -> Budgets {
        let d: Disruption = serde_json::from_value(
            serde_json::json!({ "budgets": serde_json::from_str::<serde_json::Value>(yaml).unwrap() }),
        )
        .unwrap();
        Budgets::parse(Some(&d)).unwrap()
    }

    const NOON: &str = "2026-12-07T12:00:00Z"; // a Monday

    #[test]
    fn counts_and_percents_of_the_pool_rounded_up() {
        let b = budgets(r#"[{"nodes": "3"}, {"nodes": "25%"}]"#);
        assert_eq!(b.allowed(4, Reason::Empty, at(NOON)), Allowance { allowed: Some(1), binding: Some(1) });
        assert_eq!(b.allowed(10, Reason::Empty, at(NOON)), Allowance { allowed: Some(3), binding: Some(0) });
        assert_eq!(b.allowed(1, Reason::Empty, at(NOON)).allowed, Some(1), "25% of one node rounds up to one");
        assert_eq!(budgets(r#"[{"nodes": "0%"}]"#).allowed(5, Reason::Empty, at(NOON)).allowed, Some(0));
        assert_eq!(budgets("[]").allowed(5, Reason::Empty, at(NOON)), Allowance { allowed: None, binding: None });
        assert_eq!(budgets("[{}]").allowed(20, Reason::Empty, at(NOON)).allowed, Some(2), "10% by default");
    }

    #[test]
    fn a_scheduled_budget_binds_only_within_its_duration_after_each_firing() {
        // Business hours on weekdays: 09:00 for 8h allows none.
        let b = budgets(r#"[{"nodes": "100%"}, {"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}]"#);
        assert!(b.allowed(3, Reason::Empty, at(NOON)).blocks());
        assert_eq!(b.allowed(3, Reason::Empty, at(NOON)).binding, Some(1));
        assert!(b.allowed(3, Reason::Empty, at("2026-12-07T09:00:00Z")).blocks(), "from the firing itself");
        assert!(!b.allowed(3, Reason::Empty, at("2026-12-07T17:00:00Z")).blocks(), "the end is excluded");
        assert!(!b.allowed(3, Reason::Empty, at("2026-12-07T08:59:59Z")).blocks());
        assert!(!b.allowed(3, Reason::Empty, at("2026-12-06T12:00:00Z")).blocks(), "not on a Sunday");
        let w = b.next_opening(3, Reason::Empty, at(NOON), Duration::from_secs(7 * 86400)).unwrap();
        assert_eq!((w.opens, w.closes), (at("2026-12-07T17:00:00Z"), Some(at("2026-12-08T09:00:00Z"))));
        // Friday afternoon: open until Monday morning.
        let w = b.next_opening(3, Reason::Empty, at("2026-12-11T13:00:00Z"), Duration::from_secs(7 * 86400)).unwrap();
        assert_eq!((w.opens, w.closes), (at("2026-12-11T17:00:00Z"), Some(at("2026-12-14T09:00:00Z"))));
        // Open now: the window starts now.
        let w = b.next_opening(3, Reason::Empty, at("2026-12-07T18:00:00Z"), Duration::from_secs(86400)).unwrap();
        assert_eq!((w.opens, w.closes), (at("2026-12-07T18:00:00Z"), Some(at("2026-12-08T09:00:00Z"))));
        // An alias, and a window that spans midnight.
        let b = budgets(r#"[{"nodes": "0", "schedule": "@daily", "duration": "30m"}]"#);
        assert!(b.allowed(1, Reason::Empty, at("2026-12-07T00:29:00Z")).blocks());
        assert!(!b.allowed(1, Reason::Empty, at("2026-12-07T00:30:00Z")).blocks());
    }

    #[test]
    fn a_budget_with_reasons_binds_only_those_reasons() {
        let b = budgets(r#"[{"nodes": "0", "reasons": ["Drifted", "Underutilized"]}, {"nodes": "2"}]"#);
        assert_eq!(b.allowed(5, Reason::Empty, at(NOON)), Allowance { allowed: Some(2), binding: Some(1) });
        assert!(b.allowed(5, Reason::Drifted, at(NOON)).blocks());
        assert!(b.allowed(5, Reason::Underutilized, at(NOON)).blocks());
    }

    #[test]
    fn a_budget_of_zero_without_a_schedule_never_opens() {
        let b = budgets(r#"[{"nodes": "0"}]"#);
        assert_eq!(b.next_opening(2, Reason::Empty, at(NOON), Duration::from_secs(7 * 86400)), None);
    }

    #[test]
    fn malformed_budgets_name_the_budget_and_the_field() {
        let parse = |v: serde_json::Value| {
            let d: Disruption = serde_json::from_value(serde_json::json!({ "budgets": [v] })).unwrap();
            Budgets::parse(Some(&d)).err().unwrap().to_string()
        };
        assert_eq!(
            parse(serde_json::json!({"nodes": "ten"})),
            "budget 0: nodes \"ten\" is neither a count nor a percentage"
        );
        assert!(parse(serde_json::json!({"nodes": "0", "schedule": "0 9 * * 1-5"})).contains("needs a duration"));
        assert!(
            parse(serde_json::json!({"nodes": "0", "schedule": "61 9 * * *", "duration": "1h"}))
                .starts_with("budget 0: schedule")
        );
        assert!(
            parse(serde_json::json!({"nodes": "0", "schedule": "0 0 9 * * 1", "duration": "1h"}))
                .starts_with("budget 0: schedule"),
            "no seconds field"
        );
    }
}
