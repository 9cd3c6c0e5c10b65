//! A reports directory named by its object storage location (`s3://bucket/prefix`): downloaded for `history` and
//! `evidence` to read as a local one.

use std::path::{Path, PathBuf};

use super::args::S3Flags;
use super::failure::{Failure, Outcome};
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
pub(super) fn with_local_reports(reports_dir: &Path, s3: &S3Flags, read: impl FnOnce(PathBuf) -> Outcome) -> Outcome {
    let local = local_reports(reports_dir, &s3.connection())?;
    read(local.path().to_path_buf())
}

/// `reports_dir` as it is, or, when it names object storage, every object under it downloaded.
fn local_reports(reports_dir: &Path, connection: &Connection) -> Result<LocalReports, Failure> {
    let Some(text) = reports_dir.to_str().filter(|t| crate::store::is_location(t)) else {
        return Ok(LocalReports::Here(reports_dir.to_path_buf()));
    };
    let location: Location = text.parse().map_err(Failure::invalid)?;
    let fetched =
        super::commands::block_on_result(crate::store::fetch(&location, connection)).map_err(Failure::invalid)?;
    eprintln!("read {} objects from {location}", fetched.objects);
    for finding in &fetched.findings {
        eprintln!("warning: {finding}");
    }
    Ok(LocalReports::Fetched(fetched))
}
