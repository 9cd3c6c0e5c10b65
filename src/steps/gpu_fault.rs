//! The GPU fault: the drill's hooks fail GPUs of on-prem nodes that stay Ready; the step then waits, bounded by
//! `quarantineWithin`, for the cluster's own remediation to quarantine a faulty node (cordon it, or taint it), which is
//! what starts the fallback. When none does, the fallback never triggers: the step says so and the run goes straight
//! to the `restore: gpu-fault` that ends the fault. After that restore, the GPUs must be allocatable as before.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use super::{StepContext, StepError, StepSuccess};
use crate::drill::GpuFaultAction;
use crate::drill::placeholders::expand_nodes;
use crate::prometheus::Prometheus;
use crate::timeline::gpu::NodeMarks;
use crate::timeline::view::ClusterView;
use crate::timeline::{Event, FaultKind};

/// The first faulty node a remediation quarantined since `before`, and how.
fn quarantined(before: &BTreeMap<String, NodeMarks>, view: &ClusterView) -> Option<String> {
    before.iter().find_map(|(name, was)| {
        let how = was.quarantine(&NodeMarks::of(view.nodes.get(name)?))?;
        Some(format!("{name} {how}"))
    })
}

// Long: one wait on two sources (the cluster's changes and the detection query), with the no-quarantine finding.
pub async fn gpu_fault(ctx: &StepContext<'_>, step: &str, action: &GpuFaultAction) -> Result<StepSuccess, StepError> {
    let nodes = action.hooks.chosen(ctx.on_prem_nodes);
    let before: BTreeMap<String, NodeMarks> =
        ctx.view.read(|v| nodes.iter().filter_map(|n| Some((n.clone(), NodeMarks::of(v.nodes.get(n)?)))).collect());
    let mut detection = ErrorQuery::connect(ctx, action, &nodes).await;
    let mut changes = ctx.view.changes();
    let targets = super::node_failure::run_fault_hooks(ctx, step, &action.hooks, FaultKind::GpuFault).await?;
    let started = Instant::now();
    ctx.timeline.record(Event::GpuFaulted {
        nodes: nodes.clone(),
        quarantine_within_seconds: action.quarantine_within.as_secs_f64(),
        before: before.clone(),
    });
    let until = started + action.quarantine_within;
    let within = humantime::format_duration(action.quarantine_within);
    loop {
        if let Some(how) = ctx.view.read(|v| quarantined(&before, v)) {
            let after = started.elapsed().as_secs();
            if let Some(query) = &mut detection {
                query.grace(ctx, until).await;
            }
            return Ok(StepSuccess::ok(format!(
                "GPUs failed on {targets}; quarantined {after} s after the hooks: {how}"
            )));
        }
        ctx.progress.waiting(&format!("waiting up to {within} for a remediation to quarantine {}", nodes.join(", ")));
        let next_ask = detection.as_ref().and_then(ErrorQuery::next_ask).unwrap_or(until);
        tokio::select! {
            changed = tokio::time::timeout_at(until, changes.changed()) => match changed {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(StepError::Failed("the drill's watches stopped".into())),
                Err(_) => break,
            },
            _ = tokio::time::sleep_until(next_ask), if next_ask < until => {
                if let Some(query) = &mut detection {
                    query.ask(ctx).await;
                }
            }
        }
    }
    let waited = started.elapsed();
    ctx.timeline.record(Event::GpuFaultUnremediated { nodes: nodes.clone(), waited_seconds: waited.as_secs_f64() });
    Ok(StepSuccess {
        message: format!(
            "fallback never triggered: GPUs failed on {targets} and nothing quarantined them within {within}; no \
             remediation covers these nodes"
        ),
        warning: true,
        skip_to_restore: true,
    })
}

/// The step's `detectedBy`: asked of the drill's Prometheus every SLI interval until its first answer with a series.
struct ErrorQuery {
    prometheus: Prometheus,
    query: String,
    every: Duration,
    next: Instant,
    /// Answered, or given up on after an error: asked no more.
    done: bool,
}

/// Series labels that name the node a GPU is on: dcgm-exporter's `Hostname`, then the usual relabelled ones.
const NODE_LABELS: [&str; 3] = ["Hostname", "node", "kubernetes_node"];

impl ErrorQuery {
    /// `None` without a `detectedBy`, or when the Prometheus client cannot be made (said once; the drill goes on and
    /// detects by allocatable alone).
    async fn connect(ctx: &StepContext<'_>, action: &GpuFaultAction, nodes: &[String]) -> Option<ErrorQuery> {
        let query = action.detected_by.as_deref()?;
        let slo = ctx.drill.spec.slo.as_ref()?;
        match Prometheus::connect(&slo.prometheus, ctx.reader).await {
            Ok(prometheus) => Some(ErrorQuery {
                prometheus,
                query: expand_nodes(query, nodes),
                every: slo.interval,
                next: Instant::now(),
                done: false,
            }),
            Err(e) => {
                ctx.progress
                    .line(&format!("detectedBy is not asked (the GPU fault is detected by allocatable only): {e}"));
                None
            }
        }
    }

    fn next_ask(&self) -> Option<Instant> {
        (!self.done).then_some(self.next)
    }

    async fn ask(&mut self, ctx: &StepContext<'_>) {
        self.next = Instant::now() + self.every;
        match self.prometheus.instant_vector(&self.query, Utc::now()).await {
            Ok(series) if series.is_empty() => {}
            Ok(series) => {
                self.done = true;
                let nodes: BTreeSet<String> =
                    series.iter().filter_map(|s| NODE_LABELS.iter().find_map(|l| s.labels.get(*l).cloned())).collect();
                let value = series.iter().filter_map(|s| s.points.first()).map(|p| p.1).fold(f64::NAN, f64::max);
                let seen = Event::GpuErrorsSeen { nodes: nodes.into_iter().collect(), value };
                ctx.progress.line(&seen.describe());
                ctx.timeline.record(seen);
            }
            Err(e) => {
                self.done = true;
                ctx.progress.line(&format!("detectedBy could not be asked; detection by allocatable only: {e}"));
            }
        }
    }

    /// After the quarantine: a remediation may act on the GPUs' errors before Prometheus's next scrape has them, so
    /// the query is asked a little longer (three of its intervals, at most to the step's bound).
    async fn grace(&mut self, ctx: &StepContext<'_>, until: Instant) {
        let end = (Instant::now() + self.every * 3).min(until);
        while let Some(next) = self.next_ask().filter(|n| *n < end) {
            tokio::time::sleep_until(next).await;
            self.ask(ctx).await;
        }
    }
}

/// After `restore: gpu-fault`: every node the fault touched has its GPUs allocatable as before it, and is schedulable
/// with no taint the fault's remediation added. Waits for that until the step's deadline.
pub async fn await_gpus_back(ctx: &StepContext<'_>, deadline: Instant) -> Result<(), StepError> {
    let before: BTreeMap<String, NodeMarks> = ctx
        .timeline
        .find_map(|o| match &o.event {
            Event::GpuFaulted { before, .. } => Some(before.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let mut changes = ctx.view.changes();
    loop {
        let missing: Vec<String> = ctx.view.read(|v| {
            before
                .iter()
                .filter_map(|(name, was)| {
                    let Some(now) = v.nodes.get(name) else { return Some(format!("{name}: gone")) };
                    let differences = was.differences(&NodeMarks::of(now));
                    (!differences.is_empty()).then(|| format!("{name}: {}", differences.join(", ")))
                })
                .collect()
        });
        if missing.is_empty() {
            return Ok(());
        }
        ctx.progress.waiting(&format!("waiting for the GPU nodes back as before the fault: {}", missing.join("; ")));
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(StepError::Failed("the drill's watches stopped".into())),
            Err(_) => {
                return Err(StepError::Failed(format!("not back as before the GPU fault: {}", missing.join("; "))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(gpus: i64, schedulable: bool, taints: &[&str]) -> NodeMarks {
        NodeMarks { gpus, schedulable, taints: taints.iter().map(|t| t.to_string()).collect() }
    }

    #[test]
    fn a_quarantine_is_a_cordon_or_a_new_taint_and_the_restore_wants_the_gpus_back() {
        let before = marks(8, true, &["nvidia.com/gpu:NoSchedule"]);
        assert_eq!(before.quarantine(&marks(0, true, &["nvidia.com/gpu:NoSchedule"])), None);
        assert_eq!(before.quarantine(&marks(0, false, &["nvidia.com/gpu:NoSchedule"])).as_deref(), Some("cordoned"));
        let tainted = marks(0, true, &["gpu-unhealthy:NoExecute", "nvidia.com/gpu:NoSchedule"]);
        assert_eq!(before.quarantine(&tainted).as_deref(), Some("tainted gpu-unhealthy:NoExecute"));
        assert_eq!(before.differences(&marks(4, true, &["nvidia.com/gpu:NoSchedule"])), ["4 of 8 GPUs allocatable"]);
        assert!(before.differences(&before.clone()).is_empty());
    }
}
