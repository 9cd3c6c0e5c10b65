//! Cluster access: the client for the chosen kubeconfig context (or the pod's ServiceAccount) and the cluster's
//! identity, the Karpenter types, Kubernetes scheduling rules
//! (selectors, tolerations, placement, drain selection), and read-only look-ups.

pub mod autoscaler;
pub mod budgets;
pub mod client;
pub mod drain_selection;
pub mod identity;
pub mod karpenter;
pub mod lease;
pub mod marks;
pub mod paged;
pub mod policy;
pub mod quantity;
pub mod reader;
pub mod readiness;
pub mod requests;
pub mod retry;
pub mod scheduling;
pub mod selector;
pub mod source;
pub mod tolerations;
pub mod zones;

pub use client::{Cluster, ClusterError, USER_AGENT};
pub use identity::{ExpectedCluster, ObservedCluster, connect};
pub use reader::Reader;
pub use source::KubeContext;

/// Every (API group, resource, verb) the tool uses; deploy/clusterrole.yaml must grant exactly these. `resource[name]`
/// is the one object of that name (a rule's `resourceNames`).
pub const PERMISSIONS: &[(&str, &str, &[&str])] = &[
    ("", "nodes", &["get", "list", "watch", "patch"]),
    ("", "pods", &["get", "list", "watch", "patch"]),
    ("", "pods/eviction", &["create"]),
    ("", "events", &["list", "watch"]),
    ("", "configmaps", &["get"]),
    ("", "namespaces[kube-system]", &["get"]),
    ("", "endpoints", &["get"]),
    ("discovery.k8s.io", "endpointslices", &["list"]),
    ("policy", "poddisruptionbudgets", &["list", "watch"]),
    ("karpenter.sh", "nodepools", &["list", "watch"]),
    ("karpenter.sh", "nodeclaims", &["list", "watch"]),
    ("apps", "deployments", &["get", "list", "watch", "patch"]),
    ("apps", "statefulsets", &["get", "list", "watch", "patch"]),
    ("apps", "daemonsets", &["list"]),
    ("apps", "replicasets", &["get", "list", "watch"]),
    ("autoscaling", "horizontalpodautoscalers", &["list", "watch"]),
    ("keda.sh", "scaledobjects", &["list"]),
    ("karpenter.k8s.aws", "ec2nodeclasses", &["get"]),
    ("eks.amazonaws.com", "nodeclasses", &["get"]),
    ("networking.k8s.io", "networkpolicies", &["list", "create", "delete"]),
    ("cilium.io", "ciliumclusterwidenetworkpolicies", &["list", "create", "delete"]),
    ("projectcalico.org", "globalnetworkpolicies", &["list", "create", "delete"]),
    ("crd.projectcalico.org", "globalnetworkpolicies", &["list", "create", "delete"]),
    ("crd.projectcalico.org", "hostendpoints", &["list"]),
    ("crd.projectcalico.org", "kubecontrollersconfigurations", &["get"]),
];

/// An error with its causes, `outer: inner: root`, repeated causes folded.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

pub fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

/// Whether a kube error is the API server answering 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A Kubernetes timestamp on the chrono clock the timeline uses.
pub fn to_utc(t: &k8s_openapi::jiff::Timestamp) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32).unwrap_or_default()
}

/// A Role's or ClusterRole's rules as (API group, resource, verb), `resource[name]` where `resourceNames` limits them.
#[cfg(test)]
pub(crate) fn granted_by(role: &serde_json::Value) -> std::collections::BTreeSet<(String, String, String)> {
    let mut granted = std::collections::BTreeSet::new();
    let text = |v: &serde_json::Value| v.as_str().unwrap().to_string();
    for rule in role["rules"].as_array().unwrap() {
        let names: Vec<String> = match rule["resourceNames"].as_array() {
            Some(names) => names.iter().map(|n| format!("[{}]", text(n))).collect(),
            None => vec![String::new()],
        };
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                for name in &names {
                    for verb in rule["verbs"].as_array().unwrap() {
                        granted.insert((text(group), format!("{}{name}", text(resource)), text(verb)));
                    }
                }
            }
        }
    }
    granted
}

/// A permission table as the (API group, resource, verb) triples [`granted_by`] reads from a role.
#[cfg(test)]
pub(crate) fn used_by(table: &[(&str, &str, &[&str])]) -> std::collections::BTreeSet<(String, String, String)> {
    table
        .iter()
        .flat_map(|(g, r, verbs)| verbs.iter().map(move |v| (g.to_string(), r.to_string(), v.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{PERMISSIONS, granted_by, used_by};

    #[test]
    fn the_committed_role_grants_exactly_what_the_code_uses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/clusterrole.yaml");
        let role = crate::drill::parse::parse_document(&std::fs::read_to_string(path).unwrap()).unwrap().value;
        let (granted, used) = (granted_by(&role), used_by(PERMISSIONS));
        let missing: Vec<_> = used.difference(&granted).collect();
        let extra: Vec<_> = granted.difference(&used).collect();
        assert!(missing.is_empty(), "deploy/clusterrole.yaml lacks {missing:?}");
        assert!(extra.is_empty(), "deploy/clusterrole.yaml grants more than the tool uses: {extra:?}");
    }
}
