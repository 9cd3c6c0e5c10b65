//! The small vocabularies observations are written in: fault kinds, step outcomes, condition statuses, and the
//! drill's outcome.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a step ended, or where it stands while the drill runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepOutcome {
    /// Never reached: an earlier step stopped the drill.
    Skipped,
    Running,
    Passed,
    /// Passed with a deviation the drill chose to only warn about.
    Warned,
    Failed,
    /// Interrupted by a signal, a guard or the deadline while it ran.
    Aborted,
}

impl StepOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            StepOutcome::Skipped => "skipped",
            StepOutcome::Running => "running",
            StepOutcome::Passed => "passed",
            StepOutcome::Warned => "warned",
            StepOutcome::Failed => "failed",
            StepOutcome::Aborted => "aborted",
        }
    }
}

impl fmt::Display for StepOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status of a Kubernetes condition (a node's `Ready`, a NodeClaim's `Launched`...), as the API spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    True,
    False,
    /// Also what an absent condition, or a status the API may add later, reads as.
    #[default]
    #[serde(other)]
    Unknown,
}

impl ConditionStatus {
    /// Reads a condition's `status` field; anything but `True` or `False` is `Unknown`.
    pub fn parse(status: &str) -> ConditionStatus {
        match status {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        }
    }

    pub fn is_true(self) -> bool {
        self == ConditionStatus::True
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }

    /// What a node's `Ready` condition in this status is called: Ready, NotReady or Unknown.
    pub fn node_readiness(self) -> &'static str {
        match self {
            ConditionStatus::True => "Ready",
            ConditionStatus::False => "NotReady",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a drill ended: the verdict of its report and its exit code. Reports spell it by its serde (kebab-case) name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every step ran and every objective was met.
    Passed,
    /// Every step ran; at least one objective was missed.
    ObjectiveMissed,
    /// A step failed, a guard tripped, or the drill was interrupted; the cluster was restored.
    Aborted,
    /// The drill stopped and restoring the cluster failed: a human must finish it.
    RestoreFailed,
    /// A preflight check failed before anything was touched: the drill did not start.
    Refused,
    /// Every step ran, but the drill left cloud capacity it caused running (a NodeClaim in any NodePool): someone
    /// must reclaim it.
    LeftBehind,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::Passed,
        Outcome::ObjectiveMissed,
        Outcome::Aborted,
        Outcome::RestoreFailed,
        Outcome::Refused,
        Outcome::LeftBehind,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::ObjectiveMissed => "objective missed",
            Outcome::Aborted => "aborted, cluster restored",
            Outcome::RestoreFailed => "aborted, RESTORE FAILED",
            Outcome::Refused => "refused, nothing touched",
            Outcome::LeftBehind => "completed, LEFT CLOUD CAPACITY RUNNING",
        }
    }

    /// The serde name (`objective-missed`...), for CSS classes, metric labels and machine-readable fields.
    pub fn slug(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::ObjectiveMissed => "objective-missed",
            Outcome::Aborted => "aborted",
            Outcome::RestoreFailed => "restore-failed",
            Outcome::Refused => "refused",
            Outcome::LeftBehind => "left-behind",
        }
    }

    /// The outcome in a word or two, for a table cell among other runs.
    pub fn short(self) -> &'static str {
        match self {
            Outcome::RestoreFailed => "RESTORE FAILED",
            Outcome::LeftBehind => "LEFT BEHIND",
            Outcome::ObjectiveMissed => "objective missed",
            other => other.slug(),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The drill's outcome in a timeline's `drill-finished` line, written in the words of [`Outcome::as_str`] as runs
/// before this type wrote it.
pub(crate) mod outcome_words {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use super::Outcome;

    pub fn serialize<S: Serializer>(outcome: &Outcome, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(outcome.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Outcome, D::Error> {
        let words = String::deserialize(d)?;
        Outcome::ALL
            .into_iter()
            .find(|o| o.as_str() == words)
            .ok_or_else(|| D::Error::custom(format!("unknown drill outcome `{words}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_statuses_read_as_the_api_writes_them() {
        assert_eq!(serde_json::from_str::<ConditionStatus>(r#""True""#).unwrap(), ConditionStatus::True);
        assert_eq!(serde_json::from_str::<ConditionStatus>(r#""Maybe""#).unwrap(), ConditionStatus::Unknown);
        assert_eq!(ConditionStatus::parse("False").node_readiness(), "NotReady");
        assert_eq!(serde_json::to_string(&StepOutcome::Warned).unwrap(), r#""warned""#);
    }

    #[test]
    fn a_finished_drill_keeps_the_words_older_timelines_have() {
        for outcome in Outcome::ALL {
            let event = crate::timeline::Event::DrillFinished { outcome };
            let text = serde_json::to_string(&event).unwrap();
            assert_eq!(text, format!(r#"{{"type":"drill-finished","outcome":"{}"}}"#, outcome.as_str()));
            assert_eq!(serde_json::from_str::<crate::timeline::Event>(&text).unwrap(), event);
        }
        assert_eq!(serde_json::to_string(&Outcome::RestoreFailed).unwrap(), r#""restore-failed""#);
    }
}
