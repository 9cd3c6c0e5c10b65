//! The hooks' placeholders: `{node}`, `{label:KEY}`, `{annotation:KEY}`, `{internalIP}` and `{address}`, checked
//! when the drill is validated and expanded, by the one expander every hook uses, from the Node object when the hook
//! runs. Other text in braces (a shell's `${VAR}`) is left alone.

use std::collections::BTreeMap;

/// One placeholder a hook argument names.
#[derive(Debug, Clone, PartialEq)]
pub enum Placeholder {
    Node,
    Label(String),
    Annotation(String),
    InternalIp,
    Address,
}

/// The placeholders as a drill file writes them, for error messages.
pub const KNOWN: &str = "{node}, {label:KEY}, {annotation:KEY}, {internalIP}, {address}";

/// What a node offers the placeholders, read from its Node object when the hook runs.
#[derive(Debug, Clone, Default)]
pub struct NodeFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub internal_ip: Option<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlaceholderError {
    #[error("`{{{found}}}` is not a placeholder; did you mean `{expected}`? (known: {KNOWN})")]
    Misspelt { found: String, expected: String },
    #[error("`{{{0}:}}` names no key: write `{{{0}:KEY}}`")]
    NoKey(&'static str),
    #[error("node {node} has no label `{key}` for `{{label:{key}}}`")]
    NoLabel { node: String, key: String },
    #[error("node {node} has no annotation `{key}` for `{{annotation:{key}}}`")]
    NoAnnotation { node: String, key: String },
    #[error("node {node} has no InternalIP address in its status for `{{internalIP}}`")]
    NoInternalIp { node: String },
    #[error("node {node} has no entry in spec.targets.onPrem.addresses for `{{address}}`")]
    NoAddress { node: String },
}

/// A piece of a hook argument: literal text or a placeholder.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Placeholder(Placeholder),
}

fn placeholder(inner: &str, after_dollar: bool) -> Result<Option<Placeholder>, PlaceholderError> {
    if let Some((prefix, key)) = inner.split_once(':') {
        let kind: fn(String) -> Placeholder = match prefix {
            "label" => Placeholder::Label,
            "annotation" => Placeholder::Annotation,
            _ => {
                // `{lable:KEY}`: a near miss of a keyed placeholder, never a shell's `${VAR:-default}`.
                let near = (!after_dollar && is_word(prefix))
                    .then(|| super::parse::suggest(prefix, &["label".to_string(), "annotation".to_string()]))
                    .flatten();
                return match near {
                    Some(kind) => {
                        Err(PlaceholderError::Misspelt { found: inner.into(), expected: format!("{{{kind}:{key}}}") })
                    }
                    None => Ok(None),
                };
            }
        };
        if key.trim().is_empty() {
            return Err(PlaceholderError::NoKey(if prefix == "label" { "label" } else { "annotation" }));
        }
        return Ok(Some(kind(key.to_string())));
    }
    Ok(Some(match inner {
        "node" => Placeholder::Node,
        "internalIP" => Placeholder::InternalIp,
        "address" => Placeholder::Address,
        _ => {
            // A near miss of a placeholder is an error; anything else in braces belongs to the command.
            let squashed = inner.to_ascii_lowercase().replace(['_', '-'], "");
            let expected = match squashed.as_str() {
                "node" | "nodename" | "name" => "{node}",
                "internalip" | "ip" | "nodeip" => "{internalIP}",
                "address" | "addr" | "bmc" => "{address}",
                _ if !after_dollar && is_word(inner) => match typo_of(&squashed) {
                    Some(expected) => expected,
                    None => return Ok(None),
                },
                _ => return Ok(None),
            };
            return Err(PlaceholderError::Misspelt { found: inner.into(), expected: expected.into() });
        }
    }))
}

/// The placeholder a word is one typing slip from (`nodee`, `adress`, `internalpi`).
fn typo_of(squashed: &str) -> Option<&'static str> {
    [("node", "{node}", 1), ("internalip", "{internalIP}", 2), ("address", "{address}", 2)]
        .into_iter()
        .find(|(word, _, most)| strsim::damerau_levenshtein(squashed, word) <= *most)
        .map(|(_, placeholder, _)| placeholder)
}

/// Letters, digits, `_` and `-` only: what a placeholder's name could be, unlike a shell's or JSON's braces.
fn is_word(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn pieces(arg: &str) -> Result<Vec<Piece>, PlaceholderError> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        let inner = &rest[open + 1..open + close];
        match placeholder(inner, rest[..open].ends_with('$'))? {
            Some(p) => {
                out.push(Piece::Text(rest[..open].to_string()));
                out.push(Piece::Placeholder(p));
            }
            None => out.push(Piece::Text(rest[..=open + close].to_string())),
        }
        rest = &rest[open + close + 1..];
    }
    out.push(Piece::Text(rest.to_string()));
    Ok(out)
}

/// Checks every argument of a hook; the first problem, with the index of its argument.
pub fn check(hook: &[String]) -> Result<(), (usize, PlaceholderError)> {
    for (i, arg) in hook.iter().enumerate() {
        pieces(arg).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// Whether a hook names a node placeholder, so it runs once per node.
pub fn names_node(hook: &[String]) -> bool {
    hook.iter().any(|a| pieces(a).is_ok_and(|p| p.iter().any(|p| matches!(p, Piece::Placeholder(_)))))
}

/// The hook with every placeholder replaced by what `node` says; a missing label, annotation or address fails it
/// before it runs, naming the node and the key.
pub fn expand(
    hook: &[String],
    node: &NodeFacts,
    addresses: &BTreeMap<String, String>,
) -> Result<Vec<String>, PlaceholderError> {
    hook.iter()
        .map(|arg| {
            let mut out = String::new();
            for piece in pieces(arg)? {
                match piece {
                    Piece::Text(t) => out.push_str(&t),
                    Piece::Placeholder(p) => out.push_str(&value(&p, node, addresses)?),
                }
            }
            Ok(out)
        })
        .collect()
}

fn value(p: &Placeholder, node: &NodeFacts, addresses: &BTreeMap<String, String>) -> Result<String, PlaceholderError> {
    let name = || node.name.clone();
    match p {
        Placeholder::Node => Ok(node.name.clone()),
        Placeholder::Label(key) => {
            node.labels.get(key).cloned().ok_or_else(|| PlaceholderError::NoLabel { node: name(), key: key.clone() })
        }
        Placeholder::Annotation(key) => node
            .annotations
            .get(key)
            .cloned()
            .ok_or_else(|| PlaceholderError::NoAnnotation { node: name(), key: key.clone() }),
        Placeholder::InternalIp => {
            node.internal_ip.clone().ok_or_else(|| PlaceholderError::NoInternalIp { node: name() })
        }
        Placeholder::Address => {
            addresses.get(&node.name).cloned().ok_or_else(|| PlaceholderError::NoAddress { node: name() })
        }
    }
}

/// `{nodes}` in a `detectedBy` query: the faulty nodes' names as a regular expression (`a|b`). Dots stay unescaped:
/// the escape a regular expression wants differs between PromQL's quoted and raw strings, and a dot matching any
/// character only widens the match to names that differ from a faulty node's at a dot.
pub fn expand_nodes(query: &str, nodes: &[String]) -> String {
    query.replace(NODES, &nodes.join("|"))
}

/// The placeholder a `detectedBy` query names the faulty nodes by.
pub const NODES: &str = "{nodes}";

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    fn mi() -> NodeFacts {
        NodeFacts {
            name: "mi-0abc123def4567890".into(),
            labels: BTreeMap::from([("bmc.example.com/address".into(), "10.9.0.21".into())]),
            annotations: BTreeMap::from([("rack".into(), "r12".into())]),
            internal_ip: Some("10.0.1.21".into()),
        }
    }

    #[test]
    fn every_placeholder_is_read_from_the_node() {
        let addresses = BTreeMap::from([("mi-0abc123def4567890".to_string(), "10.8.0.21".to_string())]);
        let h = hook(&[
            "ipmitool",
            "-H",
            "{label:bmc.example.com/address}",
            "{internalIP}:{address}",
            "{node}@{annotation:rack}",
        ]);
        assert_eq!(
            expand(&h, &mi(), &addresses).unwrap(),
            ["ipmitool", "-H", "10.9.0.21", "10.0.1.21:10.8.0.21", "mi-0abc123def4567890@r12"]
        );
        assert!(names_node(&h) && !names_node(&hook(&["sh", "-c", "echo ${HOME}"])));
    }

    #[test]
    fn a_missing_key_fails_before_the_hook_runs_naming_the_node_and_the_key() {
        let none = BTreeMap::new();
        let err = expand(&hook(&["{label:bmc/ip}"]), &mi(), &none).unwrap_err();
        assert_eq!(err.to_string(), "node mi-0abc123def4567890 has no label `bmc/ip` for `{label:bmc/ip}`");
        let bare = NodeFacts { name: "h1".into(), ..NodeFacts::default() };
        assert_eq!(
            expand(&hook(&["{internalIP}"]), &bare, &none).unwrap_err(),
            PlaceholderError::NoInternalIp { node: "h1".into() }
        );
        assert_eq!(
            expand(&hook(&["{address}"]), &bare, &none).unwrap_err(),
            PlaceholderError::NoAddress { node: "h1".into() }
        );
    }

    #[test]
    fn near_misses_are_errors_and_shell_braces_are_text() {
        assert_eq!(
            check(&hook(&["ipmitool", "{internalIp}"])).unwrap_err(),
            (1, PlaceholderError::Misspelt { found: "internalIp".into(), expected: "{internalIP}".into() })
        );
        assert_eq!(check(&hook(&["{label:}"])).unwrap_err().1, PlaceholderError::NoKey("label"));
        assert!(check(&hook(&["sh", "-c", "echo ${X} {\"a\": 1} {"])).is_ok());
        let typo = |arg: &str| check(&hook(&[arg])).unwrap_err().1.to_string();
        assert_eq!(
            typo("{nodee}"),
            "`{nodee}` is not a placeholder; did you mean `{node}`? (known: {node}, {label:KEY}, {annotation:KEY}, \
             {internalIP}, {address})"
        );
        assert!(typo("-H={lable:bmc.example.com/address}").contains("did you mean `{label:bmc.example.com/address}`?"));
        assert!(typo("{anotation:rack}").contains("did you mean `{annotation:rack}`?"));
        assert!(typo("{adress}").contains("did you mean `{address}`?"));
        assert!(check(&hook(&["sh", "-c", "echo ${HOME} ${nodee} ${lable:-x} {mode:fast} {print}"])).is_ok());
        let shell = hook(&["sh", "-c", "echo ${X}"]);
        assert_eq!(expand(&shell, &mi(), &BTreeMap::new()).unwrap(), shell);
    }
}
