//! The ed25519 keys that sign and check a run's manifest: read from a file, or from a secret reference
//! (`${env:NAME}`, `${file:/path}`: a Kubernetes Secret as a variable or a mounted file) through `secrets`, as PKCS#8
//! PEM (`openssl genpkey -algorithm ed25519`) or the raw 32 bytes in base64 or hex.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signer, Verifier};

/// The variable `run` and `watch` read a signing key from when no flag gives one.
pub const SIGNING_KEY_ENV: &str = "HYBRID_DRILL_SIGNING_KEY";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the key {what}: {cause}")]
    Read { what: String, cause: String },
    #[error("the key {what} is neither PKCS#8 PEM nor 32 bytes in base64 or hex")]
    Format { what: String },
    #[error("the key is {0}")]
    Literal(#[from] crate::secrets::GivenInline),
}

/// A private key that signs manifests.
pub struct SigningKey(ed25519_dalek::SigningKey);

/// A public key that checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey(ed25519_dalek::VerifyingKey);

impl SigningKey {
    pub fn from_seed(seed: [u8; 32]) -> SigningKey {
        SigningKey(ed25519_dalek::SigningKey::from_bytes(&seed))
    }

    /// Reads the key `spec` names: a secret reference, or else a file's path. The key is masked in whatever the
    /// tool writes from then on.
    pub fn load(spec: &str) -> Result<SigningKey, KeyError> {
        crate::secrets::refuse_inline(spec)?;
        let text = material(spec)?;
        crate::secrets::remember(&text);
        let what = describe(spec);
        if text.contains("-----BEGIN") {
            return ed25519_dalek::SigningKey::from_pkcs8_pem(&text)
                .map(SigningKey)
                .map_err(|_| KeyError::Format { what });
        }
        raw32(&text).map(SigningKey::from_seed).ok_or(KeyError::Format { what })
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
    }
}

impl PublicKey {
    /// Reads a public key: the key itself, or a file (or secret reference) holding SPKI PEM (`openssl pkey
    /// -pubout`) or the raw 32 bytes in base64 or hex.
    pub fn load(spec: &str) -> Result<PublicKey, KeyError> {
        // A public key is no secret: given inline (32 bytes in hex or base64, or the PEM), it is read as it is.
        let inline = raw32(spec).is_some() || spec.trim_start().starts_with("-----BEGIN PUBLIC KEY");
        let text = if inline { spec.trim().to_string() } else { material(spec)? };
        let what = describe(spec);
        if text.contains("-----BEGIN") {
            return ed25519_dalek::VerifyingKey::from_public_key_pem(&text)
                .map(PublicKey)
                .map_err(|_| KeyError::Format { what });
        }
        let raw = raw32(&text).ok_or(KeyError::Format { what: what.clone() })?;
        ed25519_dalek::VerifyingKey::from_bytes(&raw).map(PublicKey).map_err(|_| KeyError::Format { what })
    }

    /// The key of 32 raw bytes; `None` when they are not 32 or not a point of the curve.
    pub fn from_raw(bytes: Vec<u8>) -> Option<PublicKey> {
        let raw: [u8; 32] = bytes.try_into().ok()?;
        ed25519_dalek::VerifyingKey::from_bytes(&raw).map(PublicKey).ok()
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        self.0.as_bytes()
    }

    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        ed25519_dalek::Signature::from_slice(signature).is_ok_and(|s| self.0.verify(message, &s).is_ok())
    }
}

/// The public keys a verifier trusts: `--public-key` (or HYBRID_DRILL_PUBLIC_KEY) and every key of a trusted-keys
/// file (or HYBRID_DRILL_TRUSTED_KEYS). A key a run directory names itself is never trusted for being named there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedKeys(Vec<PublicKey>);

/// The variable a trusted-keys file is read from when no flag names one.
pub const TRUSTED_KEYS_ENV: &str = "HYBRID_DRILL_TRUSTED_KEYS";

impl TrustedKeys {
    pub fn new(keys: Vec<PublicKey>) -> TrustedKeys {
        TrustedKeys(keys)
    }

    /// The key `public_key` names, and each key of the file `file`: one per line as 32 bytes in base64 or hex,
    /// optionally followed by a name (`<key> drill-signer-2026`); blank lines and `#` comments are skipped.
    pub fn load(public_key: Option<&str>, file: Option<&std::path::Path>) -> Result<TrustedKeys, KeyError> {
        let mut keys = Vec::new();
        if let Some(spec) = public_key {
            keys.push(PublicKey::load(spec)?);
        }
        if let Some(file) = file {
            let what = format!("file {}", file.display());
            let text = std::fs::read_to_string(file)
                .map_err(|cause| KeyError::Read { what: what.clone(), cause: cause.to_string() })?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let field = line.split_whitespace().next().unwrap_or_default();
                let key = raw32(field)
                    .and_then(|raw| PublicKey::from_raw(raw.to_vec()))
                    .ok_or_else(|| KeyError::Format { what: format!("on line {} of the {what}", n + 1) })?;
                keys.push(key);
            }
        }
        Ok(TrustedKeys(keys))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn trusts(&self, key: &PublicKey) -> bool {
        self.0.contains(key)
    }
}

/// `sha256:` and the first 16 hex digits of the public key's digest: how reports and `verify` name a key.
pub fn key_id(key: &PublicKey) -> String {
    format!("sha256:{}", &super::digest::sha256_hex(key.as_bytes())[..16])
}

/// The text a key spec holds: a secret reference resolved, or a file read.
fn material(spec: &str) -> Result<String, KeyError> {
    let text = crate::secrets::read_own_key(spec)
        .map_err(|cause| KeyError::Read { what: describe(spec), cause: cause.to_string() })?;
    Ok(text.trim().to_string())
}

/// How an error names the key: its reference or path, never its value.
fn describe(spec: &str) -> String {
    crate::secrets::describe_spec(spec)
}

/// 32 bytes written as base64 or hex.
fn raw32(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    let hex = || -> Option<Vec<u8>> {
        (text.len() == 64)
            .then(|| (0..32).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()).collect())
            .flatten()
    };
    let bytes = hex().or_else(|| BASE64.decode(text).ok())?;
    bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_as_its_value_is_refused_without_showing_it() {
        let seed = "0101010101010101010101010101010101010101010101010101010101010101";
        let err = SigningKey::load(seed).err().unwrap();
        assert_eq!(err, KeyError::Literal(crate::secrets::GivenInline));
        assert!(!err.to_string().contains(seed));
    }

    #[test]
    fn keys_are_read_from_pem_and_from_raw_bytes_by_path_or_reference() {
        let dir = tempfile::tempdir().unwrap();
        // `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout` of the RFC 8410 example key.
        let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n";
        let public_pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n";
        std::fs::write(dir.path().join("key.pem"), pem).unwrap();
        std::fs::write(dir.path().join("pub.pem"), public_pem).unwrap();
        let key = SigningKey::load(dir.path().join("key.pem").to_str().unwrap()).unwrap();
        let public = PublicKey::load(dir.path().join("pub.pem").to_str().unwrap()).unwrap();
        assert_eq!(key.public(), public);
        assert!(public.verifies(b"m", &key.sign(b"m")));
        assert!(!public.verifies(b"n", &key.sign(b"m")));

        // A Secret mounted as a file, named by a reference: the raw seed in hex.
        std::fs::write(dir.path().join("seed"), "07".repeat(32) + "\n").unwrap();
        let reference = format!("${{file:{}}}", dir.path().join("seed").display());
        let from_secret = SigningKey::load(&reference).unwrap();
        assert_eq!(from_secret.public(), SigningKey::from_seed([7; 32]).public());
        assert!(matches!(SigningKey::load("${env:HYBRID_DRILL_TEST_UNSET_KEY}"), Err(KeyError::Read { .. })));
        std::fs::write(dir.path().join("bad"), "not a key").unwrap();
        assert!(matches!(SigningKey::load(dir.path().join("bad").to_str().unwrap()), Err(KeyError::Format { .. })));
    }
}
