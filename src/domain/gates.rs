//! The start gates by name: what `--override-gate` takes, what a refusal and the report name.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A condition checked before anything is touched; a closed one refuses the drill unless overridden.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateKind {
    /// A named alert fires in Alertmanager (`spec.gates.alerts`).
    Alert,
    /// `hybrid-drill watch` has an incident open in the reports directory.
    Incident,
    /// Now is inside one of the drill file's change-freeze windows (`spec.gates.freezeWindows`).
    FreezeWindow,
    /// A release process has set the cluster's freeze marker (the ConfigMap `hybrid-drill-freeze`).
    ClusterFreeze,
}

impl GateKind {
    pub const ALL: [GateKind; 4] =
        [GateKind::Alert, GateKind::Incident, GateKind::FreezeWindow, GateKind::ClusterFreeze];

    pub fn as_str(self) -> &'static str {
        match self {
            GateKind::Alert => "alert",
            GateKind::Incident => "incident",
            GateKind::FreezeWindow => "freeze-window",
            GateKind::ClusterFreeze => "cluster-freeze",
        }
    }

    pub fn parse(text: &str) -> Option<GateKind> {
        GateKind::ALL.into_iter().find(|g| g.as_str() == text)
    }
}

impl fmt::Display for GateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
