//! The run directory's integrity record: `manifest.json` holds the sha256 of every other file in it, written once
//! the run has written everything; `manifest.sig` an optional ed25519 signature of manifest.json's exact bytes.
//! `verify` reads both back and names each file changed, missing or added since.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::digest::sha256_hex;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::keys::{KeyError, PublicKey, SigningKey, key_id};

pub const MANIFEST_FILE: &str = "manifest.json";
pub const SIGNATURE_FILE: &str = "manifest.sig";
pub const MANIFEST_SCHEMA: &str = "hybrid-drill.io/manifest/v1";
const SIGNATURE_ALGORITHM: &str = "ed25519";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
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
    #[error(transparent)]
    Key(#[from] KeyError),
}

fn read_error(path: &Path) -> impl FnOnce(std::io::Error) -> ManifestError + '_ {
    move |cause| ManifestError::Read { path: path.display().to_string(), cause }
}

/// Every file under `dir` but the manifest and its signature: relative `/`-separated path, digest.
fn digests(dir: &Path) -> Result<BTreeMap<String, FileDigest>, ManifestError> {
    let mut out = BTreeMap::new();
    let mut pending: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).map_err(read_error(&current))? {
            let path = entry.map_err(read_error(&current))?.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative: Vec<String> = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let relative = relative.join("/");
            if relative == MANIFEST_FILE || relative == SIGNATURE_FILE {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(read_error(&path))?;
            out.insert(relative, FileDigest { sha256: sha256_hex(&bytes), bytes: bytes.len() as u64 });
        }
    }
    Ok(out)
}

/// Writes `manifest.json` over every file now in `dir`, and `manifest.sig` when a key is given.
pub fn seal(dir: &Path, run_id: &str, key: Option<&SigningKey>) -> Result<Manifest, ManifestError> {
    let manifest =
        Manifest { schema: MANIFEST_SCHEMA.into(), run_id: run_id.into(), created: Utc::now(), files: digests(dir)? };
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
    /// Files the manifest lists that are gone.
    pub missing: Vec<String>,
    /// Files in the directory the manifest does not list.
    pub added: Vec<String>,
    pub signature: SignatureStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum SignatureStatus {
    /// No manifest.sig: the manifest proves the files unchanged since it was written, not who wrote it.
    Unsigned,
    /// Valid, by the key it names; `trusted` when that is the key `--public-key` gave.
    Valid { key_id: String, trusted: bool },
    /// Does not verify, or not by the key `--public-key` gave: the manifest or its signature was changed.
    Invalid { reason: String },
}

impl Verification {
    /// Intact: no file changed, missing or added, and the signature (when there is one, or one is required)
    /// verifies.
    pub fn intact(&self, signature_required: bool) -> bool {
        self.tampered.is_empty()
            && self.missing.is_empty()
            && self.added.is_empty()
            && match &self.signature {
                SignatureStatus::Unsigned => !signature_required,
                SignatureStatus::Valid { trusted, .. } => *trusted || !signature_required,
                SignatureStatus::Invalid { .. } => false,
            }
    }

    /// One line per finding, then the signature's status.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (word, files) in [("tampered", &self.tampered), ("missing", &self.missing), ("added", &self.added)] {
            for file in files {
                out.push_str(&format!("{word}: {file}\n"));
            }
        }
        let unchanged = self.files - self.tampered.len() - self.missing.len();
        out.push_str(&format!("files: {unchanged} of {} unchanged\n", self.files));
        out.push_str(&format!("signature: {}\n", self.signature.describe()));
        out
    }
}

impl SignatureStatus {
    pub fn describe(&self) -> String {
        match self {
            SignatureStatus::Unsigned => "none (the manifest is not signed)".into(),
            SignatureStatus::Valid { key_id, trusted: true } => format!("valid, by the trusted key {key_id}"),
            SignatureStatus::Valid { key_id, trusted: false } => {
                format!("valid, by the key it names ({key_id}); pass --public-key to check it is yours")
            }
            SignatureStatus::Invalid { reason } => format!("INVALID: {reason}"),
        }
    }
}

/// Checks a run directory against its manifest, and the manifest against its signature (and `trusted`, when given).
pub fn verify(dir: &Path, trusted: Option<&PublicKey>) -> Result<Verification, ManifestError> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read(&path).map_err(read_error(&path))?;
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|cause| ManifestError::Parse { path: path.display().to_string(), cause })?;
    let now = digests(dir)?;
    let mut found = Verification {
        run_dir: dir.display().to_string(),
        run_id: manifest.run_id.clone(),
        files: manifest.files.len(),
        tampered: Vec::new(),
        missing: Vec::new(),
        added: now.keys().filter(|f| !manifest.files.contains_key(*f)).cloned().collect(),
        signature: signature_status(dir, &text, trusted),
    };
    for (file, recorded) in &manifest.files {
        match now.get(file) {
            None => found.missing.push(file.clone()),
            Some(digest) if digest != recorded => found.tampered.push(file.clone()),
            Some(_) => {}
        }
    }
    Ok(found)
}

fn signature_status(dir: &Path, manifest: &[u8], trusted: Option<&PublicKey>) -> SignatureStatus {
    let invalid = |reason: String| SignatureStatus::Invalid { reason };
    let Ok(text) = std::fs::read(dir.join(SIGNATURE_FILE)) else {
        return SignatureStatus::Unsigned;
    };
    let signature: Signature = match serde_json::from_slice(&text) {
        Ok(s) => s,
        Err(e) => return invalid(format!("{SIGNATURE_FILE} is unreadable: {e}")),
    };
    if signature.algorithm != SIGNATURE_ALGORITHM {
        return invalid(format!("unknown algorithm `{}`", signature.algorithm));
    }
    let key = match BASE64.decode(&signature.public_key).map_err(|e| e.to_string()).and_then(PublicKey::from_raw) {
        Ok(k) => k,
        Err(e) => return invalid(format!("its public key is unreadable: {e}")),
    };
    let Ok(bytes) = BASE64.decode(&signature.signature) else {
        return invalid("its signature is not base64".into());
    };
    if !key.verifies(manifest, &bytes) {
        return invalid(format!("{MANIFEST_FILE} does not match its signature by {}", key_id(&key)));
    }
    match trusted {
        Some(t) if t != &key => invalid(format!("signed by {}, not by the trusted key {}", key_id(&key), key_id(t))),
        Some(_) => SignatureStatus::Valid { key_id: key_id(&key), trusted: true },
        None => SignatureStatus::Valid { key_id: key_id(&key), trusted: false },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report.json"), "{}\n").unwrap();
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        std::fs::write(dir.path().join("logs/hook.log"), "ok\n").unwrap();
        dir
    }

    #[test]
    fn a_fresh_manifest_verifies_and_names_each_change() {
        let dir = run_dir();
        seal(dir.path(), "r1", None).unwrap();
        let clean = verify(dir.path(), None).unwrap();
        assert!(clean.intact(false), "{}", clean.describe());
        assert!(!clean.intact(true), "an unsigned manifest is not enough when a signature is required");
        std::fs::write(dir.path().join("report.json"), "{ }\n").unwrap();
        std::fs::remove_file(dir.path().join("logs/hook.log")).unwrap();
        std::fs::write(dir.path().join("extra.txt"), "x").unwrap();
        let found = verify(dir.path(), None).unwrap();
        assert_eq!(found.tampered, ["report.json"]);
        assert_eq!(found.missing, ["logs/hook.log"]);
        assert_eq!(found.added, ["extra.txt"]);
        assert!(!found.intact(false));
    }

    #[test]
    fn a_signature_verifies_only_for_its_manifest_and_its_key() {
        let dir = run_dir();
        let key = SigningKey::from_seed([7; 32]);
        seal(dir.path(), "r1", Some(&key)).unwrap();
        let found = verify(dir.path(), Some(&key.public())).unwrap();
        assert!(matches!(found.signature, SignatureStatus::Valid { trusted: true, .. }), "{found:?}");
        let other = SigningKey::from_seed([8; 32]).public();
        assert!(matches!(verify(dir.path(), Some(&other)).unwrap().signature, SignatureStatus::Invalid { .. }));
        // The manifest edited to match an edited file: its signature no longer verifies.
        let manifest = std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
        std::fs::write(dir.path().join(MANIFEST_FILE), manifest.replace("r1", "r2")).unwrap();
        let found = verify(dir.path(), None).unwrap();
        assert!(matches!(found.signature, SignatureStatus::Invalid { .. }), "{found:?}");
        assert!(!found.intact(false));
    }
}
