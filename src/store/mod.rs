//! S3-compatible object storage, where run directories are kept for as long as evidence is kept: the location and
//! the client (`location`), a run directory shipped there with its object-lock retention (`ship`, `retention`), and
//! a location read back as a local reports directory (`fetch`), each key at the version its run shipped (`versions`);
//! `request` signs what object_store has no call for.

pub mod fetch;
pub mod location;
mod request;
pub mod retention;
pub mod ship;
mod versions;

pub use fetch::Fetched;
pub use fetch::fetch;
pub use location::{Connection, Location, is_location};
pub use ship::{Prepared, ShipOverrides, ShipPolicy, Shipment, prepare, upload};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("`{location}` is not an object storage location: {why}")]
    Location { location: String, why: String },
    #[error("cannot read the object storage credentials {what}: {cause}")]
    Credentials { what: String, cause: String },
    #[error("object storage: {0}")]
    Client(String),
    #[error("cannot {action} {path}: {cause}")]
    Io { action: &'static str, path: String, cause: std::io::Error },
    #[error("object-lock retention: {0}")]
    Retention(String),
    #[error(
        "{0} is already stored: a shipped run is never overwritten (ship it under another prefix, or leave the one there)"
    )]
    Exists(String),
}

impl StoreError {
    /// The client's error in one line, secrets masked (its messages can quote a request).
    fn client(e: object_store::Error) -> StoreError {
        StoreError::Client(crate::secrets::redact(&e.to_string()).replace('\n', " "))
    }
}
