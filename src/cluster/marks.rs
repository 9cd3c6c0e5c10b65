//! Run marks: the annotation and label a run leaves on every object it changes, so the cluster itself records what
//! a run touched and recovery can find it when the journal is gone.

use std::collections::BTreeMap;
use std::fmt;

/// Annotation that marks every object a run changed (value: the run id). Objects a run creates or labels also carry
/// it as a label (value: [`run_label`]), so recovery can list them.
pub const RUN_ANNOTATION: &str = "hybrid-drill.io/run-id";

/// Label a host cut puts on the on-prem nodes it cuts (value: [`run_label`]), which its policy selects and nothing
/// else: Cilium drops `kubernetes.io/` keys from a host endpoint's labels, so a policy pinned by them selects no node.
pub const CUT_LABEL: &str = "hybrid-drill.io/cut";

/// A run's id as a label value: label values stop at 63 characters, so a long drill name is shortened and the
/// timestamp kept.
pub fn run_label(run_id: &str) -> String {
    if run_id.len() <= 63 {
        return run_id.to_string();
    }
    let (name, stamp) = run_id.rsplit_once('-').unwrap_or((run_id, ""));
    let keep = 63usize.saturating_sub(stamp.len() + 1);
    let name = name[..keep.min(name.len())].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{name}-{stamp}")
}

/// The id of one run (`<drill>-<timestamp>`), as the run annotation carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunId(String);

impl RunId {
    pub fn new(id: impl Into<String>) -> RunId {
        RunId(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as the run label's value.
    pub fn label(&self) -> String {
        run_label(&self.0)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The label selector for the objects `run` labelled, or any run when none is named.
pub fn label_selector(run: Option<&RunId>) -> String {
    match run {
        Some(run) => format!("{RUN_ANNOTATION}={}", run.label()),
        None => RUN_ANNOTATION.to_string(),
    }
}

/// The label selector for the nodes a host cut of `run` (or of any run) labelled.
pub fn cut_selector(run: Option<&RunId>) -> String {
    match run {
        Some(run) => format!("{CUT_LABEL}={}", run.label()),
        None => CUT_LABEL.to_string(),
    }
}

/// The run whose annotation an object carries, when it is `run` (or any run, when none is named).
pub fn annotated_by<'a>(annotations: &'a BTreeMap<String, String>, run: Option<&RunId>) -> Option<&'a str> {
    let mark = annotations.get(RUN_ANNOTATION)?;
    run.is_none_or(|run| run.as_str() == mark).then_some(mark.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_labels_fit_a_label_value() {
        assert_eq!(run_label("dx-cut-20261202t101500z"), "dx-cut-20261202t101500z");
        let long = format!("{}-20261202t101500z", "a-very-long-drill-name-".repeat(2) + "that-ends");
        let label = run_label(&long);
        assert!(label.len() <= 63 && label.ends_with("-20261202t101500z"), "{label}");
        assert!(label.starts_with("a-very-long-drill-name-a-very-long-drill-n"), "{label}");
    }

    #[test]
    fn marks_are_scoped_to_the_named_run() {
        let run = RunId::new("drain-20261202t101500z");
        let other = BTreeMap::from([(RUN_ANNOTATION.to_string(), "drain-20261201t090000z".to_string())]);
        assert_eq!(annotated_by(&other, Some(&run)), None);
        assert_eq!(annotated_by(&other, None), Some("drain-20261201t090000z"));
        assert_eq!(annotated_by(&BTreeMap::new(), None), None);
        assert_eq!(label_selector(Some(&run)), "hybrid-drill.io/run-id=drain-20261202t101500z");
        assert_eq!(label_selector(None), "hybrid-drill.io/run-id");
        assert_eq!(cut_selector(Some(&run)), "hybrid-drill.io/cut=drain-20261202t101500z");
    }
}
