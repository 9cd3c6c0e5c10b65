//! The restore: the service restored (when its criterion first held), the fault removed, the on-prem nodes Ready
//! again, and how long a node failure's hooks ran.

use super::model::Boundary;
use super::moments::Moments;
use crate::drill::Drill;
use crate::timeline::{Event, FaultKind, NodeRole, Observation};

impl<'a> Moments<'a> {
    /// When the last on-prem node was seen Ready again after the restore started. The step confirms it only once its
    /// undo returns (a recovery hook, a last-resort wait), which can be later; the watch saw it first.
    pub(super) fn on_prem_ready(&self) -> Option<&'a Observation> {
        let restore = self.restore?;
        let confirmed = self.scan.first(restore.seq, |e| matches!(e, Event::OnPremReady { .. }))?;
        let last_ready = self.scan.last_between(
            restore.seq,
            confirmed.seq,
            |e| matches!(e, Event::NodeReady { role: NodeRole::OnPrem, status, .. } if status.is_true()),
        );
        Some(last_ready.unwrap_or(confirmed))
    }

    /// When t0 is a hook's start (a node failure), how long the hooks ran: the fault reaches the cluster while they
    /// run, so detection includes their runtime.
    pub(super) fn hooks_ran(&self) -> Option<String> {
        let t0 = self.t0.filter(|o| matches!(o.event, Event::FaultInjected { kind: FaultKind::NodeFailure, .. }))?;
        let ran: Vec<&Observation> = self
            .scan
            .obs
            .iter()
            .filter(|o| o.seq > t0.seq)
            .take_while(|o| !matches!(o.event, Event::StepFinished { .. }))
            .filter(|o| matches!(o.event, Event::HookRan { .. }))
            .collect();
        let last = ran.last()?;
        Some(format!(
            "t0 is when the failure hooks started; {} ran until +{:.2} s",
            if ran.len() == 1 { "it".to_string() } else { format!("the {} of them", ran.len()) },
            last.t_ms.saturating_sub(t0.t_ms) as f64 / 1000.0
        ))
    }

    /// The service restored when its criterion first held.
    pub(super) fn restored_boundary(&self) -> Option<Boundary> {
        self.restored.map(restored_when_first_held)
    }

    /// For the RTO: when a restoration that first held earlier was confirmed, and by what criterion.
    pub(super) fn restored_note(&self, drill: &Drill) -> Option<String> {
        let confirmed = self.restored.and_then(confirmation)?;
        Some(format!("restored when {} first held; {confirmed}", restored_criterion(drill)))
    }
}

/// The service restored when its criterion first held: with a probe, before the observation that confirmed it.
fn restored_when_first_held(o: &Observation) -> Boundary {
    let mut boundary = Boundary::of("service restored", o);
    if let Event::ServiceRestored { held_since_ms: Some(held), .. } = o.event
        && held < o.t_ms
    {
        boundary.t_ms = held;
        boundary.received = o.received - chrono::Duration::milliseconds((o.t_ms - held) as i64);
    }
    boundary
}

/// When a restoration that first held earlier was confirmed, for the RTO's note.
fn confirmation(o: &Observation) -> Option<String> {
    match o.event {
        Event::ServiceRestored { held_since_ms: Some(held), .. } => Some(format!(
            "first held at +{:.1} s, confirmed at +{:.1} s ({})",
            held as f64 / 1000.0,
            o.t_ms as f64 / 1000.0,
            crate::timeline::rfc3339(&o.received)
        )),
        _ => None,
    }
}

/// The drill's restored criterion, in words.
fn restored_criterion(drill: &Drill) -> String {
    let when = &drill.spec.targets.workload.restored_when;
    let pods = format!("{} pods Ready", when.ready_pods);
    match &when.http {
        Some(probe) => format!(
            "{pods} and {} answering {} ({} in a row, every {})",
            probe.url,
            probe.expect_status,
            probe.consecutive,
            humantime::format_duration(probe.interval)
        ),
        None => pods,
    }
}
