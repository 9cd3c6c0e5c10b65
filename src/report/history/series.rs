//! Which runs compare: one drill, by its name, on one cluster, by the UID of its `kube-system` namespace (and the lab
//! profile it is labelled with), however the drill file's path was typed and whatever the kubeconfig context is
//! called. A drill file's content is told apart by its sha256, so the row where it changed is marked; a renamed
//! drill joins its old series when told to (`history --join OLD=NEW`).

use std::path::PathBuf;

use serde::Serialize;

use crate::cluster::ObservedCluster;
use crate::report::Report;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Series {
    pub drill: String,
    /// The cluster: the UID of its `kube-system` namespace, which neither a context's name nor a second kubeconfig
    /// changes; `context NAME` for runs made before runs recorded it.
    pub cluster: String,
    /// The `hybrid-drill.io/profile` label of the cluster's `kube-system` namespace (the lab's `fast` or `realistic`):
    /// the same cluster under another profile is another series.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// How the latest run named its drill file and its context: shown, not compared.
    pub file: String,
    pub context: String,
    /// Earlier names of the drill whose runs joined this series (`--join OLD=NEW`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub joined: Vec<String>,
}

impl Series {
    /// `onprem-gpu-drain · cluster 3f2a9c1e (context prod-eu) · profile fast`.
    pub fn title(&self) -> String {
        let cluster = match self.cluster.strip_prefix("context ") {
            Some(_) => self.cluster.clone(),
            None => format!("cluster {} (context {})", short(&self.cluster), self.context),
        };
        let profile = self.profile.as_ref().map(|p| format!(" · profile {p}")).unwrap_or_default();
        let joined =
            if self.joined.is_empty() { String::new() } else { format!(" · formerly {}", self.joined.join(", ")) };
        format!("{} · {cluster}{profile}{joined}", self.drill)
    }

    fn key(&self) -> (&str, &str, Option<&str>) {
        (&self.drill, &self.cluster, self.profile.as_deref())
    }
}

fn short(uid: &str) -> &str {
    uid.get(..8).unwrap_or(uid)
}

/// Where a run ran, as its series names it: the cluster's identity and profile from the run directory's
/// `cluster.json`, else its report's context.
pub fn environment(dir: &std::path::Path, report: &Report) -> (String, Option<String>) {
    match ObservedCluster::read(dir) {
        Some(c) => (c.kube_system_uid, c.profile),
        None => (format!("context {}", report.cluster.context), None),
    }
}

pub fn sha256_hex(text: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A renamed drill's old name and its new one: the old name's runs join the new name's series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Join {
    pub old: String,
    pub new: String,
}

impl std::str::FromStr for Join {
    type Err = String;

    fn from_str(text: &str) -> Result<Join, String> {
        match text.split_once('=') {
            Some((old, new)) if !old.is_empty() && !new.is_empty() && old != new => {
                Ok(Join { old: old.into(), new: new.into() })
            }
            _ => Err(format!("`{text}` is not OLD=NEW (two drill names, e.g. gpu-drain=onprem-gpu-drain)")),
        }
    }
}

/// The runs by series, series in order of drill, cluster and profile; each series shows the drill file and context
/// of its latest run.
pub fn split(runs: Vec<(PathBuf, Report)>, joins: &[Join]) -> Vec<(Series, Vec<(PathBuf, Report)>)> {
    let mut out: Vec<(Series, Vec<(PathBuf, Report)>)> = Vec::new();
    for (dir, report) in runs {
        let (cluster, profile) = environment(&dir, &report);
        let name = &report.drill.name;
        let joined = joins.iter().find(|j| &j.old == name);
        let series = Series {
            drill: joined.map_or_else(|| name.clone(), |j| j.new.clone()),
            cluster,
            profile,
            file: report.drill.file.clone(),
            context: report.cluster.context.clone(),
            joined: joined.map(|j| vec![j.old.clone()]).unwrap_or_default(),
        };
        match out.iter_mut().find(|(s, _)| s.key() == series.key()) {
            Some((s, list)) => {
                for old in series.joined {
                    if !s.joined.contains(&old) {
                        s.joined.push(old);
                    }
                }
                list.push((dir, report));
            }
            None => out.push((series, vec![(dir, report)])),
        }
    }
    for (series, runs) in &mut out {
        // A crashed run knows its drill file only as the copy in its run directory: the latest run that finished
        // names the file, when there is one.
        let latest = runs.iter().filter(|(_, r)| r.crashed.is_none()).max_by_key(|(_, r)| r.started);
        if let Some((_, r)) = latest.or_else(|| runs.iter().max_by_key(|(_, r)| r.started)) {
            (series.file, series.context) = (r.drill.file.clone(), r.cluster.context.clone());
        }
    }
    out.sort_by(|a, b| a.0.key().cmp(&b.0.key()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    /// A run of `drill` from `file` through `context`, its run directory recording the cluster `uid`.
    fn run(root: &std::path::Path, n: u32, drill: &str, file: &str, context: &str, uid: &str) -> (PathBuf, Report) {
        let dir = root.join(n.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let cluster = ObservedCluster {
            context: context.into(),
            server: "https://10.0.0.1".into(),
            kube_system_uid: uid.into(),
            profile: None,
        };
        cluster.write(&dir).unwrap();
        let mut report = sample::report();
        report.drill.name = drill.into();
        report.drill.file = file.into();
        report.cluster.context = context.into();
        report.started += chrono::Duration::days(n.into());
        (dir, report)
    }

    #[test]
    fn a_series_is_one_drill_on_one_cluster_whatever_the_path_and_context() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let runs = vec![
            run(r, 1, "drain", "drills/drain.yaml", "prod", "uid-a"),
            run(r, 2, "drain", "./drills/drain.yaml", "prod-2027", "uid-a"),
            run(r, 3, "drain", "drills/drain.yaml", "prod", "uid-b"),
            run(r, 4, "gpu-drain", "drills/gpu.yaml", "prod", "uid-a"),
        ];
        let split = split(runs.clone(), &[]);
        let sizes: Vec<(&str, &str, usize)> =
            split.iter().map(|(s, runs)| (s.drill.as_str(), s.cluster.as_str(), runs.len())).collect();
        assert_eq!(sizes, [("drain", "uid-a", 2), ("drain", "uid-b", 1), ("gpu-drain", "uid-a", 1)]);
        assert_eq!((split[0].0.file.as_str(), split[0].0.context.as_str()), ("./drills/drain.yaml", "prod-2027"));
        assert_eq!(split[0].0.title(), "drain · cluster uid-a (context prod-2027)");

        // A renamed drill joins its old series only when told.
        let joined = split_with(runs, "gpu-drain=drain");
        assert_eq!(joined[0].1.len(), 3);
        assert_eq!(joined[0].0.title(), "drain · cluster uid-a (context prod) · formerly gpu-drain");
        assert!("drain".parse::<Join>().is_err() && "a=a".parse::<Join>().is_err());
    }

    fn split_with(runs: Vec<(PathBuf, Report)>, join: &str) -> Vec<(Series, Vec<(PathBuf, Report)>)> {
        split(runs, &[join.parse().unwrap()])
    }
}
