//! Checks a typed drill for what types can't say: versions, unique ids, one action per step, well-formed selectors.

use std::collections::HashSet;

use super::diagnostics::Diagnostic;
use super::model::{API_VERSION, Check, CutFidelity, Drill, KIND, NODE_PLACEHOLDER, RestoreTarget, STEP_ACTIONS, Step};
use super::parse::{SpanMap, index, join, suggest};

pub fn validate(drill: &Drill, spans: &SpanMap) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    let mut problem = |path: &str, message: String| problems.push(Diagnostic::new(message, spans.value(path)));

    if drill.api_version != API_VERSION {
        problem(
            "apiVersion",
            format!("unsupported apiVersion `{}`; this tool reads `{API_VERSION}`", drill.api_version),
        );
    }
    if drill.kind != KIND {
        problem("kind", format!("unsupported kind `{}`; expected `{KIND}`", drill.kind));
    }
    let name = &drill.metadata.name;
    if name.is_empty()
        || name.len() > 48
        || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || name.starts_with('-')
    {
        problem("metadata.name", format!("invalid drill name `{name}`: use 1 to 48 lowercase letters, digits and `-`"));
    }

    let spec = &drill.spec;
    if spec.cluster.context.trim().is_empty() {
        problem("spec.cluster.context", "the expected kubeconfig context must not be empty".into());
    }
    for (path, selector) in [
        ("spec.targets.onPrem.nodes", &spec.targets.on_prem.nodes),
        ("spec.targets.workload.selector", &spec.targets.workload.selector),
    ] {
        if let Err(e) = check_label_selector(selector) {
            problem(path, format!("invalid label selector `{selector}`: {e}"));
        }
    }
    if spec.targets.workload.namespace.trim().is_empty() {
        problem("spec.targets.workload.namespace", "the workload namespace must not be empty".into());
    }
    let restored = &spec.targets.workload.restored_when;
    if restored.ready_pods == 0 {
        problem("spec.targets.workload.restoredWhen.readyPods", "readyPods must be at least 1".into());
    }
    if let Some(http) = &restored.http {
        if !(http.url.starts_with("http://") || http.url.starts_with("https://")) {
            problem(
                "spec.targets.workload.restoredWhen.http.url",
                format!("probe url `{}` must start with http:// or https://", http.url),
            );
        }
        if http.consecutive == 0 {
            problem("spec.targets.workload.restoredWhen.http.consecutive", "consecutive must be at least 1".into());
        }
    }
    if spec.guards.protected_namespaces.contains(&spec.targets.workload.namespace) {
        problem(
            "spec.targets.workload.namespace",
            format!(
                "the workload namespace `{}` is in guards.protectedNamespaces, which the drill never touches",
                spec.targets.workload.namespace
            ),
        );
    }
    if spec.guards.max_nodes == 0 {
        problem("spec.guards.maxNodes", "maxNodes must be at least 1".into());
    }
    for (instance, price) in &spec.pricing {
        if !price.is_finite() || *price < 0.0 {
            problem(
                &join("spec.pricing", instance),
                format!("price of `{instance}` must be a positive number of dollars per hour"),
            );
        }
    }

    if spec.steps.is_empty() {
        problem("spec.steps", "a drill needs at least one step".into());
    }
    let mut seen = HashSet::new();
    let mut first_change: Option<&str> = None;
    for (i, step) in spec.steps.iter().enumerate() {
        let path = index("spec.steps", i);
        if step.id.is_empty() || !step.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            problem(&join(&path, "id"), format!("invalid step id `{}`: use letters, digits, `-` and `_`", step.id));
        } else if !seen.insert(step.id.as_str()) {
            problem(&join(&path, "id"), format!("duplicate step id `{}`", step.id));
        }
        let keys = step.action_keys();
        match keys.len() {
            0 => {
                problem(&path, format!("step `{}` has no action; give it one of: {}", step.id, STEP_ACTIONS.join(", ")))
            }
            1 => {}
            _ => problem(
                &join(&path, keys[1]),
                format!(
                    "step `{}` has {} actions (`{}`); a step does one thing",
                    step.id,
                    keys.len(),
                    keys.join("`, `")
                ),
            ),
        }
        if step.on_deviation.is_some() && step.check.is_none() {
            problem(&join(&path, "onDeviation"), "onDeviation only applies to a `check` step".into());
        }
        // A refused drill must have touched nothing, so preflight runs before any step that may change the cluster.
        if step.check == Some(Check::Preflight)
            && let Some(changer) = first_change
        {
            problem(
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
            problem(&join(&path, "timeout"), "timeout must be longer than zero".into());
        }
        if let Some(ret) = &step.r#return
            && let Some(target) = &ret.restart
            && let Err(e) = parse_workload_ref(target)
        {
            problem(&join(&join(&path, "return"), "restart"), e);
        }
        if let Some(exec) = &step.exec {
            if exec.command.is_empty() || exec.command[0].trim().is_empty() {
                problem(&join(&join(&path, "exec"), "command"), "exec needs a command: a list, program first".into());
            }
            if exec.undo.as_ref().is_some_and(|u| u.is_empty()) {
                problem(&join(&join(&path, "exec"), "undo"), "undo, when given, needs a command".into());
            }
        }
        check_fault_step(&spec.steps, i, &path, &mut problem);
    }
    problems
}

/// A cut or a node failure must say how it is enforced and be ended by a later `restore`; a `restore` must end one.
fn check_fault_step(steps: &[Step], i: usize, path: &str, problem: &mut impl FnMut(&str, String)) {
    let step = &steps[i];
    let restores = |target: RestoreTarget| steps[i + 1..].iter().any(|s| s.restore == Some(target));
    if let Some(cut) = &step.cut {
        let at = join(path, "cut");
        match (cut.fidelity, cut.cni) {
            (CutFidelity::Host, None) => problem(
                &at,
                "a host-level cut needs `cni: cilium` or `cni: calico`: whose host firewall enforces it".into(),
            ),
            (CutFidelity::PodNetwork, Some(_)) => problem(
                &join(&at, "cni"),
                "`cni` applies only to `fidelity: host`; a pod-network cut is a Kubernetes NetworkPolicy".into(),
            ),
            _ => {}
        }
        for (n, cidr) in cut.allow_cidrs.iter().enumerate() {
            if !is_cidr(cidr) {
                problem(&index(&join(&at, "allowCidrs"), n), format!("`{cidr}` is not a CIDR such as 10.0.0.0/8"));
            }
        }
        if !restores(RestoreTarget::Cut) {
            problem(
                &at,
                format!(
                    "step `{}` cuts the link but no later step restores it; add `- {{id: restore, restore: cut}}`",
                    step.id
                ),
            );
        }
    }
    if let Some(failure) = &step.node_failure {
        let at = join(path, "nodeFailure");
        for (key, hook) in [("fail", &failure.fail), ("recover", &failure.recover)] {
            if hook.first().is_none_or(|p| p.trim().is_empty()) {
                problem(&join(&at, key), format!("`{key}` needs a command: a list, program first"));
            }
        }
        let per_node = |hook: &[String]| hook.iter().any(|a| a.contains(NODE_PLACEHOLDER));
        if per_node(&failure.fail) != per_node(&failure.recover) {
            problem(
                &at,
                format!(
                    "`{NODE_PLACEHOLDER}` must appear in both `fail` and `recover` or in neither: each node failed is recovered"
                ),
            );
        }
        if failure.hook_timeout.0.is_zero() {
            problem(&join(&at, "hookTimeout"), "hookTimeout must be longer than zero".into());
        }
        if !restores(RestoreTarget::NodeFailure) {
            problem(
                &at,
                format!(
                    "step `{}` fails the nodes but no later step brings them back; add `- {{id: power-on, restore: node-failure}}`",
                    step.id
                ),
            );
        }
    }
    if let Some(target) = step.restore {
        let ended = steps[..i].iter().any(|s| match target {
            RestoreTarget::Cut => s.cut.is_some(),
            RestoreTarget::NodeFailure => s.node_failure.is_some(),
        });
        if !ended {
            let fault = if target == RestoreTarget::Cut { "cut" } else { "nodeFailure" };
            problem(&join(path, "restore"), format!("`restore: {target}` needs an earlier `{fault}` step to end"));
        }
    }
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

/// The kinds a `return.restart` may name, as `kind/name`.
pub const RESTARTABLE_KINDS: &[&str] = &["deployment", "statefulset"];

pub fn parse_workload_ref(text: &str) -> Result<(String, String), String> {
    let Some((kind, name)) = text.split_once('/') else {
        return Err(format!("restart target `{text}` must be `deployment/NAME` or `statefulset/NAME`"));
    };
    let kind = kind.to_lowercase();
    if !RESTARTABLE_KINDS.contains(&kind.as_str()) {
        let expected: Vec<String> = RESTARTABLE_KINDS.iter().map(|s| s.to_string()).collect();
        let hint = suggest(&kind, &expected).map(|s| format!("; did you mean `{s}`?")).unwrap_or_default();
        return Err(format!("cannot restart a `{kind}`: use deployment/NAME or statefulset/NAME{hint}"));
    }
    if name.is_empty() {
        return Err(format!("restart target `{text}` has no name"));
    }
    Ok((kind, name.to_string()))
}

/// A syntax check of a Kubernetes label selector, so a typo fails here and not against the API server.
pub fn check_label_selector(selector: &str) -> Result<(), String> {
    crate::cluster::selector::parse(selector).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(parse_workload_ref("deployment/llm").unwrap(), ("deployment".into(), "llm".into()));
        assert!(parse_workload_ref("deploymnet/llm").unwrap_err().contains("did you mean `deployment`"));
        assert!(parse_workload_ref("llm").is_err());
    }

    fn problems(steps: &str) -> Vec<String> {
        let source = format!(
            "apiVersion: hybrid-drill.io/v1alpha1\nkind: Drill\nmetadata: {{name: x}}\nspec:\n  cluster: {{context: c}}\n  targets:\n    onPrem: {{nodes: a=b}}\n    workload: {{namespace: n, selector: a=b, restoredWhen: {{readyPods: 1}}}}\n    fallback: {{nodePool: p}}\n  steps:\n{steps}"
        );
        match crate::drill::from_source(std::path::Path::new("d.yaml"), source) {
            Ok(_) => Vec::new(),
            Err(crate::drill::DrillError::Invalid { diagnostics, .. }) => {
                diagnostics.into_iter().map(|d| d.message).collect()
            }
            Err(e) => panic!("{e}"),
        }
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
}
