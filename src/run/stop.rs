//! The stop stage of a run: after a failure or an abort, the rollback from the journal, checked, and the workload
//! brought home; after a completed run, what the steps left in place undone and the silences expired; either way,
//! the cluster compared with its state before the fault.

use std::path::PathBuf;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::{Run, Stop, Stopped};
use crate::cluster::collateral::LeftoverKind;
use crate::drill::{Action, Drill, ReturnAction, WorkloadRef};
use crate::notify::Notice;
use crate::progress::Progress;
use crate::safety::signals::interrupted;
use crate::safety::{self, RollbackOutcome};
use crate::steps;
use crate::timeline::view::ClusterView;
use crate::timeline::{Event, NodeRole};

impl Run<'_> {
    /// After a failure or an abort, undoes every change the drill made, checks the restore and brings the workload
    /// home; after a completed run, undoes what the steps left in place (unless the drill keeps it); after a refusal
    /// there is nothing to undo.
    pub(super) async fn stop(&mut self, stop: Stop) -> Stopped {
        let mut stopped = Stopped { stop, restore_failed: false, left_behind: false };
        let reason = match &stopped.stop {
            Stop::Completed => {
                // The silences outlive the restore check of what the steps left: its own alerts must not page.
                stopped.restore_failed = !self.leave_nothing_behind().await;
                self.expire_silences().await;
                stopped.left_behind = self.leftovers().await;
                return stopped;
            }
            Stop::Refused(reason) => {
                // Validation puts the refusing step before any change, so there is nothing to restore.
                self.timeline.record(Event::Aborted { reason: reason.clone() });
                self.progress.line(&format!("refusing the drill: {reason}; nothing was changed"));
                return stopped;
            }
            Stop::StepFailed(reason) | Stop::Aborted(reason) => reason.clone(),
        };
        self.timeline.record(Event::Aborted { reason: reason.clone() });
        self.progress.line(&format!("aborting: {reason}; restoring the cluster"));
        self.tell(&Notice::Aborted { reason: reason.clone() }).await;
        let notice = second_signal_notice(self.dir.clone(), self.progress.clone());
        let outcome = self.mutator.rollback_verified(safety::restore_wait(&self.cluster)).await;
        notice.abort();
        stopped.restore_failed = !self.record_restore(outcome);
        if !stopped.restore_failed {
            self.bring_workload_home().await;
        }
        if let Some(warning) = self.view.read(|v| displaced_workload_warning(&self.loaded.drill, v)) {
            self.warnings.raise(warning);
        }
        self.fallback_still_running();
        self.leftovers().await;
        stopped
    }

    /// Compares the cluster with the state before the fault and names each difference left, live and in the
    /// timeline; whether cloud capacity the drill caused is still running.
    async fn leftovers(&mut self) -> bool {
        let drill = &self.loaded.drill;
        match steps::collateral::account(&self.reader, drill, &self.timeline, &self.plan.on_prem_nodes).await {
            Ok(left) => {
                for leftover in &left {
                    self.progress.line(&leftover.line());
                }
                left.iter().any(|l| l.kind == LeftoverKind::NodeClaim)
            }
            Err(e) => {
                self.warnings.raise(format!("cannot compare the cluster with its state before the fault: {e}"));
                false
            }
        }
    }

    /// Sends a notice; a webhook that did not take it is a warning.
    async fn tell(&mut self, notice: &Notice) {
        for warning in self.notifier.send(notice).await {
            self.warnings.raise(warning);
        }
    }

    /// At the end of a completed run, the silences end with the drill, whatever else the drill keeps. One that cannot
    /// be expired stays outstanding (the rollback below or `recover` tries again) and ends by itself at its end time.
    async fn expire_silences(&mut self) {
        let outcome = self.mutator.expire_silences().await;
        for expired in &outcome.undone {
            self.progress.line(&format!("expired: {expired}"));
        }
        for (what, why) in outcome.failed {
            self.warnings.raise(format!(
                "{what} not expired: {why}; it ends by itself at its end time, or run `hybrid-drill recover {}`",
                self.dir.display()
            ));
        }
    }

    /// Records what a checked rollback undid, verified and left; whether the cluster is restored.
    fn record_restore(&mut self, outcome: RollbackOutcome) -> bool {
        let restored = outcome.restored();
        for checked in &outcome.verified {
            self.progress.line(&format!("verified: {checked}"));
        }
        if !restored {
            let left: Vec<String> = outcome.failed.iter().map(|(what, why)| format!("{what}: {why}")).collect();
            self.progress.line(&format!(
                "RESTORE INCOMPLETE: {}; the journal keeps it outstanding: finish with `hybrid-drill recover {}`",
                left.join("; "),
                self.dir.display()
            ));
        }
        self.timeline.record(Event::RollbackFinished {
            undone: outcome.undone,
            failed: outcome.failed.into_iter().map(|(what, why)| format!("{what}: {why}")).collect(),
            verified: outcome.verified,
        });
        restored
    }

    /// At the end of a completed run, undoes (and checks) what the steps left in place, or, when the drill keeps its
    /// changes, lists them in the report; whether the cluster is as the drill means to leave it.
    async fn leave_nothing_behind(&mut self) -> bool {
        let left = match self.mutator.outstanding().await {
            Ok(left) => left,
            Err(e) => {
                self.warnings.raise(format!("cannot read the journal to find what the steps left in place: {e}"));
                return false;
            }
        };
        if left.is_empty() {
            return true;
        }
        if self.loaded.drill.spec.keep_changes {
            self.warnings.raise(format!(
                "left in place at the end, as spec.keepChanges asks: {}; undo with `hybrid-drill recover {}`",
                left.join(", "),
                self.dir.display()
            ));
            return true;
        }
        self.progress.line(&format!("undoing what the steps left in place: {}", left.join(", ")));
        let outcome = self.mutator.undo_left_in_place(safety::restore_wait(&self.cluster)).await;
        if !outcome.undone.is_empty() {
            self.warnings.raise(format!(
                "the drill's steps left changes in place; undone at its end: {}",
                outcome.undone.join(", ")
            ));
        }
        self.record_restore(outcome)
    }

    /// After an abort whose restore held: the drill's own return restart, then a bounded wait for the workload's pods
    /// to be Ready on-prem with none on the fallback, so consolidation can reclaim the cloud nodes. A second signal
    /// ends the wait (the cluster is restored already).
    async fn bring_workload_home(&mut self) {
        let drill = &self.loaded.drill;
        let displaced = self
            .view
            .read(|v| v.live_pods().any(|p| p.node.as_deref().is_none_or(|n| v.role_of(n) != NodeRole::OnPrem)));
        let Some(target) = return_restart(drill) else { return };
        if !displaced {
            return;
        }
        let namespace = &drill.spec.targets.workload.namespace;
        self.progress.line(&format!("bringing the workload home: restarting {target}"));
        if let Err(e) = self.mutator.restart(namespace, target.kind, &target.name).await {
            self.warnings.raise(format!("the workload was not brought home: {e}"));
            return;
        }
        let wait = if self.cluster.is_lab() { Duration::from_secs(180) } else { Duration::from_secs(900) };
        let mut derived = self.monitor.derived.clone();
        let home = async {
            loop {
                if derived.borrow_and_update().back_on_prem {
                    return true;
                }
                if derived.changed().await.is_err() {
                    return false;
                }
            }
        };
        let waited = tokio::select! {
            home = tokio::time::timeout(wait, home) => home.unwrap_or(false),
            _ = interrupted() => false,
        };
        if waited {
            self.progress.line("the workload is back on-prem");
        } else {
            self.warnings.raise(format!(
                "the workload was restarted ({target}) but is not back on-prem yet: it was not Ready on-prem with no pod                  on the fallback within {}",
                humantime::format_duration(wait)
            ));
        }
    }

    /// Says plainly when fallback nodes outlive the run: they bill until consolidation reclaims them.
    fn fallback_still_running(&mut self) {
        let (nodes, gpus) =
            (self.view.read(|v| v.fallback_nodes().count()), self.monitor.derived.borrow().fallback_gpus);
        if nodes > 0 {
            self.warnings.raise(format!(
                "{nodes} fallback nodes ({gpus} GPUs) are still running at the end of the run: Karpenter's                  consolidation reclaims them once no workload pod is left on them (after the NodePool's                  consolidateAfter); the fallback cost in this report counts them up to the end of the rollback only"
            ));
        }
    }
}

/// After an abort, the restore has undone the drill's changes but moved no pod: pods evicted to the fallback stay
/// there, on cloud GPUs, until the workload is restarted. Says how many and the command that brings them back.
fn displaced_workload_warning(drill: &Drill, view: &ClusterView) -> Option<String> {
    let total = view.live_pods().count();
    let displaced =
        view.live_pods().filter(|p| p.node.as_deref().is_none_or(|n| view.role_of(n) != NodeRole::OnPrem)).count();
    if displaced == 0 {
        return None;
    }
    let workload = &drill.spec.targets.workload;
    let restart = return_restart(drill)
        .map(|target| format!("`kubectl rollout restart {target} -n {}`", workload.namespace))
        .unwrap_or_else(|| {
            format!("a rollout restart of the workload `{}` in `{}`", workload.selector, workload.namespace)
        });
    Some(format!(
        "{displaced} of {total} workload pods are not on the on-prem nodes: the restore undid the drill's changes but \
         moves no pod; once the on-prem nodes are Ready, {restart} brings them back and consolidation then reclaims \
         the fallback"
    ))
}

/// The workload the drill's return restarts, if it does.
fn return_restart(drill: &Drill) -> Option<&WorkloadRef> {
    drill.spec.steps.iter().find_map(|s| match &s.action {
        Action::Return(ReturnAction { restart: Some(target), .. }) => Some(target),
        _ => None,
    })
}

/// While restoring, a further Ctrl-C does not skip the restore: it says what remains and how to finish.
fn second_signal_notice(dir: PathBuf, progress: Progress) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let _ = interrupted().await;
            progress.line(&format!(
                "restore in progress and will not be skipped; if this process is killed, finish with: hybrid-drill recover {}",
                dir.display()
            ));
        }
    })
}
