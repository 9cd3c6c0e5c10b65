//! `hybrid-drill status`: what drills left behind or are still doing, found by reading only — the drill lock's
//! holder, runs with a journal and no end, objects in the cluster carrying a run's marks, and fallback NodeClaims an
//! unfinished run saw created that still exist. Every read goes through the `Reader`'s client, which refuses writes.

mod render;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use crate::cluster::karpenter::NodeClaim;
use crate::cluster::lease::{Holder, LeaseRef, this_host};
use crate::cluster::{Reader, first_line};
use crate::safety::journal;
use crate::timeline::{self, Event};

pub use crate::record::{find_journals, run_id_of};
pub use render::{json, text};

/// Everything `status` found.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub context: String,
    pub server: String,
    pub locks: Vec<LockState>,
    pub runs: Vec<UnfinishedRun>,
    /// What `recover` would undo from the marks in the cluster, one line each.
    pub marked: Vec<String>,
    pub leftovers: Vec<Leftover>,
}

impl Status {
    /// Nothing held, outstanding, marked or left over.
    pub fn clean(&self) -> bool {
        self.locks.iter().all(|l| l.holder.is_none())
            && self.runs.iter().all(|r| !r.dirty())
            && self.marked.is_empty()
            && self.leftovers.is_empty()
    }
}

/// One drill lock as read.
#[derive(Debug, Clone)]
pub struct LockState {
    pub lease: LeaseRef,
    pub holder: Option<Holder>,
    /// The holder's own renew time is within its duration of this machine's clock (clocks may differ: a hint).
    pub renewing: bool,
    /// The holder ran on this host and its process is gone.
    pub process_gone: bool,
}

/// A run directory with a journal and no end.
#[derive(Debug, Clone)]
pub struct UnfinishedRun {
    pub dir: PathBuf,
    pub run_id: Option<String>,
    pub started: Option<DateTime<Utc>>,
    /// What its journal still has to undo, one line each.
    pub outstanding: Vec<String>,
    /// The journal could not be read: why.
    pub unreadable: Option<String>,
    /// `running` while a live process renews its drill lock; else what every command calls a crashed run
    /// (`crashed; not yet recovered`, or restored by recover and when).
    pub state: String,
}

impl UnfinishedRun {
    /// Something of it is left to undo (or cannot be known).
    pub fn dirty(&self) -> bool {
        !self.outstanding.is_empty() || self.unreadable.is_some()
    }
}

/// A cluster object a run caused that is still there.
#[derive(Debug, Clone)]
pub struct Leftover {
    pub kind: &'static str,
    pub name: String,
    pub run_dir: PathBuf,
}

/// Why `status` could not finish its reads.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("cannot read the drill lock ({lease}): {}", first_line(&.error.to_string()))]
    Lock { lease: String, error: kube::Error },
    #[error("cannot list the objects runs mark: {0}")]
    Marks(String),
    #[error("cannot read NodeClaim {name}: {}", first_line(&.error.to_string()))]
    NodeClaim { name: String, error: kube::Error },
}

/// Reads everything `status` reports: the runs under `reports_dir`, the lock `lease` (and every unfinished run's
/// own), the marks and the NodeClaims those runs saw created.
pub async fn gather(reader: &Reader, reports_dir: &Path, lease: LeaseRef) -> Result<Status, StatusError> {
    let found = unfinished_runs(reports_dir);
    let mut leases = vec![lease];
    for (_, run) in &found {
        let own = crate::drill::load(&run.dir.join("drill.yaml")).map(|l| l.drill.spec.lock).ok();
        if let Some(own) = own.filter(|own| !leases.contains(own)) {
            leases.push(own);
        }
    }
    let mut locks = Vec::new();
    for lease in leases {
        locks.push(read_lock(reader, lease).await?);
    }
    let marked =
        crate::safety::marked_changes(reader.client(), None).await.map_err(|e| StatusError::Marks(e.to_string()))?;
    let mut leftovers = Vec::new();
    for (claims, run) in &found {
        leftovers.extend(still_there(reader, claims, &run.dir).await?);
    }
    let runs = found
        .into_iter()
        .map(|(_, mut run)| {
            if locks.iter().any(|l| l.renewing && !l.process_gone && holds(l, &run)) {
                run.state = "running".into();
            }
            run
        })
        .filter(|run| run.dirty() || locks.iter().any(|l| holds(l, run)))
        .collect();
    Ok(Status {
        context: reader.context().to_string(),
        server: reader.server().to_string(),
        locks,
        runs,
        marked,
        leftovers,
    })
}

/// Whether `lock` is held by `run`.
fn holds(lock: &LockState, run: &UnfinishedRun) -> bool {
    lock.holder.as_ref().is_some_and(|h| run.run_id.as_deref() == Some(h.identity.as_str()))
}

async fn read_lock(reader: &Reader, lease: LeaseRef) -> Result<LockState, StatusError> {
    let api: Api<Lease> = Api::namespaced(reader.client().clone(), &lease.namespace);
    let found =
        api.get_opt(&lease.name).await.map_err(|error| StatusError::Lock { lease: lease.to_string(), error })?;
    let holder = found.as_ref().and_then(Holder::of);
    let renewing = holder.as_ref().is_some_and(|h| {
        let age = h.renewed.map(|t| (Utc::now() - t).to_std().unwrap_or_default());
        age.is_some_and(|age| age < h.duration)
    });
    let process_gone = holder.as_ref().is_some_and(|h| h.process_gone(&this_host()));
    Ok(LockState { lease, holder, renewing, process_gone })
}

/// The NodeClaims a run's timeline saw created and not deleted that the cluster still has.
async fn still_there(reader: &Reader, claims: &[String], run_dir: &Path) -> Result<Vec<Leftover>, StatusError> {
    let api: Api<NodeClaim> = Api::all(reader.client().clone());
    let mut left = Vec::new();
    for name in claims {
        match api.get_opt(name).await {
            Ok(Some(_)) => {
                left.push(Leftover { kind: "NodeClaim", name: name.clone(), run_dir: run_dir.to_path_buf() })
            }
            Ok(None) => {}
            // Karpenter not installed here: no run created one.
            Err(e) if crate::cluster::is_not_found(&e) => {}
            Err(error) => return Err(StatusError::NodeClaim { name: name.clone(), error }),
        }
    }
    Ok(left)
}

/// Every run directory under `reports_dir` with a journal and no end (no `drill finished` in its timeline), with the
/// NodeClaims its timeline saw created and not deleted.
fn unfinished_runs(reports_dir: &Path) -> Vec<(Vec<String>, UnfinishedRun)> {
    let mut found = Vec::new();
    for journal_path in find_journals(reports_dir) {
        let Some(dir) = journal_path.parent() else { continue };
        let observations = timeline::read(&dir.join("timeline.jsonl")).unwrap_or_default();
        if observations.iter().any(|o| matches!(o.event, Event::DrillFinished { .. })) {
            continue;
        }
        let (outstanding, unreadable) = match journal::read(&journal_path) {
            Ok(contents) => {
                let left = journal::outstanding(&contents.entries);
                (left.iter().map(|(_, m)| describe(m)).collect(), None)
            }
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let mut claims: Vec<String> = Vec::new();
        for o in &observations {
            match &o.event {
                Event::NodeClaimCreated { nodeclaim } => claims.push(nodeclaim.clone()),
                Event::NodeClaimDeleted { nodeclaim } => claims.retain(|c| c != nodeclaim),
                _ => {}
            }
        }
        let (run_id, started) = observations
            .iter()
            .find_map(|o| match &o.event {
                Event::DrillStarted { run_id, .. } => Some((Some(run_id.clone()), Some(o.received))),
                _ => None,
            })
            .unwrap_or((None, None));
        let state = crate::report::crashed::verdict(crate::report::crashed::recovery(dir).as_ref());
        let run = UnfinishedRun { dir: dir.to_path_buf(), run_id, started, outstanding, unreadable, state };
        found.push((claims, run));
    }
    found
}

fn describe(mutation: &journal::Mutation) -> String {
    let (action, target) = mutation.describe();
    format!("{action} {target}")
}

/// `NAMESPACE/NAME` as the lock's Lease, with the default duration.
pub fn parse_lease(text: &str) -> Result<LeaseRef, NotALease> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(LeaseRef { namespace: namespace.into(), name: name.into(), ..LeaseRef::default() })
        }
        _ => Err(NotALease(text.into())),
    }
}

/// A `--lock` that does not name a Lease.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not NAMESPACE/NAME, e.g. kube-system/hybrid-drill")]
pub struct NotALease(String);

#[cfg(test)]
mod tests;
