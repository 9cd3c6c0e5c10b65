//! Notable events with repeats folded into one row: a drain retrying a blocked eviction every few seconds says so
//! once, with a count and the span, instead of eighty times.

use chrono::{DateTime, Utc};

use super::human_seconds;
use super::model::{Marker, Notable};

/// One row of the events table: an event, or the same event repeated.
#[derive(Debug, Clone, PartialEq)]
pub struct Folded {
    pub t_seconds: f64,
    pub at: DateTime<Utc>,
    pub server_time: Option<DateTime<Utc>>,
    pub what: String,
    pub kind: Marker,
    pub count: usize,
    pub last_t_seconds: f64,
    pub last_at: DateTime<Utc>,
}

impl Folded {
    /// `eviction of llm-0 blocked by PodDisruptionBudget llm ×81, 10:02:03–10:04:40 (+12.0s to +2m 49.0s)`, or the
    /// event alone.
    pub fn text(&self) -> String {
        if self.count == 1 {
            return self.what.clone();
        }
        format!(
            "{} ×{}, {}–{} (+{} to +{})",
            self.what,
            self.count,
            self.at.format("%H:%M:%S"),
            self.last_at.format("%H:%M:%S"),
            human_seconds(self.t_seconds),
            human_seconds(self.last_t_seconds)
        )
    }
}

/// The events in the order each first happened, every repeat of the same text folded into its first row.
pub fn fold(events: &[Notable]) -> Vec<Folded> {
    let mut rows: Vec<Folded> = Vec::new();
    let mut index: std::collections::BTreeMap<(&str, Marker), usize> = std::collections::BTreeMap::new();
    for n in events {
        match index.get(&(n.what.as_str(), n.kind)) {
            Some(&i) => {
                let row = &mut rows[i];
                row.count += 1;
                row.last_t_seconds = n.t_seconds;
                row.last_at = n.at;
            }
            None => {
                index.insert((n.what.as_str(), n.kind), rows.len());
                rows.push(Folded {
                    t_seconds: n.t_seconds,
                    at: n.at,
                    server_time: n.server_time,
                    what: n.what.clone(),
                    kind: n.kind,
                    count: 1,
                    last_t_seconds: n.t_seconds,
                    last_at: n.at,
                });
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn eighty_one_blocked_evictions_are_one_row_with_their_count_and_span() {
        let at = sample::base();
        let event = |t: f64, what: &str| Notable {
            t_seconds: t,
            at: at + chrono::Duration::milliseconds((t * 1000.0) as i64),
            server_time: None,
            what: what.into(),
            kind: Marker::Eviction,
        };
        let mut events = vec![event(1.0, "fault injected (drain): t0")];
        for i in 0..81 {
            events.push(event(2.0 + 2.0 * i as f64, "eviction of llm-0 blocked by PodDisruptionBudget llm"));
            if i == 40 {
                events.push(event(83.0, "NodeClaim gpu-fallback-x1 created"));
            }
        }
        let rows = fold(&events);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[1].count, 81);
        assert_eq!(
            rows[1].text(),
            "eviction of llm-0 blocked by PodDisruptionBudget llm ×81, 09:30:02–09:32:42 (+2.0s to +2m 42.0s)"
        );
        assert_eq!(rows[2].text(), "NodeClaim gpu-fallback-x1 created");
    }
}
