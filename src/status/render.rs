//! `status` as text (one line per finding, then the verdict and what to do) and as JSON
//! (`schema: hybrid-drill.io/status/v1`).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{LockState, Status};

fn stamp(t: Option<DateTime<Utc>>) -> String {
    t.map_or("(unknown)".into(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

fn lock_line(lock: &LockState) -> String {
    let Some(holder) = &lock.holder else {
        return format!("drill lock {}: free", lock.lease);
    };
    let state = match (lock.process_gone, lock.renewing) {
        (true, _) => "its process is gone: `hybrid-drill recover` takes it over",
        (false, true) => "renewed within its duration: a drill or recover is running",
        (false, false) => "not renewed for its duration: its holder stopped; a drill or recover takes it over",
    };
    format!("drill lock {}: held by {}; {state}", lock.lease, holder.describe())
}

/// One line per finding, then the verdict.
pub fn text(status: &Status) -> String {
    let mut out = format!("context {} ({})\n", status.context, status.server);
    for lock in &status.locks {
        out.push_str(&format!("{}\n", lock_line(lock)));
    }
    for run in &status.runs {
        let id = run.run_id.as_deref().unwrap_or("(no timeline)");
        out.push_str(&format!(
            "unfinished run {id} in {} (started {}): {}; ",
            run.dir.display(),
            stamp(run.started),
            run.state
        ));
        match (&run.unreadable, run.outstanding.is_empty()) {
            (Some(why), _) => out.push_str(&format!("its journal cannot be read: {why}\n")),
            (None, true) => out.push_str("nothing left to undo in its journal\n"),
            (None, false) => out.push_str(&format!("left to undo: {}\n", run.outstanding.join(", "))),
        }
    }
    for mark in &status.marked {
        out.push_str(&format!("marked in the cluster: {mark}\n"));
    }
    for left in &status.leftovers {
        out.push_str(&format!(
            "left over: {} {} (created during the run in {})\n",
            left.kind,
            left.name,
            left.run_dir.display()
        ));
    }
    if status.clean() {
        out.push_str("clean: the drill lock is free, no run is unfinished, nothing carries a run's mark\n");
    } else {
        out.push_str(
            "not clean: `hybrid-drill recover RUN_DIR` (or `hybrid-drill recover` for every run) restores what a \
             stopped run left; a lock renewed by a running drill is released when it ends\n",
        );
    }
    out
}

/// The whole status as one object.
pub fn json(status: &Status) -> Value {
    let locks: Vec<Value> = status
        .locks
        .iter()
        .map(|lock| {
            let holder = lock.holder.as_ref().map(|h| {
                json!({
                    "identity": h.identity,
                    "since": h.since,
                    "renewed": h.renewed,
                    "duration_seconds": h.duration.as_secs(),
                    "run_dir": h.run_dir,
                    "host": h.host,
                    "pid": h.pid,
                })
            });
            json!({
                "lease": format!("{}/{}", lock.lease.namespace, lock.lease.name),
                "held": lock.holder.is_some(),
                "holder": holder,
                "renewing": lock.holder.is_some() && lock.renewing,
                "process_gone": lock.process_gone,
            })
        })
        .collect();
    let runs: Vec<Value> = status
        .runs
        .iter()
        .map(|r| {
            json!({"run_dir": r.dir.display().to_string(), "run_id": r.run_id, "started": r.started,
                   "state": r.state, "outstanding": r.outstanding, "unreadable": r.unreadable})
        })
        .collect();
    let leftovers: Vec<Value> = status
        .leftovers
        .iter()
        .map(|l| json!({"kind": l.kind, "name": l.name, "run_dir": l.run_dir.display().to_string()}))
        .collect();
    json!({
        "schema": "hybrid-drill.io/status/v1",
        "context": status.context,
        "server": status.server,
        "clean": status.clean(),
        "locks": locks,
        "unfinished_runs": runs,
        "marked": status.marked,
        "leftovers": leftovers,
    })
}
