//! Which runs compare: one drill file on one cluster or lab profile is a series; a drill file's content is told
//! apart by its sha256, so the row where it changed is marked.

use std::path::PathBuf;

use serde::Serialize;

use crate::cluster::ObservedCluster;
use crate::report::Report;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Series {
    pub drill: String,
    /// The drill file as the run named it.
    pub file: String,
    /// Where it ran: the profile the cluster's `kube-system` namespace is labelled with (the lab's `fast` or
    /// `realistic`), else the kubeconfig context.
    pub environment: String,
}

impl Series {
    /// `onprem-gpu-drain · drills/drain.yaml · profile fast`.
    pub fn title(&self) -> String {
        format!("{} · {} · {}", self.drill, self.file, self.environment)
    }
}

/// Where a run ran, from its run directory's `cluster.json` and its report.
pub fn environment(dir: &std::path::Path, report: &Report) -> String {
    match ObservedCluster::read(dir).and_then(|c| c.profile) {
        Some(profile) => format!("profile {profile}"),
        None => format!("context {}", report.cluster.context),
    }
}

pub fn sha256_hex(text: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The runs by series, series in order of drill, file and environment. A crashed run knows its drill file only as
/// the copy in its run directory: it joins the series of a run with the same drill, environment and file content.
pub fn split(runs: Vec<(PathBuf, Report)>) -> Vec<(Series, Vec<(PathBuf, Report)>)> {
    let keyed: Vec<(Series, String, bool, PathBuf, Report)> = runs
        .into_iter()
        .map(|(dir, report)| {
            let series = Series {
                drill: report.drill.name.clone(),
                file: report.drill.file.clone(),
                environment: environment(&dir, &report),
            };
            (series, sha256_hex(&report.drill.source), report.crashed.is_some(), dir, report)
        })
        .collect();
    let known: Vec<(Series, String)> =
        keyed.iter().filter(|k| !k.2).map(|(series, sha, ..)| (series.clone(), sha.clone())).collect();
    let mut out: Vec<(Series, Vec<(PathBuf, Report)>)> = Vec::new();
    for (mut series, sha, crashed, dir, report) in keyed {
        if crashed {
            let same = |s: &Series| s.drill == series.drill && s.environment == series.environment;
            let found =
                known.iter().find(|(s, h)| same(s) && *h == sha).or_else(|| known.iter().rev().find(|(s, _)| same(s)));
            if let Some((s, _)) = found {
                series.file = s.file.clone();
            }
        }
        match out.iter_mut().find(|(s, _)| *s == series) {
            Some((_, list)) => list.push((dir, report)),
            None => out.push((series, vec![(dir, report)])),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
