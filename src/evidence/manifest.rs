//! The run directory's integrity record: `manifest.json` holds the sha256 of every other file in it and the run's id,
//! written once the run has written everything; `manifest.sig` an ed25519 signature of manifest.json's exact bytes.
//! `verify` reads both back and names each file changed, missing or added since, a manifest that belongs to another
//! run directory, and whether the signer is one the verifier trusts: only a trusted signature proves who wrote a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::digest::sha256_hex;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::keys::{KeyError, PublicKey, SigningKey, TrustedKeys, key_id};

pub const MANIFEST_FILE: &str = "manifest.json";
pub const SIGNATURE_FILE: &str = "manifest.sig";
pub const MANIFEST_SCHEMA: &str = "hybrid-drill.io/manifest/v1";
const SIGNATURE_ALGORITHM: &str = "ed25519";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    /// `<drill>-<stamp>` of the directory `<drill>/<stamp>` it was written in: signed with the files, so a manifest
    /// copied into another run's directory no longer verifies there.
    pub run_id: String,
    pub created: DateTime<Utc>,
    /// Every file of the run directory but the manifest and its signature, by path relative to it (`/`-separated).
    pub files: BTreeMap<String, FileDigest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    pub sha256: String,
    pub bytes: u64,
}

/// `manifest.sig`: who signed manifest.json's bytes, and the signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    pub algorithm: String,
    /// `sha256:` and the first 16 hex digits of the public key's digest.
    pub key_id: String,
    /// The raw 32-byte public key, base64.
    pub public_key: String,
    /// The 64-byte signature of manifest.json's bytes, base64.
    pub signature: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("cannot write {path}: {cause}")]
    Write { path: String, cause: std::io::Error },
    #[error("{path} is not a hybrid-drill manifest: {cause}")]
    Parse { path: String, cause: serde_json::Error },
    #[error("{0} is not a directory")]
    NotADirectory(String),
    #[error(transparent)]
    Key(#[from] KeyError),
}

fn read_error(path: &Path) -> impl FnOnce(std::io::Error) -> ManifestError + '_ {
    move |cause| ManifestError::Read { path: path.display().to_string(), cause }
}

/// What a run directory holds: its regular files with their digests, and every other kind of entry (a symbolic link,
/// a FIFO, a socket, a device), which the tool never writes and never opens: a link is not followed (it could point
/// at credentials an auditor's bundle would copy), a FIFO is not read (it would block).
struct Contents {
    files: BTreeMap<String, FileDigest>,
    others: Vec<String>,
}

/// Every entry under `dir` but the manifest and its signature, by relative `/`-separated path.
fn contents(dir: &Path) -> Result<Contents, ManifestError> {
    let mut found = Contents { files: BTreeMap::new(), others: Vec::new() };
    let mut pending: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).map_err(read_error(&current))? {
            let entry = entry.map_err(read_error(&current))?;
            let path = entry.path();
            // The entry's own type: a symbolic link is a link here, whatever it points at.
            let kind = entry.file_type().map_err(read_error(&path))?;
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = relative_name(dir, &path);
            if relative == MANIFEST_FILE || relative == SIGNATURE_FILE {
                continue;
            }
            if !kind.is_file() {
                found.others.push(relative);
                continue;
            }
            let bytes = std::fs::read(&path).map_err(read_error(&path))?;
            found.files.insert(relative, FileDigest { sha256: sha256_hex(&bytes), bytes: bytes.len() as u64 });
        }
    }
    found.others.sort();
    Ok(found)
}

fn relative_name(dir: &Path, path: &Path) -> String {
    let parts: Vec<String> = path
        .strip_prefix(dir)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

/// The run id a run directory `<reports>/<drill>/<stamp>` has: `<drill>-<stamp>` in lowercase, as `run` names it.
pub fn run_id_of(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let stamp = dir.file_name()?.to_str()?;
    let drill = dir.parent()?.file_name()?.to_str()?;
    Some(format!("{drill}-{}", stamp.to_lowercase()))
}

/// Writes `manifest.json` over every regular file now in `dir`, and `manifest.sig` when a key is given.
pub fn seal(dir: &Path, run_id: &str, key: Option<&SigningKey>) -> Result<Manifest, ManifestError> {
    let manifest = Manifest {
        schema: MANIFEST_SCHEMA.into(),
        run_id: run_id.into(),
        created: Utc::now(),
        files: contents(dir)?.files,
    };
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|cause| ManifestError::Parse { path: dir.join(MANIFEST_FILE).display().to_string(), cause })?
        + "\n";
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|cause| ManifestError::Write { path: path.display().to_string(), cause })
    };
    write(MANIFEST_FILE, text.as_bytes())?;
    if let Some(key) = key {
        let public = key.public();
        let signature = Signature {
            algorithm: SIGNATURE_ALGORITHM.into(),
            key_id: key_id(&public),
            public_key: BASE64.encode(public.as_bytes()),
            signature: BASE64.encode(key.sign(text.as_bytes())),
        };
        let json = serde_json::to_string_pretty(&signature).unwrap_or_default() + "\n";
        write(SIGNATURE_FILE, json.as_bytes())?;
    }
    Ok(manifest)
}

/// What `verify` found in a run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    pub run_dir: String,
    pub run_id: String,
    pub files: usize,
    /// Files whose bytes differ from the manifest's digest.
    pub tampered: Vec<String>,
    /// Files the manifest lists that are gone (manifest.json itself when there is none).
    pub missing: Vec<String>,
    /// Files in the directory the manifest does not list.
    pub added: Vec<String>,
    /// Entries that are not regular files (symbolic links, FIFOs): never followed nor read.
    pub not_files: Vec<String>,
    /// The manifest belongs to another run directory than the one it is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<String>,
    pub signature: SignatureStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum SignatureStatus {
    /// No manifest.sig: the manifest proves the files unchanged since it was written, not who wrote it.
    Unsigned,
    /// Valid, by the key it names; `trusted` when that key is one the verifier trusts.
    Valid { key_id: String, trusted: bool },
    /// Does not verify: the manifest or its signature was changed.
    Invalid { reason: String },
}

impl Verification {
    /// The files are as the manifest of this very directory records them.
    pub fn files_intact(&self) -> bool {
        self.tampered.is_empty()
            && self.missing.is_empty()
            && self.added.is_empty()
            && self.not_files.is_empty()
            && self.moved.is_none()
            && !matches!(self.signature, SignatureStatus::Invalid { .. })
    }

    /// Signed by a key the verifier trusts: who wrote the manifest is proven.
    pub fn authentic(&self) -> bool {
        matches!(self.signature, SignatureStatus::Valid { trusted: true, .. })
    }

    /// Intact: the files as recorded, and the manifest signed by a trusted key, or (`allow_unsigned`) the
    /// authenticity left unproven by the user's choice.
    pub fn intact(&self, allow_unsigned: bool) -> bool {
        self.files_intact() && (self.authentic() || allow_unsigned)
    }

    /// One line per finding, then the signature's status.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let findings = [
            ("tampered", &self.tampered),
            ("missing", &self.missing),
            ("added", &self.added),
            ("not a regular file (not read)", &self.not_files),
        ];
        for (word, files) in findings {
            for file in files {
                out.push_str(&format!("{word}: {file}\n"));
            }
        }
        if let Some(moved) = &self.moved {
            out.push_str(&format!("moved: {moved}\n"));
        }
        let unchanged = self.files.saturating_sub(self.tampered.len() + self.missing.len());
        out.push_str(&format!("files: {unchanged} of {} unchanged\n", self.files));
        out.push_str(&format!("signature: {}\n", self.signature.describe()));
        out
    }
}

impl SignatureStatus {
    pub fn describe(&self) -> String {
        match self {
            SignatureStatus::Unsigned => "none (the manifest is not signed: who wrote it is not proven)".into(),
            SignatureStatus::Valid { key_id, trusted: true } => format!("valid, by the trusted key {key_id}"),
            SignatureStatus::Valid { key_id, trusted: false } => format!(
                "UNTRUSTED: valid, but by the key {key_id}, which is not a trusted key (anyone can sign with a key \
                 of their own)"
            ),
            SignatureStatus::Invalid { reason } => format!("INVALID: {reason}"),
        }
    }
}

/// Checks a run directory against its manifest, the manifest against the directory it is in, and its signature
/// against the trusted keys. A directory without a manifest is a finding, not an error.
pub fn verify(dir: &Path, trusted: &TrustedKeys) -> Result<Verification, ManifestError> {
    if !dir.is_dir() {
        return Err(ManifestError::NotADirectory(dir.display().to_string()));
    }
    let now = contents(dir)?;
    let path = dir.join(MANIFEST_FILE);
    let mut found = Verification {
        run_dir: dir.display().to_string(),
        run_id: run_id_of(dir).unwrap_or_default(),
        files: 0,
        tampered: Vec::new(),
        missing: Vec::new(),
        added: Vec::new(),
        not_files: now.others,
        moved: None,
        signature: SignatureStatus::Unsigned,
    };
    let text = match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => std::fs::read(&path).map_err(read_error(&path))?,
        Ok(_) => {
            found.not_files.push(MANIFEST_FILE.into());
            return Ok(found);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            found.missing.push(MANIFEST_FILE.into());
            return Ok(found);
        }
        Err(e) => return Err(read_error(&path)(e)),
    };
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|cause| ManifestError::Parse { path: path.display().to_string(), cause })?;
    if found.run_id != manifest.run_id {
        found.moved = Some(format!(
            "{MANIFEST_FILE} is the manifest of the run {}, not of this directory's run {}: a run directory copied \
             over another",
            manifest.run_id,
            if found.run_id.is_empty() { "(unknown)" } else { &found.run_id }
        ));
    }
    found.run_id = manifest.run_id.clone();
    found.files = manifest.files.len();
    found.added = now.files.keys().filter(|f| !manifest.files.contains_key(*f)).cloned().collect();
    found.signature = signature_status(dir, &text, trusted);
    for (file, recorded) in &manifest.files {
        match now.files.get(file) {
            None => found.missing.push(file.clone()),
            Some(digest) if digest != recorded => found.tampered.push(file.clone()),
            Some(_) => {}
        }
    }
    Ok(found)
}

fn signature_status(dir: &Path, manifest: &[u8], trusted: &TrustedKeys) -> SignatureStatus {
    let invalid = |reason: String| SignatureStatus::Invalid { reason };
    let path = dir.join(SIGNATURE_FILE);
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        return SignatureStatus::Unsigned;
    }
    let Ok(text) = std::fs::read(&path) else {
        return invalid(format!("{SIGNATURE_FILE} is unreadable"));
    };
    let signature: Signature = match serde_json::from_slice(&text) {
        Ok(s) => s,
        Err(e) => return invalid(format!("{SIGNATURE_FILE} is unreadable: {e}")),
    };
    if signature.algorithm != SIGNATURE_ALGORITHM {
        return invalid(format!("unknown algorithm `{}`", signature.algorithm));
    }
    let key = match BASE64.decode(&signature.public_key).map(PublicKey::from_raw) {
        Ok(Some(k)) => k,
        Ok(None) => return invalid("its public key is unreadable: not 32 bytes of an ed25519 key".into()),
        Err(e) => return invalid(format!("its public key is unreadable: {e}")),
    };
    let Ok(bytes) = BASE64.decode(&signature.signature) else {
        return invalid("its signature is not base64".into());
    };
    if !key.verifies(manifest, &bytes) {
        return invalid(format!("{MANIFEST_FILE} does not match its signature by {}", key_id(&key)));
    }
    SignatureStatus::Valid { key_id: key_id(&key), trusted: trusted.trusts(&key) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run directory `<tmp>/reports/onprem-gpu-drain/<stamp>` with two files, and its run id.
    fn run_dir(stamp: &str) -> (tempfile::TempDir, PathBuf, String) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("reports/onprem-gpu-drain").join(stamp);
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(dir.join("report.json"), "{}\n").unwrap();
        std::fs::write(dir.join("logs/hook.log"), "ok\n").unwrap();
        let id = format!("onprem-gpu-drain-{}", stamp.to_lowercase());
        (tmp, dir, id)
    }

    fn trusting(key: &SigningKey) -> TrustedKeys {
        TrustedKeys::new(vec![key.public()])
    }

    #[test]
    fn a_fresh_manifest_verifies_and_names_each_change() {
        let (_tmp, dir, id) = run_dir("20260105T093000Z");
        seal(&dir, &id, None).unwrap();
        let clean = verify(&dir, &TrustedKeys::default()).unwrap();
        assert!(clean.intact(true), "{}", clean.describe());
        assert!(!clean.intact(false), "an unsigned manifest proves nobody wrote it");
        std::fs::write(dir.join("report.json"), "{ }\n").unwrap();
        std::fs::remove_file(dir.join("logs/hook.log")).unwrap();
        std::fs::write(dir.join("extra.txt"), "x").unwrap();
        let found = verify(&dir, &TrustedKeys::default()).unwrap();
        assert_eq!(found.tampered, ["report.json"]);
        assert_eq!(found.missing, ["logs/hook.log"]);
        assert_eq!(found.added, ["extra.txt"]);
        assert!(!found.intact(true));
    }

    #[test]
    fn a_signature_verifies_only_for_its_manifest_and_a_trusted_key() {
        let (_tmp, dir, id) = run_dir("20260105T093000Z");
        let key = SigningKey::from_seed([7; 32]);
        seal(&dir, &id, Some(&key)).unwrap();
        let found = verify(&dir, &trusting(&key)).unwrap();
        assert!(found.intact(false) && found.authentic(), "{}", found.describe());
        // Valid, but by a key nobody trusts: a forger's own key proves nothing.
        let other = SigningKey::from_seed([8; 32]);
        let found = verify(&dir, &trusting(&other)).unwrap();
        assert!(matches!(found.signature, SignatureStatus::Valid { trusted: false, .. }), "{found:?}");
        assert!(!found.intact(false) && found.intact(true));
        assert!(!verify(&dir, &TrustedKeys::default()).unwrap().intact(false), "no trusted key: not intact");
        // The manifest edited: its signature no longer verifies, not even with --allow-unsigned.
        let manifest = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
        std::fs::write(dir.join(MANIFEST_FILE), manifest.replace("\"bytes\": 3", "\"bytes\": 4")).unwrap();
        let found = verify(&dir, &trusting(&key)).unwrap();
        assert!(matches!(found.signature, SignatureStatus::Invalid { .. }), "{found:?}");
        assert!(!found.intact(true));
    }

    #[test]
    fn a_forged_re_sealed_run_and_a_deleted_manifest_are_not_intact() {
        let (_tmp, dir, id) = run_dir("20260105T093000Z");
        let key = SigningKey::from_seed([7; 32]);
        seal(&dir, &id, Some(&key)).unwrap();
        // Edit the report, recompute the sums, drop the signature: the files match, but nobody trusted wrote it.
        std::fs::write(dir.join("report.json"), "{\"outcome\": \"passed\"}\n").unwrap();
        std::fs::remove_file(dir.join(SIGNATURE_FILE)).unwrap();
        seal(&dir, &id, None).unwrap();
        let found = verify(&dir, &trusting(&key)).unwrap();
        assert!(found.files_intact() && !found.intact(false), "{}", found.describe());
        // Re-signed with the forger's own key: still not a trusted signature.
        seal(&dir, &id, Some(&SigningKey::from_seed([9; 32]))).unwrap();
        assert!(!verify(&dir, &trusting(&key)).unwrap().intact(false));
        // No manifest at all: a finding, never "nothing to check".
        std::fs::remove_file(dir.join(MANIFEST_FILE)).unwrap();
        let found = verify(&dir, &trusting(&key)).unwrap();
        assert_eq!(found.missing, [MANIFEST_FILE]);
        assert!(!found.intact(true), "{}", found.describe());
    }

    #[test]
    fn a_signed_run_copied_over_another_run_is_not_intact_there() {
        let (tmp, passing, id) = run_dir("20260105T093000Z");
        let key = SigningKey::from_seed([7; 32]);
        seal(&passing, &id, Some(&key)).unwrap();
        let failing = tmp.path().join("reports/onprem-gpu-drain/20260412T031500Z");
        std::fs::create_dir_all(failing.join("logs")).unwrap();
        for f in ["report.json", "logs/hook.log", MANIFEST_FILE, SIGNATURE_FILE] {
            std::fs::copy(passing.join(f), failing.join(f)).unwrap();
        }
        let found = verify(&failing, &trusting(&key)).unwrap();
        assert!(found.authentic(), "the signature itself is good: {found:?}");
        assert!(found.moved.as_deref().is_some_and(|m| m.contains("onprem-gpu-drain-20260105t093000z")), "{found:?}");
        assert!(!found.intact(true), "{}", found.describe());
        assert!(verify(&passing, &trusting(&key)).unwrap().intact(false));
    }

    #[test]
    fn links_and_fifos_in_a_run_directory_are_named_never_followed_or_read() {
        let (tmp, dir, id) = run_dir("20260105T093000Z");
        let key = SigningKey::from_seed([7; 32]);
        seal(&dir, &id, Some(&key)).unwrap();
        std::fs::write(tmp.path().join("credentials"), "secret").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("credentials"), dir.join("creds")).unwrap();
        let fifo = std::process::Command::new("mkfifo").arg(dir.join("pipe")).status().unwrap();
        assert!(fifo.success());
        // A read of the FIFO would block this test forever.
        let found = verify(&dir, &trusting(&key)).unwrap();
        assert_eq!(found.not_files, ["creds", "pipe"]);
        assert!(!found.intact(true), "{}", found.describe());
    }
}
