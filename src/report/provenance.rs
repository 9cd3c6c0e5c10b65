//! Who ran a drill and why, as its report records it: the initiator the API server authenticated, the host, the
//! tool's version and commit, the drill file's digest, the change record and the approver.

use serde::{Deserialize, Serialize};

use crate::cluster::initiator::Initiator;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// As the API server authenticated the run's requests (a SelfSubjectReview).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator: Option<Initiator>,
    /// Why the initiator is not known: the review was refused or not served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator_unknown: Option<String>,
    pub host: String,
    pub tool_version: String,
    pub git_commit: String,
    /// sha256 of the drill file as it ran (before secret references were masked in the run directory's copy).
    pub drill_sha256: String,
    /// The change record the run was approved under (`--change`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
}

/// Said where a report shows a value that was not recorded.
pub const NOT_RECORDED: &str = "not recorded";

impl Provenance {
    /// The initiator in one line, or why it is unknown.
    pub fn initiator_line(&self) -> String {
        match (&self.initiator, &self.initiator_unknown) {
            (Some(i), _) => i.describe(),
            (None, Some(why)) => format!("unknown: {why}"),
            (None, None) => NOT_RECORDED.into(),
        }
    }

    /// The rows every human format shows, in order: (label, value).
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "none given".into());
        vec![
            ("Initiated by", self.initiator_line()),
            ("Change", or_none(&self.change)),
            ("Approved by", or_none(&self.approved_by)),
            ("Host", self.host.clone()),
            ("Tool", format!("hybrid-drill {} (commit {})", self.tool_version, self.git_commit)),
            ("Drill file sha256", self.drill_sha256.clone()),
        ]
    }
}

/// The run directory's copy of who ran it and why, with the cluster it ran against: written before the first change,
/// so that a run that crashes keeps its audit record.
pub const PROVENANCE_FILE: &str = "provenance.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub drill: String,
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The cluster as the run identified it (its kube-system namespace's UID), as in `cluster.json`.
    pub cluster: crate::cluster::ObservedCluster,
}

impl RunRecord {
    pub fn write(&self, run_dir: &std::path::Path) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(run_dir.join(PROVENANCE_FILE), json + "\n")
    }

    /// The record a run wrote; `None` for a run made before runs wrote one, or an unreadable file.
    pub fn read(run_dir: &std::path::Path) -> Option<RunRecord> {
        serde_json::from_slice(&std::fs::read(run_dir.join(PROVENANCE_FILE)).ok()?).ok()
    }
}
