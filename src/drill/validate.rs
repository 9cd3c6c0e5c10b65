//! Raw drill to validated drill: checks what types can't say (versions, unique ids, one action per step, selectors,
//! restart targets, phase names) and builds the `Drill` the rest of the crate sees, or every problem, located.

use std::collections::{BTreeMap, HashSet};

use super::diagnostics::Diagnostic;
use super::model::{
    Action, Check, CutAction, CutEnforcement, DEFAULT_EFFECT_WITHIN, DEFAULT_STEP_TIMEOUT, DrainAction, Drill,
    DrillSpec, DrillTargets, ExecAction, ExpectedCluster, FallbackTarget, Guards, HttpProbe, LastResortHook, Metadata,
    NodeFailureAction, Objectives, OnDeviation, OnPremTarget, ParsedSelector, RestoredWhen, ReturnAction, SilenceSpec,
    Step, Webhook, WorkloadKind, WorkloadRef, WorkloadTarget,
};
use super::parse::{SpanMap, index, join, suggest};
use super::placeholders;
use super::raw::{self, API_VERSION, KIND, STEP_ACTIONS};
use crate::alertmanager::Matcher;
use crate::cluster::drain_selection::DrainFlags;
use crate::cluster::lease::LeaseRef;
use crate::cluster::selector::SelectorError;
use crate::domain::{CutFidelity, PhaseId, RestoreTarget};

/// The longest a drill may wait for one webhook: a notification must never hold a drill up for long.
const MAX_NOTIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The validated drill, or every problem found in it.
pub(super) fn validate(drill: &raw::Drill, spans: &SpanMap) -> Result<Drill, Vec<Diagnostic>> {
    let mut v = Validator { spans, problems: Vec::new() };
    match v.drill(drill) {
        Some(valid) if v.problems.is_empty() => Ok(valid),
        _ => Err(v.problems),
    }
}

/// Collects problems while it builds; a builder that returns `None` has recorded why.
struct Validator<'s> {
    spans: &'s SpanMap,
    problems: Vec<Diagnostic>,
}

impl Validator<'_> {
    fn problem(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(Diagnostic::new(message, self.spans.value(path)));
    }

    fn drill(&mut self, drill: &raw::Drill) -> Option<Drill> {
        if drill.api_version != API_VERSION {
            self.problem(
                "apiVersion",
                format!("unsupported apiVersion `{}`; this tool reads `{API_VERSION}`", drill.api_version),
            );
        }
        if drill.kind != KIND {
            self.problem("kind", format!("unsupported kind `{}`; expected `{KIND}`", drill.kind));
        }
        let name = &drill.metadata.name;
        if name.is_empty()
            || name.len() > 48
            || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            || name.starts_with('-')
        {
            self.problem(
                "metadata.name",
                format!("invalid drill name `{name}`: use 1 to 48 lowercase letters, digits and `-`"),
            );
        }
        let spec = &drill.spec;
        let cluster = &spec.cluster;
        if cluster.context.as_deref().is_some_and(|c| c.trim().is_empty()) {
            self.problem("spec.cluster.context", "the expected kubeconfig context must not be empty");
        }
        if cluster.kube_system_uid.as_deref().is_some_and(|u| u.trim().is_empty()) {
            self.problem("spec.cluster.kubeSystemUID", "the kube-system namespace's UID must not be empty");
        }
        if cluster.context.is_none() && cluster.kube_system_uid.is_none() {
            self.problem(
                "spec.cluster",
                "name the drill's cluster by `context` (its kubeconfig context), `kubeSystemUID` (the UID of its \
                 kube-system namespace: `hybrid-drill identify` prints it) or both",
            );
        }
        let targets = self.targets(spec);
        let guards = self.guards(&spec.guards);
        for (instance, price) in &spec.pricing {
            if !price.is_finite() || *price < 0.0 {
                self.problem(
                    &join("spec.pricing", instance),
                    format!("price of `{instance}` must be a positive number of dollars per hour"),
                );
            }
        }
        let objectives = self.objectives(&spec.objectives);
        let lock = self.lock(spec.lock.as_ref());
        let steps = self.steps(&spec.steps);
        let notify = self.notify(&spec.notify);
        let silences = self.silences(&spec.silences);
        Some(Drill {
            metadata: Metadata { name: name.clone(), description: drill.metadata.description.clone() },
            spec: DrillSpec {
                cluster: ExpectedCluster {
                    context: cluster.context.clone(),
                    kube_system_uid: cluster.kube_system_uid.clone(),
                },
                targets: targets?,
                objectives,
                guards,
                pricing: spec.pricing.clone(),
                steps: steps?,
                keep_changes: spec.keep_changes,
                lock,
                notify,
                silences,
            },
        })
    }

    fn notify(&mut self, hooks: &[raw::Webhook]) -> Vec<Webhook> {
        let mut valid = Vec::new();
        for (i, hook) in hooks.iter().enumerate() {
            let path = index("spec.notify", i);
            match crate::http::service_url(&hook.url) {
                Ok(url) => valid.push(Webhook {
                    url,
                    format: hook.format,
                    timeout: hook.timeout.map_or(Webhook::DEFAULT_TIMEOUT, |t| t.0),
                }),
                Err(reason) => {
                    self.problem(&join(&path, "url"), format!("invalid webhook URL `{}`: {reason}", hook.url))
                }
            }
            if hook.timeout.is_some_and(|t| t.0.is_zero() || t.0 > MAX_NOTIFY_TIMEOUT) {
                self.problem(&join(&path, "timeout"), "a webhook's timeout must be more than 0s and at most 1m");
            }
        }
        valid
    }

    fn silences(&mut self, silences: &[raw::Silence]) -> Vec<SilenceSpec> {
        let mut valid = Vec::new();
        for (i, silence) in silences.iter().enumerate() {
            let path = index("spec.silences", i);
            if let Err(reason) = crate::http::service_url(&silence.alertmanager) {
                let url = &silence.alertmanager;
                self.problem(&join(&path, "alertmanager"), format!("invalid Alertmanager URL `{url}`: {reason}"));
            }
            let mut matchers = Vec::new();
            for (j, text) in silence.matchers.iter().enumerate() {
                match Matcher::parse(text) {
                    Ok(m) => matchers.push(m),
                    Err(e) => {
                        self.problem(&index(&join(&path, "matchers"), j), format!("invalid matcher `{text}`: {e}"))
                    }
                }
            }
            if matchers.len() == silence.matchers.len() && matchers.iter().all(Matcher::matches_empty) {
                self.problem(
                    &join(&path, "matchers"),
                    "a silence needs at least one matcher that an alert without the label does not meet \
                     (e.g. alertname=\"KubeNodeNotReady\"): Alertmanager refuses one that would silence every alert",
                );
            }
            valid.push(SilenceSpec {
                alertmanager: silence.alertmanager.trim().to_string(),
                matchers,
                comment: silence.comment.clone(),
            });
        }
        valid
    }

    fn selector(&mut self, path: &str, text: &str) -> Option<ParsedSelector> {
        ParsedSelector::parse(text)
            .map_err(|e| self.problem(path, format!("invalid label selector `{text}`: {e}")))
            .ok()
    }

    fn targets(&mut self, spec: &raw::DrillSpec) -> Option<DrillTargets> {
        let targets = &spec.targets;
        let nodes = self.selector("spec.targets.onPrem.nodes", &targets.on_prem.nodes);
        let selector = self.selector("spec.targets.workload.selector", &targets.workload.selector);
        let namespace = &targets.workload.namespace;
        if namespace.trim().is_empty() {
            self.problem("spec.targets.workload.namespace", "the workload namespace must not be empty");
        }
        let restored = &targets.workload.restored_when;
        if restored.ready_pods == 0 {
            self.problem("spec.targets.workload.restoredWhen.readyPods", "readyPods must be at least 1");
        }
        if let Some(http) = &restored.http {
            if !(http.url.starts_with("http://") || http.url.starts_with("https://")) {
                self.problem(
                    "spec.targets.workload.restoredWhen.http.url",
                    format!("probe url `{}` must start with http:// or https://", http.url),
                );
            }
            if http.consecutive == 0 {
                self.problem("spec.targets.workload.restoredWhen.http.consecutive", "consecutive must be at least 1");
            }
        }
        if spec.guards.protected_namespaces.contains(namespace) {
            self.problem(
                "spec.targets.workload.namespace",
                format!(
                    "the workload namespace `{namespace}` is in guards.protectedNamespaces, which the drill never touches"
                ),
            );
        }
        let http = restored.http.as_ref().map(|h| HttpProbe {
            url: h.url.clone(),
            expect_status: h.expect_status,
            consecutive: h.consecutive,
            interval: h.interval.0,
            timeout: h.timeout.0,
        });
        Some(DrillTargets {
            on_prem: OnPremTarget { nodes: nodes?, addresses: targets.on_prem.addresses.clone() },
            workload: WorkloadTarget {
                namespace: namespace.clone(),
                selector: selector?,
                restored_when: RestoredWhen { ready_pods: restored.ready_pods, http },
            },
            fallback: self.fallback(&targets.fallback)?,
        })
    }

    /// `nodePool: NAME` or `nodePools: [NAME, ...]`, exactly one of them.
    fn fallback(&mut self, fallback: &raw::FallbackTarget) -> Option<FallbackTarget> {
        let path = "spec.targets.fallback";
        let pools = match (&fallback.node_pool, &fallback.node_pools) {
            (Some(one), None) => vec![one.clone()],
            (None, Some(many)) => many.clone(),
            (Some(_), Some(_)) => {
                self.problem(path, "set nodePool (one NodePool) or nodePools (a list), not both");
                return None;
            }
            (None, None) => {
                self.problem(path, "name the fallback: nodePool: NAME, or nodePools: [NAME, ...] for several");
                return None;
            }
        };
        let mut seen = std::collections::BTreeSet::new();
        let mut ok = !pools.is_empty();
        if pools.is_empty() {
            self.problem(&join(path, "nodePools"), "nodePools must name at least one NodePool");
        }
        for pool in &pools {
            if pool.trim().is_empty() || pool.contains([',', ' ', '(', ')', '=']) {
                self.problem(path, format!("`{pool}` is not a NodePool name"));
                ok = false;
            } else if !seen.insert(pool.as_str()) {
                self.problem(&join(path, "nodePools"), format!("NodePool `{pool}` is named twice"));
                ok = false;
            }
        }
        ok.then(|| FallbackTarget::new(pools))
    }

    fn lock(&mut self, lock: Option<&raw::Lock>) -> LeaseRef {
        let mut lease = LeaseRef::default();
        let Some(lock) = lock else { return lease };
        for (key, value, target) in
            [("namespace", &lock.namespace, &mut lease.namespace), ("name", &lock.name, &mut lease.name)]
        {
            match value {
                Some(v) if v.trim().is_empty() => {
                    self.problem(&join("spec.lock", key), format!("the lock's {key} must not be empty"))
                }
                Some(v) => *target = v.clone(),
                None => {}
            }
        }
        if let Some(duration) = lock.duration {
            // Renewed every third: under 3s a renewal would be due before a busy API server answers the last one.
            if duration.0 < std::time::Duration::from_secs(3) {
                self.problem("spec.lock.duration", "the lock's duration must be at least 3s");
            }
            lease.duration = duration.0;
        }
        lease
    }

    fn guards(&mut self, guards: &raw::Guards) -> Guards {
        if guards.max_nodes == 0 {
            self.problem("spec.guards.maxNodes", "maxNodes must be at least 1");
        }
        Guards {
            max_nodes: guards.max_nodes,
            max_fallback_gpus: guards.max_fallback_gpus,
            deadline: guards.deadline.0,
            max_service_down: guards.max_service_down.map(|d| d.0),
            protected_namespaces: guards.protected_namespaces.clone(),
        }
    }

    /// Each key of `objectives.phases` must name a phase; the RTO has its own key.
    fn objectives(&mut self, objectives: &raw::Objectives) -> Objectives {
        let mut phases = BTreeMap::new();
        for (key, budget) in &objectives.phases.0 {
            let path = join("spec.objectives.phases", key);
            match key.parse::<PhaseId>() {
                Ok(PhaseId::Rto) => {
                    self.problem(&path, "the RTO objective is `objectives.rto`, not a phase objective");
                }
                Ok(phase) => {
                    if let Some(budget) = budget {
                        phases.insert(phase, budget.0);
                    }
                }
                Err(_) => {
                    let expected: Vec<String> = raw::phases_with_objectives().map(|p| p.to_string()).collect();
                    let mut d = Diagnostic::new(
                        format!("unknown key `{key}` in `spec.objectives.phases`: no phase is called `{key}`"),
                        self.spans.key(&path),
                    );
                    if let Some(s) = suggest(key, &expected) {
                        d = d.with_label(format!("did you mean `{s}`?"));
                    }
                    self.problems.push(d.with_help(format!("valid phases: {}", expected.join(", "))));
                }
            }
        }
        Objectives { rto: objectives.rto.map(|d| d.0), phases }
    }

    fn steps(&mut self, steps: &[raw::Step]) -> Option<Vec<Step>> {
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
    fn action(&mut self, steps: &[raw::Step], i: usize, path: &str) -> Option<Action> {
        let step = &steps[i];
        let mut actions: Vec<Option<Action>> = Vec::new();
        if let Some(check) = step.check {
            actions.push(Some(Action::Check(check, step.on_deviation.unwrap_or(OnDeviation::Fail))));
        }
        if let Some(target) = &step.drain {
            actions.push(Some(Action::Drain(match target {
                raw::DrainTarget::Nodes(nodes) => DrainAction { nodes: *nodes, flags: DrainFlags::default() },
                raw::DrainTarget::WithFlags(spec) => DrainAction {
                    nodes: spec.nodes,
                    flags: DrainFlags { force: spec.force, delete_empty_dir_data: spec.delete_empty_dir_data },
                },
            })));
        }
        if let Some(cut) = &step.cut {
            actions.push(self.cut(steps, i, &join(path, "cut"), cut).map(Action::Cut));
        }
        if let Some(failure) = &step.node_failure {
            actions.push(self.node_failure(steps, i, &join(path, "nodeFailure"), failure).map(Action::NodeFailure));
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
    fn cut(&mut self, steps: &[raw::Step], i: usize, at: &str, cut: &raw::CutAction) -> Option<CutAction> {
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
            }),
        })
    }

    /// `effectWithin` and `lastResort` watch nodes a host cut cuts off; a pod-network cut leaves them Ready.
    fn host_only(&mut self, at: &str, cut: &raw::CutAction) -> bool {
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
        }
        self.problems.len() == before
    }

    /// Both hooks name a program and `{node}` both or neither, and a later `restore: node-failure` brings the nodes back.
    fn node_failure(
        &mut self,
        steps: &[raw::Step],
        i: usize,
        at: &str,
        failure: &raw::NodeFailureAction,
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
        if failure.hook_timeout.0.is_zero() {
            self.problem(&join(at, "hookTimeout"), "hookTimeout must be longer than zero");
        }
        if !restored_later(steps, i, RestoreTarget::NodeFailure) {
            self.problem(
                at,
                format!(
                    "step `{}` fails the nodes but no later step brings them back; add `- {{id: power-on, restore: node-failure}}`",
                    steps[i].id
                ),
            );
        }
        (self.problems.len() == problems_before).then(|| NodeFailureAction {
            fail: failure.fail.clone(),
            recover: failure.recover.clone(),
            hook_timeout: failure.hook_timeout.0,
        })
    }

    /// A `restore` ends a fault an earlier step injected.
    fn restore(&mut self, steps: &[raw::Step], i: usize, at: &str, target: RestoreTarget) -> Option<RestoreTarget> {
        let ended = steps[..i].iter().any(|s| match target {
            RestoreTarget::Cut => s.cut.is_some(),
            RestoreTarget::NodeFailure => s.node_failure.is_some(),
        });
        if !ended {
            let fault = if target == RestoreTarget::Cut { "cut" } else { "nodeFailure" };
            self.problem(at, format!("`restore: {target}` needs an earlier `{fault}` step to end"));
            return None;
        }
        Some(target)
    }

    fn return_action(&mut self, at: &str, ret: &raw::ReturnAction) -> Option<ReturnAction> {
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

    fn exec(&mut self, at: &str, exec: &raw::ExecAction) -> Option<ExecAction> {
        let mut valid = true;
        if exec.command.first().is_none_or(|p| p.trim().is_empty()) {
            valid = false;
            self.problem(&join(at, "command"), "exec needs a command: a list, program first");
        }
        if exec.undo.as_ref().is_some_and(|u| u.is_empty()) {
            valid = false;
            self.problem(&join(at, "undo"), "undo, when given, needs a command");
        }
        valid.then(|| ExecAction { command: exec.command.clone(), undo: exec.undo.clone() })
    }
}

fn restored_later(steps: &[raw::Step], i: usize, target: RestoreTarget) -> bool {
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
    #[error("restart target `{0}` must be `deployment/NAME` or `statefulset/NAME`")]
    NotKindAndName(String),
    #[error(
        "cannot restart a `{kind}`: use deployment/NAME or statefulset/NAME{}",
        .suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default()
    )]
    UnknownKind { kind: String, suggestion: Option<String> },
    #[error("restart target `{0}` has no name")]
    NoName(String),
}

/// `deployment/NAME` or `statefulset/NAME`; any other kind is an error, never silently a Deployment.
fn parse_workload_ref(text: &str) -> Result<WorkloadRef, WorkloadRefError> {
    let Some((kind, name)) = text.split_once('/') else {
        return Err(WorkloadRefError::NotKindAndName(text.into()));
    };
    let kind = kind.to_lowercase();
    let Some(kind) = WorkloadKind::ALL.iter().copied().find(|k| k.as_str() == kind) else {
        let expected: Vec<String> = WorkloadKind::ALL.iter().map(|k| k.to_string()).collect();
        let suggestion = suggest(&kind, &expected);
        return Err(WorkloadRefError::UnknownKind { kind, suggestion });
    };
    if name.is_empty() {
        return Err(WorkloadRefError::NoName(text.into()));
    }
    Ok(WorkloadRef { kind, name: name.to_string() })
}

/// A syntax check of a Kubernetes label selector given outside a drill (a flag), so a typo fails before the API
/// server sees it.
pub fn check_label_selector(selector: &str) -> Result<(), SelectorError> {
    ParsedSelector::parse(selector).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::NodeTargetRef;

    #[test]
    fn selectors() {
        assert!(check_label_selector("eks.amazonaws.com/compute-type=hybrid,gpu.model=h200").is_ok());
        assert!(check_label_selector("app in (a,b),!legacy,tier!=db").is_ok());
        assert!(check_label_selector("").is_err());
        assert!(check_label_selector("app=,").is_err());
        assert!(check_label_selector("app=a b").is_err());
        assert!(check_label_selector("app in (a").is_err());
    }

    #[test]
    fn faults_say_how_they_are_enforced_and_are_restored() {
        assert!(
            problems("    - {id: c, cut: {fidelity: host, cni: calico}}\n    - {id: r, restore: cut}\n").is_empty()
        );
        let p = problems("    - {id: c, cut: {fidelity: host, allowCidrs: [10.0.0.0/33]}}\n");
        assert!(p[0].starts_with("a host-level cut needs `cni: cilium` or `cni: calico`"), "{p:?}");
        assert!(p[1].contains("not a CIDR"), "{p:?}");
        assert!(p[2].contains("no later step restores it"), "{p:?}");
        let p = problems(
            "    - {id: c, cut: {fidelity: pod-network, effectWithin: 1m, lastResort: {command: [reboot]}}}\n    - {id: r, restore: cut}\n",
        );
        assert_eq!(
            p,
            [
                "`effectWithin` applies only to `fidelity: host`: a pod-network cut leaves the nodes Ready",
                "`lastResort` applies only to `fidelity: host`: a pod-network cut leaves the nodes Ready"
            ]
        );
        let p = problems(
            "    - {id: c, cut: {fidelity: host, cni: cilium, effectWithin: 0s, lastResort: {command: [], timeout: 0s}}}\n    - {id: r, restore: cut}\n",
        );
        assert_eq!(
            p,
            [
                "effectWithin must be longer than zero",
                "`command` needs a program first, e.g. [ipmitool, ...]",
                "timeout must be longer than zero"
            ]
        );
        let p = problems("    - {id: c, cut: {fidelity: pod-network, cni: cilium}}\n    - {id: r, restore: cut}\n");
        assert_eq!(p, ["`cni` applies only to `fidelity: host`; a pod-network cut is a Kubernetes NetworkPolicy"]);
        let p = problems("    - {id: r, restore: node-failure}\n");
        assert_eq!(p, ["`restore: node-failure` needs an earlier `nodeFailure` step to end"]);
        let p = problems(
            "    - {id: f, nodeFailure: {fail: [off, \"{node}\"], recover: [on]}}\n    - {id: r, restore: node-failure}\n",
        );
        assert!(p[0].contains("must appear in both `fail` and `recover`"), "{p:?}");
        assert!(problems("    - {id: f, nodeFailure: {fail: [off, \"{node}\"], recover: [on, \"{node}\"]}}\n    - {id: r, restore: node-failure}\n").is_empty());
    }

    #[test]
    fn workload_refs() {
        assert_eq!(
            parse_workload_ref("deployment/llm").unwrap(),
            WorkloadRef { kind: WorkloadKind::Deployment, name: "llm".into() }
        );
        assert_eq!(parse_workload_ref("StatefulSet/db").unwrap().kind, WorkloadKind::StatefulSet);
        assert!(parse_workload_ref("deploymnet/llm").unwrap_err().to_string().contains("did you mean `deployment`"));
        assert!(parse_workload_ref("llm").is_err());
        assert!(
            parse_workload_ref("daemonset/llm").unwrap_err().to_string().starts_with("cannot restart a `daemonset`")
        );
    }

    #[test]
    fn a_misspelt_hook_placeholder_is_located_and_a_real_node_address_is_valid() {
        let steps = "    - {id: f, nodeFailure: {fail: [ipmitool, -H, '{internalIp}'], recover: [on, '{internalIP}']}}\n    - {id: r, restore: node-failure}\n";
        let source = drill_source("", steps);
        let d = diagnostics(source.clone());
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].message.contains("did you mean `{internalIP}`"), "{}", d[0].message);
        assert_eq!(&source[d[0].location.start..d[0].location.end], "'{internalIp}'");
        let good = "    - {id: f, nodeFailure: {fail: [ipmitool, -H, '{label:bmc/ip}'], recover: [on, '{address}']}}\n    - {id: r, restore: node-failure}\n";
        assert!(problems(good).is_empty());
    }

    #[test]
    fn a_drain_with_no_later_return_is_left_in_place_unless_kept() {
        let source = drill_source("", "    - {id: d, drain: onPrem}\n");
        let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), source).unwrap().drill;
        let warnings = crate::drill::left::warnings(&drill);
        assert_eq!(
            warnings,
            ["step `d` cordons the on-prem nodes and no later step uncordons them (`uncordon` or `return`): the run \
              undoes it at its end (spec.keepChanges: true keeps it)"]
        );
        let kept = drill_source(
            "  keepChanges: true\n",
            "    - {id: d, drain: onPrem}\n    - {id: x, exec: {command: [a], undo: [b]}}\n",
        );
        let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), kept).unwrap().drill;
        assert!(drill.spec.keep_changes);
        let warnings = crate::drill::left::warnings(&drill);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[1].starts_with("step `x` runs a command with an undo") && warnings[1].contains("kept at the end")
        );
        let returned = drill_source("", "    - {id: d, drain: onPrem}\n    - {id: r, return: {}}\n");
        let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), returned).unwrap().drill;
        assert!(crate::drill::left::warnings(&drill).is_empty());
    }

    fn problems(steps: &str) -> Vec<String> {
        diagnostics(drill_source("", steps)).into_iter().map(|d| d.message).collect()
    }

    #[test]
    fn a_drain_takes_kubectl_drains_flags_off_by_default_and_a_mistyped_one_is_located() {
        let flags = |steps: &str| match &valid("", steps).spec.steps[0].action {
            Action::Drain(d) => (d.nodes, d.flags),
            other => panic!("{other:?}"),
        };
        assert_eq!(flags("    - {id: d, drain: onPrem}\n"), (NodeTargetRef::OnPrem, DrainFlags::default()));
        assert_eq!(
            flags("    - {id: d, drain: {nodes: onPrem, force: true, deleteEmptyDirData: true}}\n"),
            (NodeTargetRef::OnPrem, DrainFlags { force: true, delete_empty_dir_data: true })
        );
        assert!(!flags("    - {id: d, drain: {nodes: onPrem, force: true}}\n").1.delete_empty_dir_data);
        let typo = diagnostics(drill_source("", "    - {id: d, drain: {nodes: onPrem, forse: true}}\n"));
        assert_eq!(typo[0].message, "unknown key `forse` in `spec.steps[0].drain`");
        assert!(typo[0].label.as_deref().is_some_and(|l| l.contains("did you mean `force`")), "{:?}", typo[0]);
        let bad = diagnostics(drill_source("", "    - {id: d, drain: cloud}\n"));
        assert_eq!(bad[0].message, "unknown value `cloud` for `drain`");
    }

    #[test]
    fn preflight_must_come_before_any_change() {
        assert!(problems("    - {id: pre, check: preflight}\n    - {id: steady, check: steady-state}\n    - {id: p, pause: 1s}\n    - {id: d, drain: onPrem}\n").is_empty());
        assert!(
            problems("    - {id: w, pause: 1s}\n    - {id: pre, check: preflight, onDeviation: warn}\n").is_empty()
        );
        assert_eq!(
            problems("    - {id: d, drain: onPrem}\n    - {id: pre, check: preflight}\n"),
            ["`check: preflight` must come before any step that changes the cluster; move it before step `d`"]
        );
    }
    #[test]
    fn every_phase_may_carry_an_objective_and_a_misspelt_one_is_located() {
        let valid = objectives("{rto: 60s, phases: {detection: 30s, restore: 2m, toleration: 5m, image-pull: 1m}}");
        let drill = valid.unwrap();
        let o = &drill.spec.objectives;
        assert_eq!(o.get(PhaseId::Detection), Some(std::time::Duration::from_secs(30)));
        assert_eq!(o.get(PhaseId::Restore), Some(std::time::Duration::from_secs(120)));
        assert_eq!(o.get(PhaseId::ImagePull), Some(std::time::Duration::from_secs(60)));
        assert_eq!(o.get(PhaseId::Rto), Some(std::time::Duration::from_secs(60)));
        assert_eq!(o.get(PhaseId::Reclaim), None);

        let source = drill_source("  objectives: {phases: {detectoin: 30s}}\n", "    - {id: s, pause: 1s}\n");
        let d = diagnostics(source.clone());
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].message.starts_with("unknown key `detectoin` in `spec.objectives.phases`"), "{d:?}");
        assert_eq!(d[0].label.as_deref(), Some("did you mean `detection`?"));
        assert!(d[0].help.as_deref().is_some_and(|h| h.contains("toleration")), "{d:?}");
        assert_eq!(&source[d[0].location.start..d[0].location.end], "detectoin");
        let d = diagnostics(drill_source("  objectives: {phases: {rto: 30s}}\n", "    - {id: s, pause: 1s}\n"));
        assert!(d[0].message.contains("`objectives.rto`"), "{d:?}");
    }

    #[test]
    fn a_validated_step_holds_its_one_action_and_its_timeout() {
        let drill = valid(
            "",
            "    - {id: c, cut: {fidelity: host, cni: cilium}, timeout: 5m}\n    - {id: r, restore: cut}\n    - {id: b, return: {restart: statefulset/db}}\n",
        );
        let steps = &drill.spec.steps;
        assert!(matches!(
            steps[0].action,
            Action::Cut(CutAction { enforcement: CutEnforcement::Host(crate::drill::Cni::Cilium), .. })
        ));
        assert_eq!(steps[0].timeout, std::time::Duration::from_secs(300));
        assert_eq!(steps[1].timeout, DEFAULT_STEP_TIMEOUT);
        let Action::Return(ret) = &steps[2].action else { panic!("{:?}", steps[2]) };
        assert_eq!(ret.restart, Some(WorkloadRef { kind: WorkloadKind::StatefulSet, name: "db".into() }));
        assert_eq!(drill.spec.targets.on_prem.nodes.as_str(), "a=b");
        assert_eq!(drill.spec.targets.on_prem.nodes.requirements().len(), 1);
    }

    /// Regression: `objectives.phases.detection` and `.restore` were read by name and never found, so neither could
    /// be set. Both are now settable, and the analysis judges them.
    #[test]
    fn detection_and_restore_objectives_are_settable_and_judged() {
        use crate::phases::{PhaseId, Verdict};
        use crate::timeline::{ConditionStatus, Event as E, FaultKind, NodeRole};
        let drill = valid(
            "  objectives: {phases: {detection: 10s, restore: 5s}}\n",
            "    - {id: c, cut: {fidelity: host, cni: calico}}\n    - {id: r, restore: cut}\n",
        );
        let on = NodeRole::OnPrem;
        let events = vec![
            (1.0, None, E::FaultInjected { step: "c".into(), kind: FaultKind::Cut(crate::drill::CutFidelity::Host) }),
            (21.0, Some(21), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 }),
            (60.0, None, E::RestoreStarted { step: "r".into(), what: crate::drill::RestoreTarget::Cut }),
            (60.2, None, E::FaultRemoved { step: "r".into(), what: "link restored".into() }),
            (61.0, Some(61), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 8 }),
            (61.2, None, E::OnPremReady { nodes: 1 }),
        ];
        let base = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().to_utc();
        let analysis = crate::phases::analyse(&drill, &crate::timeline::observations_from(base, events));
        let detection = analysis.phase(PhaseId::Detection).unwrap();
        assert_eq!((detection.objective_seconds, detection.verdict), (Some(10.0), Verdict::Missed), "{detection:?}");
        let restore = analysis.phase(PhaseId::Restore).unwrap();
        assert_eq!((restore.objective_seconds, restore.verdict), (Some(5.0), Verdict::Met), "{restore:?}");
        assert!(analysis.objectives_missed.contains(&PhaseId::Detection), "{:?}", analysis.objectives_missed);
    }

    #[test]
    fn a_cluster_is_named_by_context_kube_system_uid_or_both_and_the_lock_has_defaults() {
        let steps = "    - {id: s, pause: 1s}\n";
        let by_uid = drill_source("", steps).replace("cluster: {context: c}", "cluster: {kubeSystemUID: u-1}");
        let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), by_uid).unwrap().drill;
        assert_eq!((drill.spec.cluster.context, drill.spec.cluster.kube_system_uid.as_deref()), (None, Some("u-1")));
        assert_eq!(drill.spec.lock, LeaseRef::default());
        let unnamed = drill_source("", steps).replace("cluster: {context: c}", "cluster: {}");
        let messages: Vec<String> = diagnostics(unnamed).into_iter().map(|d| d.message).collect();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].starts_with("name the drill's cluster by `context`"), "{messages:?}");

        let lock = valid("  lock: {namespace: drills, duration: 6s}\n", steps).spec.lock;
        assert_eq!(
            (lock.namespace.as_str(), lock.name.as_str(), lock.duration.as_secs()),
            ("drills", "hybrid-drill", 6)
        );
        let messages: Vec<String> = diagnostics(drill_source("  lock: {name: '', duration: 1s}\n", steps))
            .into_iter()
            .map(|d| d.message)
            .collect();
        assert_eq!(messages, ["the lock's name must not be empty", "the lock's duration must be at least 3s"]);
    }

    fn valid(spec: &str, steps: &str) -> Drill {
        crate::drill::from_source(std::path::Path::new("d.yaml"), drill_source(spec, steps)).unwrap().drill
    }

    fn objectives(objectives: &str) -> Result<Drill, Vec<Diagnostic>> {
        let source = drill_source(&format!("  objectives: {objectives}\n"), "    - {id: s, pause: 1s}\n");
        crate::drill::from_source(std::path::Path::new("d.yaml"), source).map(|l| l.drill).map_err(|e| match e {
            crate::drill::DrillError::Invalid { diagnostics, .. } => diagnostics,
            e => panic!("{e}"),
        })
    }

    fn diagnostics(source: String) -> Vec<Diagnostic> {
        match crate::drill::from_source(std::path::Path::new("d.yaml"), source) {
            Ok(_) => Vec::new(),
            Err(crate::drill::DrillError::Invalid { diagnostics, .. }) => diagnostics,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn webhooks_and_silences_are_checked_and_each_problem_located() {
        let spec = "  notify:\n    - {url: 'https://hooks.example.com/T/B/x', format: slack}\n    - {url: 'hooks:80', timeout: 2m}\n  silences:\n    - alertmanager: http://am:9093\n      matchers: ['alertname=\"KubeNodeNotReady\"', 'node=~\"(\"']\n    - {alertmanager: http://am:9093, matchers: ['node=~\".*\"']}\n";
        let source = drill_source(spec, "    - {id: d, drain: onPrem}\n    - {id: u, uncordon: onPrem}\n");
        let d = diagnostics(source.clone());
        let located: Vec<(&str, &str)> =
            d.iter().map(|d| (d.message.as_str(), &source[d.location.start..d.location.end])).collect();
        assert_eq!(located.len(), 4, "{located:#?}");
        assert!(located[0].0.starts_with("invalid webhook URL `hooks:80`"), "{located:?}");
        assert_eq!(located[0].1, "'hooks:80'");
        assert_eq!(located[1], ("a webhook's timeout must be more than 0s and at most 1m", "2m"));
        assert!(located[2].0.starts_with("invalid matcher `node=~\"(\"`: invalid regular expression"), "{located:?}");
        assert_eq!(located[2].1, "'node=~\"(\"'");
        assert!(located[3].0.starts_with("a silence needs at least one matcher"), "{located:?}");

        let good = "  notify: [{url: 'https://hooks.example.com/T/B/x', format: slack}, {url: 'http://events:8080/'}]\n  silences: [{alertmanager: 'http://am:9093', matchers: ['alertname=\"KubeNodeNotReady\"'], comment: Q3}]\n";
        let drill =
            crate::drill::from_source(std::path::Path::new("d.yaml"), drill_source(good, "    - {id: p, pause: 1s}\n"))
                .unwrap()
                .drill;
        assert_eq!(drill.spec.notify.len(), 2);
        assert_eq!(drill.spec.notify[0].format, crate::drill::NotifyFormat::Slack);
        assert_eq!(drill.spec.notify[1].format, crate::drill::NotifyFormat::Json);
        assert_eq!(drill.spec.notify[1].timeout, Webhook::DEFAULT_TIMEOUT);
        assert_eq!(drill.spec.silences[0].matchers[0].to_string(), "alertname=\"KubeNodeNotReady\"");
        assert_eq!(drill.spec.silences[0].comment.as_deref(), Some("Q3"));
    }

    #[test]
    fn the_fallback_is_one_nodepool_or_a_list_never_both_nor_neither() {
        let with = |fallback: &str| {
            drill_source("", "    - {id: s, pause: 1s}\n").replace("fallback: {nodePool: p}", fallback)
        };
        let loaded = |fallback: &str| crate::drill::from_source(std::path::Path::new("d.yaml"), with(fallback));
        let old = loaded("fallback: {nodePool: p}").unwrap().drill.spec.targets.fallback;
        assert_eq!((old.node_pool.as_str(), old.node_pools.as_slice()), ("p", ["p".to_string()].as_slice()));
        assert_eq!(old.label_selector(), "karpenter.sh/nodepool=p");
        let two = loaded("fallback: {nodePools: [od, spot]}").unwrap().drill.spec.targets.fallback;
        assert_eq!(two.node_pool, "od");
        assert_eq!(two.label_selector(), "karpenter.sh/nodepool in (od,spot)");
        assert_eq!(two.describe(), "NodePools od, spot");
        let message = |fallback: &str| diagnostics(with(fallback)).into_iter().map(|d| d.message).collect::<Vec<_>>();
        assert_eq!(
            message("fallback: {nodePool: p, nodePools: [q]}"),
            ["set nodePool (one NodePool) or nodePools (a list), not both"]
        );
        assert_eq!(
            message("fallback: {}"),
            ["name the fallback: nodePool: NAME, or nodePools: [NAME, ...] for several"]
        );
        assert_eq!(message("fallback: {nodePools: []}"), ["nodePools must name at least one NodePool"]);
        assert_eq!(message("fallback: {nodePools: [a, a]}"), ["NodePool `a` is named twice"]);
    }

    fn drill_source(spec: &str, steps: &str) -> String {
        format!(
            "apiVersion: hybrid-drill.io/v1alpha1\nkind: Drill\nmetadata: {{name: x}}\nspec:\n  cluster: {{context: c}}\n  targets:\n    onPrem: {{nodes: a=b}}\n    workload: {{namespace: n, selector: a=b, restoredWhen: {{readyPods: 1}}}}\n    fallback: {{nodePool: p}}\n{spec}  steps:\n{steps}"
        )
    }
}
