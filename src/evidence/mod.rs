//! The audit record of drills and incidents: who ran each and why (`provenance`), the run directory's integrity
//! manifest and its signature (`manifest`, `keys`), and the bundle of a period's runs for an auditor (`bundle`).

pub mod bundle;
pub mod digest;
pub mod keys;
pub mod manifest;
pub mod provenance;

pub use keys::{PublicKey, SIGNING_KEY_ENV, SigningKey, TRUSTED_KEYS_ENV, TrustedKeys};
pub use manifest::{Verification, seal, verify};
pub use provenance::Approval;
