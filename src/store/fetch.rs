//! A location read back as a local reports directory: every object under its prefix downloaded into a temporary
//! directory, at its path relative to the prefix, so `history`, `evidence` and `verify` read it as they read a local
//! one. The directory is removed when the value is dropped.

use std::path::Path;

use futures::TryStreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};

use super::StoreError;
use super::location::{Connection, Location};

/// The downloaded copy of a location.
pub struct Fetched {
    dir: tempfile::TempDir,
    pub objects: usize,
}

impl Fetched {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Downloads every object under `location`; a location that holds nothing is an error (a mistyped prefix).
pub async fn fetch(location: &Location, connection: &Connection) -> Result<Fetched, StoreError> {
    let bucket = connection.bucket(&location.bucket)?;
    let dir = tempfile::Builder::new().prefix("hybrid-drill-s3-").tempdir().map_err(|cause| StoreError::Io {
        action: "create",
        path: "a temporary directory".into(),
        cause,
    })?;
    let prefix = Key::from(location.prefix.as_str());
    let listed: Vec<_> = bucket.client.list(Some(&prefix)).try_collect().await.map_err(StoreError::client)?;
    let mut objects = 0;
    for object in listed {
        let Some(parts) = object.location.prefix_match(&prefix) else { continue };
        let parts: Vec<String> = parts.map(|p| p.as_ref().to_string()).collect();
        // A key no file can be written at (`..`, empty) is not a run's file.
        if parts.is_empty() || parts.iter().any(|p| p.is_empty() || p == "." || p == ".." || p.contains('\\')) {
            continue;
        }
        let path = parts.iter().fold(dir.path().to_path_buf(), |p, part| p.join(part));
        let body = bucket.client.get(&object.location).await.map_err(StoreError::client)?;
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
    Ok(Fetched { dir, objects })
}
