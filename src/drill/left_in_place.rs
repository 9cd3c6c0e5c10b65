//! What a drill's steps leave in place when every one of them passes: a change no later step undoes. `validate` and
//! `plan` warn about each; a run undoes them at its end unless the drill keeps them (`spec.keepChanges`).

use std::fmt;

use super::{Action, Drill, RestoreTarget};

/// One change the steps make and no later step undoes.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftInPlace {
    pub step: String,
    pub change: &'static str,
    pub undone_by: &'static str,
}

impl fmt::Display for LeftInPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step `{}` {} and no later step {}", self.step, self.change, self.undone_by)
    }
}

/// The changes a drill's steps leave in place at its end, in step order.
pub fn left_in_place(drill: &Drill) -> Vec<LeftInPlace> {
    let mut open: Vec<(LeftInPlace, Kind)> = Vec::new();
    for step in &drill.spec.steps {
        let opened = |change, undone_by, kind| (LeftInPlace { step: step.id.clone(), change, undone_by }, kind);
        match &step.action {
            Action::Drain(_) | Action::Cordon(_) => {
                open.push(opened("cordons the on-prem nodes", "uncordons them (`uncordon` or `return`)", Kind::Cordon))
            }
            Action::Cut(_) => open.push(opened("cuts the link", "restores it (`restore: cut`)", Kind::Cut)),
            Action::NodeFailure(_) => open.push(opened(
                "fails the on-prem nodes",
                "recovers them (`restore: node-failure`)",
                Kind::NodeFailure,
            )),
            Action::GpuFault(_) => open.push(opened(
                "fails GPUs of the on-prem nodes",
                "recovers them (`restore: gpu-fault`)",
                Kind::GpuFault,
            )),
            Action::Capacity(_) => open.push(opened(
                "takes instance types' capacity away",
                "gives it back (`restore: capacity`)",
                Kind::Capacity,
            )),
            Action::Exec(exec) if exec.undo.is_some() => {
                open.push(opened("runs a command with an undo", "runs its undo", Kind::Exec))
            }
            Action::Uncordon(_) => open.retain(|(_, k)| *k != Kind::Cordon),
            Action::Return(ret) if ret.uncordon => open.retain(|(_, k)| *k != Kind::Cordon),
            Action::Restore(RestoreTarget::Cut) => open.retain(|(_, k)| *k != Kind::Cut),
            Action::Restore(RestoreTarget::NodeFailure) => open.retain(|(_, k)| *k != Kind::NodeFailure),
            Action::Restore(RestoreTarget::GpuFault) => open.retain(|(_, k)| *k != Kind::GpuFault),
            Action::Restore(RestoreTarget::Capacity) => open.retain(|(_, k)| *k != Kind::Capacity),
            _ => {}
        }
    }
    open.into_iter().map(|(left, _)| left).collect()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Cordon,
    Cut,
    NodeFailure,
    GpuFault,
    Capacity,
    Exec,
}

/// What `validate` and `plan` say about the changes left in place, one line each; none when there are none.
pub fn warnings(drill: &Drill) -> Vec<String> {
    let left = left_in_place(drill);
    let fate = if drill.spec.keep_changes {
        "kept at the end of the run (spec.keepChanges: true); `hybrid-drill recover RUN_DIR` undoes it"
    } else {
        "the run undoes it at its end (spec.keepChanges: true keeps it)"
    };
    left.iter().map(|l| format!("{l}: {fate}")).collect()
}
