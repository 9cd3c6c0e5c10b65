//! `spec.steps`: one action per step, each checked against what comes before and after it (a fault restored later,
//! preflight before any change, hooks' placeholders, restart targets).

use super::Validator;
use std::collections::HashSet;

use crate::cluster::drain_selection::DrainFlags;
use crate::domain::{CutFidelity, RestoreTarget};
use crate::drill::model::{
    Action, Check, CutAction, CutEnforcement, DEFAULT_EFFECT_WITHIN, DEFAULT_STEP_TIMEOUT, DrainAction, ExecAction,
    LastResortHook, NodeFailureAction, OnDeviation, ReturnAction, Step, WorkloadKind, WorkloadRef,
};
use crate::drill::parse::{index, join, suggest};
use crate::drill::placeholders;
use crate::drill::raw::{self, STEP_ACTIONS};

impl Validator<'_> {
    pub(super) fn steps(&mut self, steps: &[raw::Step]) -> Option<Vec<Step>> {
        if steps.is_empty() {
            self.problem("spec.steps", "a drill needs at least one step");
        }
        let mut seen = HashSet::new();
        let mut first_change: Option<&str> = None;
        let mut valid = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            let path = index("spec.steps", i);
            if step.id.is_empty() || !step.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                self.problem(
                    &join(&path, "id"),
                    format!("invalid step id `{}`: use letters, digits, `-` and `_`", step.id),
                );
            } else if !seen.insert(step.id.as_str()) {
                self.problem(&join(&path, "id"), format!("duplicate step id `{}`", step.id));
            }
            if step.on_deviation.is_some() && step.check.is_none() {
                self.problem(&join(&path, "onDeviation"), "onDeviation only applies to a `check` step");
            }
            // A refused drill must have touched nothing, so preflight runs before any step that may change it.
            if step.check == Some(Check::Preflight)
                && let Some(changer) = first_change
            {
                self.problem(
                    &join(&path, "check"),
                    format!(
                        "`check: preflight` must come before any step that changes the cluster; move it before step `{changer}`"
                    ),
                );
            }
            if first_change.is_none() && step.action_keys().iter().any(|k| !READ_ONLY_ACTIONS.contains(k)) {
                first_change = Some(step.id.as_str());
            }
            if step.timeout.is_some_and(|t| t.0.is_zero()) {
                self.problem(&join(&path, "timeout"), "timeout must be longer than zero");
            }
            let action = self.action(steps, i, &path);
            valid.push(action.map(|action| Step {
                id: step.id.clone(),
                timeout: step.timeout.map_or(DEFAULT_STEP_TIMEOUT, |t| t.0),
                action,
            }));
        }
        valid.into_iter().collect()
    }

    /// The step's one action. Every action key present is checked, so a step with two reports the problems of both.
    pub(super) fn action(&mut self, steps: &[raw::Step], i: usize, path: &str) -> Option<Action> {
        let step = &steps[i];
        let mut actions: Vec<Option<Action>> = Vec::new();
        if let Some(check) = step.check {
            actions.push(Some(Action::Check(check, step.on_deviation.unwrap_or(OnDeviation::Fail))));
        }
        if let Some(target) = &step.drain {
            actions.push(Some(Action::Drain(match target {
                raw::DrainTarget::Nodes(nodes) => {
                    DrainAction { nodes: *nodes, flags: DrainFlags::default(), share: None }
                }
                raw::DrainTarget::WithFlags(spec) => DrainAction {
                    nodes: spec.nodes,
                    flags: DrainFlags { force: spec.force, delete_empty_dir_data: spec.delete_empty_dir_data },
                    share: self.node_share_of(&join(path, "drain"), spec.count, spec.fraction.as_ref()),
                },
            })));
        }
        if let Some(cut) = &step.cut {
            actions.push(self.cut(steps, i, &join(path, "cut"), cut).map(Action::Cut));
        }
        if let Some(failure) = &step.node_failure {
            actions.push(self.node_failure(steps, i, &join(path, "nodeFailure"), failure).map(Action::NodeFailure));
        }
        if let Some(fault) = &step.gpu_fault {
            actions.push(self.gpu_fault(steps, i, &join(path, "gpuFault"), fault).map(Action::GpuFault));
        }
        if let Some(target) = step.restore {
            actions.push(self.restore(steps, i, &join(path, "restore"), target).map(Action::Restore));
        }
        if let Some(target) = step.cordon {
            actions.push(Some(Action::Cordon(target)));
        }
        if let Some(target) = step.uncordon {
            actions.push(Some(Action::Uncordon(target)));
        }
        if let Some(condition) = step.wait_for {
            actions.push(Some(Action::WaitFor(condition)));
        }
        if let Some(ret) = &step.r#return {
            actions.push(self.return_action(&join(path, "return"), ret).map(Action::Return));
        }
        if let Some(exec) = &step.exec {
            actions.push(self.exec(&join(path, "exec"), exec).map(Action::Exec));
        }
        if let Some(pause) = step.pause {
            actions.push(Some(Action::Pause(pause.0)));
        }
        if let Some(capacity) = &step.capacity {
            actions.push(self.capacity(&join(path, "capacity"), capacity).map(Action::Capacity));
        }
        if step.lose_fallback_node.is_some() {
            actions.push(Some(Action::LoseFallbackNode));
        }
        let keys = step.action_keys();
        match actions.len() {
            0 => {
                self.problem(
                    path,
                    format!("step `{}` has no action; give it one of: {}", step.id, STEP_ACTIONS.join(", ")),
                );
                None
            }
            1 => actions.pop().flatten(),
            n => {
                self.problem(
                    &join(path, keys[1]),
                    format!("step `{}` has {n} actions (`{}`); a step does one thing", step.id, keys.join("`, `")),
                );
                None
            }
        }
    }

    /// A cut says whose firewall enforces it (for `host`), and a later `restore: cut` ends it.
    pub(super) fn cut(&mut self, steps: &[raw::Step], i: usize, at: &str, cut: &raw::CutAction) -> Option<CutAction> {
        let enforcement = match (cut.fidelity, cut.cni) {
            (CutFidelity::Host, Some(cni)) => Some(CutEnforcement::Host(cni)),
            (CutFidelity::PodNetwork, None) => Some(CutEnforcement::PodNetwork),
            (CutFidelity::Host, None) => {
                self.problem(
                    at,
                    "a host-level cut needs `cni: cilium` or `cni: calico`: whose host firewall enforces it",
                );
                None
            }
            (CutFidelity::PodNetwork, Some(_)) => {
                self.problem(
                    &join(at, "cni"),
                    "`cni` applies only to `fidelity: host`; a pod-network cut is a Kubernetes NetworkPolicy",
                );
                None
            }
        };
        let mut cidrs_valid = true;
        for (n, cidr) in cut.allow_cidrs.iter().enumerate() {
            if !is_cidr(cidr) {
                cidrs_valid = false;
                self.problem(&index(&join(at, "allowCidrs"), n), format!("`{cidr}` is not a CIDR such as 10.0.0.0/8"));
            }
        }
        let restored = restored_later(steps, i, RestoreTarget::Cut);
        if !restored {
            self.problem(
                at,
                format!(
                    "step `{}` cuts the link but no later step restores it; add `- {{id: restore, restore: cut}}`",
                    steps[i].id
                ),
            );
        }
        let host_only_valid = self.host_only(at, cut);
        let enforcement = enforcement.filter(|_| cidrs_valid && restored && host_only_valid)?;
        Some(CutAction {
            enforcement,
            allow_cidrs: cut.allow_cidrs.clone(),
            effect_within: cut.effect_within.as_ref().map_or(DEFAULT_EFFECT_WITHIN, |d| d.0),
            last_resort: cut.last_resort.as_ref().map(|h| LastResortHook {
                command: h.command.clone(),
                after: h.after.0,
                timeout: h.timeout.0,
                env: h.env.clone(),
            }),
        })
    }

    /// `effectWithin` and `lastResort` watch nodes a host cut cuts off; a pod-network cut leaves them Ready.
    pub(super) fn host_only(&mut self, at: &str, cut: &raw::CutAction) -> bool {
        let before = self.problems.len();
        if cut.fidelity == CutFidelity::PodNetwork {
            for (key, given) in
                [("effectWithin", cut.effect_within.is_some()), ("lastResort", cut.last_resort.is_some())]
            {
                if given {
                    self.problem(
                        &join(at, key),
                        format!("`{key}` applies only to `fidelity: host`: a pod-network cut leaves the nodes Ready"),
                    );
                }
            }
        }
        if cut.effect_within.as_ref().is_some_and(|d| d.0.is_zero()) {
            self.problem(&join(at, "effectWithin"), "effectWithin must be longer than zero");
        }
        if let Some(hook) = &cut.last_resort {
            let at = join(at, "lastResort");
            if hook.command.first().is_none_or(|p| p.trim().is_empty()) {
                self.problem(&join(&at, "command"), "`command` needs a program first, e.g. [ipmitool, ...]");
            }
            if hook.timeout.0.is_zero() {
                self.problem(&join(&at, "timeout"), "timeout must be longer than zero");
            }
            if let Err((arg, e)) = placeholders::check(&hook.command) {
                self.problem(&index(&join(&at, "command"), arg), e.to_string());
            }
            self.hook_env(&at, &hook.env);
        }
        self.problems.len() == before
    }

    /// Both hooks name a program and `{node}` both or neither, and a later `restore: node-failure` brings the nodes back.
    pub(super) fn node_failure(
        &mut self,
        steps: &[raw::Step],
        i: usize,
        at: &str,
        failure: &raw::NodeFailureAction,
    ) -> Option<NodeFailureAction> {
        self.fault_hooks(steps, i, at, failure, RestoreTarget::NodeFailure)
    }

    /// A fault's hooks: both name a program and `{node}` both or neither, and a later `restore: TARGET` ends it.
    pub(super) fn fault_hooks(
        &mut self,
        steps: &[raw::Step],
        i: usize,
        at: &str,
        failure: &raw::NodeFailureAction,
        target: RestoreTarget,
    ) -> Option<NodeFailureAction> {
        let problems_before = self.problems.len();
        for (key, hook) in [("fail", &failure.fail), ("recover", &failure.recover)] {
            if hook.first().is_none_or(|p| p.trim().is_empty()) {
                self.problem(&join(at, key), format!("`{key}` needs a command: a list, program first"));
            }
        }
        let mut placeholders_valid = true;
        for (key, hook) in [("fail", &failure.fail), ("recover", &failure.recover)] {
            if let Err((arg, e)) = placeholders::check(hook) {
                self.problem(&index(&join(at, key), arg), e.to_string());
                placeholders_valid = false;
            }
        }
        if placeholders_valid && placeholders::names_node(&failure.fail) != placeholders::names_node(&failure.recover) {
            self.problem(
                at,
                format!(
                    "a node placeholder ({}) must appear in both `fail` and `recover` or in neither: each node failed is recovered",
                    placeholders::KNOWN
                ),
            );
        }
        self.hook_env(at, &failure.env);
        if failure.hook_timeout.0.is_zero() {
            self.problem(&join(at, "hookTimeout"), "hookTimeout must be longer than zero");
        }
        if !restored_later(steps, i, target) {
            let id = if target == RestoreTarget::NodeFailure { "power-on" } else { "recover" };
            self.problem(
                at,
                format!(
                    "step `{}` fails the nodes but no later step brings them back; add `- {{id: {id}, restore: {target}}}`",
                    steps[i].id
                ),
            );
        }
        let share = self.node_share_of(at, failure.count, failure.fraction.as_ref());
        if share.is_some() && !placeholders::names_node(&failure.fail) {
            self.problem(at, "`count` or `fraction` fails some nodes only: the hooks must name the node ({node})");
        }
        (self.problems.len() == problems_before).then(|| NodeFailureAction {
            share,
            fail: failure.fail.clone(),
            recover: failure.recover.clone(),
            hook_timeout: failure.hook_timeout.0,
            env: failure.env.clone(),
        })
    }

    /// A `restore` ends a fault an earlier step injected.
    pub(super) fn restore(
        &mut self,
        steps: &[raw::Step],
        i: usize,
        at: &str,
        target: RestoreTarget,
    ) -> Option<RestoreTarget> {
        let ended = steps[..i].iter().any(|s| match target {
            RestoreTarget::Cut => s.cut.is_some(),
            RestoreTarget::NodeFailure => s.node_failure.is_some(),
            RestoreTarget::GpuFault => s.gpu_fault.is_some(),
            RestoreTarget::Capacity => s.capacity.is_some(),
        });
        if !ended {
            let fault = match target {
                RestoreTarget::Cut => "cut",
                RestoreTarget::NodeFailure => "nodeFailure",
                RestoreTarget::GpuFault => "gpuFault",
                RestoreTarget::Capacity => "capacity",
            };
            self.problem(at, format!("`restore: {target}` needs an earlier `{fault}` step to end"));
            return None;
        }
        Some(target)
    }

    pub(super) fn return_action(&mut self, at: &str, ret: &raw::ReturnAction) -> Option<ReturnAction> {
        let restart = match &ret.restart {
            None => None,
            Some(target) => match parse_workload_ref(target) {
                Ok(workload) => Some(workload),
                Err(e) => {
                    self.problem(&join(at, "restart"), e.to_string());
                    return None;
                }
            },
        };
        Some(ReturnAction { uncordon: ret.uncordon, restart })
    }

    pub(super) fn exec(&mut self, at: &str, exec: &raw::ExecAction) -> Option<ExecAction> {
        let mut valid = true;
        if exec.command.first().is_none_or(|p| p.trim().is_empty()) {
            valid = false;
            self.problem(&join(at, "command"), "exec needs a command: a list, program first");
        }
        if exec.undo.as_ref().is_some_and(|u| u.is_empty()) {
            valid = false;
            self.problem(&join(at, "undo"), "undo, when given, needs a command");
        }
        valid &= self.hook_env(at, &exec.env);
        valid.then(|| ExecAction { command: exec.command.clone(), undo: exec.undo.clone(), env: exec.env.clone() })
    }

    /// A hook's `env` names variables: letters, digits and `_`, not starting with a digit.
    pub(super) fn hook_env(&mut self, at: &str, names: &[String]) -> bool {
        let mut valid = true;
        for (i, name) in names.iter().enumerate() {
            let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                valid = false;
                self.problem(
                    &index(&join(at, "env"), i),
                    format!("`{name}` is not an environment variable's name: letters, digits and `_`"),
                );
            } else if crate::secrets::TOOL_SECRETS.contains(&name.as_str()) {
                valid = false;
                self.problem(
                    &index(&join(at, "env"), i),
                    format!(
                        "`{name}` holds one of hybrid-drill's own secrets, never a hook's: give the hook a secret of \
                         its own (a reference `${{file:/path}}` in its command, or another variable)"
                    ),
                );
            }
        }
        valid
    }
}

pub(super) fn restored_later(steps: &[raw::Step], i: usize, target: RestoreTarget) -> bool {
    steps[i + 1..].iter().any(|s| s.restore == Some(target))
}

/// `10.0.0.0/8` or `fd00::/8`: an address and a prefix length that fits it.
fn is_cidr(text: &str) -> bool {
    let Some((addr, bits)) = text.split_once('/') else { return false };
    let max = match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => 32,
        Ok(std::net::IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    bits.parse::<u8>().is_ok_and(|b| b <= max)
}

/// The step actions that only observe; every other one may change the cluster.
const READ_ONLY_ACTIONS: &[&str] = &["check", "waitFor", "pause"];

/// Why a restart target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadRefError {
    #[error(
        "restart target `{0}` must be `deployment/NAME` or `statefulset/NAME` (kubectl's `deploy/NAME`, `sts/NAME`)"
    )]
    NotKindAndName(String),
    #[error(
        "cannot restart a `{kind}`: use deployment/NAME or statefulset/NAME{}",
        .suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default()
    )]
    UnknownKind { kind: String, suggestion: Option<String> },
    #[error("restart target `{0}` has no name")]
    NoName(String),
}

/// `deployment/NAME` or `statefulset/NAME` in any of kubectl's spellings (`deploy/NAME`, `deployment.apps/NAME`,
/// `sts/NAME`...); any other kind is an error, never silently a Deployment.
pub(super) fn parse_workload_ref(text: &str) -> Result<WorkloadRef, WorkloadRefError> {
    let Some((kind, name)) = text.split_once('/') else {
        return Err(WorkloadRefError::NotKindAndName(text.into()));
    };
    let Some(kind) = WorkloadKind::from_kubectl(kind) else {
        let kind = kind.to_lowercase();
        let expected: Vec<String> = WorkloadKind::ALL.iter().map(|k| k.to_string()).collect();
        let suggestion = suggest(&kind, &expected);
        return Err(WorkloadRefError::UnknownKind { kind, suggestion });
    };
    if name.is_empty() {
        return Err(WorkloadRefError::NoName(text.into()));
    }
    Ok(WorkloadRef { kind, name: name.to_string() })
}
