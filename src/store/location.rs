//! Where run directories are kept in object storage and how to reach it: an `s3://bucket/prefix` location, the
//! endpoint, region, addressing style and credentials of an S3-compatible server, and the S3 client built from them.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, Checksum};
use object_store::{ClientOptions, RetryConfig};

use super::StoreError;

/// The scheme every location starts with.
pub const SCHEME: &str = "s3://";

/// `s3://bucket/prefix`: a bucket and the key prefix under it (no leading or trailing `/`; empty for the whole
/// bucket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub bucket: String,
    pub prefix: String,
}

/// Whether a command's argument names object storage rather than a local path.
pub fn is_location(text: &str) -> bool {
    text.starts_with(SCHEME)
}

impl FromStr for Location {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Location, StoreError> {
        let bad = |why: &str| StoreError::Location { location: text.to_string(), why: why.to_string() };
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| bad("write it as s3://bucket/prefix"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        // S3's bucket naming rules, which every S3-compatible server follows.
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
            && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
            && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !valid_bucket {
            return Err(bad("the bucket must be 3 to 63 lowercase letters, digits, `-` or `.`"));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|part| part == "." || part == "..") || prefix.contains("//") || prefix.contains('?') {
            return Err(bad("the prefix must be plain `/`-separated names"));
        }
        Ok(Location { bucket: bucket.to_string(), prefix: prefix.to_string() })
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.prefix.as_str() {
            "" => write!(f, "{SCHEME}{}", self.bucket),
            prefix => write!(f, "{SCHEME}{}/{prefix}", self.bucket),
        }
    }
}

impl Location {
    /// The key of `relative` (a `/`-separated path) under the prefix.
    pub fn key(&self, relative: &str) -> String {
        match self.prefix.as_str() {
            "" => relative.to_string(),
            prefix => format!("{prefix}/{relative}"),
        }
    }
}

/// How to reach the server: each unset field falls back to the AWS variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, and EKS's web identity for a pod).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// The server's URL, e.g. `http://127.0.0.1:27070`; none for AWS S3 itself.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// `https://endpoint/bucket/key` rather than `https://bucket.endpoint/key`: what most S3-compatible servers need.
    pub path_style: bool,
    /// A credentials file, or a secret reference to one (`${file:/path}`, `${env:NAME}`), holding the access key
    /// id and secret access key.
    pub credentials: Option<String>,
}

/// The region a request is signed for when nothing names one: S3-compatible servers take any.
const DEFAULT_REGION: &str = "us-east-1";
/// How long one request may take, and how long its retries may go on: a server that is gone is said within a
/// minute rather than holding a finished drill for the client's default of three.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const RETRY_TIMEOUT: Duration = Duration::from_secs(20);

/// The access key pair a credentials file holds.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials {{ access_key_id: {}, .. }}", self.access_key_id)
    }
}

impl Credentials {
    /// Reads `spec`: a secret reference or a file's path, holding `aws_access_key_id = ...` and
    /// `aws_secret_access_key = ...` lines (AWS's credentials file; its first profile is read) or
    /// `AWS_ACCESS_KEY_ID=...` lines (an env file, or a Secret's keys mounted as one file). The values are masked in
    /// whatever the tool writes from then on.
    pub fn load(spec: &str) -> Result<Credentials, StoreError> {
        let failed = |cause: String| StoreError::Credentials { what: crate::secrets::describe_spec(spec), cause };
        let text = crate::secrets::read_reference_or_file(spec).map_err(|e| failed(e.to_string()))?;
        let credentials = Credentials::parse(&text).ok_or_else(|| {
            failed("it holds no access key id and secret access key (aws_access_key_id = ..., aws_secret_access_key = ...)".into())
        })?;
        crate::secrets::remember(&credentials.secret_access_key);
        if let Some(token) = &credentials.session_token {
            crate::secrets::remember(token);
        }
        Ok(credentials)
    }

    fn parse(text: &str) -> Option<Credentials> {
        let mut id = None;
        let mut secret = None;
        let mut token = None;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') && id.is_some() {
                break;
            }
            let Some((key, value)) = line.trim_start_matches("export ").split_once('=') else { continue };
            let value = value.trim().trim_matches(['"', '\'']).to_string();
            match key.trim().to_ascii_lowercase().as_str() {
                "aws_access_key_id" => id = Some(value),
                "aws_secret_access_key" => secret = Some(value),
                "aws_session_token" => token = Some(value),
                _ => {}
            }
        }
        Some(Credentials { access_key_id: id?, secret_access_key: secret?, session_token: token })
    }
}

/// A bucket's S3 client, with what a plain request to the same server needs.
#[derive(Debug, Clone)]
pub struct Bucket {
    pub client: Arc<AmazonS3>,
    pub name: String,
    /// The bucket's URL: requests the client has no method for (object-lock retention) go there.
    pub url: String,
    pub region: String,
}

impl Connection {
    /// The S3 client of `bucket`; the credentials file, when given, is read now.
    pub fn bucket(&self, bucket: &str) -> Result<Bucket, StoreError> {
        // The client is reqwest's, built without a TLS provider of its own (as `http::client`).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let region = self.region.clone().or_else(|| std::env::var("AWS_REGION").ok());
        let region = region.unwrap_or_else(|| DEFAULT_REGION.to_string());
        builder = builder.with_region(&region);
        if let Some(endpoint) = &self.endpoint {
            builder = builder.with_endpoint(endpoint.trim_end_matches('/'));
        }
        builder = builder.with_virtual_hosted_style_request(!self.path_style);
        if let Some(spec) = &self.credentials {
            let c = Credentials::load(spec)?;
            builder = builder.with_access_key_id(c.access_key_id).with_secret_access_key(c.secret_access_key);
            if let Some(token) = c.session_token {
                builder = builder.with_token(token);
            }
        }
        let endpoint = self.endpoint.clone().or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        let allow_http = endpoint.as_deref().is_some_and(|e| e.starts_with("http://"));
        let options = ClientOptions::new().with_allow_http(allow_http).with_timeout(REQUEST_TIMEOUT);
        let retry = RetryConfig { max_retries: 3, retry_timeout: RETRY_TIMEOUT, ..RetryConfig::default() };
        // A checksum with every upload: AWS S3 refuses an upload into a bucket with default retention without one.
        let builder = builder.with_checksum_algorithm(Checksum::SHA256).with_client_options(options);
        let client = builder.with_retry(retry).build().map_err(StoreError::client)?;
        let url = match (&endpoint, self.path_style) {
            (Some(e), true) => format!("{}/{bucket}", e.trim_end_matches('/')),
            (Some(e), false) => e.trim_end_matches('/').replacen("://", &format!("://{bucket}."), 1),
            (None, _) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
        };
        Ok(Bucket { client: Arc::new(client), name: bucket.to_string(), url, region })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_a_bucket_and_a_clean_prefix() {
        let l: Location = "s3://hybrid-drill-evidence/drills/prod/".parse().unwrap();
        assert_eq!((l.bucket.as_str(), l.prefix.as_str()), ("hybrid-drill-evidence", "drills/prod"));
        assert_eq!(l.to_string(), "s3://hybrid-drill-evidence/drills/prod");
        assert_eq!(l.key("d/20261207T000000Z/report.json"), "drills/prod/d/20261207T000000Z/report.json");
        let whole: Location = "s3://evidence".parse().unwrap();
        assert_eq!((whole.prefix.as_str(), whole.key("a/b").as_str()), ("", "a/b"));
        assert_eq!(whole.to_string(), "s3://evidence");
        for bad in ["evidence/x", "s3://", "s3://Upper/x", "s3://ab", "s3://-bad/x", "s3://b-ok/../x", "s3://b-ok/a//b"]
        {
            assert!(bad.parse::<Location>().is_err(), "{bad} is refused");
        }
        let error = "gs://x/y".parse::<Location>().unwrap_err().to_string();
        assert_eq!(error, "`gs://x/y` is not an object storage location: write it as s3://bucket/prefix");
        assert!(is_location("s3://b/p") && !is_location("reports"));
    }

    #[test]
    fn credentials_are_read_from_aws_files_env_files_and_references() {
        let dir = tempfile::tempdir().unwrap();
        let aws = dir.path().join("credentials");
        std::fs::write(
            &aws,
            "[default]\naws_access_key_id = AKIAFIRST\naws_secret_access_key = first-secret-key\n\n[other]\n\
             aws_access_key_id = AKIASECOND\naws_secret_access_key = second\n",
        )
        .unwrap();
        let c = Credentials::load(aws.to_str().unwrap()).unwrap();
        assert_eq!((c.access_key_id.as_str(), c.secret_access_key.as_str()), ("AKIAFIRST", "first-secret-key"));
        assert_eq!(crate::secrets::redact("key first-secret-key"), "key ***");
        let env = dir.path().join("s3.env");
        std::fs::write(
            &env,
            "export AWS_ACCESS_KEY_ID=\"lab\"\nAWS_SECRET_ACCESS_KEY=lab-secret\nAWS_SESSION_TOKEN=t0k3n-value\n",
        )
        .unwrap();
        let c = Credentials::load(&format!("${{file:{}}}", env.display())).unwrap();
        assert_eq!(c.access_key_id, "lab");
        assert_eq!(c.session_token.as_deref(), Some("t0k3n-value"));
        assert!(!format!("{c:?}").contains("lab-secret"), "Debug never shows the secret");
        std::fs::write(&env, "AWS_ACCESS_KEY_ID=lab\n").unwrap();
        let error = Credentials::load(env.to_str().unwrap()).unwrap_err().to_string();
        assert!(error.contains("holds no access key id and secret access key"), "{error}");
        assert!(Credentials::load("/nonexistent/credentials").is_err());
    }

    #[test]
    fn the_bucket_url_follows_the_addressing_style() {
        let lab =
            Connection { endpoint: Some("http://127.0.0.1:27070/".into()), path_style: true, ..Default::default() };
        let bucket = lab.bucket("evidence").unwrap();
        assert_eq!((bucket.url.as_str(), bucket.region.as_str()), ("http://127.0.0.1:27070/evidence", "us-east-1"));
        let hosted = Connection {
            endpoint: Some("https://s3.example.net".into()),
            region: Some("eu-west-1".into()),
            ..Default::default()
        };
        assert_eq!(hosted.bucket("evidence").unwrap().url, "https://evidence.s3.example.net");
    }
}
