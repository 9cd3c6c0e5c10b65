//! The steps that fail the fallback itself or part of the on-prem side: a capacity fault's types and hooks, and a
//! partial loss's count or fraction (a drain's, a node failure's).

use super::Validator;
use crate::drill::model::{CapacityAction, INSTANCE_TYPE_PLACEHOLDER, NodeShare};
use crate::drill::parse::join;
use crate::drill::placeholders;
use crate::drill::raw;

impl Validator<'_> {
    /// Named types (or `all`), and both hooks with a program, naming `{instanceType}` both or neither.
    pub(super) fn capacity(&mut self, at: &str, fault: &raw::CapacityFault) -> Option<CapacityAction> {
        let before = self.problems.len();
        let instance_types = match &fault.instance_types {
            raw::InstanceTypes::All(_) => None,
            raw::InstanceTypes::Listed(types) => {
                if types.is_empty() {
                    self.problem(&join(at, "instanceTypes"), "name at least one instance type, or write `all`");
                }
                for t in types.iter().filter(|t| t.trim().is_empty() || t.contains(char::is_whitespace)) {
                    self.problem(&join(at, "instanceTypes"), format!("`{t}` is not an instance type"));
                }
                Some(types.clone())
            }
        };
        for (key, hook) in [("remove", &fault.remove), ("giveBack", &fault.give_back)] {
            if hook.first().is_none_or(|p| p.trim().is_empty()) {
                self.problem(&join(at, key), format!("`{key}` needs a command: a list, program first"));
            } else if placeholders::names_node(hook) {
                self.problem(&join(at, key), "a capacity hook acts on instance types, not nodes: no node placeholder");
            }
        }
        if names_type(&fault.remove) != names_type(&fault.give_back) {
            self.problem(
                at,
                format!(
                    "`{INSTANCE_TYPE_PLACEHOLDER}` must appear in both `remove` and `giveBack` or in neither: each type \
                     taken away is given back"
                ),
            );
        }
        self.hook_env(at, &fault.env);
        if fault.hook_timeout.0.is_zero() {
            self.problem(&join(at, "hookTimeout"), "hookTimeout must be longer than zero");
        }
        (self.problems.len() == before).then(|| CapacityAction {
            instance_types,
            remove: fault.remove.clone(),
            give_back: fault.give_back.clone(),
            hook_timeout: fault.hook_timeout.0,
            env: fault.env.clone(),
        })
    }

    /// `count` (at least one) or `fraction` (`1%` to `100%`), not both.
    pub(super) fn node_share_of(
        &mut self,
        at: &str,
        count: Option<u32>,
        fraction: Option<&String>,
    ) -> Option<NodeShare> {
        match (count, fraction) {
            (None, None) => None,
            (Some(_), Some(_)) => {
                self.problem(&join(at, "fraction"), "give `count` or `fraction`, not both");
                None
            }
            (Some(0), None) => {
                self.problem(&join(at, "count"), "count must be at least 1");
                None
            }
            (Some(n), None) => Some(NodeShare::Count(n)),
            (None, Some(text)) => match parse_percent(text) {
                Some(p) => Some(NodeShare::Percent(p)),
                None => {
                    self.problem(&join(at, "fraction"), format!("`{text}` is not a percentage: write e.g. `50%`"));
                    None
                }
            },
        }
    }
}

fn names_type(hook: &[String]) -> bool {
    hook.iter().any(|a| a.contains(INSTANCE_TYPE_PLACEHOLDER))
}

/// `50%` as 50; from 1 to 100.
fn parse_percent(text: &str) -> Option<u32> {
    let n: u32 = text.trim().strip_suffix('%')?.trim().parse().ok()?;
    (1..=100).contains(&n).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::parse_percent;
    use crate::drill::model::NodeShare;

    #[test]
    fn a_share_takes_the_first_nodes_by_name_rounding_up() {
        let nodes: Vec<String> = ["c", "a", "d", "b"].map(String::from).to_vec();
        assert_eq!(NodeShare::Count(1).of(&nodes), ["a"]);
        assert_eq!(NodeShare::Percent(50).of(&nodes), ["a", "b"]);
        assert_eq!(NodeShare::Percent(30).of(&nodes), ["a", "b"]);
        assert_eq!(NodeShare::Percent(1).of(&nodes), ["a"]);
        assert_eq!(NodeShare::Count(9).of(&nodes).len(), 4);
        assert_eq!(parse_percent(" 50% "), Some(50));
        assert_eq!(parse_percent("0%"), None);
        assert_eq!(parse_percent("50"), None);
    }
}
