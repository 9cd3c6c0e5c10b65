//! The design's safety nets, proven by a drill: the alerts it relies on to page someone (`alerts` reads them from
//! Alertmanager while the drill runs; `judge` times each from the fault), the warmers its RTO relies on (`judge`
//! checks each on the fallback's nodes and credits it with the time it saved), and the alert rules `preflight`
//! looks for in Prometheus (`rules`).

pub mod alerts;
pub mod judge;
pub mod preflight;
pub mod rules;
#[cfg(test)]
mod tests;

pub use judge::{AlertCheck, AlertVerdict, SafetyNets, WarmerCheck, WarmerVerdict, judge};
