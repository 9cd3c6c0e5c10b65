//! The sha256 digest in the one spelling the audit record uses: lowercase hex.

use sha2::{Digest, Sha256};

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
