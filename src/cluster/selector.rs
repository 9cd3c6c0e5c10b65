//! Kubernetes label selectors as written in a drill (`a=b,c in (x,y),!d`): parsed once, then rendered for the
//! objects that select nodes the same way (a `LabelSelector`, a Calico selector expression).

use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One comma-separated requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

/// Why a selector was refused: it names the part at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("a selector must not be empty (it would match everything)")]
    Empty,
    #[error("unbalanced parentheses")]
    Unbalanced,
    #[error("empty requirement between commas")]
    EmptyRequirement,
    #[error("`{0}`: a set must be written `(a,b)`")]
    Set(String),
    #[error("invalid label key prefix in `{0}`")]
    KeyPrefix(String),
    #[error("invalid label key `{0}`")]
    Key(String),
    #[error("invalid label value `{0}`")]
    Value(String),
}

/// Parses a selector string, checking every key and value, so a typo fails in validation and not at the API server.
pub fn parse(selector: &str) -> Result<Vec<LabelRequirement>, SelectorError> {
    if selector.trim().is_empty() {
        return Err(SelectorError::Empty);
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
        return Err(SelectorError::Unbalanced);
    }
    parts.iter().map(|p| requirement(p.trim())).collect()
}

fn requirement(part: &str) -> Result<LabelRequirement, SelectorError> {
    if part.is_empty() {
        return Err(SelectorError::EmptyRequirement);
    }
    let (key, operator, values) = if let Some((k, v)) = part.split_once("!=") {
        (k, Operator::NotEquals, vec![v.trim().to_string()])
    } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        (k, Operator::Equals, vec![v.trim().to_string()])
    } else if let Some((k, rest, operator)) = part
        .split_once(" notin ")
        .map(|(k, r)| (k, r, Operator::NotIn))
        .or_else(|| part.split_once(" in ").map(|(k, r)| (k, r, Operator::In)))
    {
        let rest = rest.trim();
        if !(rest.starts_with('(') && rest.ends_with(')')) {
            return Err(SelectorError::Set(part.into()));
        }
        (k, operator, rest[1..rest.len() - 1].split(',').map(|v| v.trim().to_string()).collect())
    } else if let Some(k) = part.strip_prefix('!') {
        (k, Operator::DoesNotExist, Vec::new())
    } else {
        (part, Operator::Exists, Vec::new())
    };
    for v in &values {
        check_value(v)?;
    }
    let key = key.trim();
    check_key(key)?;
    Ok(LabelRequirement { key: key.to_string(), operator, values })
}

fn check_key(key: &str) -> Result<(), SelectorError> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty()
                || prefix.len() > 253
                || !prefix.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
            {
                return Err(SelectorError::KeyPrefix(key.into()));
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(SelectorError::Key(key.into()));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), SelectorError> {
    if value.len() > 63 || !value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(SelectorError::Value(value.into()));
    }
    Ok(())
}

/// The selector as a `metav1.LabelSelector` (what Cilium's `nodeSelector` takes).
pub fn to_label_selector(requirements: &[LabelRequirement]) -> Value {
    let mut match_labels = serde_json::Map::new();
    let mut expressions = Vec::new();
    for r in requirements {
        let expression = |op: &str, values: &[String]| json!({"key": r.key, "operator": op, "values": values});
        match r.operator {
            Operator::Equals => {
                match_labels.insert(r.key.clone(), Value::from(r.values[0].clone()));
            }
            Operator::NotEquals => expressions.push(expression("NotIn", &r.values)),
            Operator::In => expressions.push(expression("In", &r.values)),
            Operator::NotIn => expressions.push(expression("NotIn", &r.values)),
            Operator::Exists => expressions.push(json!({"key": r.key, "operator": "Exists"})),
            Operator::DoesNotExist => expressions.push(json!({"key": r.key, "operator": "DoesNotExist"})),
        }
    }
    let mut selector = serde_json::Map::new();
    if !match_labels.is_empty() {
        selector.insert("matchLabels".into(), Value::Object(match_labels));
    }
    if !expressions.is_empty() {
        selector.insert("matchExpressions".into(), Value::Array(expressions));
    }
    Value::Object(selector)
}

/// The selector as a Calico selector expression, which host endpoints (labelled like their nodes) are matched by.
pub fn to_calico(requirements: &[LabelRequirement]) -> String {
    let quoted = |values: &[String]| values.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ");
    requirements
        .iter()
        .map(|r| match r.operator {
            Operator::Equals => format!("{} == '{}'", r.key, r.values[0]),
            Operator::NotEquals => format!("{} != '{}'", r.key, r.values[0]),
            Operator::In => format!("{} in {{{}}}", r.key, quoted(&r.values)),
            Operator::NotIn => format!("{} not in {{{}}}", r.key, quoted(&r.values)),
            Operator::Exists => format!("has({})", r.key),
            Operator::DoesNotExist => format!("!has({})", r.key),
        })
        .collect::<Vec<_>>()
        .join(" && ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_and_reject_typos() {
        let r = parse("eks.amazonaws.com/compute-type=hybrid,gpu.model=h200").unwrap();
        assert_eq!(
            r[1],
            LabelRequirement { key: "gpu.model".into(), operator: Operator::Equals, values: vec!["h200".into()] }
        );
        let r = parse("app in (a,b),!legacy,tier!=db,zone").unwrap();
        let ops: Vec<&Operator> = r.iter().map(|r| &r.operator).collect();
        assert_eq!(ops, [&Operator::In, &Operator::DoesNotExist, &Operator::NotEquals, &Operator::Exists]);
        assert_eq!(r[0].values, ["a", "b"]);
        for bad in ["", "app=,", "app=a b", "app in (a", "app in a,b"] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn selectors_render_for_cilium_and_calico() {
        let r = parse("eks.amazonaws.com/compute-type=hybrid,gpu.model in (h200,h100),!spare").unwrap();
        assert_eq!(
            to_label_selector(&r),
            json!({
                "matchLabels": {"eks.amazonaws.com/compute-type": "hybrid"},
                "matchExpressions": [
                    {"key": "gpu.model", "operator": "In", "values": ["h200", "h100"]},
                    {"key": "spare", "operator": "DoesNotExist"}
                ]
            })
        );
        assert_eq!(
            to_calico(&r),
            "eks.amazonaws.com/compute-type == 'hybrid' && gpu.model in {'h200', 'h100'} && !has(spare)"
        );
    }
}
