//! A finished run directory shipped to object storage: every file under `<prefix>/<drill>/<run>/`, the layout of a
//! local reports directory, the manifest and its signature last (a run whose manifest is there arrived whole), each
//! object kept under object-lock retention when one is asked for and the bucket has object lock.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::location::{Connection, Location};
use super::request::{self, Request};
use super::{StoreError, retention};

/// Where and how a run ships: from the drill file's `spec.evidence.ship`, each field overridden by its flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShipPolicy {
    pub location: Location,
    pub connection: Connection,
    /// How long each object is kept from deletion and overwriting (object lock, compliance mode).
    pub retention: Option<Duration>,
}

/// What the command line says about shipping: each given field overrides the drill file's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShipOverrides {
    pub location: Option<Location>,
    pub connection: Connection,
    pub retention: Option<Duration>,
}

impl ShipOverrides {
    /// Where and how this run ships: nowhere unless the drill file or the command line names a location.
    pub fn policy(&self, drill: Option<&ShipPolicy>) -> Option<ShipPolicy> {
        let location = self.location.clone().or_else(|| drill.map(|d| d.location.clone()))?;
        let from_drill = drill.map(|d| d.connection.clone()).unwrap_or_default();
        let given = &self.connection;
        Some(ShipPolicy {
            location,
            connection: Connection {
                endpoint: given.endpoint.clone().or(from_drill.endpoint),
                region: given.region.clone().or(from_drill.region),
                path_style: given.path_style || from_drill.path_style,
                credentials: given.credentials.clone().or(from_drill.credentials),
            },
            retention: self.retention.or_else(|| drill.and_then(|d| d.retention)),
        })
    }
}

/// What a shipment left in the bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Shipment {
    /// The run's own location: `s3://bucket/prefix/<drill>/<run>`.
    pub location: Location,
    pub objects: usize,
    pub bytes: u64,
    /// When the objects' retention ends; none when none was asked for or the bucket has no object lock.
    pub retained_until: Option<DateTime<Utc>>,
    /// Each file and the version id the bucket gave its object (empty where the bucket keeps no versions).
    pub versions: Vec<(String, String)>,
}

/// The manifest and its signature (`evidence::manifest`'s files) go last, so a manifest in the bucket means every
/// file it covers arrived before it.
const LAST: [&str; 2] = ["manifest.json", "manifest.sig"];

/// A shipment made ready before the run's reports are written: the bucket's client, and whether its objects can be
/// retained, so what the bucket cannot do is said in the report the bucket receives.
#[derive(Debug)]
pub struct Prepared {
    bucket: super::location::Bucket,
    retained_until: Option<DateTime<Utc>>,
    /// Whether the uploads name their retention (the drill asks for one) or the bucket's default applies.
    lock_headers: bool,
    pub warnings: Vec<String>,
}

/// Builds the client (reading the credentials) and reads the bucket's object lock: a retention the drill asks for
/// is never shorter than the bucket's default (an upload that asked for less would shorten what the bucket's owner
/// set, and S3 refuses to shorten a compliance-mode retention afterwards).
pub async fn prepare(policy: &ShipPolicy) -> Result<Prepared, StoreError> {
    let bucket = policy.connection.bucket(&policy.location.bucket)?;
    let mut warnings = Vec::new();
    if let Some(period) = policy.retention
        && let Some(why) = retention::refuse(period)
    {
        return Err(StoreError::Retention(why));
    }
    let lock = retention::object_lock(&bucket).await?;
    let default = lock.as_ref().and_then(|l| l.default.as_ref()).map(|(_, period)| *period);
    let retained_until = match (&lock, policy.retention) {
        (Some(_), Some(asked)) => retention::until(Utc::now(), asked.max(default.unwrap_or_default())),
        (Some(_), None) => default.and_then(|d| retention::until(Utc::now(), d)),
        (None, Some(_)) => {
            warnings.push(format!(
                "the bucket {} has no object lock: the run was shipped without its retention, and can be deleted",
                policy.location.bucket
            ));
            None
        }
        (None, None) => None,
    };
    let lock_headers = lock.is_some() && policy.retention.is_some();
    Ok(Prepared { bucket, retained_until, lock_headers, warnings })
}

/// Uploads `run_dir` (a directory `<reports>/<drill>/<run>`) under the policy's location. Each object is created,
/// never replaced (`If-None-Match`): a key already there is an error, not a new version over a shipped run.
pub async fn upload(run_dir: &Path, policy: &ShipPolicy, prepared: &Prepared) -> Result<Shipment, StoreError> {
    let bucket = &prepared.bucket;
    let location = Location { bucket: policy.location.bucket.clone(), prefix: policy.location.key(&run_name(run_dir)) };
    let mut files = files_under(run_dir)?;
    files.sort_by_key(|f| (LAST.iter().position(|l| l == f), f.clone()));
    let mut bytes = 0;
    let mut versions = Vec::new();
    for relative in &files {
        let path = run_dir.join(relative);
        let body = std::fs::read(&path).map_err(|cause| StoreError::Io {
            action: "read",
            path: path.display().to_string(),
            cause,
        })?;
        bytes += body.len() as u64;
        let key = location.key(relative);
        let mut headers = vec![("if-none-match", "*".to_string())];
        if prepared.lock_headers {
            headers.extend(prepared.retained_until.map(retention::lock_headers).unwrap_or_default());
        }
        let request = Request { method: http::Method::PUT, key: &key, query: &[], headers, body };
        let answer = request::send(bucket, request).await?;
        match answer.status.as_u16() {
            200..=299 => {}
            409 | 412 => return Err(StoreError::Exists(format!("s3://{}/{key}", location.bucket))),
            _ => return Err(StoreError::Client(format!("uploading {key}: {}", answer.describe()))),
        }
        let version = answer.headers.get("x-amz-version-id").and_then(|v| v.to_str().ok());
        versions.push((relative.clone(), version.unwrap_or_default().to_string()));
    }
    Ok(Shipment { location, objects: files.len(), bytes, retained_until: prepared.retained_until, versions })
}

/// `<drill>/<run>`: the run directory's place in a reports directory.
fn run_name(run_dir: &Path) -> String {
    let mut parts = run_dir.components().rev().take(2).map(|c| c.as_os_str().to_string_lossy().into_owned());
    let run = parts.next().unwrap_or_default();
    match parts.next() {
        Some(drill) => format!("{drill}/{run}"),
        None => run,
    }
}

/// Every file under `dir`, as `/`-separated paths relative to it.
fn files_under(dir: &Path) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let read = |cause| StoreError::Io { action: "read", path: current.display().to_string(), cause };
        for entry in std::fs::read_dir(&current).map_err(read)? {
            let path = entry.map_err(read)?.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir) {
                let parts: Vec<String> =
                    relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                out.push(parts.join("/"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_drill_files_fields_one_by_one() {
        let drill = ShipPolicy {
            location: "s3://from-drill/runs".parse().unwrap(),
            connection: Connection {
                endpoint: Some("http://drill:9000".into()),
                region: Some("eu-west-1".into()),
                path_style: true,
                credentials: Some("/etc/creds".into()),
            },
            retention: Some(Duration::from_secs(86_400)),
        };
        assert_eq!(ShipOverrides::default().policy(None), None, "nothing names a location: no shipping");
        assert_eq!(ShipOverrides::default().policy(Some(&drill)), Some(drill.clone()));
        let flags = ShipOverrides {
            location: Some("s3://from-flag".parse().unwrap()),
            connection: Connection { region: Some("us-west-2".into()), ..Default::default() },
            retention: Some(Duration::from_secs(60)),
        };
        let merged = flags.policy(Some(&drill)).unwrap();
        assert_eq!(merged.location.to_string(), "s3://from-flag");
        assert_eq!(merged.connection.region.as_deref(), Some("us-west-2"));
        assert_eq!(merged.connection.endpoint.as_deref(), Some("http://drill:9000"));
        assert!(merged.connection.path_style);
        assert_eq!(merged.retention, Some(Duration::from_secs(60)));
        assert_eq!(flags.policy(None).unwrap().connection.endpoint, None);
    }

    #[test]
    fn a_run_keeps_its_place_and_its_manifest_goes_last() {
        assert_eq!(
            run_name(Path::new("/tmp/reports/onprem-gpu-drain/20261207T010000Z")),
            "onprem-gpu-drain/20261207T010000Z"
        );
        assert_eq!(run_name(Path::new("20261207T010000Z")), "20261207T010000Z");
        let dir = tempfile::tempdir().unwrap();
        for f in ["manifest.sig", "manifest.json", "report.json", "timeline.jsonl"] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        std::fs::create_dir(dir.path().join("hooks")).unwrap();
        std::fs::write(dir.path().join("hooks/out.log"), "x").unwrap();
        let mut files = files_under(dir.path()).unwrap();
        files.sort_by_key(|f| (LAST.iter().position(|l| l == f), f.clone()));
        assert_eq!(files, ["hooks/out.log", "report.json", "timeline.jsonl", "manifest.json", "manifest.sig"]);
        assert_eq!(LAST, [crate::evidence::manifest::MANIFEST_FILE, crate::evidence::manifest::SIGNATURE_FILE]);
    }
}
