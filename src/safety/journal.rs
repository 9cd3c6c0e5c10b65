//! The write-ahead journal: every mutation is written, with how to undo it, before it is made.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::cluster::policy::PolicyRef;

/// A change the tool makes to a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Mutation {
    /// Mark a node unschedulable; undone by uncordoning it (unless it was already cordoned before the drill).
    Cordon { node: String, was_unschedulable: bool },
    /// Make a node schedulable again as part of the drill itself (the return).
    Uncordon { node: String },
    /// Evict a pod; its controller recreates it, so there is nothing to undo.
    Evict { namespace: String, pod: String, node: String },
    /// A rollout restart; the rollout itself is the repair, so there is nothing to undo.
    Restart { namespace: String, kind: String, name: String },
    /// A user command; undone by its `undo` command when it has one.
    Exec { step: String, command: Vec<String>, undo: Option<Vec<String>> },
    /// Create a deny policy of a link cut; undone by deleting it.
    CreatePolicy { policy: PolicyRef },
    /// Label a pod with the run's id so a pod-network cut's policy selects it; undone by removing the label.
    LabelPod { namespace: String, pod: String, label: String },
    /// Fail a node (or all of them, when `node` is none) with the drill's hook; undone by its recovery hook.
    FailNode {
        step: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        command: Vec<String>,
        recover: Vec<String>,
        timeout_seconds: u64,
    },
}

impl Mutation {
    pub fn describe(&self) -> (String, String) {
        match self {
            Mutation::Cordon { node, .. } => ("cordon".into(), format!("node/{node}")),
            Mutation::Uncordon { node } => ("uncordon".into(), format!("node/{node}")),
            Mutation::Evict { namespace, pod, .. } => ("evict".into(), format!("pod/{namespace}/{pod}")),
            Mutation::Restart { namespace, kind, name } => ("restart".into(), format!("{kind}/{namespace}/{name}")),
            Mutation::Exec { step, command, .. } => ("exec".into(), format!("{step}: {}", command.join(" "))),
            Mutation::CreatePolicy { policy } => ("create".into(), policy.to_string()),
            Mutation::LabelPod { namespace, pod, .. } => ("label".into(), format!("pod/{namespace}/{pod}")),
            Mutation::FailNode { node: Some(node), .. } => ("fail".into(), format!("node/{node}")),
            Mutation::FailNode { step, command, .. } => {
                ("fail".into(), format!("nodes ({step}: {})", command.join(" ")))
            }
        }
    }

    /// Whether undoing this mutation needs an action on the cluster.
    pub fn needs_undo(&self) -> bool {
        match self {
            Mutation::Cordon { was_unschedulable, .. } => !was_unschedulable,
            Mutation::Exec { undo, .. } => undo.is_some(),
            Mutation::CreatePolicy { .. } | Mutation::LabelPod { .. } | Mutation::FailNode { .. } => true,
            Mutation::Uncordon { .. } | Mutation::Evict { .. } | Mutation::Restart { .. } => false,
        }
    }
}

/// The states a journal entry goes through. `Reverted` means a later step of the drill undid it (the return).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryState {
    Intent,
    Done,
    Failed,
    Reverted,
    Undone,
    UndoFailed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    pub at: DateTime<Utc>,
    pub state: EntryState,
    #[serde(flatten)]
    pub mutation: Mutation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Append-only, fsynced journal file of one run.
pub struct Journal {
    path: PathBuf,
    file: File,
    next_seq: u64,
}

impl Journal {
    pub fn create(path: &Path) -> std::io::Result<Journal> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let next_seq = read(path)?.iter().map(|e| e.seq + 1).max().unwrap_or(0);
        Ok(Journal { path: path.to_path_buf(), file, next_seq })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records the intent and returns its sequence number; the line is on disk when this returns.
    pub fn intend(&mut self, mutation: &Mutation) -> std::io::Result<u64> {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.write(seq, EntryState::Intent, mutation, None)?;
        Ok(seq)
    }

    pub fn write(
        &mut self,
        seq: u64,
        state: EntryState,
        mutation: &Mutation,
        note: Option<String>,
    ) -> std::io::Result<()> {
        let entry = Entry { seq, at: Utc::now(), state, mutation: mutation.clone(), note };
        let line = serde_json::to_string(&entry).map_err(std::io::Error::other)?;
        writeln!(self.file, "{line}")?;
        self.file.sync_data()
    }
}

/// All entries of a journal file, oldest first; a torn last line is skipped.
pub fn read(path: &Path) -> std::io::Result<Vec<Entry>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(BufReader::new(file).lines().map_while(Result::ok).filter_map(|l| serde_json::from_str(&l).ok()).collect())
}

/// The mutations that still need undoing: intended or made, not reverted or undone since, newest first.
pub fn outstanding(entries: &[Entry]) -> Vec<(u64, Mutation)> {
    let mut last: std::collections::BTreeMap<u64, &Entry> = std::collections::BTreeMap::new();
    for e in entries {
        last.insert(e.seq, e);
    }
    last.values()
        .rev()
        .filter(|e| {
            matches!(e.state, EntryState::Intent | EntryState::Done | EntryState::Failed | EntryState::UndoFailed)
        })
        .filter(|e| e.mutation.needs_undo())
        .map(|e| (e.seq, e.mutation.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outstanding_lists_undoable_entries_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::create(&path).unwrap();
        let a = Mutation::Cordon { node: "a".into(), was_unschedulable: false };
        let b = Mutation::Cordon { node: "b".into(), was_unschedulable: false };
        let already = Mutation::Cordon { node: "c".into(), was_unschedulable: true };
        let evict = Mutation::Evict { namespace: "n".into(), pod: "p".into(), node: "a".into() };
        for m in [&a, &b, &already, &evict] {
            let seq = j.intend(m).unwrap();
            j.write(seq, EntryState::Done, m, None).unwrap();
        }
        // an intent whose outcome never reached the disk still counts: it may have happened
        j.intend(&Mutation::Cordon { node: "d".into(), was_unschedulable: false }).unwrap();
        j.write(0, EntryState::Reverted, &a, None).unwrap();
        let left: Vec<String> = outstanding(&read(&path).unwrap()).into_iter().map(|(_, m)| m.describe().1).collect();
        assert_eq!(left, ["node/d", "node/b"]);
        // reopening continues the sequence
        let mut again = Journal::create(&path).unwrap();
        assert_eq!(again.intend(&a).unwrap(), 5);
    }
}
