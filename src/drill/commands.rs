//! The commands a drill file runs on the tool's machine (`exec` steps and their undo, node-failure, capacity and
//! last-resort hooks): code run with the tool's identity and Secrets at hand, so `run` starts a drill that has any
//! only with `--allow-commands`, and `plan` lists each command line.

use super::model::{Action, Drill};

/// One command a drill runs: its step, what it is for, and the command line as written (references unread).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DrillCommand {
    pub step: String,
    pub role: &'static str,
    pub line: String,
}

impl std::fmt::Display for DrillCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step `{}`, {}: {}", self.step, self.role, self.line)
    }
}

/// Every command the drill's steps run, in step order.
pub fn of(drill: &Drill) -> Vec<DrillCommand> {
    let mut out = Vec::new();
    for step in &drill.spec.steps {
        let mut add = |role: &'static str, command: &[String]| {
            out.push(DrillCommand { step: step.id.clone(), role, line: command.join(" ") })
        };
        match &step.action {
            Action::Exec(e) => {
                add("command", &e.command);
                if let Some(undo) = &e.undo {
                    add("undo", undo);
                }
            }
            Action::NodeFailure(f) => {
                add("fail hook", &f.fail);
                add("recover hook", &f.recover);
            }
            Action::GpuFault(g) => {
                add("GPU fault hook", &g.hooks.fail);
                add("GPU recover hook", &g.hooks.recover);
            }
            Action::Capacity(c) => {
                add("remove hook", &c.remove);
                add("give-back hook", &c.give_back);
            }
            Action::Cut(c) => {
                if let Some(hook) = &c.last_resort {
                    add("last-resort hook", &hook.command);
                }
            }
            _ => {}
        }
    }
    out
}
