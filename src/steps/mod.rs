//! The steps a drill runs, one file per kind, sharing one context that reads the cluster but cannot write to it:
//! every change goes through the mutator.

pub mod check;
pub mod collateral;
pub mod cut;
pub mod drain;
pub mod fallback_faults;
pub mod gpu_fault;
pub mod node_failure;
pub mod nodes;
pub mod preflight;
pub mod reclaim_blockers;
pub mod restore;
pub mod return_to_on_prem;
pub mod wait;

use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::Reader;
use crate::drill::{Action, Check, Drill, Step};
use crate::monitor::Derived;
use crate::progress::Progress;
use crate::safety::{MutationError, Mutator};
use crate::timeline::Timeline;
use crate::timeline::view::SharedView;

/// Everything a step may use. Steps never format output beyond progress lines.
pub struct StepContext<'a> {
    pub reader: &'a Reader,
    pub drill: &'a Drill,
    pub view: &'a SharedView,
    pub timeline: &'a Timeline,
    pub mutator: &'a Mutator,
    pub derived: tokio::sync::watch::Receiver<Derived>,
    pub progress: &'a Progress,
    /// The on-prem nodes the drill resolved before it started; steps act on exactly these.
    pub on_prem_nodes: &'a [String],
}

#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("timed out after {}: {detail}", humantime::format_duration(*.after))]
    Timeout { after: Duration, detail: String },
    #[error("{0}")]
    Failed(String),
    /// The drill must not start; only steps that run before any change may refuse (validation sees to it).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Mutation(#[from] MutationError),
}

/// What a finished step reports.
#[derive(Debug, Clone)]
pub struct StepSuccess {
    pub message: String,
    pub warning: bool,
    /// The fault path ends here: the run skips the steps up to the next `restore` (a GPU fault nothing remediated).
    pub skip_to_restore: bool,
}

impl StepSuccess {
    pub fn ok(message: impl Into<String>) -> StepSuccess {
        StepSuccess { message: message.into(), warning: false, skip_to_restore: false }
    }
}

pub async fn run_step(ctx: &mut StepContext<'_>, step: &Step) -> Result<StepSuccess, StepError> {
    let timeout = step.timeout;
    let deadline = Instant::now() + timeout;
    match &step.action {
        Action::Check(Check::SteadyState, on_deviation) => check::steady_state(ctx, *on_deviation),
        Action::Check(Check::Preflight, on_deviation) => preflight::preflight(ctx, *on_deviation).await,
        Action::Drain(d) => drain::drain(ctx, &step.id, d, deadline, timeout).await,
        Action::Cut(c) => cut::cut(ctx, &step.id, c, deadline).await,
        Action::NodeFailure(f) => node_failure::node_failure(ctx, &step.id, f).await,
        Action::GpuFault(g) => gpu_fault::gpu_fault(ctx, &step.id, g).await,
        Action::Restore(t) => restore::restore(ctx, &step.id, *t, deadline, timeout).await,
        Action::Cordon(_) => nodes::cordon(ctx).await,
        Action::Uncordon(_) => nodes::uncordon(ctx).await,
        Action::WaitFor(condition) => wait::wait_for(ctx, *condition, deadline, timeout).await,
        Action::Return(ret) => return_to_on_prem::return_to_on_prem(ctx, &step.id, ret).await,
        Action::Exec(exec) => {
            let code = ctx.mutator.exec(&step.id, &exec.command, exec.undo.clone(), timeout, &exec.env).await?;
            if code == 0 {
                Ok(StepSuccess::ok(format!("`{}` exited 0", exec.command.join(" "))))
            } else {
                Err(StepError::Failed(format!("`{}` exited {code}", exec.command.join(" "))))
            }
        }
        Action::Capacity(c) => fallback_faults::capacity(ctx, &step.id, c).await,
        Action::LoseFallbackNode => fallback_faults::lose_fallback_node(ctx, deadline, timeout).await,
        Action::Pause(duration) => {
            ctx.progress.waiting(&format!("pausing {}", humantime::format_duration(*duration)));
            tokio::time::sleep(*duration).await;
            Ok(StepSuccess::ok(format!("paused {}", humantime::format_duration(*duration))))
        }
    }
}
