//! End-to-end tests against the lab, in one test binary so that all of them share one pool of lab instances: each
//! test takes a free instance for its whole run (`common::lab::lock_lab`), and as many run at once as the pool has
//! instances (./test starts the pool and sets LAB_INSTANCES and the test threads to match).

#[path = "../common/mod.rs"]
mod common;

// First by name, so it finds two instances free as the run starts rather than holding one while it waits.
mod autoscaler;
mod budgets;
mod canary;
mod capacity;
mod collateral;
mod concurrent;
mod cut;
mod drills;
mod dry_run;
mod evidence;
mod gates;
mod gpu_fault;
mod image;
mod lease;
mod nets;
mod permissions;
mod preflight;
mod secrets;
mod shipping;
mod slo;
mod status;
mod tiers;
mod watch;
mod whatif;
