//! The open-episode marker: which run directory an episode of `hybrid-drill watch` under way writes to, kept in the
//! reports directory so a restarted watch takes the same episode up instead of opening a second one, and a drill's
//! start gate sees that an incident is open.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// An episode opened and not yet reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenEpisode {
    pub run_dir: PathBuf,
    pub run_id: String,
    /// When it opened, on the watch's clock: the episode limit counts from here.
    pub opened: DateTime<Utc>,
}

/// Where the marker of a drill's episodes lives: beside its run directories.
pub fn path(reports_dir: &Path, drill: &str) -> PathBuf {
    reports_dir.join(drill).join(".open-episode.json")
}

/// The episode a previous watch left open: `None` when there is none, or when its report was written (the watch
/// stopped between the report and removing the marker): never reopened, never reported twice.
pub fn read(path: &Path) -> Option<OpenEpisode> {
    let mut episode: OpenEpisode = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    // Read through another mount of the same volume (the drill's pod sees the watch's directory elsewhere): the run
    // directory is the one of that name beside the marker.
    if !episode.run_dir.exists()
        && let Some(beside) = episode.run_dir.file_name().and_then(|name| Some(path.parent()?.join(name)))
        && beside.exists()
    {
        episode.run_dir = beside;
    }
    if episode.run_dir.join("report.json").exists() || !episode.run_dir.join("timeline.jsonl").exists() {
        let _ = std::fs::remove_file(path);
        return None;
    }
    Some(episode)
}

/// The directory of a reports directory where deploy/watch/ mounts the watch's part of the volume: the watch writes
/// only there, so it can never write a drill's run directory or journal.
pub const WATCH_SUBDIR: &str = "incidents";

/// Every episode open in a reports directory (or its watch's part of it, [`WATCH_SUBDIR`]), by drill: the markers
/// beside each drill's runs.
pub fn open_in(reports_dir: &Path) -> Vec<(String, OpenEpisode)> {
    let mut open = open_at(reports_dir);
    open.extend(open_at(&reports_dir.join(WATCH_SUBDIR)));
    open.sort_by(|a, b| a.0.cmp(&b.0));
    open
}

fn open_at(reports_dir: &Path) -> Vec<(String, OpenEpisode)> {
    let Ok(drills) = std::fs::read_dir(reports_dir) else { return Vec::new() };
    let mut open: Vec<(String, OpenEpisode)> = drills
        .flatten()
        .filter_map(|entry| {
            let drill = entry.file_name().to_string_lossy().into_owned();
            read(&path(reports_dir, &drill)).map(|episode| (drill, episode))
        })
        .collect();
    open.sort_by(|a, b| a.0.cmp(&b.0));
    open
}

/// Writes the marker whole (a temporary file renamed over it), so a crash leaves the old marker or the new one.
pub fn write(path: &Path, episode: &OpenEpisode) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(episode).map_err(std::io::Error::other)?)?;
    std::fs::rename(tmp, path)
}

pub fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_episode_is_never_taken_up_again() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("d/20261203T100000Z");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("timeline.jsonl"), "").unwrap();
        let marker = path(dir.path(), "d");
        let episode = OpenEpisode { run_dir: run.clone(), run_id: "d-x".into(), opened: Utc::now() };
        write(&marker, &episode).unwrap();
        assert_eq!(read(&marker), Some(episode));
        std::fs::write(run.join("report.json"), "{}").unwrap();
        assert_eq!(read(&marker), None);
        assert!(!marker.exists());
    }
}
