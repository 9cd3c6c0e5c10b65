//! One signed S3 request, for what object_store has no call for: an upload that carries its object-lock headers and
//! `If-None-Match`, the bucket's object-lock configuration, and the list of every version under a prefix. Signed with
//! object_store's SigV4 signer, sent to the bucket's URL (`Bucket::url`, the one place an S3 URL is made).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use md5::Digest;
use object_store::aws::AwsAuthorizer;
use object_store::client::HttpRequestBody;

use super::StoreError;
use super::location::Bucket;

/// How long a request without a body may take; an upload is given a second more per MiB on top.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What the server answered.
pub(super) struct Answer {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `403 AccessDenied`: the status and S3's error code, for a message.
    pub fn describe(&self) -> String {
        let code = element(&self.text(), "Code").unwrap_or_default();
        format!("{} {code}", self.status).trim_end().to_string()
    }
}

/// The text of the first `<name>` element of an S3 answer.
pub(super) fn element(xml: &str, name: &str) -> Option<String> {
    let rest = xml.split(&format!("<{name}>")).nth(1)?;
    Some(rest.split(&format!("</{name}>")).next()?.to_string())
}

/// A request to the bucket: `key` empty for the bucket itself, `query` its parameters (a subresource has an empty
/// value), `headers` besides the signature's.
pub(super) struct Request<'a> {
    pub method: http::Method,
    pub key: &'a str,
    pub query: &'a [(&'a str, &'a str)],
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl<'a> Request<'a> {
    pub fn get(key: &'a str, query: &'a [(&'a str, &'a str)]) -> Request<'a> {
        Request { method: http::Method::GET, key, query, headers: Vec::new(), body: Vec::new() }
    }
}

/// Signs and sends `request`.
pub(super) async fn send(bucket: &Bucket, request: Request<'_>) -> Result<Answer, StoreError> {
    let client_error = |e: String| StoreError::Client(crate::secrets::redact(&e).into_owned());
    let mut url = reqwest::Url::parse(&bucket.url).map_err(|e| client_error(e.to_string()))?;
    if !request.key.is_empty()
        && let Ok(mut segments) = url.path_segments_mut()
    {
        segments.pop_if_empty().extend(request.key.split('/'));
    }
    if !request.query.is_empty() {
        url.query_pairs_mut().extend_pairs(request.query);
    }
    let mut signed = http::Request::builder().method(request.method.clone()).uri(url.as_str());
    // S3 asks an upload under object lock, and a configuration request, to prove its body arrived whole.
    signed = signed.header("content-md5", BASE64.encode(md5::Md5::digest(&request.body)));
    for (name, value) in &request.headers {
        signed = signed.header(*name, value);
    }
    let mut signed =
        signed.body(HttpRequestBody::from(request.body.clone())).map_err(|e| client_error(e.to_string()))?;
    let credential = bucket.client.credentials().get_credential().await.map_err(StoreError::client)?;
    AwsAuthorizer::new(&credential, "s3", &bucket.region)
        .try_authorize(&mut signed, None)
        .map_err(StoreError::client)?;
    let mebibytes = request.body.len() as u64 / (1 << 20);
    let timeout = REQUEST_TIMEOUT + std::time::Duration::from_secs(mebibytes);
    let client = crate::http::client(timeout).map_err(|e| client_error(e.to_string()))?;
    let response = client
        .request(request.method, url)
        .headers(signed.headers().clone())
        .body(request.body)
        .send()
        .await
        .map_err(|e| client_error(e.to_string()))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
    Ok(Answer { status, headers, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_names_its_status_and_code() {
        let answer = Answer {
            status: http::StatusCode::PRECONDITION_FAILED,
            headers: http::HeaderMap::new(),
            body: b"<Error><Code>PreconditionFailed</Code><Message>x</Message></Error>".to_vec(),
        };
        assert_eq!(answer.describe(), "412 Precondition Failed PreconditionFailed");
        assert_eq!(element("<a><Days>2</Days></a>", "Days").as_deref(), Some("2"));
        assert_eq!(element("<a/>", "Days"), None);
    }
}
