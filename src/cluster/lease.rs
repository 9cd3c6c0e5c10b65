//! The drill lock as the cluster holds it: which coordination.k8s.io/v1 Lease, who may hold it, and what a Lease
//! says about its holder (free, held, or expired because its holder stopped renewing). Pure: the writes are in
//! `safety::lock`.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

use super::to_utc;

/// Where the lock lives unless a drill says otherwise: one Lease for the whole cluster, in the namespace every
/// cluster has, so a drill run from a laptop and one from the in-cluster schedule exclude each other.
pub const DEFAULT_NAMESPACE: &str = "kube-system";
pub const DEFAULT_NAME: &str = "hybrid-drill";
/// How long a holder that stopped renewing keeps the lock; it renews every third of it.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(60);

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
    fn of(lease: &Lease) -> Option<Holder> {
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

    /// When the lock falls free if its holder renews no more.
    pub fn expires(&self) -> Option<DateTime<Utc>> {
        self.renewed.map(|r| r + chrono::Duration::from_std(self.duration).unwrap_or_default())
    }

    /// Whether its process is known to be gone: it ran on this host and no such process exists any more.
    pub fn process_gone(&self, this_host: &str) -> bool {
        self.host.as_deref() == Some(this_host)
            && self.pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    }

    /// One line: who, since when, where it writes, and when it was last renewed.
    pub fn describe(&self, now: DateTime<Utc>) -> String {
        let stamp =
            |t: Option<DateTime<Utc>>| t.map_or("(unknown)".into(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
        let mut text = format!("{} since {}", self.identity, stamp(self.since));
        if let Some(dir) = &self.run_dir {
            text.push_str(&format!(", run directory {dir}"));
        }
        if let (Some(host), Some(pid)) = (&self.host, self.pid) {
            text.push_str(&format!(", process {pid} on {host}"));
        }
        if let Some(renewed) = self.renewed {
            let ago = (now - renewed).num_milliseconds().max(0) as f64 / 1000.0;
            text.push_str(&format!(", last renewed {ago:.0}s ago"));
        }
        text
    }
}

/// The lock as a Lease shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holding {
    /// No Lease, or one that names no holder (released).
    Free,
    /// Its holder renewed it within its duration.
    Held(Holder),
    /// Its holder stopped renewing more than its duration ago: it may be taken over.
    Expired(Holder),
}

/// Judges a Lease at `now` (this machine's clock against the holder's renew time: clocks must agree to well within
/// a third of the duration, which NTP gives).
pub fn judge(lease: Option<&Lease>, now: DateTime<Utc>) -> Holding {
    let Some(holder) = lease.and_then(Holder::of) else { return Holding::Free };
    match holder.expires() {
        Some(expires) if expires > now => Holding::Held(holder),
        _ => Holding::Expired(holder),
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

    #[test]
    fn a_lease_is_held_until_its_duration_passes_without_renewal() {
        let now = at("2026-12-03T19:10:00Z");
        assert_eq!(judge(None, now), Holding::Free);
        assert_eq!(judge(Some(&lease("", "2026-12-03T19:09:59.000000Z")), now), Holding::Free);
        let Holding::Held(holder) = judge(Some(&lease("run-a", "2026-12-03T19:09:30.000000Z")), now) else {
            panic!("held")
        };
        assert_eq!(
            holder.describe(now),
            "run-a since 2026-12-03T19:00:00Z, run directory /reports/onprem-gpu-drain/20261203T190000Z, process 4242 \
             on ops-1, last renewed 30s ago"
        );
        assert!(matches!(judge(Some(&lease("run-a", "2026-12-03T19:08:59.000000Z")), now), Holding::Expired(_)));
    }

    #[test]
    fn a_claimants_lease_round_trips_through_the_judgement() {
        let claimant = Claimant { identity: "run-b".into(), run_dir: "/r".into(), host: "h".into(), pid: 7 };
        let now = at("2026-12-03T19:10:00.250Z");
        let lease = claimant.lease(&LeaseRef::default(), at("2026-12-03T19:09:00Z"), now, 2);
        let Holding::Held(holder) = judge(Some(&lease), now) else { panic!("held") };
        assert_eq!((holder.identity.as_str(), holder.pid, holder.duration), ("run-b", Some(7), DEFAULT_DURATION));
        assert_eq!(holder.expires(), Some(at("2026-12-03T19:11:00.250Z")));
        assert_eq!(lease.spec.unwrap().lease_transitions, Some(2));
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
