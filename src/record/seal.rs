//! Ending a run's timeline and building its report, once: the end a drill and an incident's episode share. The
//! timeline is analysed once, the outcome judged on that analysis, and the report built from the same analysis after
//! whatever is measured over the finished run (the SLIs' impact) is recorded.

use crate::cluster::Cluster;
use crate::drill::LoadedDrill;
use crate::phases::Analysis;
use crate::report::provenance::Provenance;
use crate::report::{self, Outcome, Report, RunMeta};
use crate::slo::RunSpan;
use crate::timeline::{Event, Timeline};

/// A run about to end: its timeline, what the report keeps of the tool and the API server, and who ran it.
pub struct Closing<'a> {
    pub timeline: &'a Timeline,
    pub cluster: &'a Cluster,
    pub loaded: &'a LoadedDrill,
    pub version: &'a str,
    pub provenance: Provenance,
}

/// A run whose timeline is ended and analysed: its outcome recorded, its report not built yet.
pub struct Ended<'a> {
    closing: Closing<'a>,
    analysis: Analysis,
}

impl<'a> Closing<'a> {
    /// Ends the run's timeline (the lab's caveat, the request count), analyses it once, and records the outcome
    /// `judge` gives on that analysis.
    pub fn end(self, judge: impl FnOnce(&Analysis) -> Outcome) -> Ended<'a> {
        let (timeline, cluster) = (self.timeline, self.cluster);
        if cluster.is_lab() {
            timeline.record(Event::Warning {
                message: "this ran against the lab: its timings are shortened (see lab/README.md) and are not a real \
                          cluster's"
                    .into(),
            });
        }
        timeline.record(Event::RequestsSent { total: cluster.requests_sent(), by_verb: cluster.requests_by_verb() });
        let analysis = report::analyse(&self.loaded.drill, &timeline.observations());
        let outcome = judge(&analysis);
        timeline.record(Event::DrillFinished { outcome });
        Ended { closing: self, analysis }
    }
}

impl Ended<'_> {
    /// What the run's phases and span are, for what is measured over the run once it is over (the SLIs' impact).
    pub fn span(&self) -> RunSpan<'_> {
        let observations = self.closing.timeline.observations();
        let (started, finished) = report::span(&observations);
        RunSpan::of(&started, &finished, &self.analysis.phases, &observations)
    }

    /// The run's report, built once from the analysis `end` made and everything the timeline holds by now.
    pub fn report(self) -> Report {
        let Closing { timeline, cluster, loaded, version, provenance } = self.closing;
        let meta = RunMeta { provenance: Some(provenance), ..run_meta(loaded, cluster, version) };
        report::build_analysed(&loaded.drill, &timeline.observations(), self.analysis, &meta)
    }
}

/// What a report keeps of the tool, the drill file and the API server.
pub fn run_meta(loaded: &LoadedDrill, cluster: &Cluster, version: &str) -> RunMeta {
    RunMeta {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        drill_file: loaded.path.display().to_string(),
        drill_source: crate::secrets::redact(&loaded.source).into_owned(),
        cluster_server: cluster.server.clone(),
        cluster_version: version.to_string(),
        provenance: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::BUILT;

    fn counted() -> (usize, usize) {
        (crate::phases::ANALYSED.with(std::cell::Cell::get), BUILT.with(std::cell::Cell::get))
    }

    /// A run's finish, as `run` and `watch` end theirs: the timeline analysed once, the outcome judged on it, what
    /// is measured over the span recorded, the report built once from the same analysis.
    #[tokio::test]
    async fn a_run_is_analysed_once_and_its_report_built_once() {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/drills/drain.yaml"));
        let loaded = crate::drill::from_source(path, std::fs::read_to_string(path).unwrap()).unwrap();
        let (cluster, _handle) = Cluster::mock();
        let timeline = Timeline::in_memory();
        timeline.record(Event::DrillStarted {
            drill: "drain".into(),
            run_id: "drain-1".into(),
            context: "mock".into(),
        });
        timeline.record(Event::StepStarted { step: "drain".into(), action: "drain".into() });
        let before = counted();
        let closing = Closing {
            timeline: &timeline,
            cluster: &cluster,
            loaded: &loaded,
            version: "v1.33.0",
            provenance: Provenance::default(),
        };
        let mut judged = 0;
        let ended = closing.end(|_| {
            judged += 1;
            Outcome::Aborted
        });
        let span = ended.span();
        assert!(span.finished >= span.started);
        timeline.record(Event::Warning { message: "measured over the span".into() });
        let report = ended.report();
        let after = counted();
        assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1), "analysed once, built once");
        assert_eq!(judged, 1);
        assert_eq!(report.outcome, Outcome::Aborted);
        assert!(report.warnings.iter().any(|w| w == "measured over the span"), "{:?}", report.warnings);
        assert_eq!(report.run_id, "drain-1");
    }
}
