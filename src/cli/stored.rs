//! A reports directory named by its object storage location (`s3://bucket/prefix`): downloaded for `history` and
//! `evidence` to read as a local one.

use std::path::{Path, PathBuf};

use super::args::S3Flags;
use crate::exit::EXIT_INVALID;
use crate::store::{Connection, Fetched, Location};

/// A reports directory on this machine: the one named, or the download of the location named.
pub(super) enum LocalReports {
    Here(PathBuf),
    Fetched(Fetched),
}

impl LocalReports {
    pub(super) fn path(&self) -> &Path {
        match self {
            LocalReports::Here(path) => path,
            LocalReports::Fetched(fetched) => fetched.path(),
        }
    }
}

/// Runs `read` on `reports_dir`, or, when it names object storage, on the download of every object under it.
pub(super) fn with_local_reports(reports_dir: &Path, s3: &S3Flags, read: impl FnOnce(PathBuf) -> u8) -> u8 {
    match local_reports(reports_dir, &s3.connection()) {
        Ok(local) => read(local.path().to_path_buf()),
        Err(code) => code,
    }
}

/// `reports_dir` as it is, or, when it names object storage, every object under it downloaded.
fn local_reports(reports_dir: &Path, connection: &Connection) -> Result<LocalReports, u8> {
    let Some(text) = reports_dir.to_str().filter(|t| crate::store::is_location(t)) else {
        return Ok(LocalReports::Here(reports_dir.to_path_buf()));
    };
    let failed = |e: crate::store::StoreError| {
        eprintln!("error: {}", crate::secrets::redact(&e.to_string()));
        EXIT_INVALID
    };
    let location: Location = text.parse().map_err(failed)?;
    let fetched = super::commands::block_on_result(crate::store::fetch(&location, connection)).map_err(|e| {
        eprintln!("error: {}", crate::secrets::redact(&e.to_string()));
        EXIT_INVALID
    })?;
    eprintln!("read {} objects from {location}", fetched.objects);
    for finding in &fetched.findings {
        eprintln!("warning: {finding}");
    }
    Ok(LocalReports::Fetched(fetched))
}
