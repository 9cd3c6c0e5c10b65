//! S3-compatible object storage, where run directories are kept for as long as evidence is kept: the location and
//! the client (`location`), a run directory shipped there with its object-lock retention (`ship`, `retention`), and
//! a location read back as a local reports directory (`fetch`).

pub mod fetch;
pub mod location;
pub mod retention;
pub mod ship;

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
}

impl StoreError {
    /// The client's error in one line, secrets masked (its messages can quote a request).
    fn client(e: object_store::Error) -> StoreError {
        StoreError::Client(crate::secrets::redact(&e.to_string()).replace('\n', " "))
    }
}
