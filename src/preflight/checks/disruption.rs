//! nodepool-disruption: whether the fallback NodePool's disruption budgets let consolidation reclaim the emptied
//! fallback nodes at the drill's time (now, or `--at`), and if not, the window when they would.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use super::support::Findings;
use crate::cluster::nodepool_budgets::{Budgets, Reason, Window};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::{PoolLookup, Snapshot};
use crate::preflight::targets::{Expectations, PreflightTargets};

/// How far ahead a closed window is looked for: a week covers every weekly schedule.
const HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn window_text(w: &Window) -> String {
    match w.closes {
        Some(closes) => format!("{} until {}", stamp(w.opens), stamp(closes)),
        None => format!("from {}", stamp(w.opens)),
    }
}

/// nodepool-disruption: an emptied fallback node is reclaimed for the reason `Empty`; a budget that allows 0 such
/// nodes at the drill's time keeps every fallback node billing until its window ends.
pub(super) fn nodepool_disruption(s: &Snapshot, targets: &PreflightTargets, expect: &Expectations, out: &mut Findings) {
    let id = CheckId::NodepoolDisruption;
    let object = format!("NodePool {}", targets.node_pool);
    let PoolLookup::Found(pool) = &s.pool else {
        out.skip(&[id], &object, "the NodePool was not read");
        return;
    };
    let disruption = pool.spec.disruption.as_ref();
    let budgets = match Budgets::parse(disruption) {
        Ok(b) => b,
        Err(e) => {
            let fix = "fix spec.disruption.budgets (Karpenter ignores a pool it cannot parse)";
            return out.fix(id, Status::Fail, &object, format!("unreadable disruption budget: {e}"), fix);
        }
    };
    let at = expect.at.unwrap_or_else(Utc::now);
    let when = if expect.at.is_some() { format!("at {}", stamp(at)) } else { "now".into() };
    // A reclaim starts with at least one emptied node; a percentage above 0 of any pool allows at least one.
    let allowance = budgets.allowed(1, Reason::Empty, at);
    let binding = allowance.binding.map(|i| Budgets::describe(disruption, i)).unwrap_or_default();
    let fix = "run the drill inside the window, or give the budget a schedule that leaves the drill's reclaim out";
    if allowance.blocks() {
        return match budgets.next_opening(1, Reason::Empty, at, HORIZON) {
            Some(w) => out.fix(
                id,
                Status::Warn,
                &object,
                format!(
                    "{binding} allows 0 nodes to be disrupted {when}: emptied fallback nodes keep billing until \
                     it ends; reclaim is allowed {}",
                    window_text(&w)
                ),
                fix,
            ),
            None => out.fix(
                id,
                Status::Fail,
                &object,
                format!("{binding} allows 0 nodes to be disrupted {when} and for the week after: consolidation never reclaims the fallback"),
                "allow at least one node for the reason Empty, at least outside business hours",
            ),
        };
    }
    // Open at the start: does it close while the drill could still be running?
    let closes = budgets.next_opening(1, Reason::Empty, at, HORIZON).and_then(|w| w.closes);
    match (closes, expect.span) {
        (Some(c), Some(span)) if c < at + span => out.fix(
            id,
            Status::Warn,
            &object,
            format!(
                "reclaim is allowed {when}, but a budget allows 0 nodes from {} (within the drill's deadline of {}): \
                 a late reclaim waits for the window to end",
                stamp(c),
                humantime::format_duration(span)
            ),
            fix,
        ),
        _ => {
            let by = if binding.is_empty() { " (no budget limits it)".into() } else { format!(" (under {binding})") };
            out.add(id, Status::Pass, &object, format!("emptied fallback nodes may be reclaimed {when}{by}"))
        }
    }
}
