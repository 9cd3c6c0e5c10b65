//! Every version of every key under a prefix (`GET ?versions`), and the one a reader takes: the first, the version
//! the run shipped and its retention keeps. A later version (someone with `s3:PutObject` writing a new report over a
//! locked run) or a delete marker (a run hidden from plain listings) is named, never read in its place.

use std::collections::BTreeMap;

use quick_xml::Reader;
use quick_xml::events::Event;

use super::StoreError;
use super::location::Bucket;
use super::request::{self, Request};

/// One entry of a version listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Entry {
    pub key: String,
    pub version_id: String,
    pub last_modified: String,
    pub is_latest: bool,
    pub delete_marker: bool,
}

/// One page of a listing, and where the next one starts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Page {
    entries: Vec<Entry>,
    next: Option<(String, String)>,
}

/// What a reader takes of one key: the version to read (none when only delete markers are left) and what else the
/// bucket holds under the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyVersions {
    pub key: String,
    pub read: Option<String>,
    pub later_versions: usize,
    pub delete_markers: usize,
}

/// Every version under `prefix`; none when the server cannot list versions (it is then read as plain objects).
pub(super) async fn list(bucket: &Bucket, prefix: &str) -> Result<Option<Vec<KeyVersions>>, StoreError> {
    let mut entries = Vec::new();
    let mut marker: Option<(String, String)> = None;
    loop {
        let mut query = vec![("versions", ""), ("prefix", prefix)];
        if let Some((key, version)) = &marker {
            query.push(("key-marker", key.as_str()));
            query.push(("version-id-marker", version.as_str()));
        }
        let answer = request::send(bucket, Request::get("", &query)).await?;
        match answer.status.as_u16() {
            200 => {}
            400 | 404 | 405 | 501 if entries.is_empty() => return Ok(None),
            _ => return Err(StoreError::Client(format!("listing the versions under {prefix}: {}", answer.describe()))),
        }
        let page = parse_page(&answer.text())
            .map_err(|e| StoreError::Client(format!("the version listing under {prefix} does not parse: {e}")))?;
        entries.extend(page.entries);
        match page.next {
            Some(next) if marker.as_ref() != Some(&next) => marker = Some(next),
            _ => break,
        }
    }
    Ok(Some(by_key(entries)))
}

/// Groups a listing by key; each key reads its oldest version.
fn by_key(entries: Vec<Entry>) -> Vec<KeyVersions> {
    let mut keys: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for entry in entries {
        keys.entry(entry.key.clone()).or_default().push(entry);
    }
    keys.into_iter()
        .map(|(key, mut entries)| {
            // Oldest first. S3 lists a key's versions newest first, and stamps them to the second on some servers:
            // the listing's order, reversed, breaks a tie, and the latest version is never taken for an older one.
            // Timestamps of one server share one format, so they sort as text.
            entries.reverse();
            entries.sort_by(|a, b| (a.is_latest, &a.last_modified).cmp(&(b.is_latest, &b.last_modified)));
            let versions: Vec<&Entry> = entries.iter().filter(|e| !e.delete_marker).collect();
            KeyVersions {
                read: versions.first().map(|e| e.version_id.clone()),
                later_versions: versions.len().saturating_sub(1),
                delete_markers: entries.len() - versions.len(),
                key,
            }
        })
        .collect()
}

fn parse_page(xml: &str) -> Result<Page, quick_xml::Error> {
    let mut reader = Reader::from_str(xml);
    let mut page = Page::default();
    let mut path: Vec<String> = Vec::new();
    let mut entry: Option<Entry> = None;
    // The text of the element being read: quick-xml hands entity references (`&amp;`) over as events of their own.
    let mut text = String::new();
    let (mut truncated, mut next_key, mut next_version) = (false, String::new(), String::new());
    loop {
        match reader.read_event()? {
            Event::Start(start) => {
                let name = String::from_utf8_lossy(start.local_name().as_ref()).into_owned();
                if path.len() == 1 && (name == "Version" || name == "DeleteMarker") {
                    entry = Some(Entry { delete_marker: name == "DeleteMarker", ..Entry::default() });
                }
                path.push(name);
                text.clear();
            }
            Event::Text(t) => text.push_str(&t.decode().map_err(quick_xml::Error::from)?),
            Event::GeneralRef(r) => {
                let name = r.decode().map_err(quick_xml::Error::from)?;
                match r.resolve_char_ref()? {
                    Some(c) => text.push(c),
                    None => text.push_str(quick_xml::escape::resolve_predefined_entity(&name).unwrap_or_default()),
                }
            }
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                let value = std::mem::take(&mut text);
                match (path.len(), name.as_str(), entry.as_mut()) {
                    (1, "Version" | "DeleteMarker", _) => page.entries.extend(entry.take()),
                    (2, "Key", Some(e)) => e.key = value,
                    (2, "VersionId", Some(e)) => e.version_id = value,
                    (2, "LastModified", Some(e)) => e.last_modified = value,
                    (2, "IsLatest", Some(e)) => e.is_latest = value.trim() == "true",
                    (1, "IsTruncated", _) => truncated = value.trim() == "true",
                    (1, "NextKeyMarker", _) => next_key = value,
                    (1, "NextVersionIdMarker", _) => next_version = value,
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    page.next = (truncated && !next_key.is_empty()).then_some((next_key, next_version));
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListVersionsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>evidence</Name><Prefix>runs</Prefix><IsTruncated>true</IsTruncated>
  <NextKeyMarker>runs/d/r/timeline.jsonl</NextKeyMarker><NextVersionIdMarker>v9</NextVersionIdMarker>
  <Version><Key>runs/d/r/report.json</Key><VersionId>v2</VersionId><IsLatest>true</IsLatest>
    <LastModified>2026-12-07T18:00:00.000Z</LastModified></Version>
  <Version><Key>runs/d/r/report.json</Key><VersionId>v1</VersionId><IsLatest>false</IsLatest>
    <LastModified>2026-12-07T17:00:00.000Z</LastModified></Version>
  <DeleteMarker><Key>runs/d/r/manifest.json</Key><VersionId>m2</VersionId><IsLatest>true</IsLatest>
    <LastModified>2026-12-07T18:30:00.000Z</LastModified></DeleteMarker>
  <Version><Key>runs/d/r/manifest.json</Key><VersionId>m1</VersionId><IsLatest>false</IsLatest>
    <LastModified>2026-12-07T17:00:01.000Z</LastModified></Version>
  <Version><Key>runs/d/r/a&amp;b.log</Key><VersionId>null</VersionId><IsLatest>true</IsLatest>
    <LastModified>2026-12-07T17:00:02.000Z</LastModified></Version>
</ListVersionsResult>"#;

    #[test]
    fn each_key_reads_the_version_its_run_shipped_and_names_the_rest() {
        let page = parse_page(LISTING).unwrap();
        assert_eq!(page.next, Some(("runs/d/r/timeline.jsonl".into(), "v9".into())));
        assert_eq!(page.entries.len(), 5);
        let keys = by_key(page.entries);
        let of = |key: &str| keys.iter().find(|k| k.key == key).unwrap().clone();
        let report = of("runs/d/r/report.json");
        assert_eq!((report.read.as_deref(), report.later_versions, report.delete_markers), (Some("v1"), 1, 0));
        let manifest = of("runs/d/r/manifest.json");
        assert_eq!((manifest.read.as_deref(), manifest.later_versions, manifest.delete_markers), (Some("m1"), 0, 1));
        assert_eq!(of("runs/d/r/a&b.log").read.as_deref(), Some("null"));
    }

    #[test]
    fn versions_stamped_in_the_same_second_read_the_one_listed_last() {
        let entry = |version: &str, is_latest: bool| Entry {
            key: "r/report.json".into(),
            version_id: version.into(),
            last_modified: "2026-12-07T17:55:23Z".into(),
            is_latest,
            delete_marker: false,
        };
        let keys = by_key(vec![entry("forged", true), entry("shipped", false)]);
        assert_eq!((keys[0].read.as_deref(), keys[0].later_versions), (Some("shipped"), 1));
        let keys = by_key(vec![entry("shipped", false), entry("forged", true)]);
        assert_eq!(keys[0].read.as_deref(), Some("shipped"), "the latest is never the first");
    }

    #[test]
    fn a_last_page_has_no_next_and_a_key_of_delete_markers_reads_nothing() {
        let xml = "<ListVersionsResult><IsTruncated>false</IsTruncated><DeleteMarker><Key>k</Key>\
                   <VersionId>d1</VersionId><LastModified>2026</LastModified></DeleteMarker></ListVersionsResult>";
        let page = parse_page(xml).unwrap();
        assert_eq!(page.next, None);
        let keys = by_key(page.entries);
        assert_eq!((keys[0].read.clone(), keys[0].delete_markers), (None, 1));
    }
}
