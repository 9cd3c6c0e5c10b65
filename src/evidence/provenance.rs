//! Gathering a run's provenance: the initiator from the API server, this host, this build, the drill file's digest,
//! and the change and approver the run was given.

use crate::cluster::Cluster;
use crate::cluster::lease::this_host;
use crate::drill::LoadedDrill;
use crate::report::provenance::Provenance;

/// The git commit this binary was built from (build.rs).
pub const GIT_COMMIT: &str = match option_env!("HYBRID_DRILL_GIT_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

/// The change record and approver a run was given (`--change`, `--approved-by`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approval {
    pub change: Option<String>,
    pub approved_by: Option<String>,
}

impl Approval {
    /// The flags the drill requires that this approval lacks; empty when it may run.
    pub fn missing(&self, loaded: &LoadedDrill) -> Vec<&'static str> {
        loaded.drill.spec.evidence.missing(self.change.as_deref(), self.approved_by.as_deref())
    }
}

/// What the run knows without asking the cluster.
pub fn local(loaded: &LoadedDrill, approval: &Approval) -> Provenance {
    Provenance {
        initiator: None,
        initiator_unknown: None,
        host: this_host(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: GIT_COMMIT.into(),
        drill_sha256: super::digest::sha256_hex(loaded.source.as_bytes()),
        change: approval.change.clone(),
        approved_by: approval.approved_by.clone(),
    }
}

/// The provenance of a run against `cluster`: the initiator is the API server's answer; a refused or unserved
/// review is recorded as such, never a failed drill (Kubernetes before 1.28 has no SelfSubjectReview).
pub async fn gather(cluster: &Cluster, loaded: &LoadedDrill, approval: &Approval) -> Provenance {
    let mut provenance = local(loaded, approval);
    match cluster.initiator().await {
        Ok(initiator) => provenance.initiator = Some(initiator),
        Err(e) => {
            provenance.initiator_unknown = Some(format!(
                "the API server did not answer a SelfSubjectReview ({}); grant create on \
                 authentication.k8s.io selfsubjectreviews (deploy/clusterrole.yaml)",
                crate::cluster::first_line(&e.to_string())
            ))
        }
    }
    provenance
}
