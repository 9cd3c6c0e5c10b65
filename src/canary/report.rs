//! The canary's record: `canary.json` (its verdict, cause, phases, cost and the comparison with the last drill),
//! rendered for the terminal, as `report.md` and as Prometheus metrics (`hybrid_drill_canary_*`), and read back for
//! `history`.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::measure::{CanaryPhase, Measured};
use crate::report::history::{REGRESSION_RATIO, is_regression};
use crate::report::{RunKind, human_seconds};

pub const CANARY_SCHEMA: &str = "hybrid-drill.io/canary/v1";
/// The canary's report in its run directory; present from the canary's start, so a run directory holding it is a
/// canary's (finished or not), never a crashed drill's.
pub const CANARY_FILE: &str = "canary.json";

/// How a canary ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CanaryOutcome {
    /// A fallback node came, served, and was reclaimed.
    Passed,
    /// Karpenter could not launch a node: capacity, quota, or a type refused.
    LaunchRefused,
    /// A node launched but never initialised within the canary's deadline.
    NeverInitialised,
    /// The node came but the pod never gave a good answer within the deadline.
    NeverServed,
    /// The node was not reclaimed within the reclaim deadline (the canary deleted it itself).
    ReclaimMissed,
    /// Something the canary caused is still in the cluster.
    LeftBehind,
    /// Interrupted, or the drill lock lost; what it caused was removed.
    Aborted,
    /// Still running, or the process died: `hybrid-drill recover` removes what it left.
    Unfinished,
}

impl CanaryOutcome {
    pub fn word(self) -> &'static str {
        match self {
            CanaryOutcome::Passed => "passed",
            CanaryOutcome::LaunchRefused => "launch refused",
            CanaryOutcome::NeverInitialised => "node never initialised",
            CanaryOutcome::NeverServed => "pod never served",
            CanaryOutcome::ReclaimMissed => "reclaim missed",
            CanaryOutcome::LeftBehind => "left behind",
            CanaryOutcome::Aborted => "aborted",
            CanaryOutcome::Unfinished => "unfinished",
        }
    }

    /// The exit code: the fallback failing its canary is a missed objective; capacity left is a human's to remove.
    pub fn exit_code(self) -> u8 {
        use crate::exit::*;
        match self {
            CanaryOutcome::Passed => EXIT_PASSED,
            CanaryOutcome::LaunchRefused
            | CanaryOutcome::NeverInitialised
            | CanaryOutcome::NeverServed
            | CanaryOutcome::ReclaimMissed => EXIT_OBJECTIVE_MISSED,
            CanaryOutcome::Aborted => EXIT_ABORTED,
            CanaryOutcome::LeftBehind | CanaryOutcome::Unfinished => EXIT_RESTORE_FAILED,
        }
    }
}

/// One phase against the same phase of the drill's last run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub phase: String,
    pub canary_seconds: f64,
    pub drill_seconds: f64,
    pub regression: bool,
}

/// The drill's last run the canary is set against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Against {
    pub run_id: String,
    pub started: DateTime<Utc>,
    pub phases: Vec<Comparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanaryReport {
    pub schema: String,
    /// Always `canary`: the history tells it from drills and incidents by this.
    pub kind: String,
    pub tool_version: String,
    pub run_id: String,
    pub drill: String,
    pub context: String,
    pub node_pool: String,
    pub pod: String,
    pub started: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<DateTime<Utc>>,
    pub outcome: CanaryOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    pub exit_code: u8,
    pub phases: Vec<CanaryPhase>,
    pub first_answer_seconds: Option<f64>,
    #[serde(flatten)]
    pub measured: MeasuredFacts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<Against>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regressions: Vec<String>,
    /// What the canary caused that is still in the cluster at its end, verified by reading it back.
    pub left_behind: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The measured facts besides the phases, flattened into the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasuredFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodeclaim: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_launches: Vec<crate::phases::fallback_faults::FailedLaunch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<crate::phases::PodStartup>,
    pub node_hours: f64,
}

impl CanaryReport {
    /// Sets the measurements, their cost from the drill's price table, and the comparison with the last drill.
    pub fn measured(&mut self, m: Measured, pricing: &std::collections::BTreeMap<String, f64>, last: Option<Against>) {
        self.estimated_cost = m.instance_type.as_ref().and_then(|t| pricing.get(t)).map(|price| price * m.node_hours);
        self.first_answer_seconds = m.first_answer_seconds;
        self.phases = m.phases;
        self.measured = MeasuredFacts {
            nodeclaim: m.nodeclaim,
            node: m.node,
            instance_type: m.instance_type,
            failed_launches: m.failed_launches,
            startup: m.startup,
            node_hours: m.node_hours,
        };
        self.against = last.map(|mut against| {
            against.phases = compare(&self.phases, &against.phases);
            against
        });
        self.regressions = self
            .against
            .iter()
            .flat_map(|a| &a.phases)
            .filter(|c| c.regression)
            .map(|c| {
                format!(
                    "{} {} against {} in the last drill",
                    c.phase,
                    human_seconds(c.canary_seconds),
                    human_seconds(c.drill_seconds)
                )
            })
            .collect();
    }

    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(CANARY_FILE), json + "\n")?;
        std::fs::write(dir.join("report.md"), markdown(self))
    }
}

/// The canary's phases set against the drill's (each `Comparison` of `drill` holds the drill's figure alone).
fn compare(canary: &[CanaryPhase], drill: &[Comparison]) -> Vec<Comparison> {
    canary
        .iter()
        .filter_map(|p| {
            let d = drill.iter().find(|d| d.phase == p.name)?;
            let now = p.seconds?;
            Some(Comparison {
                phase: p.name.clone(),
                canary_seconds: now,
                drill_seconds: d.drill_seconds,
                regression: is_regression(now, d.drill_seconds, None, REGRESSION_RATIO),
            })
        })
        .collect()
}

/// The drill's last finished run under `reports_dir/<drill>/`, its phases as the canary compares them.
pub fn last_drill(reports_dir: &Path, drill: &str) -> Option<Against> {
    let (runs, _) = crate::report::history::collect(&reports_dir.join(drill)).ok()?;
    let (_, last) = runs
        .into_iter()
        .filter(|(_, r)| r.kind == RunKind::Drill && r.crashed.is_none() && r.drill.name == drill)
        // A drill refused or aborted before its fallback measured nothing to compare with.
        .filter(|(_, r)| r.phases.iter().any(|p| p.seconds.is_some()))
        .max_by_key(|(_, r)| r.started)?;
    let phases = last
        .phases
        .iter()
        .filter_map(|p| {
            Some(Comparison {
                phase: p.name.to_string(),
                canary_seconds: 0.0,
                drill_seconds: p.seconds?,
                regression: false,
            })
        })
        .collect();
    Some(Against { run_id: last.run_id, started: last.started, phases })
}

fn seconds(s: Option<f64>) -> String {
    s.map_or_else(|| "not measured".into(), human_seconds)
}

/// The terminal's summary: the verdict and its cause first, then each phase.
pub fn text(r: &CanaryReport, dir: &Path) -> String {
    let mut out = format!("canary {}: {}", r.drill, r.outcome.word().to_uppercase());
    if let Some(cause) = &r.cause {
        let _ = write!(out, " ({cause})");
    }
    out.push('\n');
    for p in &r.phases {
        let _ = writeln!(out, "  {:<16} {:>12}   {} -> {}", p.name, seconds(p.seconds), p.from, p.to);
    }
    let _ = writeln!(out, "  first good answer after {}", seconds(r.first_answer_seconds));
    for line in regressions_and_cost(r) {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(out, "run directory {}", dir.display());
    out
}

fn regressions_and_cost(r: &CanaryReport) -> Vec<String> {
    let mut lines = Vec::new();
    match &r.against {
        Some(a) if r.regressions.is_empty() => lines.push(format!(
            "no phase regressed against the last drill ({}, {} phases compared)",
            a.run_id,
            a.phases.len()
        )),
        Some(a) => lines.push(format!("regressed against the last drill {}: {}", a.run_id, r.regressions.join("; "))),
        None => lines.push("no finished drill of this file in the reports directory to compare with".into()),
    }
    let node = r.measured.instance_type.as_deref().unwrap_or("no node");
    lines.push(match r.estimated_cost {
        Some(cost) => format!("cost: {:.3} node-hours of {node}, about ${cost:.2}", r.measured.node_hours),
        None => format!("cost: {:.3} node-hours of {node} (no price in spec.pricing)", r.measured.node_hours),
    });
    if !r.left_behind.is_empty() {
        lines.push(format!("LEFT BEHIND: {}", r.left_behind.join(", ")));
    }
    lines.extend(r.warnings.iter().map(|w| format!("warning: {w}")));
    lines
}

pub fn markdown(r: &CanaryReport) -> String {
    let mut out = format!("# Fallback canary: {}\n\n", r.drill);
    let _ =
        writeln!(out, "**{}**{}\n", r.outcome.word(), r.cause.as_ref().map(|c| format!(": {c}")).unwrap_or_default());
    let _ = writeln!(
        out,
        "Run `{}` on `{}`, NodePool `{}`, pod `{}`, started {}; nothing on-prem was touched.\n",
        r.run_id,
        r.context,
        r.node_pool,
        r.pod,
        r.started.format("%Y-%m-%d %H:%M:%S UTC")
    );
    out.push_str("| phase | from | to | seconds (tool) | seconds (server) |\n|---|---|---|---|---|\n");
    for p in &r.phases {
        let server = p.server_seconds.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        let _ = writeln!(out, "| {} | {} | {} | {} | {server} |", p.name, p.from, p.to, seconds(p.seconds));
    }
    let _ = writeln!(out, "\nFirst good answer after {}.\n", seconds(r.first_answer_seconds));
    for f in &r.measured.failed_launches {
        let _ = writeln!(out, "- launch refused at {}: {} {}", f.at.format("%H:%M:%S"), f.reason, f.pools.join(", "));
    }
    for line in regressions_and_cost(r) {
        let _ = writeln!(out, "- {line}");
    }
    out
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The canary's metrics in Prometheus's text format, for the Pushgateway.
pub fn prometheus(r: &CanaryReport) -> String {
    let drill = format!("drill=\"{}\"", escape(&r.drill));
    let mut out = String::new();
    let mut family = |name: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP hybrid_drill_canary_{name} {help}\n# TYPE hybrid_drill_canary_{name} gauge");
        for (labels, value) in samples {
            let _ = writeln!(out, "hybrid_drill_canary_{name}{{{labels}}} {value}");
        }
    };
    family(
        "success",
        "1 when the last canary passed, else 0.",
        vec![(drill.clone(), f64::from(u8::from(r.outcome == CanaryOutcome::Passed)))],
    );
    family(
        "outcome",
        "The last canary's outcome: 1 for the one it had.",
        vec![(format!("{drill},outcome=\"{}\"", r.outcome.word()), 1.0)],
    );
    family(
        "phase_seconds",
        "Each phase of the last canary, on the tool's clock.",
        r.phases.iter().filter_map(|p| Some((format!("{drill},phase=\"{}\"", p.name), p.seconds?))).collect(),
    );
    family(
        "first_answer_seconds",
        "From the canary pod's creation to its first good answer.",
        r.first_answer_seconds.map(|s| (drill.clone(), s)).into_iter().collect(),
    );
    family(
        "failed_launches",
        "Launches Karpenter was refused during the last canary.",
        vec![(drill.clone(), r.measured.failed_launches.len() as f64)],
    );
    family(
        "cost_dollars",
        "The last canary's estimated cost.",
        r.estimated_cost.map(|c| (drill.clone(), c)).into_iter().collect(),
    );
    family("regressions", "Phases slower than in the last drill.", vec![(drill.clone(), r.regressions.len() as f64)]);
    family(
        "left_behind",
        "Objects the last canary caused still in the cluster.",
        vec![(drill.clone(), r.left_behind.len() as f64)],
    );
    family("last_run_timestamp_seconds", "When the last canary started.", vec![(drill, r.started.timestamp() as f64)]);
    out
}

/// Every canary report under `dir` (a reports directory, one drill's, or one run), oldest first.
pub fn collect(dir: &Path) -> Vec<(PathBuf, CanaryReport)> {
    let mut found = Vec::new();
    find(dir, 0, &mut found);
    found.sort_by_key(|(_, r)| r.started);
    found
}

fn find(dir: &Path, depth: usize, found: &mut Vec<(PathBuf, CanaryReport)>) {
    if let Some(report) = std::fs::read(dir.join(CANARY_FILE)).ok().and_then(|b| serde_json::from_slice(&b).ok()) {
        found.push((dir.to_path_buf(), report));
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten().filter(|_| depth < 3) {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            find(&entry.path(), depth + 1, found);
        }
    }
}

/// The canaries beside the drills in `history`: one line per canary, oldest first, per drill.
pub fn history_text(dir: &Path) -> String {
    let canaries = collect(dir);
    if canaries.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nFallback canaries (hybrid-drill canary)\n");
    for (_, r) in &canaries {
        let phase = |name: &str| seconds(r.phases.iter().find(|p| p.name == name).and_then(|p| p.seconds));
        let _ = writeln!(
            out,
            "  {}  {:<24} {:<22} provisioning {:>10}  first answer {:>10}  reclaim {:>10}{}",
            r.started.format("%Y-%m-%d %H:%M"),
            r.drill,
            r.outcome.word(),
            phase("provisioning"),
            seconds(r.first_answer_seconds),
            phase("reclaim"),
            if r.regressions.is_empty() { String::new() } else { format!("  REGRESSED: {}", r.regressions.join("; ")) }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, seconds: f64) -> CanaryPhase {
        CanaryPhase {
            name: name.into(),
            from: "a".into(),
            to: "b".into(),
            seconds: Some(seconds),
            server_seconds: None,
        }
    }

    #[test]
    fn a_phase_much_slower_than_the_last_drills_is_a_regression() {
        let drill = vec![
            Comparison { phase: "launched".into(), canary_seconds: 0.0, drill_seconds: 3.0, regression: false },
            Comparison { phase: "image-pull".into(), canary_seconds: 0.0, drill_seconds: 10.0, regression: false },
        ];
        let compared = compare(&[phase("launched", 9.0), phase("image-pull", 10.5), phase("reclaim", 20.0)], &drill);
        assert_eq!(compared.len(), 2, "only phases both measured");
        assert!(compared[0].regression, "three times slower");
        assert!(!compared[1].regression, "within the noise");
    }

    #[test]
    fn the_metrics_name_the_drill_and_each_phase() {
        let r = CanaryReport {
            schema: CANARY_SCHEMA.into(),
            kind: "canary".into(),
            tool_version: "t".into(),
            run_id: "r".into(),
            drill: "d".into(),
            context: "c".into(),
            node_pool: "p".into(),
            pod: "canary-r".into(),
            started: DateTime::from_timestamp(1_767_225_600, 0).unwrap(),
            finished: None,
            outcome: CanaryOutcome::LaunchRefused,
            cause: Some("no capacity".into()),
            exit_code: 1,
            phases: vec![phase("launched", 2.5)],
            first_answer_seconds: None,
            measured: MeasuredFacts::default(),
            estimated_cost: None,
            against: None,
            regressions: vec![],
            left_behind: vec![],
            warnings: vec![],
        };
        let text = prometheus(&r);
        assert!(text.contains("hybrid_drill_canary_success{drill=\"d\"} 0"), "{text}");
        assert!(text.contains("hybrid_drill_canary_phase_seconds{drill=\"d\",phase=\"launched\"} 2.5"), "{text}");
        assert!(text.contains("hybrid_drill_canary_outcome{drill=\"d\",outcome=\"launch refused\"} 1"), "{text}");
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(json["outcome"], "launch-refused");
        assert!(json["phases"].is_array() && json.get("first_answer_seconds").is_some());
        assert_eq!(CanaryOutcome::LaunchRefused.exit_code(), crate::exit::EXIT_OBJECTIVE_MISSED);
    }
}
