//! Checks a typed drill for what types can't say: versions, unique ids, one action per step, well-formed selectors.

use std::collections::HashSet;

use super::diagnostics::Diagnostic;
use super::model::{API_VERSION, Drill, KIND, STEP_ACTIONS};
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
    }
    problems
}

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
    if selector.trim().is_empty() {
        return Err("a selector must not be empty (it would match everything)".into());
    }
    let mut depth = 0;
    let mut parts = Vec::new();
    let mut current = String::new();
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    for part in parts {
        let part = part.trim();
        if part.is_empty() {
            return Err("empty requirement between commas".into());
        }
        let key = if let Some((k, v)) =
            part.split_once("!=").or_else(|| part.split_once("==")).or_else(|| part.split_once('='))
        {
            check_label_value(v.trim())?;
            k.trim()
        } else if let Some((k, rest)) = part.split_once(" notin ").or_else(|| part.split_once(" in ")) {
            let rest = rest.trim();
            if !(rest.starts_with('(') && rest.ends_with(')')) {
                return Err(format!("`{part}`: a set must be written `(a,b)`"));
            }
            for v in rest[1..rest.len() - 1].split(',') {
                check_label_value(v.trim())?;
            }
            k.trim()
        } else {
            part.strip_prefix('!').unwrap_or(part).trim()
        };
        check_label_key(key)?;
    }
    Ok(())
}

fn check_label_key(key: &str) -> Result<(), String> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty()
                || prefix.len() > 253
                || !prefix.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
            {
                return Err(format!("invalid label key prefix in `{key}`"));
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(format!("invalid label key `{key}`"));
    }
    Ok(())
}

fn check_label_value(value: &str) -> Result<(), String> {
    if value.len() > 63 || !value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(format!("invalid label value `{value}`"));
    }
    Ok(())
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
    fn workload_refs() {
        assert_eq!(parse_workload_ref("deployment/llm").unwrap(), ("deployment".into(), "llm".into()));
        assert!(parse_workload_ref("deploymnet/llm").unwrap_err().contains("did you mean `deployment`"));
        assert!(parse_workload_ref("llm").is_err());
    }
}
