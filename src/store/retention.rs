//! Object-lock retention, set per object through S3's own requests (`GET ?object-lock` on the bucket, `PUT
//! ?retention` on each object): object_store writes and reads objects but has no call for either, so they are signed
//! with its SigV4 signer and sent as plain requests.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, SecondsFormat, Utc};
use md5::Digest;
use object_store::aws::AwsAuthorizer;
use object_store::client::HttpRequestBody;

use super::StoreError;
use super::location::Bucket;

const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

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

/// Whether the bucket has object lock enabled: a bucket without it (or a server that does not implement it) answers
/// with an error naming the missing configuration.
pub(super) async fn bucket_has_lock(bucket: &Bucket) -> Result<bool, StoreError> {
    let (status, body) = send(bucket, http::Method::GET, "", "object-lock", String::new()).await?;
    match status.as_u16() {
        200 => Ok(body.contains("<ObjectLockEnabled>Enabled</ObjectLockEnabled>")),
        400 | 404 | 501 => Ok(false),
        _ => Err(StoreError::Retention(format!(
            "reading the bucket's object-lock configuration: {}",
            answer(status, &body)
        ))),
    }
}

/// Keeps `key` from being deleted or overwritten until `until` (compliance mode: nobody can shorten it).
pub(super) async fn retain(bucket: &Bucket, key: &str, until: DateTime<Utc>) -> Result<(), StoreError> {
    let body = format!(
        "<Retention xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Mode>COMPLIANCE</Mode>\
         <RetainUntilDate>{}</RetainUntilDate></Retention>",
        until.to_rfc3339_opts(SecondsFormat::Secs, true)
    );
    let (status, answer_body) = send(bucket, http::Method::PUT, key, "retention", body).await?;
    if status.is_success() {
        Ok(())
    } else {
        Err(StoreError::Retention(format!("{key}: {}", answer(status, &answer_body))))
    }
}

fn answer(status: http::StatusCode, body: &str) -> String {
    let code = body.split("<Code>").nth(1).and_then(|rest| rest.split("</Code>").next()).unwrap_or_default();
    format!("{status} {code}").trim_end().to_string()
}

/// One signed request to the bucket (`key` empty for the bucket itself) with a `?query` subresource.
async fn send(
    bucket: &Bucket,
    method: http::Method,
    key: &str,
    query: &str,
    body: String,
) -> Result<(http::StatusCode, String), StoreError> {
    let mut url = reqwest::Url::parse(&bucket.url).map_err(|e| StoreError::Client(e.to_string()))?;
    if !key.is_empty()
        && let Ok(mut segments) = url.path_segments_mut()
    {
        segments.pop_if_empty().extend(key.split('/'));
    }
    url.set_query(Some(query));
    // S3 signs `?retention` as `retention=`.
    let signed_uri = url.as_str().replacen(&format!("?{query}"), &format!("?{query}="), 1);
    let mut request = http::Request::builder()
        .method(method.clone())
        .uri(&signed_uri)
        .header("content-md5", BASE64.encode(md5::Md5::digest(body.as_bytes())))
        .body(HttpRequestBody::from(body.clone()))
        .map_err(|e| StoreError::Client(e.to_string()))?;
    let credential = bucket.client.credentials().get_credential().await.map_err(StoreError::client)?;
    AwsAuthorizer::new(&credential, "s3", &bucket.region)
        .try_authorize(&mut request, None)
        .map_err(StoreError::client)?;
    let client = crate::http::client(REQUEST_TIMEOUT).map_err(|e| StoreError::Client(e.to_string()))?;
    let response = client
        .request(method, signed_uri)
        .headers(request.headers().clone())
        .body(body)
        .send()
        .await
        .map_err(|e| StoreError::Client(crate::secrets::redact(&e.to_string()).into_owned()))?;
    let status = response.status();
    Ok((status, response.text().await.unwrap_or_default()))
}
