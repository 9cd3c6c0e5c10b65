//! Reports of a run: the versioned `report.json` model (`model`), its building from a timeline (`build`), and one
//! renderer per format, each a pure function of the model, sharing their wording (`words`).

pub mod autoscaling;
mod blockers;
mod build;
pub mod crashed;
pub mod deviations;
mod fallback_faults;
pub mod fidelity;
pub mod figures;
pub mod fold;
pub mod forecast;
pub mod gpu_fault;
pub mod headline;
pub mod history;
pub mod html;
mod impact;
pub mod junit;
pub mod last_tier;
mod leftovers;
pub mod legend;
mod load;
pub mod markdown;
mod model;
pub(crate) mod nets;
pub mod open_episode;
pub(crate) mod page;
pub mod prometheus;
pub mod provenance;
#[cfg(test)]
pub(crate) mod sample;
pub mod service;
pub mod terminal;
#[cfg(test)]
mod tests;
mod words;

use std::path::{Path, PathBuf};

pub use crate::domain::Outcome;
pub use blockers::{ReclaimBlocker, reclaim_blockers};
#[cfg(test)]
pub(crate) use build::BUILT;
pub use build::{LoadError, RunMeta, analyse, build, build_analysed, notable, overlap, span};
pub use load::load;
pub use model::{
    ClusterRecord, DrillIdentity, IncidentFacts, Marker, Notable, OverlapWindow, REPORT_SCHEMA, Recovery, Report,
    Rollback, RunKind, StepRecord,
};
pub use words::{
    billing_in_words, by_node_pool, counted, human_seconds, overlap_sentence, phase_label, requests_in_words,
    seconds_cell, verdict_word,
};

/// The formats a run's report is written in; every run writes each one to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Md,
    Html,
    Json,
    Junit,
    Prometheus,
}

impl Format {
    pub const ALL: [Format; 5] = [Format::Json, Format::Md, Format::Html, Format::Junit, Format::Prometheus];

    pub fn file_name(self) -> &'static str {
        match self {
            Format::Md => "report.md",
            Format::Html => "report.html",
            Format::Json => "report.json",
            Format::Junit => "junit.xml",
            Format::Prometheus => "metrics.prom",
        }
    }

    pub fn render(self, report: &Report) -> Result<String, RenderError> {
        Ok(match self {
            Format::Md => markdown::render(report),
            Format::Html => html::render(report),
            Format::Json => serde_json::to_string_pretty(report).map_err(RenderError::Json)? + "\n",
            Format::Junit => junit::render(report).map_err(RenderError::Junit)?,
            Format::Prometheus => prometheus::render(report).map_err(RenderError::Metrics)?,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot serialize the report: {0}")]
    Json(serde_json::Error),
    #[error("cannot write the JUnit XML: {0}")]
    Junit(quick_junit::SerializeError),
    #[error("cannot encode the metrics: {0}")]
    Metrics(std::fmt::Error),
}

/// Writes every format of the report into the run directory.
pub fn write_all(dir: &Path, report: &Report) -> std::io::Result<Vec<PathBuf>> {
    let report = &forecast::with_forecast(dir, report);
    let mut written = Vec::new();
    for format in Format::ALL {
        let text = format.render(report).map_err(std::io::Error::other)?;
        let path = dir.join(format.file_name());
        std::fs::write(&path, crate::secrets::redact(&text).as_bytes())?;
        written.push(path);
    }
    Ok(written)
}
