//! The write-ahead journal: every mutation is written, with how to undo it, before it is made; so is every undo.
//!
//! Each line carries `mac`, an HMAC-SHA256 of the line and the run directory it belongs to, under the key
//! `HYBRID_DRILL_JOURNAL_KEY` names (kept outside the reports volume), or under a key of this process alone when none
//! is given. A line read back is `authentic` when its mac verifies: a line someone else appended to the file (a
//! planted `exec` undo) is not, and its commands are not run unless the user trusts the journal by name
//! (`recover --trust-journal RUN_DIR`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::alertmanager::Matcher;
use crate::cluster::policy::PolicyRef;

/// A change the tool makes to a cluster. What undoes each one is in `undo.rs`.
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
    Exec {
        step: String,
        command: Vec<String>,
        undo: Option<Vec<String>>,
        /// The environment the hooks are given by name (see [`super::process::run_command`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
    },
    /// Create a deny policy of a link cut; undone by deleting it.
    CreatePolicy { policy: PolicyRef },
    /// Label a pod with the run's id so a pod-network cut's policy selects it; undone by removing the label.
    LabelPod { namespace: String, pod: String, label: String },
    /// Label an on-prem node with the run's cut label, so a host cut's policy selects exactly the nodes resolved
    /// before the drill; undone by removing the label and, when the node is not Ready within the hook's bound after
    /// that (its CNI agent never heard the policy go), by running the drill's last-resort hook for it.
    LabelNode {
        step: String,
        node: String,
        label: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_resort: Option<LastResort>,
    },
    /// Fail a node (or all of them, when `node` is none) with the drill's hook; undone by its recovery hook.
    FailNode {
        step: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        command: Vec<String>,
        recover: Vec<String>,
        timeout_seconds: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
    },
    /// Take one instance type's capacity away with the drill's hook; undone by its give-back hook.
    RemoveCapacity {
        step: String,
        instance_type: String,
        command: Vec<String>,
        give_back: Vec<String>,
        timeout_seconds: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
    },
    /// Delete a fallback NodeClaim, as a Spot interruption or a failed instance would; Karpenter replaces it, so
    /// there is nothing to undo.
    DeleteNodeClaim {
        nodeclaim: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
    /// Start the canary's one replica of the workload on the fallback (`hybrid-drill canary`); undone by deleting it.
    CreatePod { namespace: String, pod: String },
    /// Take the drill lock (a Lease) for the run: released by the run at its end (journalled `undoing`, `undone`),
    /// never by a rollback, which runs under it; `recover` takes it over once the run's process is gone.
    HoldLease { namespace: String, name: String, holder: String },
    /// Create an Alertmanager silence for the alerts the drill causes; undone by expiring every silence with this
    /// comment and these matchers (its id is only known once it is made, so a crash in between leaves it findable).
    Silence {
        alertmanager: String,
        matchers: Vec<Matcher>,
        comment: String,
        /// When Alertmanager ends it by itself, should no one expire it.
        ends_at: DateTime<Utc>,
    },
}

/// A node's way back when lifting a cut does not bring it back: the drill's hook, `{node}` already expanded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastResort {
    pub command: Vec<String>,
    /// How long the node may stay not Ready after its cut is lifted before the hook runs.
    pub after_seconds: u64,
    pub timeout_seconds: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
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
            Mutation::LabelNode { node, .. } => ("label".into(), format!("node/{node}")),
            Mutation::FailNode { node: Some(node), .. } => ("fail".into(), format!("node/{node}")),
            Mutation::FailNode { step, command, .. } => {
                ("fail".into(), format!("nodes ({step}: {})", command.join(" ")))
            }
            Mutation::RemoveCapacity { instance_type, .. } => {
                ("remove capacity".into(), format!("instance-type/{instance_type}"))
            }
            Mutation::DeleteNodeClaim { nodeclaim, .. } => ("delete".into(), format!("nodeclaim/{nodeclaim}")),
            Mutation::CreatePod { namespace, pod } => ("create".into(), format!("pod/{namespace}/{pod}")),
            Mutation::HoldLease { namespace, name, .. } => ("hold".into(), format!("lease/{namespace}/{name}")),
            Mutation::Silence { alertmanager, matchers, .. } => {
                let matchers: Vec<String> = matchers.iter().map(Matcher::to_string).collect();
                ("silence".into(), format!("{{{}}} in {alertmanager}", matchers.join(", ")))
            }
        }
    }
}

/// The states a journal entry goes through: `intent`, then `done` or `failed`; when it is undone, `undoing` (written
/// before the undo runs), then `undone`, `undo-failed`, or `reverted` (a later step of the drill undid it, the return).
/// Journals written before `undoing` existed simply lack it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryState {
    Intent,
    Done,
    Failed,
    Undoing,
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
    /// The line's mac verified under the journal key: the tool wrote it, for this run directory.
    #[serde(skip)]
    pub authentic: bool,
}

/// The variable naming the journal's key: the key itself, or a reference `${file:/path}` / `${env:NAME}`.
pub const JOURNAL_KEY_ENV: &str = "HYBRID_DRILL_JOURNAL_KEY";

/// The shortest journal key accepted: 128 bits in hex or base64 and more.
const SHORTEST_KEY: usize = 16;

/// Why the journal key cannot be had.
#[derive(Debug, thiserror::Error)]
enum JournalKeyError {
    #[error("no random source")]
    NoRandomSource,
    #[error("{}: {error}", JOURNAL_KEY_ENV)]
    Unreadable { error: crate::secrets::SecretError },
    #[error("{} is shorter than {} characters: use e.g. `openssl rand -hex 32`", JOURNAL_KEY_ENV, SHORTEST_KEY)]
    Short,
}

/// The journal key: the one `HYBRID_DRILL_JOURNAL_KEY` names, or one made for this process (its lines then verify
/// only in this process: a later `recover` must be told to trust them).
static KEY: std::sync::LazyLock<Result<(ring::hmac::Key, bool), JournalKeyError>> = std::sync::LazyLock::new(|| {
    let Ok(spec) = std::env::var(JOURNAL_KEY_ENV) else {
        let rng = ring::rand::SystemRandom::new();
        let key =
            ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng).map_err(|_| JournalKeyError::NoRandomSource)?;
        return Ok((key, false));
    };
    // The variable holds the key, or a reference to where it is (whose file no drill reference may read after).
    let value = if crate::secrets::has_reference(&spec) {
        crate::secrets::read_own_key(&spec).map_err(|error| JournalKeyError::Unreadable { error })?
    } else {
        spec
    };
    let value = value.trim();
    if value.len() < SHORTEST_KEY {
        return Err(JournalKeyError::Short);
    }
    crate::secrets::remember(value);
    Ok((ring::hmac::Key::new(ring::hmac::HMAC_SHA256, value.as_bytes()), true))
});

fn key() -> std::io::Result<&'static ring::hmac::Key> {
    KEY.as_ref().map(|(k, _)| k).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))
}

/// Whether the journal key is one given to the tool (`HYBRID_DRILL_JOURNAL_KEY`), so another process can verify.
pub fn key_configured() -> bool {
    KEY.as_ref().is_ok_and(|(_, given)| *given)
}

/// What a journal's lines are bound to: the names of its directory and that directory's parent (`<drill>/<stamp>`),
/// so a line copied from another run's journal does not verify.
fn binding(path: &Path) -> String {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let names: Vec<String> =
        dir.components().rev().take(2).map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    names.into_iter().rev().collect::<Vec<_>>().join("/")
}

const MAC_FIELD: &str = ",\"mac\":\"";

fn mac_of(binding: &str, body: &str) -> std::io::Result<String> {
    let tag = ring::hmac::sign(key()?, format!("{binding}\n{body}").as_bytes());
    Ok(tag.as_ref().iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `line` ends with a mac of the rest of it under the journal key.
fn verifies(binding: &str, line: &[u8]) -> bool {
    let Ok(line) = std::str::from_utf8(line.trim_ascii()) else { return false };
    let Some(at) = line.rfind(MAC_FIELD) else { return false };
    let Some(hex) = line[at + MAC_FIELD.len()..].strip_suffix("\"}") else { return false };
    let Some(tag) = (0..hex.len() / 2).map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect()
    else {
        return false;
    };
    let tag: Vec<u8> = tag;
    let body = format!("{}}}", &line[..at]);
    key().is_ok_and(|k| ring::hmac::verify(k, format!("{binding}\n{body}").as_bytes(), &tag).is_ok())
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read the journal {path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    #[error("the journal {path} has an unreadable entry on line {line}: {cause}")]
    Corrupt { path: String, line: usize, cause: serde_json::Error },
}

/// A journal file as read back.
#[derive(Debug, Default)]
pub struct Contents {
    pub entries: Vec<Entry>,
    /// The last line, when a crash cut it short mid-write: ignored, and shown so the reader knows.
    pub torn: Option<String>,
    /// Where the torn line starts, so an appending journal can cut it off before it writes.
    torn_at: Option<u64>,
}

/// Append-only, fsynced journal file of one run.
pub struct Journal {
    path: PathBuf,
    file: File,
    next_seq: u64,
    binding: String,
    /// The user named this run's journal as trusted (`recover --trust-journal`): its unauthenticated lines' commands
    /// may run.
    trusted_by_user: bool,
}

impl Journal {
    /// Opens a journal for appending, continuing its sequence. A torn last line (a crash mid-write) is cut off first,
    /// so the next entry starts on a line of its own; an unreadable entry before it is an error.
    pub fn create(path: &Path) -> std::io::Result<Journal> {
        key()?;
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let contents = read(path).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if let Some(at) = contents.torn_at {
            file.set_len(at)?;
            file.sync_data()?;
        }
        let next_seq = contents.entries.iter().map(|e| e.seq + 1).max().unwrap_or(0);
        Ok(Journal { path: path.to_path_buf(), file, next_seq, binding: binding(path), trusted_by_user: false })
    }

    /// This journal as one the user trusts by name: the commands of its unauthenticated lines may run.
    pub fn trusted_by_user(mut self, trusted: bool) -> Journal {
        self.trusted_by_user = trusted;
        self
    }

    pub fn is_trusted_by_user(&self) -> bool {
        self.trusted_by_user
    }

    /// A journal over `path` whose writes go to `file`, so a test can make them fail.
    #[cfg(test)]
    pub(crate) fn writing_to(path: &Path, file: File) -> Journal {
        let next_seq = read(path).map(|c| c.entries.iter().map(|e| e.seq + 1).max().unwrap_or(0)).unwrap_or(0);
        Journal { path: path.to_path_buf(), file, next_seq, binding: binding(path), trusted_by_user: false }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A sequence number no entry of this journal has yet.
    pub fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Records the intent and returns its sequence number; the line is on disk when this returns.
    pub fn intend(&mut self, mutation: &Mutation) -> std::io::Result<u64> {
        let seq = self.next_seq();
        self.write(seq, EntryState::Intent, mutation, None)?;
        Ok(seq)
    }

    /// Appends one entry in a single write and waits until it is on disk.
    pub fn write(
        &mut self,
        seq: u64,
        state: EntryState,
        mutation: &Mutation,
        note: Option<String>,
    ) -> std::io::Result<()> {
        let entry = Entry { seq, at: Utc::now(), state, mutation: mutation.clone(), note, authentic: true };
        // The journal holds hooks and URLs as written, their references unread; the mask is for what an error or a
        // note quoted of a value.
        let body = crate::secrets::redact(&serde_json::to_string(&entry).map_err(std::io::Error::other)?).into_owned();
        let mac = mac_of(&self.binding, &body)?;
        let line = format!("{}{MAC_FIELD}{mac}\"}}\n", &body[..body.len().saturating_sub(1)]);
        self.file.write_all(line.as_bytes())?;
        self.file.sync_data()
    }
}

/// All entries of a journal file, oldest first; a missing file has none. An entry that does not parse is an error,
/// unless it is the last line: a crash mid-write leaves that one torn, and it is returned in [`Contents::torn`].
pub fn read(path: &Path) -> Result<Contents, ReadError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Contents::default()),
        Err(cause) => return Err(ReadError::Io { path: path.display().to_string(), cause }),
    };
    let mut contents = Contents::default();
    let binding = binding(path);
    let mut start = 0usize;
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let last = lines.iter().rposition(|l| !l.trim_ascii().is_empty());
    for (i, line) in lines.iter().enumerate() {
        let offset = start;
        start += line.len() + 1;
        if line.trim_ascii().is_empty() {
            continue;
        }
        match serde_json::from_slice::<Entry>(line) {
            Ok(mut entry) => {
                entry.authentic = verifies(&binding, line);
                contents.entries.push(entry)
            }
            Err(_) if Some(i) == last => {
                contents.torn = Some(String::from_utf8_lossy(line).into_owned());
                contents.torn_at = Some(offset as u64);
            }
            Err(cause) => return Err(ReadError::Corrupt { path: path.display().to_string(), line: i + 1, cause }),
        }
    }
    Ok(contents)
}

/// The mutations that still need undoing: intended or made (or their undo begun), not reverted or undone since,
/// newest first.
pub fn outstanding(entries: &[Entry]) -> Vec<(u64, Mutation)> {
    outstanding_entries(entries).into_iter().map(|e| (e.seq, e.mutation.clone())).collect()
}

/// The same, with whether the tool wrote each: its last line, whose mutation is the one undone, verified.
pub fn outstanding_authenticated(entries: &[Entry]) -> Vec<(u64, Mutation, bool)> {
    outstanding_entries(entries).into_iter().map(|e| (e.seq, e.mutation.clone(), e.authentic)).collect()
}

fn outstanding_entries(entries: &[Entry]) -> Vec<&Entry> {
    let mut last: std::collections::BTreeMap<u64, &Entry> = std::collections::BTreeMap::new();
    for e in entries {
        last.insert(e.seq, e);
    }
    last.values()
        .rev()
        .filter(|e| match e.state {
            EntryState::Intent
            | EntryState::Done
            | EntryState::Failed
            | EntryState::Undoing
            | EntryState::UndoFailed => true,
            EntryState::Reverted | EntryState::Undone => false,
        })
        .filter(|e| e.mutation.needs_undo())
        .copied()
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
        let left: Vec<String> =
            outstanding(&read(&path).unwrap().entries).into_iter().map(|(_, m)| m.describe().1).collect();
        assert_eq!(left, ["node/d", "node/b"]);
        // reopening continues the sequence
        let mut again = Journal::create(&path).unwrap();
        assert_eq!(again.intend(&a).unwrap(), 5);
    }

    #[test]
    fn an_undo_begun_but_not_finished_is_still_outstanding() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::create(&path).unwrap();
        let cordon = Mutation::Cordon { node: "a".into(), was_unschedulable: false };
        let seq = j.intend(&cordon).unwrap();
        j.write(seq, EntryState::Done, &cordon, None).unwrap();
        j.write(seq, EntryState::Undoing, &cordon, None).unwrap();
        assert_eq!(outstanding(&read(&path).unwrap().entries), [(0, cordon.clone())]);
        j.write(seq, EntryState::Undone, &cordon, None).unwrap();
        assert!(outstanding(&read(&path).unwrap().entries).is_empty());
    }

    #[test]
    fn a_journal_of_an_older_run_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(
            &path,
            concat!(
                r#"{"seq":0,"at":"2026-12-02T10:15:00Z","state":"intent","action":"cordon","node":"a","was_unschedulable":false}"#,
                "\n",
                r#"{"seq":0,"at":"2026-12-02T10:15:01Z","state":"done","action":"cordon","node":"a","was_unschedulable":false}"#,
                "\n",
                r#"{"seq":0,"at":"2026-12-02T10:16:00Z","state":"undo-failed","action":"cordon","node":"a","was_unschedulable":false,"note":"boom"}"#,
                "\n",
            ),
        )
        .unwrap();
        let contents = read(&path).unwrap();
        assert_eq!(contents.entries.len(), 3);
        assert_eq!(contents.torn, None);
        assert_eq!(outstanding(&contents.entries).len(), 1);
    }

    /// A journal holding one intent, and a handle that appends to it behind the journal's back.
    fn one_intent(dir: &Path) -> (PathBuf, Mutation, File) {
        let path = dir.join("journal.jsonl");
        let cordon = Mutation::Cordon { node: "a".into(), was_unschedulable: false };
        Journal::create(&path).unwrap().intend(&cordon).unwrap();
        let file = OpenOptions::new().append(true).open(&path).unwrap();
        (path, cordon, file)
    }

    #[test]
    fn a_torn_last_line_is_reported_and_cut_off_before_the_next_entry() {
        let dir = tempfile::tempdir().unwrap();
        let (path, cordon, mut file) = one_intent(dir.path());
        file.write_all(br#"{"seq":0,"at":"2026-12-02T10:15:01Z","sta"#).unwrap();
        let contents = read(&path).unwrap();
        assert_eq!(contents.entries.len(), 1);
        assert_eq!(contents.torn.as_deref(), Some(r#"{"seq":0,"at":"2026-12-02T10:15:01Z","sta"#));
        let mut j = Journal::create(&path).unwrap();
        assert_eq!(j.intend(&cordon).unwrap(), 1);
        let contents = read(&path).unwrap();
        assert_eq!((contents.entries.len(), contents.torn), (2, None));
    }

    #[test]
    fn an_unreadable_entry_before_the_last_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _, mut file) = one_intent(dir.path());
        file.write_all(b"not an entry\n").unwrap();
        file.write_all(br#"{"seq":1,"at":"2026-12-02T10:15:01Z","state":"intent","action":"uncordon","node":"a"}"#)
            .unwrap();
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
        assert!(Journal::create(&path).is_err());
    }

    #[test]
    fn a_silence_is_journalled_with_what_finds_it_again_and_needs_undoing() {
        let m = Mutation::Silence {
            alertmanager: "http://am:9093".into(),
            matchers: vec![Matcher::parse(r#"alertname="KubeNodeNotReady""#).unwrap()],
            comment: "Q3 [hybrid-drill run d-1]".into(),
            ends_at: "2026-12-03T11:00:00Z".parse().unwrap(),
        };
        let line = serde_json::to_value(&m).unwrap();
        assert_eq!(line["action"], "silence");
        assert_eq!(line["matchers"][0]["isRegex"], false);
        assert_eq!(serde_json::from_value::<Mutation>(line).unwrap(), m);
        assert_eq!(m.describe(), ("silence".into(), r#"{alertname="KubeNodeNotReady"} in http://am:9093"#.into()));
        assert!(m.needs_undo());
    }
}
