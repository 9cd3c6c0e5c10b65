//! The drill lock as the cluster holds it: which coordination.k8s.io/v1 Lease, who may hold it, and what a Lease
//! says about its holder (free, held, or expired because its holder stopped renewing), judged as client-go's leader
//! election judges it: by whether its record changes while watched on this machine's monotonic clock, never by its
//! renew time against this machine's wall clock; and the emergency stop an on-call person sets on it. Pure: the reads
//! and writes are in `safety::lock` and `safety::emergency`.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use tokio::time::Instant;

use super::to_utc;

/// Where the lock lives unless a drill says otherwise: one Lease for the whole cluster, in the namespace every
/// cluster has, so a drill run from a laptop and one from the in-cluster schedule exclude each other.
pub const DEFAULT_NAMESPACE: &str = "kube-system";
pub const DEFAULT_NAME: &str = "hybrid-drill";
/// How long a holder that stopped renewing keeps the lock; it renews every third of it.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(60);

/// The cluster's freeze marker: a ConfigMap of this name in the lock's namespace, which a release process creates
/// while no drill may start (its `reason` key says why).
pub const FREEZE_MARKER: &str = "hybrid-drill-freeze";

/// The emergency stop: this annotation on the lock's Lease (its value the reason) aborts the drill holding it.
pub const STOP_ANNOTATION: &str = "hybrid-drill.io/stop";
/// Who pulled the emergency stop, when they say so beside it.
pub const STOPPED_BY_ANNOTATION: &str = "hybrid-drill.io/stopped-by";

const RUN_DIR_ANNOTATION: &str = "hybrid-drill.io/run-dir";
const HOST_ANNOTATION: &str = "hybrid-drill.io/host";
const PID_ANNOTATION: &str = "hybrid-drill.io/pid";

/// The Lease that is the drill lock, and how long it lasts without renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRef {
    pub namespace: String,
    pub name: String,
    pub duration: Duration,
}

impl Default for LeaseRef {
    fn default() -> LeaseRef {
        LeaseRef { namespace: DEFAULT_NAMESPACE.into(), name: DEFAULT_NAME.into(), duration: DEFAULT_DURATION }
    }
}

impl std::fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease {}/{}", self.namespace, self.name)
    }
}

impl LeaseRef {
    /// How often the holder renews: a third of the duration, so two renewals may fail before the lock can be lost.
    pub fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    /// How long the holder may go without a renewal that succeeded (counted from when that renewal was sent) before
    /// it stops acting as the holder: two thirds of the duration, as client-go's renew deadline. Another claimant takes
    /// the lock over no earlier than the full duration after it last saw the record change, so the holder stops a
    /// third of the duration before anyone else may start.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    /// How soon a renewal that failed is tried again (client-go's retry period).
    pub fn retry_every(&self) -> Duration {
        (self.duration / 20).clamp(Duration::from_millis(200), Duration::from_secs(2))
    }
}

/// Who holds (or wants) the lock: a run by its id, or a `recover`; where it writes and which process it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimant {
    pub identity: String,
    pub run_dir: String,
    pub host: String,
    pub pid: u32,
}

impl Claimant {
    /// This process, claiming the lock as `identity` for the run directory `run_dir`.
    pub fn this_process(identity: &str, run_dir: &std::path::Path) -> Claimant {
        let run_dir = std::path::absolute(run_dir).unwrap_or_else(|_| run_dir.to_path_buf());
        Claimant {
            identity: identity.into(),
            run_dir: run_dir.display().to_string(),
            host: this_host(),
            pid: std::process::id(),
        }
    }

    /// The Lease naming this claimant as holder since `acquired`, renewed `now`.
    pub fn lease(&self, lease: &LeaseRef, acquired: DateTime<Utc>, now: DateTime<Utc>, transitions: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(lease.name.clone()),
                namespace: Some(lease.namespace.clone()),
                annotations: Some(BTreeMap::from([
                    (RUN_DIR_ANNOTATION.to_string(), self.run_dir.clone()),
                    (HOST_ANNOTATION.to_string(), self.host.clone()),
                    (PID_ANNOTATION.to_string(), self.pid.to_string()),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(lease.duration.as_secs().clamp(1, i32::MAX as u64) as i32),
                acquire_time: Some(micro_time(acquired)),
                renew_time: Some(micro_time(now)),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            }),
        }
    }
}

/// The host name, which in a pod is the pod's name.
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

pub fn micro_time(t: DateTime<Utc>) -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::from_microsecond(t.timestamp_micros()).unwrap_or_default())
}

/// What a Lease says of its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub identity: String,
    pub since: Option<DateTime<Utc>>,
    pub renewed: Option<DateTime<Utc>>,
    pub duration: Duration,
    pub run_dir: Option<String>,
    pub host: Option<String>,
    pub pid: Option<u32>,
}

impl Holder {
    pub fn of(lease: &Lease) -> Option<Holder> {
        let spec = lease.spec.as_ref()?;
        let identity = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
        let annotation = |key: &str| lease.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned();
        Some(Holder {
            identity,
            since: spec.acquire_time.as_ref().map(|t| to_utc(&t.0)),
            renewed: spec.renew_time.as_ref().or(spec.acquire_time.as_ref()).map(|t| to_utc(&t.0)),
            duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64),
            run_dir: annotation(RUN_DIR_ANNOTATION),
            host: annotation(HOST_ANNOTATION),
            pid: annotation(PID_ANNOTATION).and_then(|p| p.parse().ok()),
        })
    }

    /// Whether its process is known to be gone: it ran on this host and no such process exists any more.
    pub fn process_gone(&self, this_host: &str) -> bool {
        self.host.as_deref() == Some(this_host)
            && self.pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    }

    /// One line: who, since when, where it writes, and when it last renewed by its own clock (which may not be this
    /// machine's: nothing is judged on it).
    pub fn describe(&self) -> String {
        let stamp =
            |t: Option<DateTime<Utc>>| t.map_or("(unknown)".into(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
        let mut text = format!("{} since {}", self.identity, stamp(self.since));
        if let Some(dir) = &self.run_dir {
            text.push_str(&format!(", run directory {dir}"));
        }
        if let (Some(host), Some(pid)) = (&self.host, self.pid) {
            text.push_str(&format!(", process {pid} on {host}"));
        }
        if self.renewed.is_some() {
            text.push_str(&format!(", last renewed at {} by its clock", stamp(self.renewed)));
        }
        text
    }
}

/// The emergency stop as a Lease carries it: the reason, who (the `stopped-by` annotation, else the field manager
/// that wrote the stop, e.g. `kubectl-annotate`) and when the API server recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopRequest {
    pub reason: String,
    pub by: Option<String>,
    pub set_at: Option<DateTime<Utc>>,
}

impl StopRequest {
    pub fn of(lease: &Lease) -> Option<StopRequest> {
        let annotations = lease.metadata.annotations.as_ref()?;
        let reason = annotations.get(STOP_ANNOTATION)?.trim();
        let key = format!("f:{STOP_ANNOTATION}");
        // The latest write that set the annotation: its manager and time.
        let written = lease
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| m.fields_v1.as_ref().is_some_and(|f| f.0["f:metadata"]["f:annotations"].get(&key).is_some()))
            .max_by_key(|m| m.time.as_ref().map(|t| t.0));
        let by = annotations
            .get(STOPPED_BY_ANNOTATION)
            .map(|b| b.trim().to_string())
            .filter(|b| !b.is_empty())
            .or_else(|| written.and_then(|m| m.manager.clone()).map(|m| format!("field manager {m}")));
        Some(StopRequest {
            reason: if reason.is_empty() { "no reason given".into() } else { reason.into() },
            by,
            set_at: written.and_then(|m| m.time.as_ref()).map(|t| to_utc(&t.0)),
        })
    }
}

/// The lock as a Lease shows it to one observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holding {
    /// No Lease, or one that names no holder (released).
    Free,
    /// Its record changed less than its duration ago as watched here: its holder may still be renewing it.
    Held {
        holder: Holder,
        /// The record changed while watched: its holder is alive and renewing.
        renewing: bool,
        /// How long, on this machine's clock, until the lock falls free if the record changes no more.
        free_in: Duration,
    },
    /// Its record has not changed for its duration as watched here: its holder stopped renewing, and it may be
    /// taken over.
    Expired(Holder),
}

/// Watches a Lease's record as client-go's leader election does: the time the record last changed is taken from
/// this machine's monotonic clock when the change is seen (`observedTime`), and the lock is held until its duration
/// has passed since then. The holder's renewTime is compared only with its own earlier values, so a holder whose
/// clock is minutes off is judged as one whose clock is right.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    /// The record last seen (none: no holder) and when, here, it was first seen so.
    seen: Option<(Option<LeaseSpec>, Instant)>,
    /// The record changed since the first read.
    changed: bool,
}

impl Observer {
    /// Judges the Lease as read at `now`.
    pub fn observe(&mut self, lease: Option<&Lease>, now: Instant) -> Holding {
        let holder = lease.and_then(Holder::of);
        let record = holder.as_ref().and(lease).and_then(|l| l.spec.clone());
        match &self.seen {
            Some((seen, _)) if *seen == record => {}
            Some(_) => {
                self.changed = true;
                self.seen = Some((record, now));
            }
            None => self.seen = Some((record, now)),
        }
        let Some(holder) = holder else { return Holding::Free };
        let since = self.seen.as_ref().map_or(now, |(_, at)| *at);
        let unchanged = now.saturating_duration_since(since);
        if unchanged >= holder.duration {
            return Holding::Expired(holder);
        }
        Holding::Held { free_in: holder.duration - unchanged, renewing: self.changed, holder }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn lease(holder: &str, renewed: &str) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": "hybrid-drill", "namespace": "kube-system", "annotations": {
                "hybrid-drill.io/run-dir": "/reports/onprem-gpu-drain/20261203T190000Z",
                "hybrid-drill.io/host": "ops-1", "hybrid-drill.io/pid": "4242"}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60,
                     "acquireTime": "2026-12-03T19:00:00.000000Z", "renewTime": renewed}
        }))
        .unwrap()
    }

    /// Judges each Lease in turn, `after` seconds apart on this machine's monotonic clock.
    fn watched(reads: &[(Option<&Lease>, u64)]) -> Vec<Holding> {
        let (mut observer, start) = (Observer::default(), Instant::now());
        let mut at = start;
        reads
            .iter()
            .map(|(lease, after)| {
                at += Duration::from_secs(*after);
                observer.observe(*lease, at)
            })
            .collect()
    }

    #[test]
    fn a_lease_is_held_until_its_record_goes_unchanged_for_its_duration_as_watched_here() {
        let free = lease("", "2026-12-03T19:09:59.000000Z");
        assert_eq!(watched(&[(None, 0), (Some(&free), 0)]), [Holding::Free, Holding::Free]);
        let a = lease("run-a", "2026-12-03T19:09:30.000000Z");
        let judged = watched(&[(Some(&a), 0), (Some(&a), 59), (Some(&a), 1)]);
        let Holding::Held { holder, renewing: false, free_in } = &judged[0] else { panic!("held: {judged:?}") };
        assert_eq!(*free_in, Duration::from_secs(60), "a first read gives the holder its whole duration");
        assert_eq!(
            holder.describe(),
            "run-a since 2026-12-03T19:00:00Z, run directory /reports/onprem-gpu-drain/20261203T190000Z, process 4242 \
             on ops-1, last renewed at 2026-12-03T19:09:30Z by its clock"
        );
        assert!(
            matches!(judged[1], Holding::Held { renewing: false, free_in, .. } if free_in == Duration::from_secs(1))
        );
        assert!(matches!(judged[2], Holding::Expired(_)), "{judged:?}");
    }

    #[test]
    fn a_holder_whose_clock_is_far_behind_but_whose_record_keeps_changing_is_held() {
        // Renewed, by the holder's clock, an hour and more before this machine's clock: the old judgement (renewTime
        // plus duration against the local wall clock) handed its lock to a second drill at once.
        let renewals: Vec<Lease> = (0..6).map(|i| lease("run-a", &format!("2026-12-03T18:0{i}:20.000000Z"))).collect();
        let reads: Vec<(Option<&Lease>, u64)> = renewals.iter().map(|l| (Some(l), 20)).collect();
        let judged = watched(&reads);
        assert!(matches!(judged[0], Holding::Held { renewing: false, .. }), "{judged:?}");
        for later in &judged[1..] {
            assert!(
                matches!(later, Holding::Held { renewing: true, free_in, .. } if *free_in == Duration::from_secs(60)),
                "{later:?}"
            );
        }
    }

    #[test]
    fn a_holder_whose_clock_is_far_ahead_but_who_stopped_renewing_falls_free_after_its_duration_here() {
        // Renewed, by the holder's clock, tomorrow: the old judgement kept such a dead holder's lock for a day.
        let stale = lease("run-a", "2026-12-04T19:00:00.000000Z");
        let judged = watched(&[(Some(&stale), 0), (Some(&stale), 30), (Some(&stale), 30)]);
        assert!(matches!(judged[1], Holding::Held { renewing: false, .. }), "{judged:?}");
        assert!(matches!(judged[2], Holding::Expired(_)), "{judged:?}");
    }

    #[test]
    fn a_claimants_lease_round_trips_through_the_judgement() {
        let claimant = Claimant { identity: "run-b".into(), run_dir: "/r".into(), host: "h".into(), pid: 7 };
        let now = at("2026-12-03T19:10:00.250Z");
        let lease = claimant.lease(&LeaseRef::default(), at("2026-12-03T19:09:00Z"), now, 2);
        let Holding::Held { holder, .. } = Observer::default().observe(Some(&lease), Instant::now()) else {
            panic!("held")
        };
        assert_eq!((holder.identity.as_str(), holder.pid, holder.duration), ("run-b", Some(7), DEFAULT_DURATION));
        assert_eq!(holder.renewed, Some(now));
        assert_eq!(lease.spec.unwrap().lease_transitions, Some(2));
    }

    #[test]
    fn the_stop_annotation_says_why_who_and_when() {
        let mut stopped = lease("run-a", "2026-12-03T19:09:30.000000Z");
        assert_eq!(StopRequest::of(&stopped), None);
        let fields = json!({"f:metadata": {"f:annotations": {"f:hybrid-drill.io/stop": {}}}});
        stopped.metadata.managed_fields = Some(vec![
            serde_json::from_value(json!({
            "manager": "kubectl-annotate", "operation": "Update", "time": "2026-12-03T19:10:02Z",
            "fieldsType": "FieldsV1", "fieldsV1": fields}))
            .unwrap(),
        ]);
        let annotations = stopped.metadata.annotations.as_mut().unwrap();
        annotations.insert(STOP_ANNOTATION.into(), "checkout errors rising".into());
        let request = StopRequest::of(&stopped).unwrap();
        assert_eq!(request.reason, "checkout errors rising");
        assert_eq!(request.by.as_deref(), Some("field manager kubectl-annotate"));
        assert_eq!(request.set_at, Some(at("2026-12-03T19:10:02Z")));
        let annotations = stopped.metadata.annotations.as_mut().unwrap();
        annotations.insert(STOPPED_BY_ANNOTATION.into(), "alice (on call)".into());
        assert_eq!(StopRequest::of(&stopped).unwrap().by.as_deref(), Some("alice (on call)"));
    }

    #[test]
    fn the_holder_stops_a_third_of_the_duration_before_another_may_take_over() {
        let lease = LeaseRef::default();
        assert_eq!((lease.renew_every(), lease.renew_deadline()), (Duration::from_secs(20), Duration::from_secs(40)));
        assert_eq!(lease.retry_every(), Duration::from_secs(2));
    }

    #[test]
    fn a_process_is_gone_only_when_it_ran_here_and_no_longer_exists() {
        let mut holder = Holder::of(&lease("run-a", "2026-12-03T19:09:30.000000Z")).unwrap();
        assert!(!holder.process_gone("elsewhere"));
        holder.pid = Some(std::process::id());
        assert!(!holder.process_gone("ops-1"), "this very process is alive");
        holder.pid = Some(u32::MAX - 1);
        assert!(holder.process_gone("ops-1"));
    }
}
