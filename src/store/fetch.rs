//! A location read back as a local reports directory: every object under its prefix downloaded into a temporary
//! directory, at its path relative to the prefix, so `history`, `evidence` and `verify` read it as they read a local
//! one. Each key is read at its first version, the one its run shipped; later versions and delete markers are
//! named. The directory is removed when the value is dropped.

use std::collections::BTreeMap;
use std::path::Path;

use futures::TryStreamExt;
use object_store::path::Path as Key;
use object_store::{GetOptions, ObjectStore};

use super::location::{Connection, Location};
use super::{StoreError, versions};

/// The downloaded copy of a location.
pub struct Fetched {
    dir: tempfile::TempDir,
    pub objects: usize,
    /// What the bucket holds besides what was read, one line per run: later versions written over its objects,
    /// delete markers hiding them.
    pub findings: Vec<String>,
}

impl Fetched {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// One object to download: its key and the version to read (none: the latest).
struct Wanted {
    key: Key,
    version: Option<String>,
}

/// Downloads every object under `location`, each at the version its run shipped; a location that holds nothing is
/// an error (a mistyped prefix).
pub async fn fetch(location: &Location, connection: &Connection) -> Result<Fetched, StoreError> {
    let bucket = connection.bucket(&location.bucket)?;
    let dir = tempfile::Builder::new().prefix("hybrid-drill-s3-").tempdir().map_err(|cause| StoreError::Io {
        action: "create",
        path: "a temporary directory".into(),
        cause,
    })?;
    let prefix = Key::from(location.prefix.as_str());
    // The prefix as a folder: `runs` must not read `runs-old/`.
    let folder = if location.prefix.is_empty() { String::new() } else { format!("{}/", location.prefix) };
    let (wanted, findings) = match versions::list(&bucket, &folder).await? {
        Some(keys) => {
            let findings = findings(location, &keys);
            let wanted = keys.into_iter().filter_map(|k| {
                let version = k.read?;
                Some(Wanted { key: Key::from(k.key.as_str()), version: Some(version).filter(|v| v != "null") })
            });
            (wanted.collect::<Vec<_>>(), findings)
        }
        None => {
            let listed: Vec<_> = bucket.client.list(Some(&prefix)).try_collect().await.map_err(StoreError::client)?;
            (listed.into_iter().map(|o| Wanted { key: o.location, version: None }).collect(), Vec::new())
        }
    };
    let mut objects = 0;
    for object in wanted {
        let Some(parts) = object.key.prefix_match(&prefix) else { continue };
        let parts: Vec<String> = parts.map(|p| p.as_ref().to_string()).collect();
        // A key no file can be written at (`..`, empty) is not a run's file.
        if parts.is_empty() || parts.iter().any(|p| p.is_empty() || p == "." || p == ".." || p.contains('\\')) {
            continue;
        }
        let path = parts.iter().fold(dir.path().to_path_buf(), |p, part| p.join(part));
        let options = GetOptions { version: object.version, ..GetOptions::default() };
        let body = bucket.client.get_opts(&object.key, options).await.map_err(StoreError::client)?;
        let bytes = body.bytes().await.map_err(StoreError::client)?;
        let write = |cause| StoreError::Io { action: "write", path: path.display().to_string(), cause };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(write)?;
        }
        std::fs::write(&path, &bytes).map_err(write)?;
        objects += 1;
    }
    if objects == 0 {
        return Err(StoreError::Client(format!("nothing is stored under {location}")));
    }
    Ok(Fetched { dir, objects, findings })
}

/// One line per run (`<drill>/<run>` under the location) whose objects have later versions or delete markers.
fn findings(location: &Location, keys: &[versions::KeyVersions]) -> Vec<String> {
    let mut runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in keys.iter().filter(|k| k.later_versions > 0 || k.delete_markers > 0) {
        let relative = key.key.strip_prefix(&location.prefix).unwrap_or(&key.key).trim_start_matches('/');
        let mut parts = relative.splitn(3, '/');
        let run = [parts.next(), parts.next()].into_iter().flatten().collect::<Vec<_>>().join("/");
        let file = parts.next().unwrap_or(relative);
        let mut what = Vec::new();
        if key.later_versions > 0 {
            what.push(format!(
                "{} later version{}",
                key.later_versions,
                if key.later_versions == 1 { "" } else { "s" }
            ));
        }
        if key.delete_markers > 0 {
            what.push("hidden by a delete marker".to_string());
        }
        runs.entry(run).or_default().push(format!("{file} ({})", what.join(", ")));
    }
    runs.into_iter()
        .map(|(run, files)| {
            format!(
                "{location}/{run} was written to after it was shipped: {}; read as shipped (each object's first version)",
                files.join(", ")
            )
        })
        .collect()
}
