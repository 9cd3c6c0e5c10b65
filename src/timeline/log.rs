//! The timeline on disk and in memory: the append-only log of a run's observations, each with both clocks, shared by
//! the watches and the steps, moved to its origin by an incident's opening, and read back.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::Event;

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub seq: u64,
    /// Milliseconds since the drill started, on the tool's monotonic clock.
    pub t_ms: u64,
    /// When the tool received or did it (wall clock, milliseconds).
    pub received: DateTime<Utc>,
    /// The object's own time (creationTimestamp, lastTransitionTime, event time); whole seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<DateTime<Utc>>,
    #[serde(flatten)]
    pub event: Event,
}

struct Inner {
    /// The origin of the tool's clock: moved only by [`Timeline::rebase`].
    start: Instant,
    start_wall: DateTime<Utc>,
    file: Option<File>,
    observations: Vec<Observation>,
    listeners: Vec<tokio::sync::mpsc::UnboundedSender<Observation>>,
}

/// The append-only log of a run, shared by the watches and the steps.
#[derive(Clone)]
pub struct Timeline {
    inner: Arc<Mutex<Inner>>,
}

impl Timeline {
    /// A timeline that appends every observation to `path` (JSON lines) as it arrives.
    pub fn create(path: &Path) -> std::io::Result<Timeline> {
        let file = File::create(path)?;
        Ok(Self::with_file(Some(file)))
    }

    pub fn in_memory() -> Timeline {
        Self::with_file(None)
    }

    fn with_file(file: Option<File>) -> Timeline {
        Timeline {
            inner: Arc::new(Mutex::new(Inner {
                start: Instant::now(),
                start_wall: Utc::now(),
                file,
                observations: Vec::new(),
                listeners: Vec::new(),
            })),
        }
    }

    /// Takes up a timeline a stopped process wrote at `path`: its observations, its origin, appending from here on.
    pub fn resume(path: &Path) -> std::io::Result<Timeline> {
        let observations = read(path)?;
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        let start_wall =
            observations.first().map_or_else(Utc::now, |o| o.received - chrono::Duration::milliseconds(o.t_ms as i64));
        Ok(Timeline {
            inner: Arc::new(Mutex::new(Inner {
                start: instant_at(start_wall),
                start_wall,
                file: Some(file),
                observations,
                listeners: Vec::new(),
            })),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn started_at(&self) -> DateTime<Utc> {
        self.lock().start_wall
    }

    pub fn elapsed(&self) -> std::time::Duration {
        self.lock().start.elapsed()
    }

    pub fn record(&self, event: Event) -> Observation {
        self.record_at(event, None)
    }

    pub fn record_at(&self, event: Event, server_time: Option<DateTime<Utc>>) -> Observation {
        let mut inner = self.lock();
        let elapsed = inner.start.elapsed();
        let received = inner.start_wall + chrono::Duration::from_std(elapsed).unwrap_or_default();
        let obs = Observation {
            seq: inner.observations.len() as u64,
            t_ms: elapsed.as_millis() as u64,
            received,
            server_time,
            event,
        };
        if let Some(file) = inner.file.as_mut()
            && let Ok(line) = serde_json::to_string(&obs)
        {
            // One write per line, unbuffered: a crash of the tool loses nothing already seen.
            let _ = writeln!(file, "{}", crate::secrets::redact(&line));
        }
        inner.listeners.retain(|l| l.send(obs.clone()).is_ok());
        inner.observations.push(obs.clone());
        obs
    }

    /// Moves the origin of an in-memory timeline to `origin` (an incident's t0, or when it was first seen), so the
    /// episode's clock starts there, however long the watch ran before. Observations before it are dropped but for
    /// the state they leave (the run's start, the baseline, the tolerations, the service's availability), stamped at
    /// the origin; `first` is recorded at the origin before everything kept after it, with its server time. Later
    /// observations keep their wall clock; their tool clock counts from the origin.
    pub fn rebase(&self, origin: DateTime<Utc>, first: Option<(Event, Option<DateTime<Utc>>)>) {
        let mut inner = self.lock();
        let kept_state = |e: &Event| {
            matches!(
                e,
                Event::DrillStarted { .. }
                    | Event::Baseline { .. }
                    | Event::TolerationsRead { .. }
                    | Event::AutoscalerFound { .. }
            )
        };
        let availability = |e: &Event| matches!(e, Event::ServiceLost { .. } | Event::ServiceRestored { .. });
        let (before, after): (Vec<Observation>, Vec<Observation>) =
            std::mem::take(&mut inner.observations).into_iter().partition(|o| o.received < origin);
        let last_availability = before.iter().rev().find(|o| availability(&o.event)).cloned();
        let stamped = |mut o: Observation| {
            o.received = origin;
            o
        };
        let mut kept: Vec<Observation> = before.into_iter().filter(|o| kept_state(&o.event)).map(stamped).collect();
        kept.extend(last_availability.map(stamped));
        if let Some((event, server_time)) = first {
            kept.push(Observation { seq: 0, t_ms: 0, received: origin, server_time, event });
        }
        kept.extend(after);
        for (i, o) in kept.iter_mut().enumerate() {
            o.seq = i as u64;
            o.t_ms = (o.received - origin).num_milliseconds().max(0) as u64;
        }
        inner.observations = kept;
        inner.start_wall = origin;
        inner.start = instant_at(origin);
    }

    /// Writes every observation so far to `path` and appends each later one there: an in-memory timeline becomes a
    /// run's.
    pub fn persist(&self, path: &Path) -> std::io::Result<()> {
        let mut inner = self.lock();
        let mut file = File::create(path)?;
        for o in &inner.observations {
            let line = serde_json::to_string(o).map_err(std::io::Error::other)?;
            writeln!(file, "{}", crate::secrets::redact(&line))?;
        }
        inner.file = Some(file);
        Ok(())
    }

    /// How many observations the timeline holds.
    pub fn len(&self) -> usize {
        self.lock().observations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn observations(&self) -> Vec<Observation> {
        self.lock().observations.clone()
    }

    /// The first observation `f` maps to something, without copying the timeline: the watches stamp what they
    /// record under the same lock, so a step that looks something up while they record must hold it briefly.
    pub fn find_map<T>(&self, f: impl FnMut(&Observation) -> Option<T>) -> Option<T> {
        self.lock().observations.iter().find_map(f)
    }

    /// Every observation recorded from now on.
    pub fn subscribe(&self) -> tokio::sync::mpsc::UnboundedReceiver<Observation> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.lock().listeners.push(tx);
        rx
    }
}

/// The monotonic instant that corresponds to a wall-clock time, so a moved origin keeps counting on the monotonic
/// clock; now, if the process's clock cannot reach that far back.
fn instant_at(wall: DateTime<Utc>) -> Instant {
    let ago = (Utc::now() - wall).to_std().unwrap_or_default();
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}

/// Reads a timeline written by [`Timeline::create`]; a torn last line (a crash mid-write) is skipped.
pub fn read(path: &Path) -> std::io::Result<Vec<Observation>> {
    let file = File::open(path)?;
    Ok(BufReader::new(file).lines().map_while(Result::ok).filter_map(|l| serde_json::from_str(&l).ok()).collect())
}

/// A timeline for tests: observations numbered in order from (seconds after `base`, the server's time in whole
/// seconds after `base`, event).
#[cfg(test)]
pub(crate) fn observations_from(base: DateTime<Utc>, events: Vec<(f64, Option<i64>, Event)>) -> Vec<Observation> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, (t, server, event))| Observation {
            seq: i as u64,
            t_ms: (t * 1000.0) as u64,
            received: base + chrono::Duration::milliseconds((t * 1000.0) as i64),
            server_time: server.map(|s| base + chrono::Duration::seconds(s)),
            event,
        })
        .collect()
}

pub fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}
