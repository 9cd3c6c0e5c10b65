//! One drill at a time: taking, renewing and releasing the drill lock (a coordination.k8s.io/v1 Lease, see
//! `cluster::lease`). A run's taking and its release are journalled through the ledger (`Mutator::take_lock`); the
//! renewals are not (they move only the renew time of a Lease the journal already holds), and no rollback undoes the
//! lock, which the run still holds while it restores. `recover` holds it too, taking over the lease of a run it
//! recovers once that run's process is gone.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;

use super::ledger::{Transient, transient_retry};
use super::requests::FIELD_MANAGER;
use crate::cluster::lease::{Claimant, Holder, Holding, LeaseRef, judge, micro_time};
use crate::cluster::{Cluster, first_line};

/// The verbs the lock uses on leases in its namespace (create, and get and update on its one Lease);
/// deploy/lock-role.yaml must grant exactly these.
pub const LOCK_PERMISSIONS: &[(&str, &str, &[&str])] = &[
    ("coordination.k8s.io", "leases", &["create"]),
    ("coordination.k8s.io", "leases[hybrid-drill]", &["get", "update"]),
];

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another drill holds the cluster's drill lock ({lease}): {holder}; nothing was touched; {hint}")]
    Held { lease: String, holder: String, hint: String },
    /// The API server's answer, kept whole (a 403 wants a grant, a 404 a namespace, a timeout a retry); the message
    /// shows its first line and the fix for it.
    #[error("cannot take the drill lock ({lease}): {}; {fix}", first_line(&.error.to_string()))]
    Api { lease: String, error: kube::Error, fix: String },
    #[error("cannot take the drill lock ({lease}): {cause}; the journal must be writable before the lock is taken")]
    Unjournalled { lease: String, cause: Box<super::error::MutationError> },
}

impl LockError {
    /// Whether another holds the lock (worth retrying later), rather than the lock being out of reach.
    pub fn is_held(&self) -> bool {
        matches!(self, LockError::Held { .. })
    }
}

/// Taking the lock is tried as a whole again (`take`'s own loop), never by the ledger's retry.
impl Transient for LockError {
    fn is_transient(&self) -> bool {
        false
    }
}

/// Who asks for the lock.
#[derive(Debug, Clone, Copy)]
pub enum Claim<'a> {
    /// A run: it takes a free lock, or one whose holder stopped renewing for its duration.
    Run,
    /// `recover` of these runs: it also takes at once the lock of one of them whose process is known to be gone.
    Recover { runs: &'a [String] },
}

/// The lock, held: renewed in the background until released.
pub struct HeldLock {
    lease: LeaseRef,
    identity: String,
    api: Api<Lease>,
    current: Arc<Mutex<Lease>>,
    renewal: JoinHandle<()>,
    lost: watch::Receiver<Option<String>>,
    /// Set when the lock was taken over from a holder that stopped renewing: a warning for the report.
    pub took_over: Option<String>,
}

/// Whether `claim` may take the lock as `holding` shows it: `Ok(Some(warning))` when it takes it over from a holder.
fn decide(lease: &LeaseRef, holding: &Holding, claim: Claim<'_>, host: &str) -> Result<Option<String>, LockError> {
    let now = Utc::now();
    match holding {
        Holding::Free => Ok(None),
        Holding::Expired(holder) => Ok(Some(format!(
            "took over the drill lock ({lease}) from {}: its holder stopped renewing it (duration {})",
            holder.describe(now),
            humantime::format_duration(holder.duration)
        ))),
        Holding::Held(holder) if recovering(claim, holder) && holder.process_gone(host) => Ok(Some(format!(
            "took over the drill lock ({lease}) from {}, the run being recovered, whose process is gone",
            holder.describe(now)
        ))),
        Holding::Held(holder) => Err(LockError::Held {
            lease: lease.to_string(),
            holder: holder.describe(now),
            hint: refusal_hint(holder, host),
        }),
    }
}

fn recovering(claim: Claim<'_>, holder: &Holder) -> bool {
    matches!(claim, Claim::Recover { runs } if runs.contains(&holder.identity))
}

fn refusal_hint(holder: &Holder, host: &str) -> String {
    let expires = holder.expires().map_or("(unknown)".into(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    match &holder.run_dir {
        Some(dir) if holder.process_gone(host) => format!(
            "its process is gone: restore what it left with `hybrid-drill recover {dir}` (which takes over its lock), or \
             retry after {expires}, when its lock falls free"
        ),
        _ => format!(
            "retry once it finishes; if it died, its lock falls free at {expires}, its duration after its last renewal"
        ),
    }
}

fn api_error(lease: &LeaseRef, e: kube::Error) -> LockError {
    let fix = match &e {
        kube::Error::Api(s) if s.code == 403 => {
            format!("grant get, create and update on leases in namespace {} (deploy/lock-role.yaml)", lease.namespace)
        }
        kube::Error::Api(s) if s.code == 404 => {
            format!("create the namespace {} or set spec.lock.namespace to one that exists", lease.namespace)
        }
        _ => "check the cluster is reachable and retry".into(),
    };
    LockError::Api { lease: lease.to_string(), error: e, fix }
}

fn holder_of(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
}

/// Refuses, reading only, when the lock is held by another: said before anything else happens (a confirmation).
pub async fn check(cluster: &Cluster, lease: &LeaseRef, claim: Claim<'_>, host: &str) -> Result<(), LockError> {
    let api: Api<Lease> = Api::namespaced(cluster.client.clone(), &lease.namespace);
    let found = transient_retry(|| api.get_opt(&lease.name)).await.map_err(|e| api_error(lease, e))?;
    decide(lease, &judge(found.as_ref(), Utc::now()), claim, host).map(drop)
}

/// Takes the lock for `claimant` (a Lease created, or replaced at the resource version it was judged at, so two
/// claimants never both win) and starts renewing it.
pub async fn take(
    cluster: &Cluster,
    lease: &LeaseRef,
    claimant: &Claimant,
    claim: Claim<'_>,
) -> Result<HeldLock, LockError> {
    let api: Api<Lease> = Api::namespaced(cluster.client.clone(), &lease.namespace);
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    let mut conflicts = 0;
    loop {
        let found = transient_retry(|| api.get_opt(&lease.name)).await.map_err(|e| api_error(lease, e))?;
        let now = Utc::now();
        let took_over = decide(lease, &judge(found.as_ref(), now), claim, &claimant.host)?;
        let transitions = found.as_ref().and_then(|l| l.spec.as_ref()).and_then(|s| s.lease_transitions).unwrap_or(0)
            + i32::from(found.as_ref().and_then(holder_of).is_some_and(|h| !h.is_empty()));
        let mut wanted = claimant.lease(lease, now, now, transitions);
        let written = match &found {
            None => api.create(&params, &wanted).await,
            Some(old) => {
                wanted.metadata.resource_version = old.metadata.resource_version.clone();
                api.replace(&lease.name, &params, &wanted).await
            }
        };
        match written {
            Ok(held) => return Ok(HeldLock::start(lease.clone(), claimant.identity.clone(), api, held, took_over)),
            // Another claimant wrote it first: judge again what it wrote.
            Err(kube::Error::Api(s)) if s.code == 409 && conflicts < 3 => conflicts += 1,
            Err(e) if e.is_transient() && conflicts < 3 => conflicts += 1,
            Err(e) => return Err(api_error(lease, e)),
        }
    }
}

impl HeldLock {
    fn start(lease: LeaseRef, identity: String, api: Api<Lease>, held: Lease, took_over: Option<String>) -> HeldLock {
        let current = Arc::new(Mutex::new(held));
        let (tell, lost) = watch::channel(None);
        let renewal = tokio::spawn(renew(lease.clone(), identity.clone(), api.clone(), current.clone(), tell));
        HeldLock { lease, identity, api, current, renewal, lost, took_over }
    }

    pub fn lease(&self) -> &LeaseRef {
        &self.lease
    }

    /// Says why, once the lock is lost (another holder took it over, or it was deleted).
    pub fn lost(&self) -> watch::Receiver<Option<String>> {
        self.lost.clone()
    }

    /// Stops renewing and frees the Lease if it is still this holder's; another's is left alone. Safe to repeat.
    pub async fn release(&self) -> Result<(), kube::Error> {
        // A renewal cancelled in flight may have landed: `release` reads the Lease again on a conflict.
        self.renewal.abort();
        let last = self.current.lock().await.clone();
        release(&self.api, &self.lease, &self.identity, Some(last)).await
    }
}

/// Frees the Lease if `identity` holds it (judged on `known`, else on a fresh read): no holder, no annotations; a
/// Lease another holds or that is gone is left alone.
pub(super) async fn release(
    api: &Api<Lease>,
    lease: &LeaseRef,
    identity: &str,
    known: Option<Lease>,
) -> Result<(), kube::Error> {
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    let mut current = known;
    for _ in 0..3 {
        let found = match current.take() {
            Some(lease) => Some(lease),
            None => transient_retry(|| api.get_opt(&lease.name)).await?,
        };
        let Some(mut found) = found.filter(|l| holder_of(l) == Some(identity)) else { return Ok(()) };
        found.metadata.annotations = None;
        if let Some(spec) = found.spec.as_mut() {
            spec.holder_identity = None;
            spec.renew_time = Some(micro_time(Utc::now()));
        }
        match api.replace(&lease.name, &params, &found).await {
            Ok(_) => return Ok(()),
            // Changed since it was read (a renewal in flight): read it again.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Renews every third of the duration; a renewal that fails for a dropped connection is tried at the next tick. A
/// Lease found in another's hands (or gone) is lost: said once, then renewing stops.
async fn renew(
    lease: LeaseRef,
    identity: String,
    api: Api<Lease>,
    current: Arc<Mutex<Lease>>,
    lost: watch::Sender<Option<String>>,
) {
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    let every = lease.renew_every().max(Duration::from_millis(500));
    loop {
        tokio::time::sleep(every).await;
        let mut held = current.lock().await;
        let mut next = held.clone();
        if let Some(spec) = next.spec.as_mut() {
            spec.renew_time = Some(micro_time(Utc::now()));
        }
        match api.replace(&lease.name, &params, &next).await {
            Ok(renewed) => *held = renewed,
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => match api.get_opt(&lease.name).await {
                Ok(Some(found)) if holder_of(&found) == Some(identity.as_str()) => *held = found,
                Ok(found) => {
                    let now = Utc::now();
                    let by = match judge(found.as_ref(), now) {
                        Holding::Held(h) | Holding::Expired(h) => h.describe(now),
                        Holding::Free => "it was released or deleted by someone else".into(),
                    };
                    let _ = lost.send(Some(format!("lost the drill lock ({lease}): {by}")));
                    return;
                }
                Err(e) => tracing::warn!("cannot read the drill lock ({lease}): {e}; retrying"),
            },
            Err(e) => tracing::warn!("cannot renew the drill lock ({lease}): {e}; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::safety::tests::{Answer, Seen, serve, status};

    #[test]
    fn the_committed_lock_role_grants_exactly_what_the_lock_uses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/lock-role.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let role = text.split("\n---\n").next().unwrap();
        let role = crate::drill::parse::parse_document(role).unwrap().value;
        assert_eq!(role["metadata"]["namespace"], crate::cluster::lease::DEFAULT_NAMESPACE);
        assert_eq!(crate::cluster::granted_by(&role), crate::cluster::used_by(LOCK_PERMISSIONS));
        let named = format!("leases[{}]", crate::cluster::lease::DEFAULT_NAME);
        assert!(LOCK_PERMISSIONS.iter().any(|(_, r, _)| *r == named));
    }

    fn lease_of(holder: &str, renewed: chrono::DateTime<Utc>, pid: u32) -> Value {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "hybrid-drill", "namespace": "kube-system", "resourceVersion": "7", "annotations": {
                "hybrid-drill.io/run-dir": "/reports/d/20261203T190000Z", "hybrid-drill.io/host": "this-host",
                "hybrid-drill.io/pid": pid.to_string()}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60,
                "acquireTime": micro(renewed - chrono::Duration::seconds(300)), "renewTime": micro(renewed),
                "leaseTransitions": 1}})
    }

    fn micro(t: chrono::DateTime<Utc>) -> String {
        t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    }

    fn claimant() -> Claimant {
        Claimant { identity: "run-b".into(), run_dir: "/reports/d/b".into(), host: "this-host".into(), pid: 1 }
    }

    /// Plays an API server holding `existing` (none: no Lease); every write is answered with what was written.
    async fn take_against(existing: Option<Value>, claim: Claim<'_>) -> (Result<Option<String>, LockError>, Vec<Seen>) {
        let (cluster, handle) = Cluster::mock();
        let server = serve(handle, move |r: &Seen| match (r.method.as_str(), &existing) {
            ("GET", Some(lease)) => Answer::Json(200, lease.clone()),
            ("GET", None) => status(404, "NotFound"),
            (_, _) => Answer::Json(201, r.body.clone()),
        });
        let result = take(&cluster, &LeaseRef::default(), &claimant(), claim).await;
        let result = match result {
            Ok(lock) => {
                lock.renewal.abort();
                Ok(lock.took_over.clone())
            }
            Err(e) => Err(e),
        };
        drop(cluster);
        (result, server.await.unwrap())
    }

    #[tokio::test]
    async fn a_free_lock_is_created_with_who_holds_it_since_when_and_where() {
        let (result, seen) = take_against(None, Claim::Run).await;
        assert!(matches!(result, Ok(None)), "{result:?}");
        let methods: Vec<&str> = seen.iter().map(|s| s.method.as_str()).collect();
        assert_eq!(methods, ["GET", "POST"]);
        assert!(
            seen[1].uri.starts_with("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?"),
            "{}",
            seen[1].uri
        );
        let body = &seen[1].body;
        assert_eq!(body["spec"]["holderIdentity"], "run-b");
        assert_eq!(body["spec"]["leaseDurationSeconds"], 60);
        assert_eq!(body["metadata"]["annotations"]["hybrid-drill.io/run-dir"], "/reports/d/b");
    }

    #[tokio::test]
    async fn a_held_lock_refuses_a_second_run_with_its_holder_and_writes_nothing() {
        let held = lease_of("run-a", Utc::now(), u32::MAX - 1);
        let (result, seen) = take_against(Some(held), Claim::Run).await;
        let message = result.unwrap_err().to_string();
        assert!(
            message.starts_with(
                "another drill holds the cluster's drill lock (Lease kube-system/hybrid-drill): run-a since "
            ),
            "{message}"
        );
        assert!(message.contains("run directory /reports/d/20261203T190000Z"), "{message}");
        assert!(message.contains("recover /reports/d/20261203T190000Z"), "its process is gone here: {message}");
        assert!(!message.contains('\n'));
        assert!(seen.iter().all(|s| s.method == "GET"), "{seen:?}");
    }

    #[tokio::test]
    async fn an_expired_lock_is_taken_over_at_its_resource_version_with_a_warning() {
        let stale = lease_of("run-a", Utc::now() - chrono::Duration::seconds(61), std::process::id());
        let (result, seen) = take_against(Some(stale), Claim::Run).await;
        let warning = result.unwrap().expect("a takeover warning");
        assert!(
            warning.starts_with("took over the drill lock (Lease kube-system/hybrid-drill) from run-a since"),
            "{warning}"
        );
        assert_eq!(seen[1].method, "PUT");
        assert_eq!(seen[1].body["metadata"]["resourceVersion"], "7");
        assert_eq!(seen[1].body["spec"]["leaseTransitions"], 2);
    }

    #[tokio::test]
    async fn recover_takes_over_at_once_the_lock_of_the_dead_run_it_recovers_and_no_other() {
        let dead = lease_of("run-a", Utc::now(), u32::MAX - 1);
        let runs = ["run-a".to_string()];
        let (result, seen) = take_against(Some(dead.clone()), Claim::Recover { runs: &runs }).await;
        assert!(result.unwrap().unwrap().contains("the run being recovered, whose process is gone"));
        assert_eq!(seen[1].method, "PUT");
        let others = ["run-z".to_string()];
        let (result, _) = take_against(Some(dead), Claim::Recover { runs: &others }).await;
        assert!(result.is_err());
        let alive = lease_of("run-a", Utc::now(), std::process::id());
        let (result, _) = take_against(Some(alive), Claim::Recover { runs: &runs }).await;
        assert!(result.is_err(), "a live run's lock is never taken");
    }

    #[tokio::test]
    async fn release_frees_only_its_own_lease() {
        let (cluster, handle) = Cluster::mock();
        let mine = lease_of("run-b", Utc::now(), 1);
        let server = serve(handle, move |r: &Seen| match r.method.as_str() {
            "GET" => Answer::Json(200, mine.clone()),
            _ => Answer::Json(200, r.body.clone()),
        });
        let api: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-system");
        release(&api, &LeaseRef::default(), "run-b", None).await.unwrap();
        release(&api, &LeaseRef::default(), "run-other", None).await.unwrap();
        drop((api, cluster));
        let seen = server.await.unwrap();
        let methods: Vec<&str> = seen.iter().map(|s| s.method.as_str()).collect();
        assert_eq!(methods, ["GET", "PUT", "GET"], "another's lease is left alone");
        assert!(seen[1].body["spec"]["holderIdentity"].is_null());
        assert!(seen[1].body["metadata"]["annotations"].is_null());
    }
}
