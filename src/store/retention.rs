//! Object-lock retention: the bucket's lock and its default retention (`GET ?object-lock`), and the headers that put
//! an upload under retention from the moment it exists, never in a second request after it (a window in which the
//! object is unlocked, and a request that a bucket whose default retention is longer refuses as a shortening).

use chrono::{DateTime, SecondsFormat, Utc};

use super::StoreError;
use super::location::Bucket;
use super::request::{self, Request};

/// The longest retention a run may ask for: 100 years, what AWS S3 object lock allows in days. A longer one is a typo
/// (`110000000d`), and a date that far out does not fit the calendar the request is written in.
pub const LONGEST: std::time::Duration = std::time::Duration::from_secs(36_500 * 86_400);

/// Why a retention period cannot be used, with the fix; none when it can.
pub fn refuse(period: std::time::Duration) -> Option<String> {
    (period > LONGEST || period.is_zero()).then(|| {
        format!(
            "a retention of {} days is not between 1 second and 36500d (100 years, the longest S3 object lock \
             keeps an object): write e.g. 400d",
            period.as_secs() / 86_400
        )
    })
}

/// When a retention of `period` starting `from` ends; none when it is out of bounds.
pub fn until(from: DateTime<Utc>, period: std::time::Duration) -> Option<DateTime<Utc>> {
    if refuse(period).is_some() {
        return None;
    }
    from.checked_add_signed(chrono::Duration::from_std(period).ok()?)
}

/// A bucket's object lock: enabled, and the retention every new object gets unless its upload names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectLock {
    /// The default retention's mode (`COMPLIANCE` or `GOVERNANCE`) and period; none when the bucket has none.
    pub default: Option<(String, std::time::Duration)>,
}

/// The bucket's object lock; none when the bucket has none (or the server does not implement it: it answers with an
/// error naming the missing configuration).
pub(super) async fn object_lock(bucket: &Bucket) -> Result<Option<ObjectLock>, StoreError> {
    let answer = request::send(bucket, Request::get("", &[("object-lock", "")])).await?;
    match answer.status.as_u16() {
        200 => Ok(parse_object_lock(&answer.text())),
        400 | 404 | 501 => Ok(None),
        _ => {
            Err(StoreError::Retention(format!("reading the bucket's object-lock configuration: {}", answer.describe())))
        }
    }
}

fn parse_object_lock(xml: &str) -> Option<ObjectLock> {
    if request::element(xml, "ObjectLockEnabled").as_deref() != Some("Enabled") {
        return None;
    }
    let days = |name: &str, per: u64| request::element(xml, name)?.trim().parse::<u64>().ok().map(|n| n * per);
    let period = days("Days", 1).or_else(|| days("Years", 365)).map(|d| std::time::Duration::from_secs(d * 86_400));
    let mode = request::element(xml, "Mode");
    Some(ObjectLock { default: mode.zip(period) })
}

/// The headers that put an upload under compliance-mode retention until `until`, from its first byte: nobody,
/// the account's root included, can shorten it or delete the object before then.
pub(super) fn lock_headers(until: DateTime<Utc>) -> Vec<(&'static str, String)> {
    vec![
        ("x-amz-object-lock-mode", "COMPLIANCE".to_string()),
        ("x-amz-object-lock-retain-until-date", until.to_rfc3339_opts(SecondsFormat::Secs, true)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buckets_default_retention_is_read_in_days_or_years() {
        let xml = |rule: &str| {
            format!(
                "<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled>{rule}</ObjectLockConfiguration>"
            )
        };
        assert_eq!(parse_object_lock(&xml("")), Some(ObjectLock { default: None }));
        let days = parse_object_lock(&xml(
            "<Rule><DefaultRetention><Mode>COMPLIANCE</Mode><Days>2</Days></DefaultRetention></Rule>",
        ));
        assert_eq!(days.unwrap().default, Some(("COMPLIANCE".into(), std::time::Duration::from_secs(2 * 86_400))));
        let years = parse_object_lock(&xml(
            "<Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Years>1</Years></DefaultRetention></Rule>",
        ));
        assert_eq!(years.unwrap().default, Some(("GOVERNANCE".into(), std::time::Duration::from_secs(365 * 86_400))));
        assert_eq!(parse_object_lock("<ObjectLockConfiguration/>"), None);
        let headers = lock_headers("2026-12-09T10:00:00Z".parse().unwrap());
        assert_eq!(headers[1].1, "2026-12-09T10:00:00Z");
    }
}
