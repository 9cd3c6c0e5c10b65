//! `hybrid-drill watch`: real fallbacks measured with the drills' ruler. Read-only, long-running: the drill's watches
//! feed a timeline; when the on-prem side degrades an episode opens, and when the workload is back on-prem and the
//! fallback reclaimed (or the episode limit passes) it closes into a run directory like a drill's, `kind: incident`,
//! cut into the same phases and judged against the same objectives.

pub use crate::report::open_episode as marker;
pub mod gpu;
pub mod serve;
pub mod signs;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cluster::{self, Cluster, ClusterError, KubeContext};
use crate::drill::LoadedDrill;
use crate::monitor::{Derived, Monitor};
use crate::record::{Closing, RecordError};
use crate::report::{Outcome, Report};
use crate::timeline::view::SharedView;
use crate::timeline::watch::Watches;
use crate::timeline::{Event, Timeline};
use marker::OpenEpisode;
use signs::{Degraded, NodeEvidence};

/// The default episode limit: past it, an episode closes with what it saw (a fallback left running for days is a
/// state, not an incident).
pub const DEFAULT_EPISODE_LIMIT: Duration = Duration::from_secs(6 * 3600);

/// An incident's provenance in place of an initiator: nobody started it.
const INCIDENT_INITIATOR: &str = "none: a real incident, observed by `hybrid-drill watch`, started by no one";

/// How long the watch lets an opening settle before it reads the cause: nodes lost over a link go NotReady within a
/// few node-monitor periods of each other.
const SETTLE: Duration = Duration::from_secs(5);

/// How often an idle watch refreshes its metrics' request tally.
const METRICS_REFRESH: Duration = Duration::from_secs(15);

/// An idle watch starts its timeline afresh past this many observations, so its memory stays flat.
const IDLE_OBSERVATIONS: usize = 20_000;

/// Every (API group, resource, verb) the watch uses, cluster-wide; deploy/watch/rbac.yaml's ClusterRole grants exactly
/// these. Only reads: the watch never changes the cluster.
pub const PERMISSIONS: cluster::Permissions = &[
    ("", "nodes", &["get", "list", "watch"]),
    ("", "namespaces[kube-system]", &["get"]),
    ("karpenter.sh", "nodepools", &["list", "watch"]),
    ("karpenter.sh", "nodeclaims", &["list", "watch"]),
];

/// The watch's reads in one namespace each, by deploy/watch/rbac.yaml's Roles: the workload's pods and Events (the
/// manifest's drill's namespace), the NodeClaims' Events, a lost node's heartbeat.
pub const NAMESPACED_PERMISSIONS: &[(&str, cluster::Permissions)] = &[
    ("inference", &[("", "pods", &["list", "watch"]), ("", "events", &["list", "watch"])]),
    ("default", &[("", "events", &["list", "watch"])]),
    ("kube-node-lease", &[("coordination.k8s.io", "leases", &["get"])]),
];

#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub target: KubeContext,
    pub reports_dir: PathBuf,
    pub episode_limit: Duration,
    pub metrics_addr: Option<SocketAddr>,
    /// Stop after this many episodes closed (tests); `None`: run until a signal.
    pub episodes: Option<u64>,
    /// The key that signs each incident's manifest, as `run --signing-key`: a file, or a secret reference.
    pub signing_key: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("the watches could not list the drilled objects: {0}")]
    Watches(#[from] crate::timeline::watch::SyncError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics { addr: SocketAddr, source: std::io::Error },
    #[error("cannot write the episode to {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error(
        "readyPods `{0}` is a share, which the watch cannot judge yet (it does not follow the workload's desired replicas); write the number of Ready pods that serve, e.g. readyPods: 4"
    )]
    ShareOfReplicas(crate::drill::ready::ReadyPods),
    #[error("cannot sign the incidents' manifests: {0}")]
    SigningKey(#[from] crate::evidence::keys::KeyError),
}

/// How a watch cycle ended.
enum CycleEnd {
    Signal,
    Closed,
    /// Idle too long on one timeline: start afresh.
    Refresh,
}

/// Watches until a signal (or `opts.episodes` closed), writing one incident report per episode.
pub async fn watch(loaded: &LoadedDrill, opts: &WatchOptions) -> Result<(), WatchError> {
    let drill = &loaded.drill;
    let ready_pods = drill.spec.targets.workload.restored_when.ready_pods;
    if matches!(ready_pods, crate::drill::ready::ReadyPods::Share(_)) {
        // Without the desired replicas a share would count one Ready pod as the service restored.
        return Err(WatchError::ShareOfReplicas(ready_pods));
    }
    let key = opts.signing_key.as_deref().map(crate::evidence::SigningKey::load).transpose()?;
    let (cluster, version) = cluster::connect(&opts.target, &drill.spec.cluster).await?;
    let state = serve::Shared::default();
    if let Some(addr) = opts.metrics_addr {
        let bound = serve::start(addr, drill.metadata.name.clone(), state.clone())
            .await
            .map_err(|source| WatchError::Metrics { addr, source })?;
        eprintln!("hybrid-drill watch: metrics on http://{bound}/metrics");
    }
    eprintln!(
        "hybrid-drill watch: watching {} for {} on {} (read-only; episodes under {})",
        drill.spec.targets.on_prem.nodes,
        drill.metadata.name,
        cluster.context,
        opts.reports_dir.join(&drill.metadata.name).display()
    );
    let mut signals = tokio::spawn(crate::safety::signals::interrupted());
    let watcher = Watcher { loaded, cluster, version, opts, state, key };
    let mut closed = 0;
    loop {
        match watcher.cycle(&mut signals).await? {
            CycleEnd::Signal => return Ok(()),
            CycleEnd::Closed => {
                closed += 1;
                if opts.episodes.is_some_and(|n| closed >= n) {
                    return Ok(());
                }
            }
            CycleEnd::Refresh => {}
        }
    }
}

struct Watcher<'a> {
    loaded: &'a LoadedDrill,
    cluster: Cluster,
    version: String,
    opts: &'a WatchOptions,
    state: serve::Shared,
    key: Option<crate::evidence::SigningKey>,
}

/// An episode under way: where it writes, since when.
struct Episode {
    marker: OpenEpisode,
    /// Whether the on-prem side was whole at the last look; `None` until seen (a resumed watch does not know).
    whole: Option<bool>,
    /// The on-prem nodes the episode involves so far; more join as they are lost or cordoned.
    nodes: BTreeSet<String>,
}

impl Watcher<'_> {
    fn marker_path(&self) -> PathBuf {
        marker::path(&self.opts.reports_dir, &self.loaded.drill.metadata.name)
    }

    /// The open episode a previous watch left, with its timeline taken up and the gap marked; else a fresh timeline
    /// in memory until an episode opens.
    fn take_up(&self) -> Result<(Option<OpenEpisode>, Timeline), WatchError> {
        let resumed = marker::read(&self.marker_path());
        let timeline = match &resumed {
            Some(open) => {
                let path = open.run_dir.join("timeline.jsonl");
                let timeline = Timeline::resume(&path).map_err(|source| self.write_error(&path, source))?;
                let last_seen = timeline.observations().last().map_or(open.opened, |o| o.received);
                timeline.record(Event::IncidentResumed { last_seen });
                eprintln!("hybrid-drill watch: took up the open episode {}", open.run_dir.display());
                timeline
            }
            None => Timeline::in_memory(),
        };
        Ok((resumed, timeline))
    }

    /// One timeline: from the watches' start to an episode's close (or a refresh, or a signal).
    async fn cycle(&self, signals: &mut JoinHandle<&'static str>) -> Result<CycleEnd, WatchError> {
        let drill = &self.loaded.drill;
        let (resumed, timeline) = self.take_up()?;
        let view = SharedView::default();
        let mut watches = Watches::start(&self.cluster, drill, &view, &timeline);
        watches.synced(Duration::from_secs(60)).await?;
        if resumed.is_none() {
            timeline.record(view.read(|v| crate::timeline::view::baseline(v, v.pool_limit_gpus)));
        }
        let monitor = Monitor::start(drill, &view, &timeline);
        let mut episode = resumed.map(|marker| {
            let nodes = crate::report::IncidentFacts::of(&timeline.observations()).map(|f| f.nodes).unwrap_or_default();
            Episode { marker, whole: None, nodes: nodes.into_iter().collect() }
        });
        if let Some(e) = &episode {
            self.publish(&view, Some(e.marker.opened));
        }
        let mut changes = view.changes();
        let mut derived = monitor.derived.clone();
        loop {
            match &mut episode {
                None => {
                    if let Some(first) = view.read(Degraded::of) {
                        let seen = Utc::now();
                        tokio::time::sleep(SETTLE).await;
                        if let Some(degraded) = view.read(Degraded::of) {
                            let degraded = degraded.merge(first);
                            episode = Some(self.open(&timeline, &view, degraded, seen).await?);
                            continue;
                        }
                    }
                    if timeline.len() > IDLE_OBSERVATIONS {
                        return Ok(CycleEnd::Refresh);
                    }
                }
                Some(e) => {
                    let reason = self.follow(e, &view, &timeline, &derived).await;
                    if let Some(reason) = reason {
                        drop(monitor);
                        drop(watches);
                        self.close(&timeline, &e.marker, reason).await?;
                        return Ok(CycleEnd::Closed);
                    }
                }
            }
            self.publish(&view, episode.as_ref().map(|e| e.marker.opened));
            let limit_left = episode.as_ref().map(|e| {
                let end = e.marker.opened + chrono::Duration::from_std(self.opts.episode_limit).unwrap_or_default();
                (end - Utc::now()).to_std().unwrap_or_default()
            });
            tokio::select! {
                r = changes.changed() => if r.is_err() { return Ok(CycleEnd::Signal) },
                r = derived.changed() => if r.is_err() { return Ok(CycleEnd::Signal) },
                _ = sleep_for(limit_left) => {}
                // Keeps the request tally on the metrics endpoint current; asks the cluster nothing.
                _ = tokio::time::sleep(METRICS_REFRESH) => {}
                signal = &mut *signals => {
                    let what = signal.unwrap_or("a signal");
                    match &episode {
                        // The marker stays: the next watch takes the episode up, its gap marked unknown.
                        Some(e) => eprintln!(
                            "hybrid-drill watch: stopped by {what}; the open episode {} is taken up by the next watch",
                            e.marker.run_dir.display()
                        ),
                        None => eprintln!("hybrid-drill watch: stopped by {what}"),
                    }
                    return Ok(CycleEnd::Signal);
                }
            }
        }
    }

    /// Follows an open episode: nodes that join it, the on-prem side whole again (the return), and whether it is
    /// over, with why.
    async fn follow(
        &self,
        e: &mut Episode,
        view: &SharedView,
        timeline: &Timeline,
        derived: &watch::Receiver<Derived>,
    ) -> Option<String> {
        let joined: Vec<String> = view
            .read(Degraded::of)
            .map(|d| d.nodes().into_iter().filter(|n| !e.nodes.contains(n)).collect())
            .unwrap_or_default();
        if !joined.is_empty() {
            let evidence = self.evidence(&joined).await.iter().map(NodeEvidence::describe).collect();
            eprintln!("hybrid-drill watch: the incident spread to {}", joined.join(", "));
            e.nodes.extend(joined.iter().cloned());
            timeline.record(Event::IncidentSpread { nodes: joined, evidence });
        }
        let whole = view.read(signs::on_prem_whole);
        if whole && e.whole == Some(false) {
            timeline.record(Event::ReturnStarted { step: "incident".into() });
        }
        if e.whole.is_some() || !whole {
            e.whole = Some(whole);
        }
        let d = derived.borrow().clone();
        let limit = chrono::Duration::from_std(self.opts.episode_limit).unwrap_or(chrono::Duration::MAX);
        if whole && d.back_on_prem && d.fallback_empty {
            Some("the workload is back on-prem and the fallback reclaimed".to_string())
        } else if Utc::now() - e.marker.opened >= limit {
            Some(format!(
                "the episode limit ({}) passed before the workload was back on-prem with the fallback \
                 reclaimed",
                humantime::format_duration(self.opts.episode_limit)
            ))
        } else {
            None
        }
    }

    /// Opens an episode: reads the lost or cordoned nodes' own records, moves the timeline's origin to t0 (or to when
    /// it was seen), and gives it a run directory and the marker.
    async fn open(
        &self,
        timeline: &Timeline,
        view: &SharedView,
        degraded: Degraded,
        seen: DateTime<Utc>,
    ) -> Result<Episode, WatchError> {
        let drill = &self.loaded.drill;
        let evidence = self.evidence(&degraded.nodes()).await;
        let cause = signs::cause(&evidence, &degraded);
        let observed = observed_start(timeline, cause, &degraded);
        let from_objects = signs::t0_evidence(cause, &evidence);
        // A cordon seen as it happened is stamped on the tool's clock, as a drill's drain is; otherwise t0 is what
        // the objects kept, on the server's clock; failing both it is unknown.
        let (t0, basis, server_time) = match (cause, observed, &from_objects) {
            (crate::domain::IncidentCause::Drain, Some(at), _) => {
                (Some(at), "t0 is the cordon as the watch saw it".to_string(), from_objects.as_ref().map(|o| o.0))
            }
            (crate::domain::IncidentCause::GpuFault, Some(at), _) => (Some(at), gpu::T0_BASIS.to_string(), None),
            (_, _, Some((at, basis))) => (Some(*at), basis.clone(), Some(*at)),
            _ => (None, String::new(), None),
        };
        let origin = t0.unwrap_or(seen).min(seen);
        let first = match (t0, cause.fault_kind()) {
            (Some(_), Some(kind)) => Some((Event::FaultInjected { step: "incident".into(), kind }, server_time)),
            _ => None,
        };
        let gpu_fault = first.as_ref().is_some_and(|_| cause == crate::domain::IncidentCause::GpuFault);
        timeline.rebase(origin, first);
        if gpu_fault {
            timeline.record(view.read(|v| gpu::faulted(v, &degraded.gpu_failed, self.opts.episode_limit)));
        }
        let (dir, run_id) = crate::record::run_dir(&self.opts.reports_dir, &drill.metadata.name)?;
        let source = crate::secrets::redact(&self.loaded.source);
        std::fs::write(dir.join("drill.yaml"), source.as_bytes()).map_err(|e| self.write_error(&dir, e))?;
        let path = dir.join("timeline.jsonl");
        timeline.persist(&path).map_err(|e| self.write_error(&path, e))?;
        let mut lines: Vec<String> = evidence.iter().map(NodeEvidence::describe).collect();
        if degraded.on_fallback > 0 {
            lines.push(format!("{} workload pods on fallback nodes", degraded.on_fallback));
        }
        let mut unknown = Vec::new();
        match t0 {
            Some(_) => lines.push(basis),
            None => unknown.push(
                "t0: no object kept when the fault began (no Lease heartbeat of a lost node, no cordon's time); \
                 detection, eviction and RTO are not measured"
                    .to_string(),
            ),
        }
        timeline.record(Event::DrillStarted {
            drill: drill.metadata.name.clone(),
            run_id: run_id.clone(),
            context: self.cluster.context.clone(),
        });
        let drill_run = match evidence.iter().find_map(|e| e.drill_run.clone()) {
            Some(run) => Some(run),
            None => self.drill_lock_holder().await,
        };
        if let Some(run) = &drill_run {
            lines.push(format!("the hybrid-drill run {run} is under way: recorded as a drill, not an incident"));
        }
        let drill_seen = drill_run.is_some();
        let event = Event::IncidentOpened { cause, nodes: degraded.nodes(), evidence: lines, unknown, drill_run };
        timeline.record(event);
        let open = OpenEpisode { run_dir: dir.clone(), run_id, opened: seen };
        let marker_path = self.marker_path();
        marker::write(&marker_path, &open).map_err(|e| self.write_error(&marker_path, e))?;
        let what = if drill_seen { "drill seen" } else { "incident opened" };
        eprintln!("hybrid-drill watch: {what} ({cause}) · run directory {}", dir.display());
        self.state.lock().unwrap_or_else(|p| p.into_inner()).drill_in_progress = drill_seen;
        self.publish(view, Some(origin));
        // Nodes seen lost or cordoned left the on-prem side broken, though one may be back by now (a short drain
        // uncordoned while the episode opened): the next look then records the return instead of missing it.
        let whole = degraded.nodes().is_empty() && view.read(signs::on_prem_whole);
        Ok(Episode { marker: open, whole: Some(whole), nodes: degraded.nodes().into_iter().collect() })
    }

    /// The run holding the drill's lock (`spec.lock`), if one does: a drill whose marks the nodes do not carry (a
    /// node failure's hooks leave none). Unreadable (no grant), it says nothing.
    async fn drill_lock_holder(&self) -> Option<String> {
        let lock = &self.loaded.drill.spec.lock;
        let api: Api<Lease> = Api::namespaced(self.cluster.client.clone(), &lock.namespace);
        let lease = api.get_opt(&lock.name).await.ok().flatten()?;
        lease.spec?.holder_identity.filter(|h| !h.is_empty())
    }

    /// Each lost or cordoned node and its Lease, read once (get only).
    async fn evidence(&self, nodes: &[String]) -> Vec<NodeEvidence> {
        let node_api: Api<Node> = Api::all(self.cluster.client.clone());
        let lease_api: Api<Lease> = Api::namespaced(self.cluster.client.clone(), "kube-node-lease");
        let mut out = Vec::new();
        for name in nodes {
            let Ok(node) = node_api.get(name).await else { continue };
            let lease = lease_api.get_opt(name).await.ok().flatten();
            out.push(NodeEvidence::read(&node, lease.as_ref()));
        }
        out
    }

    /// Ends the episode: its report in every format, the marker gone, the metrics told.
    async fn close(&self, timeline: &Timeline, open: &OpenEpisode, reason: String) -> Result<(), WatchError> {
        timeline.record(Event::IncidentClosed { reason });
        let mut provenance = crate::evidence::provenance::local(self.loaded, &Default::default());
        provenance.initiator_unknown = Some(INCIDENT_INITIATOR.into());
        let closing =
            Closing { timeline, cluster: &self.cluster, loaded: self.loaded, version: &self.version, provenance };
        let ended = closing.end(|analysis| match analysis.objectives_missed.is_empty() {
            true => Outcome::Passed,
            false => Outcome::ObjectiveMissed,
        });
        let mut report = ended.report();
        crate::record::persist(&open.run_dir, &mut report, timeline, None, self.key.as_ref()).await?;
        marker::remove(&self.marker_path()).map_err(|e| self.write_error(&self.marker_path(), e))?;
        eprintln!("hybrid-drill watch: incident closed · report {}", open.run_dir.join("report.md").display());
        println!("{}", open.run_dir.display());
        self.publish_closed(report);
        Ok(())
    }

    fn publish(&self, view: &SharedView, episode_since: Option<DateTime<Utc>>) {
        let (nodes, gpus) = view.read(|v| (v.fallback_nodes().count(), v.fallback_gpus()));
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !s.synced {
            eprintln!("hybrid-drill watch: in sync with the cluster; an on-prem degradation from now on is an episode");
            s.synced = true;
        }
        s.episode_open = episode_since.is_some() && !s.drill_in_progress;
        s.drill_in_progress &= episode_since.is_some();
        s.episode_since = episode_since;
        s.fallback_nodes = nodes;
        s.fallback_gpus = gpus;
        s.api_requests = self.cluster.requests_sent();
    }

    fn publish_closed(&self, report: Report) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.episode_open = false;
        s.drill_in_progress = false;
        s.episode_since = None;
        s.episodes_closed += 1;
        s.last = Some(Box::new(report));
    }

    fn write_error(&self, path: &std::path::Path, source: std::io::Error) -> WatchError {
        WatchError::Write { path: path.display().to_string(), source }
    }
}

/// When the watch itself saw a drain begin (the first cordon of an on-prem node on this timeline) or a GPU fault.
fn observed_start(timeline: &Timeline, cause: crate::domain::IncidentCause, d: &Degraded) -> Option<DateTime<Utc>> {
    if cause == crate::domain::IncidentCause::GpuFault {
        return gpu::first_sign(&timeline.observations(), &d.gpu_failed);
    }
    if cause != crate::domain::IncidentCause::Drain {
        return None;
    }
    timeline.observations().into_iter().find_map(|o| match &o.event {
        Event::NodeSchedulable { node, schedulable: false, .. } if d.drained.contains(node) => Some(o.received),
        _ => None,
    })
}

async fn sleep_for(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ConditionStatus, IncidentCause, PhaseId};
    use crate::phases::Verdict;
    use crate::report::RunKind;
    use crate::timeline::{FaultKind, NodeRole};

    #[test]
    fn the_watch_role_reads_only_and_grants_exactly_what_the_watch_uses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/watch/rbac.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let docs: Vec<serde_json::Value> =
            text.split("\n---\n").map(|d| crate::drill::parse::parse_document(d).unwrap().value).collect();
        let roles: Vec<&serde_json::Value> =
            docs.iter().filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role").collect();
        assert_eq!(roles.len(), 1 + NAMESPACED_PERMISSIONS.len());
        for role in &roles {
            for (group, resource, verb) in crate::cluster::granted_by(role) {
                assert!(["get", "list", "watch"].contains(&verb.as_str()), "{group}/{resource}: {verb} is a write");
            }
        }
        assert_eq!(crate::cluster::granted_by(roles[0]), crate::cluster::used_by(PERMISSIONS));
        for (role, (namespace, table)) in roles[1..].iter().zip(NAMESPACED_PERMISSIONS) {
            assert_eq!(role["metadata"]["namespace"], *namespace);
            assert_eq!(crate::cluster::granted_by(role), crate::cluster::used_by(table));
        }
    }

    fn drill() -> crate::drill::Drill {
        crate::phases::tests::drill()
    }

    fn meta() -> crate::report::RunMeta {
        crate::report::RunMeta {
            tool_version: "0".into(),
            drill_file: "t.yaml".into(),
            drill_source: String::new(),
            cluster_server: "s".into(),
            cluster_version: "v".into(),
            provenance: None,
        }
    }

    fn ready(status: ConditionStatus) -> Event {
        Event::NodeReady { node: "n1".into(), role: NodeRole::OnPrem, status, gpus: 8 }
    }

    /// A node failure the watch saw from before it began: t0 at the Lease's last renewal, everything before it gone
    /// but the state it left, the report an incident cut into the drills' phases.
    #[test]
    fn an_episode_starts_at_its_evidence_and_is_cut_like_a_drill() {
        let timeline = Timeline::in_memory();
        timeline.record(Event::TolerationsRead { tolerations: vec![] });
        timeline.record(Event::KubeEvent { object: "Pod/x".into(), reason: "Old".into(), message: "m".into() });
        std::thread::sleep(Duration::from_millis(30));
        let t0 = Utc::now();
        std::thread::sleep(Duration::from_millis(30));
        timeline.record(ready(ConditionStatus::Unknown));
        timeline.record(Event::ServiceLost { ready_pods: 0 });
        timeline.record(Event::PodTerminating { pod: "w-1".into(), node: "n1".into(), role: NodeRole::OnPrem });
        timeline.rebase(
            t0,
            Some((Event::FaultInjected { step: "incident".into(), kind: FaultKind::NodeFailure }, Some(t0))),
        );
        timeline.record(Event::IncidentOpened {
            cause: IncidentCause::NodeFailure,
            nodes: vec!["n1".into()],
            evidence: vec!["n1: Ready=Unknown".into()],
            unknown: vec![],
            drill_run: None,
        });
        let obs = timeline.observations();
        assert!(matches!(obs[0].event, Event::TolerationsRead { .. }), "the state before t0 is kept");
        assert!(matches!(obs[1].event, Event::FaultInjected { .. }));
        assert_eq!(obs[1].t_ms, 0);
        assert!(!obs.iter().any(|o| matches!(o.event, Event::KubeEvent { .. })), "the rest before t0 is dropped");
        assert!(obs.windows(2).all(|w| w[0].seq + 1 == w[1].seq && w[0].t_ms <= w[1].t_ms));
        // A second node lost after the opening joins the incident, with its evidence.
        timeline.record(Event::IncidentSpread { nodes: vec!["n0".into()], evidence: vec!["n0: Ready=Unknown".into()] });
        timeline.record(Event::ReturnStarted { step: "incident".into() });
        timeline.record(Event::IncidentClosed { reason: "back".into() });
        let report = crate::report::build(&drill(), &timeline.observations(), &meta());
        let facts = report.incident.as_ref().unwrap();
        assert_eq!(facts.nodes, ["n0", "n1"]);
        assert!(facts.evidence.iter().any(|e| e == "n0: Ready=Unknown"), "{facts:?}");
        assert_eq!(report.kind, RunKind::Incident);
        assert!(report.steps.is_empty(), "an incident ran no step");
        assert!(report.fidelity.starts_with("a real incident, not a drill"), "{}", report.fidelity);
        let detection = report.phase(PhaseId::Detection).unwrap();
        assert!(detection.seconds.unwrap() >= 0.03, "{detection:?}");
        let rto = report.phase(PhaseId::Rto).unwrap();
        assert_eq!(rto.verdict, Verdict::Incomplete);
        assert!(rto.note.as_deref().unwrap().contains("unknown: not observed by the watch"), "{rto:?}");
        for format in crate::report::Format::ALL {
            let text = format.render(&report).unwrap();
            assert!(!text.is_empty());
            if format == crate::report::Format::Md {
                assert!(text.starts_with("# Incident report: t"), "{text}");
                assert!(text.contains("Cause: node-failure (n0, n1)"), "{text}");
            }
        }
        assert_eq!(report.incident.unwrap().closed.as_deref(), Some("back"));
    }

    /// A drill the watch recognised (by its marks or its lock) is recorded as a drill, never as an incident.
    #[test]
    fn an_episode_of_a_recognised_drill_is_recorded_as_a_drill() {
        let timeline = Timeline::in_memory();
        timeline.rebase(Utc::now(), None);
        timeline.record(Event::IncidentOpened {
            cause: IncidentCause::Drain,
            nodes: vec!["n1".into()],
            evidence: vec!["n1: cordoned".into()],
            unknown: vec![],
            drill_run: Some("drain-20261203T100000Z".into()),
        });
        timeline.record(Event::IncidentClosed { reason: "back".into() });
        let report = crate::report::build(&drill(), &timeline.observations(), &meta());
        assert_eq!(report.kind, RunKind::Drill);
        assert_eq!(report.incident.unwrap().drill_run.as_deref(), Some("drain-20261203T100000Z"));
        let json = serde_json::to_value(crate::report::build(&drill(), &timeline.observations(), &meta())).unwrap();
        assert_eq!(json["kind"], "drill");
    }

    /// Without evidence of when it began, the episode has no t0: phases from t0 are unknown, the rest still cut.
    #[test]
    fn without_evidence_t0_is_unknown_and_later_phases_still_measured() {
        let timeline = Timeline::in_memory();
        timeline.rebase(Utc::now(), None);
        timeline.record(Event::IncidentOpened {
            cause: IncidentCause::Unknown,
            nodes: vec![],
            evidence: vec![],
            unknown: vec!["t0".into()],
            drill_run: None,
        });
        timeline.record(Event::PodCreated { pod: "w-2".into() });
        timeline.record(Event::NodeClaimCreated { nodeclaim: "c1".into() });
        let report = crate::report::build(&drill(), &timeline.observations(), &meta());
        assert_eq!(report.phase(PhaseId::Rto).unwrap().verdict, Verdict::Incomplete);
        assert!(report.phase(PhaseId::Pending).unwrap().seconds.is_some(), "{:?}", report.phases);
        assert!(report.fidelity.contains("Unknown: t0"), "{}", report.fidelity);
    }
}
