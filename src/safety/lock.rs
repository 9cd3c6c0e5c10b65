//! One drill at a time: taking, renewing and releasing the drill lock (a coordination.k8s.io/v1 Lease, see
//! `cluster::lease`). A run's taking and its release are journalled through the ledger (`Mutator::take_lock`); the
//! renewals are not (they move only the renew time of a Lease the journal already holds), and no rollback undoes the
//! lock, which the run still holds while it restores. A holder that cannot prove it still holds the lock (no renewal
//! succeeded within the renew deadline) is told so and stops acting. `recover` holds it too, taking over the lease
//! of a run it recovers once that run's process is gone.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::ledger::{Transient, transient_retry};
use super::requests::FIELD_MANAGER;
use crate::cluster::lease::{Claimant, Holder, Holding, LeaseRef, Observer, micro_time};
use crate::cluster::{Cluster, first_line};

/// The verbs the lock uses on leases in its namespace (create, and get and update on its one Lease; list and watch on
/// it by name, for the emergency stop); deploy/lock-role.yaml must grant exactly these.
pub const LOCK_PERMISSIONS: &[(&str, &str, &[&str])] = &[
    ("coordination.k8s.io", "leases", &["create"]),
    ("coordination.k8s.io", "leases[hybrid-drill]", &["get", "update", "list", "watch"]),
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

/// What a claimant does with the lock as its observer judges it.
enum Decision {
    /// Take it (with a warning when taking it over from a holder).
    Take(Option<String>),
    /// Read it again within this long: its holder has not been seen renewing yet.
    Watch(Duration),
}

/// Whether `claim` may take the lock as `holding` shows it: taken (with a warning when taken over from a holder),
/// refused once its holder is seen renewing it, else watched until one or the other.
fn decide(lease: &LeaseRef, holding: Holding, claim: Claim<'_>, host: &str) -> Result<Decision, LockError> {
    match holding {
        Holding::Free => Ok(Decision::Take(None)),
        Holding::Expired(holder) => Ok(Decision::Take(Some(format!(
            "took over the drill lock ({lease}) from {}: its holder stopped renewing it (its record unchanged for its \
             duration, {}, as watched here)",
            holder.describe(),
            humantime::format_duration(holder.duration)
        )))),
        Holding::Held { holder, .. } if recovering(claim, &holder) && holder.process_gone(host) => {
            Ok(Decision::Take(Some(format!(
                "took over the drill lock ({lease}) from {}, the run being recovered, whose process is gone",
                holder.describe()
            ))))
        }
        Holding::Held { holder, renewing: true, .. } => Err(LockError::Held {
            lease: lease.to_string(),
            holder: holder.describe(),
            hint: refusal_hint(&holder, host),
        }),
        Holding::Held { free_in, .. } => Ok(Decision::Watch(free_in)),
    }
}

fn recovering(claim: Claim<'_>, holder: &Holder) -> bool {
    matches!(claim, Claim::Recover { runs } if runs.contains(&holder.identity))
}

fn refusal_hint(holder: &Holder, host: &str) -> String {
    let duration = humantime::format_duration(holder.duration);
    match &holder.run_dir {
        Some(dir) if holder.process_gone(host) => format!(
            "its process is gone: restore what it left with `hybrid-drill recover {dir}` (which takes over its lock), or \
             retry once its lock falls free, when it has gone unrenewed for its duration ({duration})"
        ),
        _ => format!(
            "retry once it finishes; if it died, its lock falls free once it has gone unrenewed for its duration \
             ({duration})"
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

/// Reads the lock until `claim` may take it, or is refused: a holder is watched (a read every retry period) until
/// it is seen renewing (refused) or its record has gone unchanged for its duration (taken over). `watching` is told
/// once when a wait starts. The Lease as last read, and the takeover warning, if any.
async fn observe(
    api: &Api<Lease>,
    lease: &LeaseRef,
    claim: Claim<'_>,
    host: &str,
    observer: &mut Observer,
    watching: &(dyn Fn(&str) + Sync),
) -> Result<(Option<Lease>, Option<String>), LockError> {
    let mut told = false;
    loop {
        let found = transient_retry(|| api.get_opt(&lease.name)).await.map_err(|e| api_error(lease, e))?;
        let holding = observer.observe(found.as_ref(), Instant::now());
        let holder = match &holding {
            Holding::Held { holder, .. } => Some(holder.clone()),
            _ => None,
        };
        match decide(lease, holding, claim, host)? {
            Decision::Take(warning) => return Ok((found, warning)),
            Decision::Watch(free_in) => {
                if let (false, Some(holder)) = (told, holder) {
                    told = true;
                    watching(&format!(
                        "the drill lock ({lease}) is held by {}: watching whether its holder still renews it (it falls \
                         free if unrenewed for {})",
                        holder.describe(),
                        humantime::format_duration(free_in)
                    ));
                }
                let every = LeaseRef { duration: free_in, ..lease.clone() }.retry_every();
                tokio::time::sleep(every.min(free_in)).await;
            }
        }
    }
}

/// Refuses, reading only, when the lock is held by another: said before anything else happens (a confirmation).
/// The observer keeps what it saw for the taking that follows.
pub async fn check(
    cluster: &Cluster,
    lease: &LeaseRef,
    claim: Claim<'_>,
    host: &str,
    observer: &mut Observer,
    watching: &(dyn Fn(&str) + Sync),
) -> Result<(), LockError> {
    let api: Api<Lease> = Api::namespaced(cluster.client.clone(), &lease.namespace);
    observe(&api, lease, claim, host, observer, watching).await.map(drop)
}

/// Takes the lock for `claimant` (a Lease created, or replaced at the resource version it was judged at, so two
/// claimants never both win) and starts renewing it. `observer` holds what an earlier `check` saw.
pub async fn take(
    cluster: &Cluster,
    lease: &LeaseRef,
    claimant: &Claimant,
    claim: Claim<'_>,
    mut observer: Observer,
) -> Result<HeldLock, LockError> {
    let api: Api<Lease> = Api::namespaced(cluster.client.clone(), &lease.namespace);
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    let mut conflicts = 0;
    let quiet = |_: &str| {};
    loop {
        let (found, took_over) = observe(&api, lease, claim, &claimant.host, &mut observer, &quiet).await?;
        let now = Utc::now();
        let transitions = found.as_ref().and_then(|l| l.spec.as_ref()).and_then(|s| s.lease_transitions).unwrap_or(0)
            + i32::from(found.as_ref().and_then(holder_of).is_some_and(|h| !h.is_empty()));
        let mut wanted = claimant.lease(lease, now, now, transitions);
        // The renew deadline counts from here: the Lease written cannot be older than this.
        let sent = Instant::now();
        let written = match &found {
            None => api.create(&params, &wanted).await,
            Some(old) => {
                wanted.metadata.resource_version = old.metadata.resource_version.clone();
                api.replace(&lease.name, &params, &wanted).await
            }
        };
        match written {
            Ok(held) => {
                return Ok(HeldLock::start(lease.clone(), claimant.identity.clone(), api, held, sent, took_over));
            }
            // Another claimant wrote it first: judge again what it wrote.
            Err(kube::Error::Api(s)) if s.code == 409 && conflicts < 3 => conflicts += 1,
            Err(e) if e.is_transient() && conflicts < 3 => conflicts += 1,
            Err(e) => return Err(api_error(lease, e)),
        }
    }
}

impl HeldLock {
    fn start(
        lease: LeaseRef,
        identity: String,
        api: Api<Lease>,
        held: Lease,
        sent: Instant,
        took_over: Option<String>,
    ) -> HeldLock {
        let current = Arc::new(Mutex::new(held));
        let (tell, lost) = watch::channel(None);
        let renewer =
            Renewer { lease: lease.clone(), identity: identity.clone(), api: api.clone(), current: current.clone() };
        let renewal = tokio::spawn(renewer.run(sent, tell));
        HeldLock { lease, identity, api, current, renewal, lost, took_over }
    }

    pub fn lease(&self) -> &LeaseRef {
        &self.lease
    }

    /// Says why, once the lock is lost (another holder took it over, or it was deleted) or can no longer be proven
    /// held (no renewal succeeded within the renew deadline).
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

/// What one renewal came to.
enum Renewal {
    Renewed,
    /// Another holds the Lease, or it is gone: why.
    Lost(String),
    /// No answer, or one that proves nothing: tried again.
    Failed(String),
}

/// The background renewal of a held lock.
struct Renewer {
    lease: LeaseRef,
    identity: String,
    api: Api<Lease>,
    current: Arc<Mutex<Lease>>,
}

impl Renewer {
    /// Renews every third of the duration, and after a failure every retry period, each attempt bounded by what is
    /// left of the renew deadline. Once no renewal has succeeded for the renew deadline (counted from when the last
    /// good one was sent, on the monotonic clock), the holder can no longer prove it holds the lock: said once, and
    /// renewing goes on (a renewal that lands still keeps others out while the run restores). A Lease found in
    /// another's hands (or gone) is lost: said, then renewing stops.
    async fn run(self, mut proven: Instant, lost: watch::Sender<Option<String>>) {
        let lease = &self.lease;
        let (every, retry, deadline) =
            (lease.renew_every().max(Duration::from_millis(500)), lease.retry_every(), lease.renew_deadline());
        let mut wait = every;
        let mut unproven = false;
        loop {
            tokio::time::sleep(wait).await;
            let sent = Instant::now();
            let left = (proven + deadline).saturating_duration_since(sent).max(retry);
            let outcome = match tokio::time::timeout(left, self.renew_once()).await {
                Ok(outcome) => outcome,
                Err(_) => Renewal::Failed(format!("no answer within {}", humantime::format_duration(left))),
            };
            match outcome {
                Renewal::Renewed => {
                    proven = sent;
                    wait = every;
                    continue;
                }
                Renewal::Lost(why) => {
                    let _ = lost.send(Some(why));
                    return;
                }
                Renewal::Failed(why) => {
                    tracing::warn!("cannot renew the drill lock ({lease}): {why}; retrying");
                    wait = retry;
                    if !unproven && Instant::now() >= proven + deadline {
                        unproven = true;
                        let _ = lost.send(Some(format!(
                            "cannot prove this run still holds the drill lock ({lease}): no renewal succeeded within \
                             its renew deadline of {} (last: {why}); another run may take it over {} after the last \
                             renewal",
                            humantime::format_duration(deadline),
                            humantime::format_duration(lease.duration)
                        )));
                    }
                }
            }
        }
    }

    /// One renewal: the held Lease written back with a new renew time, at the resource version last written.
    async fn renew_once(&self) -> Renewal {
        let (lease, api) = (&self.lease, &self.api);
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
        let mut held = self.current.lock().await;
        let mut next = held.clone();
        if let Some(spec) = next.spec.as_mut() {
            spec.renew_time = Some(micro_time(Utc::now()));
        }
        match api.replace(&lease.name, &params, &next).await {
            Ok(renewed) => {
                *held = renewed;
                Renewal::Renewed
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => match api.get_opt(&lease.name).await {
                // Still ours (a write of ours landed unseen): renewed at the next attempt, at this version.
                Ok(Some(found)) if holder_of(&found) == Some(self.identity.as_str()) => {
                    *held = found;
                    Renewal::Failed("the Lease changed since it was last written".into())
                }
                Ok(found) => {
                    let by = match found.as_ref().and_then(Holder::of) {
                        Some(holder) => holder.describe(),
                        None => "it was released or deleted by someone else".into(),
                    };
                    Renewal::Lost(format!("lost the drill lock ({lease}): {by}"))
                }
                Err(e) => Renewal::Failed(format!("cannot read it: {}", first_line(&e.to_string()))),
            },
            Err(e) => Renewal::Failed(first_line(&e.to_string())),
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
        let result = take(&cluster, &LeaseRef::default(), &claimant(), claim, Observer::default()).await;
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

    /// Plays an API server whose Lease is renewed by its holder every `renewals` reads (never when 0), with a renew
    /// time an hour behind this machine's clock.
    fn renewed_every(renewals: usize, pid: u32) -> impl FnMut(&Seen) -> Answer + Send + 'static {
        let mut reads: usize = 0;
        move |r: &Seen| match r.method.as_str() {
            "GET" => {
                reads += 1;
                let step = reads.checked_div(renewals).unwrap_or(0);
                let renewed = Utc::now() - chrono::Duration::hours(1) + chrono::Duration::seconds(step as i64);
                let renewed = if renewals == 0 { at_noon() } else { renewed };
                Answer::Json(200, lease_of("run-a", renewed, pid))
            }
            _ => Answer::Json(201, r.body.clone()),
        }
    }

    fn at_noon() -> chrono::DateTime<Utc> {
        chrono::DateTime::parse_from_rfc3339("2026-12-03T12:00:00Z").unwrap().with_timezone(&Utc)
    }

    async fn take_watching(
        answer: impl FnMut(&Seen) -> Answer + Send + 'static,
    ) -> (Result<Option<String>, LockError>, Vec<Seen>) {
        let (cluster, handle) = Cluster::mock();
        let server = serve(handle, answer);
        let result = take(&cluster, &LeaseRef::default(), &claimant(), Claim::Run, Observer::default()).await;
        let result = result.map(|lock| {
            lock.renewal.abort();
            lock.took_over.clone()
        });
        drop(cluster);
        (result, server.await.unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_seen_renewed_refuses_a_second_run_with_its_holder_and_writes_nothing_however_old_its_renew_time() {
        let started = Instant::now();
        let (result, seen) = take_watching(renewed_every(3, u32::MAX - 1)).await;
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
        assert!(started.elapsed() < Duration::from_secs(60), "refused once seen renewing, not after the duration");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_unchanged_for_its_duration_as_watched_here_is_taken_over_at_its_resource_version() {
        // Its renew time is hours away from this machine's clock, as a holder's skewed clock would write it: only the
        // record going unchanged for the duration, as watched here, lets it go.
        let started = Instant::now();
        let (result, seen) = take_watching(renewed_every(0, std::process::id())).await;
        let warning = result.unwrap().expect("a takeover warning");
        assert!(started.elapsed() >= Duration::from_secs(60), "taken over after {:?}", started.elapsed());
        assert!(
            warning.starts_with("took over the drill lock (Lease kube-system/hybrid-drill) from run-a since"),
            "{warning}"
        );
        let put = seen.iter().find(|s| s.method == "PUT").expect("a takeover");
        assert_eq!(put.body["metadata"]["resourceVersion"], "7");
        assert_eq!(put.body["spec"]["leaseTransitions"], 2);
    }

    #[tokio::test(start_paused = true)]
    async fn recover_takes_over_at_once_the_lock_of_the_dead_run_it_recovers_and_no_other() {
        let dead = lease_of("run-a", Utc::now(), u32::MAX - 1);
        let runs = ["run-a".to_string()];
        let (result, seen) = take_against(Some(dead), Claim::Recover { runs: &runs }).await;
        assert!(result.unwrap().unwrap().contains("the run being recovered, whose process is gone"));
        assert_eq!(seen[1].method, "PUT");
        assert!(refused_while_renewed(&["run-z".to_string()], u32::MAX - 1).await);
        assert!(refused_while_renewed(&runs, std::process::id()).await, "a live run's lock is never taken");
    }

    /// Whether `recover` of `runs` is refused the lock of run-a (process `pid` on this host), seen renewing it.
    async fn refused_while_renewed(runs: &[String], pid: u32) -> bool {
        let (cluster, handle) = Cluster::mock();
        let server = serve(handle, renewed_every(3, pid));
        let claim = Claim::Recover { runs };
        let result = take(&cluster, &LeaseRef::default(), &claimant(), claim, Observer::default()).await;
        drop(cluster);
        server.await.unwrap();
        result.map(|lock| lock.renewal.abort()).is_err()
    }

    #[tokio::test(start_paused = true)]
    async fn a_holder_whose_renewals_fail_is_told_it_cannot_prove_it_holds_the_lock_at_its_renew_deadline() {
        let (cluster, handle) = Cluster::mock();
        let server = serve(handle, |r: &Seen| match r.method.as_str() {
            "GET" => status(404, "NotFound"),
            "POST" => Answer::Json(201, r.body.clone()),
            // Renewals refused (an RBAC grant withdrawn), then unanswered (a link gone): neither proves anything.
            _ => status(403, "Forbidden"),
        });
        let lock = take(&cluster, &LeaseRef::default(), &claimant(), Claim::Run, Observer::default()).await.unwrap();
        let taken = Instant::now();
        let mut lost = lock.lost();
        let told = tokio::time::timeout(Duration::from_secs(120), lost.wait_for(Option::is_some)).await;
        let message = told.expect("told within the lease's duration").unwrap().clone().unwrap();
        let after = taken.elapsed();
        assert!(after >= Duration::from_secs(40) && after < Duration::from_secs(43), "told after {after:?}");
        assert!(
            message.starts_with(
                "cannot prove this run still holds the drill lock (Lease kube-system/hybrid-drill): no renewal \
                 succeeded within its renew deadline of 40s"
            ),
            "{message}"
        );
        assert!(message.contains("Forbidden") || message.contains("403"), "the cause is named: {message}");
        lock.renewal.abort();
        drop((lock, cluster));
        let seen = server.await.unwrap();
        let renewals = seen.iter().filter(|s| s.method == "PUT").count();
        assert!(renewals >= 3, "renewed at 20 s, then retried every 2 s: {renewals} attempts");
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
