//! `restoredWhen.readyPods`: a number of pods, or a share of the workload's desired replicas (`"75%"`), and how many
//! Ready pods restore the service once an autoscaler may change the replicas during the drill.

use std::fmt;

/// How many of the workload's pods must be Ready, as the drill file says it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReadyPods {
    /// At least this many (at least one). Under an autoscaler it is read as 100% of the desired replicas at t0: a
    /// number written for one size is wrong both ways once the size moves.
    Count(u32),
    /// This share of the desired replicas at t0, in percent (above 0, at most 100).
    Share(f64),
}

/// The workload's desired replicas the judgement rests on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaBasis {
    /// An HPA or a KEDA ScaledObject targets the workload's controller.
    pub autoscaled: bool,
    /// The desired replicas when the fault began; `None` before it.
    pub at_t0: Option<u32>,
    /// The desired replicas now: the autoscaler's, else the controller's `spec.replicas` as read before the drill.
    pub now: Option<u32>,
}

/// Why text given for `readyPods` is not a share.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadyPodsError {
    #[error("readyPods `{0}` is neither a number of pods (4) nor a share of the desired replicas (\"75%\")")]
    NotAShare(String),
    #[error("readyPods `{0}` must be a share above 0% and at most 100%")]
    OutOfRange(String),
}

impl ReadyPods {
    /// Reads `"75%"` (a decimal share is allowed: `"62.5%"`).
    pub fn parse_share(text: &str) -> Result<ReadyPods, ReadyPodsError> {
        let number = text.trim().strip_suffix('%').ok_or_else(|| ReadyPodsError::NotAShare(text.into()))?;
        let share: f64 = number.trim().parse().map_err(|_| ReadyPodsError::NotAShare(text.into()))?;
        if !(share > 0.0 && share <= 100.0) {
            return Err(ReadyPodsError::OutOfRange(text.into()));
        }
        Ok(ReadyPods::Share(share))
    }

    /// Whether the count depends on the desired replicas (a share, or any count under an autoscaler).
    pub fn is_relative(&self, basis: &ReplicaBasis) -> bool {
        matches!(self, ReadyPods::Share(_)) || basis.autoscaled
    }

    /// The Ready pods that restore the service. Relative to the desired replicas at t0; an autoscaler's scale-in
    /// during the drill lowers it (waiting for pods the autoscaler no longer asks for would abort a restored
    /// service), its scale-out does not raise it (the extra replicas answer the load; the restore is judged against
    /// the capacity the fault took). At least one: a workload scaled to zero is never "restored" by nothing.
    pub fn needed(&self, basis: &ReplicaBasis) -> u32 {
        if let (ReadyPods::Count(n), false) = (self, basis.autoscaled) {
            return *n;
        }
        let base = match (basis.at_t0, basis.now) {
            (Some(t0), Some(now)) => Some(t0.min(now)),
            (t0, now) => t0.or(now),
        };
        match (self, base) {
            (ReadyPods::Count(n), None) => *n,
            (ReadyPods::Share(_), None) => 1,
            (ReadyPods::Count(_), Some(base)) => base.max(1),
            (ReadyPods::Share(share), Some(base)) => ((share * f64::from(base) / 100.0 - 1e-9).ceil() as u32).max(1),
        }
    }
}

impl fmt::Display for ReadyPods {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadyPods::Count(n) => write!(f, "{n}"),
            ReadyPods::Share(share) => write!(f, "{share}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis(autoscaled: bool, at_t0: Option<u32>, now: Option<u32>) -> ReplicaBasis {
        ReplicaBasis { autoscaled, at_t0, now }
    }

    #[test]
    fn a_share_is_a_percentage_above_zero_and_at_most_a_hundred() {
        assert_eq!(ReadyPods::parse_share("75%"), Ok(ReadyPods::Share(75.0)));
        assert_eq!(ReadyPods::parse_share(" 62.5 %"), Ok(ReadyPods::Share(62.5)));
        assert_eq!(ReadyPods::parse_share("100%"), Ok(ReadyPods::Share(100.0)));
        assert_eq!(ReadyPods::parse_share("0%"), Err(ReadyPodsError::OutOfRange("0%".into())));
        assert_eq!(ReadyPods::parse_share("120%"), Err(ReadyPodsError::OutOfRange("120%".into())));
        assert_eq!(ReadyPods::parse_share("75"), Err(ReadyPodsError::NotAShare("75".into())));
        assert_eq!(ReadyPods::parse_share("most%"), Err(ReadyPodsError::NotAShare("most%".into())));
        assert_eq!(ReadyPods::Share(62.5).to_string(), "62.5%");
        assert_eq!(ReadyPods::Count(4).to_string(), "4");
    }

    #[test]
    fn a_count_without_an_autoscaler_stands_as_written() {
        assert_eq!(ReadyPods::Count(4).needed(&basis(false, Some(2), Some(8))), 4);
        assert!(!ReadyPods::Count(4).is_relative(&basis(false, None, Some(4))));
    }

    #[test]
    fn under_an_autoscaler_the_desired_replicas_at_t0_decide_not_the_number() {
        // The file says 2, the HPA wanted 4 at t0: 2 Ready would be a false pass at half the capacity.
        assert_eq!(ReadyPods::Count(2).needed(&basis(true, Some(4), Some(4))), 4);
        // The file says 4, the HPA wanted 2 at t0: waiting for 4 would be a false abort.
        assert_eq!(ReadyPods::Count(4).needed(&basis(true, Some(2), Some(2))), 2);
        // Before t0 the desired replicas now stand in (the steady-state check).
        assert_eq!(ReadyPods::Count(4).needed(&basis(true, None, Some(3))), 3);
        // Nothing read: the number is all there is.
        assert_eq!(ReadyPods::Count(4).needed(&basis(true, None, None)), 4);
    }

    #[test]
    fn a_scale_in_during_the_drill_lowers_the_target_and_a_scale_out_does_not_raise_it() {
        assert_eq!(ReadyPods::Count(4).needed(&basis(true, Some(4), Some(2))), 2);
        assert_eq!(ReadyPods::Count(4).needed(&basis(true, Some(4), Some(8))), 4);
        assert_eq!(ReadyPods::Share(75.0).needed(&basis(true, Some(4), Some(8))), 3);
    }

    #[test]
    fn a_share_rounds_up_and_never_asks_for_nothing() {
        assert_eq!(ReadyPods::Share(75.0).needed(&basis(false, Some(4), Some(4))), 3);
        assert_eq!(ReadyPods::Share(50.0).needed(&basis(false, Some(5), Some(5))), 3);
        assert_eq!(ReadyPods::Share(100.0).needed(&basis(true, Some(3), Some(3))), 3);
        assert_eq!(ReadyPods::Share(10.0).needed(&basis(true, Some(0), Some(0))), 1, "scaled to zero");
        assert_eq!(ReadyPods::Share(33.3).needed(&basis(false, None, None)), 1);
        assert!(ReadyPods::Share(75.0).is_relative(&basis(false, None, None)));
    }
}
