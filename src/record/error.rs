//! What keeps a run's record from being written: its directory, its reports, its manifest.

/// A run directory that could not be created, written or sealed. Raised once the cluster may have been touched (at
/// the finish), or before (creating the directory): the caller says which.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot create the run directory {path}: {source}")]
    Create { path: String, source: std::io::Error },
    #[error("cannot write the run directory {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("cannot seal the run directory {path}: {source}")]
    Seal { path: String, source: crate::evidence::manifest::ManifestError },
}

impl RecordError {
    pub(crate) fn write(dir: &std::path::Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
        move |source| RecordError::Write { path: dir.display().to_string(), source }
    }

    pub(crate) fn seal(
        dir: &std::path::Path,
    ) -> impl FnOnce(crate::evidence::manifest::ManifestError) -> RecordError + '_ {
        move |source| RecordError::Seal { path: dir.display().to_string(), source }
    }
}
