//! Secrets: the references a drill file makes to them (`${env:NAME}`, `${file:/path}`), resolved only where a value
//! is used, and the redaction every file and line a run writes passes through.
//!
//! The drill file, the journal and the timeline keep the references as written, so a run directory never holds the
//! value; the value is read when a request is sent or a hook is started. Whatever was resolved, and any URL's userinfo
//! or token parameter, is replaced by [`MASK`] in what the tool writes or prints.

use std::borrow::Cow;
use std::sync::{LazyLock, RwLock};

/// What a secret is replaced by wherever the tool writes or prints.
pub const MASK: &str = "***";

/// Why a reference could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("unterminated secret reference: close it with `}}`")]
    Unterminated,
    #[error("unknown secret source `{0}`: use `${{env:NAME}}` or `${{file:/path}}`")]
    Source(String),
    #[error("empty secret reference: name the variable or the file")]
    Empty,
    #[error("environment variable `{0}` is not set")]
    Unset(String),
    #[error("cannot read secret file {path}: {cause}")]
    File { path: String, cause: String },
    #[error(
        "`{0}` holds one of hybrid-drill's own keys, which no drill file may read: give the drill a secret of its own"
    )]
    ToolOwn(String),
    /// A key or credentials file that could not be read: why, never its content.
    #[error("{0}")]
    Read(String),
}

/// A key or credentials given inline where a path or a reference belongs: the one refusal every reader of one says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "given inline (not shown), where shell history and process lists keep it: pass a file's path or a reference \
     `${{env:NAME}}` or `${{file:/path}}`"
)]
pub struct GivenInline;

/// Refuses `spec` when it reads as the secret itself rather than a path or a reference (and names no file that
/// exists); the value is remembered first, so nothing prints it later.
pub fn refuse_inline(spec: &str) -> Result<(), GivenInline> {
    if looks_inline(spec) && !std::path::Path::new(spec.trim()).exists() {
        remember(spec);
        return Err(GivenInline);
    }
    Ok(())
}

/// A reference found in a text: its byte range and the error reading it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub start: usize,
    pub end: usize,
    pub error: SecretError,
}

/// Where secret references start: a shell's `${VAR}` (no source prefix) is left alone.
const OPENERS: [&str; 2] = ["${env:", "${file:"];

fn next_reference(text: &str, from: usize) -> Option<usize> {
    let rest = &text[from..];
    let at = rest.find("${")?;
    let after = &rest[at..];
    let known = OPENERS.iter().any(|o| after.starts_with(o));
    let sourced = after[2..].find([':', '}']).is_some_and(|i| after.as_bytes()[2 + i] == b':')
        && after[2..].split(':').next().is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase()));
    if known || sourced { Some(from + at) } else { next_reference(text, from + at + 2) }
}

/// Reads one reference `${source:arg}` starting at `start`: its end and its value.
fn read_one(text: &str, start: usize) -> Result<(usize, String), (usize, SecretError)> {
    let body = &text[start + 2..];
    let Some(close) = body.find('}') else { return Err((text.len(), SecretError::Unterminated)) };
    let end = start + 2 + close + 1;
    let (source, arg) = body[..close].split_once(':').unwrap_or((&body[..close], ""));
    let arg = arg.trim();
    if arg.is_empty() && (source == "env" || source == "file") {
        return Err((end, SecretError::Empty));
    }
    let value = match source {
        "env" if TOOL_SECRETS.contains(&arg) => return Err((end, SecretError::ToolOwn(arg.into()))),
        "file" if is_own_key_file(arg) => return Err((end, SecretError::ToolOwn(arg.into()))),
        "env" => std::env::var(arg).map_err(|_| (end, SecretError::Unset(arg.into())))?,
        // A mounted Secret's file ends with the newline its author's editor added.
        "file" => std::fs::read_to_string(arg)
            .map(|v| v.trim_end_matches(['\n', '\r']).to_string())
            .map_err(|e| (end, SecretError::File { path: arg.into(), cause: e.to_string() }))?,
        other => return Err((end, SecretError::Source(other.into()))),
    };
    Ok((end, value))
}

/// Whether `text` holds a secret reference.
pub fn has_reference(text: &str) -> bool {
    next_reference(text, 0).is_some()
}

/// Every reference of `text` that cannot be read, located; none when all of them can.
pub fn check(text: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut at = 0;
    while let Some(start) = next_reference(text, at) {
        match read_one(text, start) {
            Ok((end, _)) => at = end,
            Err((end, error)) => {
                problems.push(Problem { start, end, error });
                at = end.max(start + 2);
            }
        }
        if at >= text.len() {
            break;
        }
    }
    problems
}

/// `text` with every reference replaced by its value, each value remembered for [`redact`].
pub fn resolve(text: &str) -> Result<String, SecretError> {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(start) = next_reference(text, at) {
        let (end, value) = read_one(text, start).map_err(|(_, e)| e)?;
        out.push_str(&text[at..start]);
        out.push_str(&value);
        remember(&value);
        at = end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// What `spec` holds: a secret reference resolved, or else the file it names read (a key or credentials file given
/// by path or by reference alike). The error says why, never the value.
pub fn read_reference_or_file(spec: &str) -> Result<String, SecretError> {
    if has_reference(spec) {
        resolve(spec)
    } else {
        std::fs::read_to_string(spec).map_err(|e| SecretError::Read(e.to_string()))
    }
}

/// The files the tool's own keys were read from (the signing key, the journal key): no reference reads them after.
static OWN_KEY_FILES: RwLock<Vec<std::path::PathBuf>> = RwLock::new(Vec::new());

/// Reads one of the tool's own keys as [`read_reference_or_file`] does, then keeps the file it came from out of every
/// later reference, so a drill's webhook URL or hook argument cannot send the key anywhere.
pub fn read_own_key(spec: &str) -> Result<String, SecretError> {
    let text = read_reference_or_file(spec)?;
    let path = spec.strip_prefix("${file:").and_then(|p| p.strip_suffix('}')).unwrap_or(spec).trim();
    if !has_reference(spec) || spec.starts_with("${file:") {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.into());
        OWN_KEY_FILES.write().unwrap_or_else(|e| e.into_inner()).push(path);
    }
    Ok(text)
}

fn is_own_key_file(path: &str) -> bool {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.into());
    OWN_KEY_FILES.read().unwrap_or_else(|e| e.into_inner()).contains(&path)
}

/// Every secret value the process has read: known once resolved, masked in everything written after.
static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Values shorter than this are not masked by value: a one-letter password would mask every such letter of a report.
/// Their references still keep them out of every file; only a hook or service echoing one is left unmasked.
const SHORTEST_MASKED: usize = 4;

/// Remembers a secret value so [`redact`] masks it from now on. The store is process-wide because every writer
/// (journal, timeline, reports, progress, stdout) must mask it, and the value is known only once a reference is read.
pub fn remember(value: &str) {
    let value = value.trim();
    if value.chars().count() < SHORTEST_MASKED {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    for spelling in spellings(value) {
        if !known.contains(&spelling) {
            known.push(spelling);
        }
    }
    // Longest first, so a secret containing another is masked whole.
    known.sort_by_key(|k| std::cmp::Reverse(k.len()));
}

/// A secret as each writer may spell it: as it is, escaped in JSON, HTML and XML (a `"` or `<` in it would otherwise
/// hide it from a mask applied after the escaping), percent-encoded (in a URL) and percent-decoded (a password given
/// in a URL's userinfo).
fn spellings(value: &str) -> Vec<String> {
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json.get(1..json.len().saturating_sub(1)).unwrap_or(value).to_string();
    let html = value.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    let mut out = vec![
        value.to_string(),
        json,
        html.clone(),
        html.replace('\'', "&#39;"),
        html.replace('\'', "&apos;"),
        html.replace('\'', "&#x27;"),
        percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string(),
        percent_encoding::utf8_percent_encode(value, UNRESERVED_KEPT).to_string(),
        percent_encoding::percent_decode_str(value).decode_utf8_lossy().into_owned(),
    ];
    out.retain(|s| s.chars().count() >= SHORTEST_MASKED);
    out.sort();
    out.dedup();
    out
}

/// Percent-encoding as URLs do it: RFC 3986's unreserved characters stay as they are.
const UNRESERVED_KEPT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The variables that hold the tool's own secrets: never passed to a hook, whatever its `env` says.
pub const TOOL_SECRETS: [&str; 5] = [
    "HYBRID_DRILL_SIGNING_KEY",
    "HYBRID_DRILL_JOURNAL_KEY",
    "HYBRID_DRILL_NOTIFY",
    "HYBRID_DRILL_S3_CREDENTIALS",
    "HYBRID_DRILL_PUSHGATEWAY",
];

/// Whether a text given where a path or a reference belongs reads as a key or credentials themselves: PEM, a line
/// with `=` or whitespace, a long hex string.
pub fn looks_inline(spec: &str) -> bool {
    !has_reference(spec)
        && (spec.contains(char::is_whitespace)
            || spec.contains('=')
            || spec.contains("-----BEGIN")
            || spec.len() > 512
            || (spec.len() >= 32 && spec.chars().all(|c| c.is_ascii_hexdigit())))
}

/// How an error names a key or credentials given by `spec`: the reference or the path as written, or, when `spec`
/// reads as the secret itself given inline, only that (the value is remembered, so nothing prints it later).
pub fn describe_spec(spec: &str) -> String {
    match refuse_inline(spec) {
        Err(inline) => inline.to_string(),
        Ok(()) => format!("`{spec}`"),
    }
}

/// Remembers the userinfo and token parameters of a URL given on the command line or resolved from a reference.
pub fn remember_url(url: &reqwest::Url) {
    remember(url.password().unwrap_or_default());
    let user = percent_decoded(url.username());
    if url.password().is_none() && user.len() >= 16 {
        // A long bare user name is a token (`https://TOKEN@host`); one beside a password is only a name.
        remember(&user);
    }
    for (key, value) in url.query_pairs() {
        if is_token_key(&key) {
            remember(&value);
        }
    }
}

fn percent_decoded(text: &str) -> String {
    let url = reqwest::Url::parse(&format!("http://{text}@x/")).ok();
    url.map(|u| u.username().to_string()).unwrap_or_else(|| text.to_string())
}

fn is_token_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["token", "secret", "password", "passwd", "apikey", "api_key", "api-key", "key", "sig", "signature", "auth"]
        .iter()
        .any(|k| key == *k || key.ends_with(&format!("_{k}")) || key.ends_with(&format!("-{k}")))
}

/// A URL's userinfo (`scheme://user:pass@`).
static USERINFO: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@\x22']+@").expect("a valid pattern"));
/// A token-like query parameter (`?token=...`, `&api_key=...`).
static TOKEN_PARAM: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)([?&](?:[a-z0-9_-]*[_-])?(?:token|secret|password|passwd|apikey|api_key|api-key|key|sig|signature|auth)=)[^&\s\x22'#]+",
    )
    .expect("a valid pattern")
});
/// An HTTP authorization value (`Bearer ...`, `Basic ...`).
static AUTHORIZATION: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}").expect("a valid pattern"));

/// `text` with every remembered secret, URL userinfo, token parameter and authorization value masked.
pub fn redact(text: &str) -> Cow<'_, str> {
    let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
    let mut out = Cow::Borrowed(text);
    for secret in known.iter() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), MASK));
        }
    }
    // Userinfo made of references (`user:${env:PASSWORD}@`) holds no value: the journal keeps it so that `recover`
    // can read it again.
    let userinfo = |c: &regex::Captures<'_>| {
        if c[0].contains("${") { c[0].to_string() } else { format!("{}{MASK}@", &c[1]) }
    };
    if let Cow::Owned(masked) = USERINFO.replace_all(&out, userinfo) {
        out = Cow::Owned(masked);
    }
    for (pattern, with) in [(&TOKEN_PARAM, "${1}***"), (&AUTHORIZATION, "${1} ***")] {
        if let Cow::Owned(masked) = pattern.replace_all(&out, with) {
            out = Cow::Owned(masked);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_from_files_and_the_environment_and_are_masked_after() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "from-a-file-xyz\n").unwrap();
        let text = format!("-P ${{file:{}}} ${{HOME}} {{node}}", file.path().display());
        assert_eq!(resolve(&text).unwrap(), "-P from-a-file-xyz ${HOME} {node}");
        assert_eq!(redact("sent -P from-a-file-xyz"), "sent -P ***");
        assert!(has_reference(&text) && has_reference("${env:X}") && !has_reference("${HOME} {node} $HOME"));
        // Environment references are read the same way (checked without remembering the value).
        assert!(check("${env:PATH}").is_empty());
    }

    #[test]
    fn bad_references_are_located() {
        let problems = check("a ${env:HD_SURELY_UNSET_VARIABLE} b ${vault:x} ${env:} ${file:/nonexistent/x");
        let errors: Vec<String> = problems.iter().map(|p| p.error.to_string()).collect();
        assert_eq!(
            errors,
            [
                "environment variable `HD_SURELY_UNSET_VARIABLE` is not set",
                "unknown secret source `vault`: use `${env:NAME}` or `${file:/path}`",
                "empty secret reference: name the variable or the file",
                "unterminated secret reference: close it with `}`",
            ]
        );
        assert_eq!((problems[0].start, problems[0].end), (2, 33));
        assert!(check("${HOME} and {node} and ${env:PATH}").is_empty());
    }

    #[test]
    fn a_secret_is_masked_however_a_writer_escaped_it() {
        remember("pa\"ss<w0rd>&'x");
        let spelt = [
            r#"{"note":"pa\"ss<w0rd>&'x"}"#,
            "<td>pa&quot;ss&lt;w0rd&gt;&amp;&#39;x</td>",
            "<td>pa&quot;ss&lt;w0rd&gt;&amp;&#x27;x</td>",
            "https://h/?q=pa%22ss%3Cw0rd%3E%26%27x",
        ];
        for text in spelt {
            assert!(!redact(text).contains("w0rd"), "{text} -> {}", redact(text));
        }
        // A password that reached a URL percent-encoded is masked as given and as decoded.
        remember("p%40ss%2Fword");
        assert_eq!(redact("login p@ss/word"), "login ***");
        assert_eq!(describe_spec("-----BEGIN PRIVATE KEY-----\nabc"), describe_spec("x=y"));
        assert_eq!(describe_spec("/etc/keys/signing"), "`/etc/keys/signing`");
    }

    #[test]
    fn no_reference_reads_the_tools_own_secrets() {
        let problems = check("${env:HYBRID_DRILL_SIGNING_KEY}");
        assert!(matches!(problems[0].error, SecretError::ToolOwn(_)), "{problems:?}");
        let key = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(key.path(), "k3y-material-0123").unwrap();
        let spec = format!("${{file:{}}}", key.path().display());
        assert_eq!(read_own_key(&spec).unwrap(), "k3y-material-0123");
        assert!(matches!(resolve(&spec), Err(SecretError::ToolOwn(_))), "the key file is the tool's own now");
    }

    #[test]
    fn userinfo_tokens_and_authorization_are_masked_in_any_text() {
        let text = "POST https://bot:pa55w0rd@hooks.example.com/x?token=abc123&room=ops failed; \
                    Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x and http://127.0.0.1:9093/api";
        assert_eq!(
            redact(text),
            "POST https://***@hooks.example.com/x?token=***&room=ops failed; Authorization: Bearer *** and \
             http://127.0.0.1:9093/api"
        );
        assert_eq!(redact("user@example.com mailed"), "user@example.com mailed");
        let reference = "http://am:${env:AM_PASSWORD}@am:9093";
        assert_eq!(redact(reference), reference, "a reference holds no value");
    }

    #[test]
    fn a_urls_password_token_user_and_token_parameters_are_remembered() {
        let url = reqwest::Url::parse("http://am-user:s3cr3t-pass@am:9093/?api_key=k3y-value").unwrap();
        remember_url(&url);
        remember_url(&reqwest::Url::parse("https://xoxb-0123456789abcdef@hooks.example.com/").unwrap());
        assert_eq!(
            redact("the password s3cr3t-pass, the key k3y-value, user am-user, token xoxb-0123456789abcdef"),
            "the password ***, the key ***, user am-user, token ***"
        );
    }
}
