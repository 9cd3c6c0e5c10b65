//! hybrid-drill: failure drills for hybrid GPU clusters with a Karpenter cloud fallback, measured phase by phase.

pub mod alertmanager;
pub mod cli;
pub mod cluster;
pub mod domain;
pub mod drill;
pub mod evidence;
pub mod exit;
pub mod gates;
mod http;
pub mod incident;
pub mod last_tier;
pub mod monitor;
pub mod notify;
pub mod phases;
pub mod plan;
pub mod preflight;
pub mod progress;
mod pushgateway;
pub mod report;
pub mod run;
pub mod safety;
pub mod secrets;
pub mod slo;
pub mod status;
pub mod steps;
pub mod store;
pub mod timeline;
