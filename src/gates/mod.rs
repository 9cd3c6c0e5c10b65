//! Start gates: what must hold before a drill touches anything (no named alert firing, no incident open, outside
//! every change freeze, no freeze marker on the cluster). Read once before t0, then judged purely against the
//! `--override-gate` overrides; a gate that cannot be read counts as closed, as a gate that fails open guards nothing.

mod read;

use std::fmt;
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::cluster::Cluster;
pub use crate::cluster::lease::FREEZE_MARKER;
use crate::domain::GateKind;
use crate::drill::Drill;
use crate::drill::freeze::FreezeWindow;

/// `--override-gate NAME --reason TEXT`: one gate let through, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub gate: GateKind,
    pub reason: String,
}

/// One gate as read before the drill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub gate: GateKind,
    /// Which gate: `alert GPUNodeDown in http://alertmanager:9093`.
    pub what: String,
    pub state: GateState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateState {
    Open,
    /// Closed: why, and what opens it.
    Closed {
        why: String,
        fix: String,
    },
}

/// A closed gate a person let through: what closed it, who and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overridden {
    pub gate: GateKind,
    pub closed: String,
    pub by: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// Every closed gate no override lets through, each with its fix.
    #[error("refusing to start: {}; nothing was touched", refusals(.0))]
    Closed(Vec<Reading>),
}

fn refusals(closed: &[Reading]) -> String {
    closed
        .iter()
        .map(|r| match &r.state {
            GateState::Closed { why, fix } => format!(
                "start gate `{}` is closed: {why}; {fix}, or let it through with `--override-gate {} --reason TEXT`",
                r.gate, r.gate
            ),
            GateState::Open => String::new(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reads every gate the drill has: Alertmanager for its alerts, the reports directory for open incidents, the clock
/// for its freeze windows, the cluster for its freeze marker (in the drill lock's namespace).
pub async fn read(cluster: &Cluster, drill: &Drill, reports_dir: &Path, now: DateTime<Utc>) -> Vec<Reading> {
    let gates = &drill.spec.gates;
    let mut readings = Vec::new();
    for gate in &gates.alerts {
        readings.push(read::alert(gate).await);
    }
    if gates.incidents {
        readings.push(read::incidents(reports_dir));
    }
    readings.extend(gates.freeze_windows.iter().map(|w| freeze_window(w, now)));
    if gates.cluster_freeze {
        readings.push(read::cluster_freeze(cluster, &drill.spec.lock.namespace).await);
    }
    readings
}

/// Whether `now` is inside the window.
pub fn freeze_window(window: &FreezeWindow, now: DateTime<Utc>) -> Reading {
    let state = if window.contains(now) {
        GateState::Closed {
            why: format!("now ({}) is inside the change freeze {window}", now.format("%Y-%m-%d %H:%M UTC")),
            fix: "run the drill after the window".into(),
        }
    } else {
        GateState::Open
    };
    Reading { gate: GateKind::FreezeWindow, what: format!("freeze window {window}"), state }
}

/// The closed gates the overrides let through (each recorded with `by`), or the refusal naming the rest.
pub fn judge(readings: &[Reading], overrides: &[Override], by: &str) -> Result<Vec<Overridden>, GateError> {
    let mut let_through = Vec::new();
    let mut refused = Vec::new();
    for reading in readings {
        let GateState::Closed { why, .. } = &reading.state else { continue };
        match overrides.iter().find(|o| o.gate == reading.gate) {
            Some(o) => let_through.push(Overridden {
                gate: reading.gate,
                closed: why.clone(),
                by: by.into(),
                reason: o.reason.clone(),
            }),
            None => refused.push(reading.clone()),
        }
    }
    if refused.is_empty() { Ok(let_through) } else { Err(GateError::Closed(refused)) }
}

/// What `plan` shows: each gate, open or closed (with why), and what an override would let through.
pub fn describe(readings: &[Reading], overrides: &[Override]) -> String {
    if readings.is_empty() {
        return "start gates: none\n".into();
    }
    let mut text = String::from("start gates (checked again when the drill starts):\n");
    for reading in readings {
        let line = match &reading.state {
            GateState::Open => format!("  open    {}: {}\n", reading.gate, reading.what),
            GateState::Closed { why, fix } => match overrides.iter().find(|o| o.gate == reading.gate) {
                Some(o) => format!("  CLOSED  {}: {why}; overridden: {}\n", reading.gate, o.reason),
                None => format!("  CLOSED  {}: {why}; {fix}\n", reading.gate),
            },
        };
        text.push_str(&line);
    }
    text
}

/// Who overrides: the identity the API server knows (when it says), and the account and host the tool runs as.
pub async fn who(cluster: &Cluster) -> String {
    let local = format!(
        "{}@{}",
        std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
        crate::cluster::lease::this_host()
    );
    match read::username(cluster).await {
        Some(user) => format!("{user} ({local})"),
        None => local,
    }
}

impl fmt::Display for Overridden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "start gate `{}` overridden by {}: {} (it was closed: {})",
            self.gate, self.by, self.reason, self.closed
        )
    }
}

#[cfg(test)]
mod tests;
