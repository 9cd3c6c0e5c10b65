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

/// How to reach the server: each unset field falls back to what the AWS SDKs read (`AWS_ENDPOINT_URL_S3`,
/// `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_DEFAULT_REGION`, keys in the environment, a pod's web identity or Pod
/// Identity, then the `AWS_PROFILE` profile of the config and credentials files).
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
    /// The bucket's URL ([`bucket_url`]): object_store's requests and the tool's own signed ones go under it.
    pub url: String,
    pub region: String,
}

/// How an environment variable is read: the process's own, or a test's.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Connection {
    /// The S3 client of `bucket`; the credentials file, when given, is read now.
    pub fn bucket(&self, bucket: &str) -> Result<Bucket, StoreError> {
        self.bucket_with(bucket, &process_env)
    }

    fn bucket_with(&self, bucket: &str, env: Env<'_>) -> Result<Bucket, StoreError> {
        // The client is reqwest's, built without a TLS provider of its own (as `http::client`).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let profile = AwsProfile::read(env);
        let region = self.region_with(env, &profile);
        let endpoint = self.endpoint_with(env);
        let url = bucket_url(endpoint.as_deref(), self.path_style, bucket, &region);
        // object_store is given the bucket's own URL, whichever the style: with an endpoint and virtual-hosted
        // style it would otherwise take the endpoint for the bucket's and send requests without the bucket.
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_region(&region)
            .with_endpoint(&url)
            .with_virtual_hosted_style_request(true);
        let credentials = match &self.credentials {
            Some(spec) => Some(Credentials::load(spec)?),
            None if has_ambient_credentials(env) => None,
            None => profile.credentials(env)?,
        };
        if let Some(c) = credentials {
            builder = builder.with_access_key_id(c.access_key_id).with_secret_access_key(c.secret_access_key);
            if let Some(token) = c.session_token {
                builder = builder.with_token(token);
            }
        }
        let allow_http = url.starts_with("http://");
        let options = ClientOptions::new().with_allow_http(allow_http).with_timeout(REQUEST_TIMEOUT);
        let retry = RetryConfig { max_retries: 3, retry_timeout: RETRY_TIMEOUT, ..RetryConfig::default() };
        // A checksum with every upload: AWS S3 refuses an upload into a bucket with default retention without one.
        let builder = builder.with_checksum_algorithm(Checksum::SHA256).with_client_options(options);
        let client = builder.with_retry(retry).build().map_err(StoreError::client)?;
        Ok(Bucket { client: Arc::new(client), name: bucket.to_string(), url, region })
    }

    /// The endpoint: the one given, else the AWS SDKs' variables (S3's own first); none for AWS S3 itself.
    fn endpoint_with(&self, env: Env<'_>) -> Option<String> {
        let given = self.endpoint.clone().or_else(|| env("AWS_ENDPOINT_URL_S3")).or_else(|| env("AWS_ENDPOINT_URL"));
        given.map(|e| e.trim_end_matches('/').to_string())
    }

    /// The region requests are signed for, looked up as the AWS SDKs do: given, `AWS_REGION`, `AWS_DEFAULT_REGION`,
    /// the profile's `region`, else us-east-1 (S3-compatible servers take any).
    fn region_with(&self, env: Env<'_>, profile: &AwsProfile) -> String {
        self.region
            .clone()
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .or_else(|| profile.config.get("region").cloned())
            .unwrap_or_else(|| DEFAULT_REGION.to_string())
    }
}

/// The URL of `bucket`, the one place an S3 URL is made: every request (object_store's and the signed ones the tool
/// sends itself) goes under it.
pub fn bucket_url(endpoint: Option<&str>, path_style: bool, bucket: &str, region: &str) -> String {
    // A bucket name with dots cannot be a TLS host name under AWS's wildcard certificate: the SDKs use path style.
    let path_style = path_style || (endpoint.is_none() && bucket.contains('.'));
    match (endpoint.map(|e| e.trim_end_matches('/')), path_style) {
        (Some(e), true) => format!("{e}/{bucket}"),
        (Some(e), false) => e.replacen("://", &format!("://{bucket}."), 1),
        (None, true) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
        (None, false) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
    }
}

/// Credentials object_store finds itself: keys in the environment, a pod's web identity (IRSA), EKS Pod Identity's
/// or ECS's container endpoint.
fn has_ambient_credentials(env: Env<'_>) -> bool {
    ["AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI"]
        .into_iter()
        .chain(["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"])
        .any(|name| env(name).is_some())
}

/// The named AWS profile (`AWS_PROFILE`, else `default`): its settings in the config file and its keys in the
/// shared credentials file, where the AWS CLI keeps them.
#[derive(Debug, Default)]
struct AwsProfile {
    name: String,
    config: std::collections::BTreeMap<String, String>,
}

impl AwsProfile {
    fn read(env: Env<'_>) -> AwsProfile {
        let name = env("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
        let header = if name == "default" { name.clone() } else { format!("profile {name}") };
        let file = env("AWS_CONFIG_FILE").or_else(|| env("HOME").map(|h| format!("{h}/.aws/config")));
        let config = file.and_then(|f| std::fs::read_to_string(f).ok()).map(|text| ini_section(&text, &header));
        AwsProfile { name, config: config.unwrap_or_default() }
    }

    /// The profile's keys; none when the credentials file has no such profile (object_store then asks the instance
    /// metadata service). A profile that signs in through SSO or a process is named with the command that exports
    /// its keys, since only the AWS CLI can run that sign-in.
    fn credentials(&self, env: Env<'_>) -> Result<Option<Credentials>, StoreError> {
        let file = env("AWS_SHARED_CREDENTIALS_FILE").or_else(|| env("HOME").map(|h| format!("{h}/.aws/credentials")));
        let section = file.and_then(|f| std::fs::read_to_string(f).ok()).map(|text| ini_section(&text, &self.name));
        if let Some(section) = section.filter(|s| s.contains_key("aws_access_key_id")) {
            let value = |key: &str| section.get(key).cloned().unwrap_or_default();
            let credentials = Credentials {
                access_key_id: value("aws_access_key_id"),
                secret_access_key: value("aws_secret_access_key"),
                session_token: section.get("aws_session_token").cloned(),
            };
            crate::secrets::remember(&credentials.secret_access_key);
            return Ok(Some(credentials));
        }
        let signs_in =
            ["sso_session", "sso_start_url", "credential_process"].iter().any(|k| self.config.contains_key(*k));
        if signs_in {
            return Err(StoreError::Credentials {
                what: format!("of the AWS profile {}", self.name),
                cause: format!(
                    "it signs in through SSO or a process, which only the AWS CLI runs: run `aws sso login --profile {0}` \
                     if needed, then `eval \"$(aws configure export-credentials --profile {0} --format env)\"` and run \
                     hybrid-drill again",
                    self.name
                ),
            });
        }
        Ok(None)
    }
}

/// The `key = value` lines of the `[header]` section of an INI file (AWS's config and credentials files).
fn ini_section(text: &str, header: &str) -> std::collections::BTreeMap<String, String> {
    let mut inside = false;
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == header;
        } else if inside && let Some((key, value)) = line.split_once('=') {
            out.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    out
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
        let bucket = lab.bucket_with("evidence", &|_| None).unwrap();
        assert_eq!((bucket.url.as_str(), bucket.region.as_str()), ("http://127.0.0.1:27070/evidence", "us-east-1"));
        let hosted = Connection {
            endpoint: Some("https://s3.example.net".into()),
            region: Some("eu-west-1".into()),
            ..Default::default()
        };
        assert_eq!(hosted.bucket_with("evidence", &|_| None).unwrap().url, "https://evidence.s3.example.net");
        assert_eq!(bucket_url(None, false, "evidence", "eu-west-1"), "https://evidence.s3.eu-west-1.amazonaws.com");
        assert_eq!(bucket_url(None, false, "ev.idence", "eu-west-1"), "https://s3.eu-west-1.amazonaws.com/ev.idence");
        // The SDKs' endpoint variable is an endpoint like any other: the bucket goes into it, in its style.
        let env = |name: &str| (name == "AWS_ENDPOINT_URL").then(|| "http://minio.local:9000".to_string());
        let from_env = Connection::default().bucket_with("evidence", &env).unwrap();
        assert_eq!(from_env.url, "http://evidence.minio.local:9000");
    }

    #[test]
    fn the_region_and_keys_are_found_where_the_aws_sdks_look() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().display().to_string();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(
            dir.path().join(".aws/config"),
            "[default]\nregion = us-west-2\n[profile audit]\nregion = eu-central-1\n[profile sso]\nsso_session = corp\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join(".aws/credentials"),
            "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = default-secret-1\n\
             [audit]\naws_access_key_id = AKIAAUDIT\naws_secret_access_key = audit-secret-22\n",
        )
        .unwrap();
        let vars = |pairs: Vec<(&'static str, String)>| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
        };
        let plain = vars(vec![("HOME", home.clone())]);
        let profile = AwsProfile::read(&plain);
        assert_eq!(Connection::default().region_with(&plain, &profile), "us-west-2");
        assert_eq!(profile.credentials(&plain).unwrap().unwrap().access_key_id, "AKIADEFAULT");
        let audit = vars(vec![("HOME", home.clone()), ("AWS_PROFILE", "audit".into())]);
        let profile = AwsProfile::read(&audit);
        assert_eq!(Connection::default().region_with(&audit, &profile), "eu-central-1");
        assert_eq!(profile.credentials(&audit).unwrap().unwrap().access_key_id, "AKIAAUDIT");
        let default_region = vars(vec![("HOME", home.clone()), ("AWS_DEFAULT_REGION", "ap-south-1".into())]);
        let profile = AwsProfile::read(&default_region);
        assert_eq!(Connection::default().region_with(&default_region, &profile), "ap-south-1");
        let sso = vars(vec![("HOME", home.clone()), ("AWS_PROFILE", "sso".into())]);
        let error = AwsProfile::read(&sso).credentials(&sso).unwrap_err().to_string();
        assert!(error.contains("aws configure export-credentials --profile sso"), "{error}");
        let pod = vars(vec![("HOME", home), ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token".into())]);
        assert!(has_ambient_credentials(&pod) && !has_ambient_credentials(&plain));
    }
}
