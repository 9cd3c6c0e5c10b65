//! Cluster access: the client for the chosen kubeconfig context (or the pod's ServiceAccount) and the cluster's
//! identity, the Karpenter types, Kubernetes scheduling rules
//! (selectors, tolerations, placement, drain selection), and read-only look-ups.

pub mod autoscaler;
pub mod budgets;
pub mod client;
pub mod collateral;
pub mod deadline;
pub mod displacement;
pub mod drain_selection;
pub mod identity;
pub mod initiator;
pub mod karpenter;
pub mod lease;
pub mod marks;
pub mod nodepool_budgets;
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

/// A permission table: (API group, resource, verbs); `resource[name]` is the one object of that name (a rule's
/// `resourceNames`).
pub type Permissions = &'static [(&'static str, &'static str, &'static [&'static str])];

/// Every cluster-wide read of `plan`, `preflight` and `identify`, and of a run and `recover` besides their writes;
/// deploy/clusterrole.yaml's `hybrid-drill-read` grants exactly these. `tiers` and `tier.globalnetworkpolicies` are
/// what a tiered Calico (3.29 and later) authorizes a GlobalNetworkPolicy request against, never requested as such.
pub const READ_PERMISSIONS: Permissions = &[
    ("", "nodes", &["get", "list", "watch"]),
    ("", "pods", &["get", "list", "watch"]),
    ("", "events", &["list", "watch"]),
    ("", "namespaces[kube-system]", &["get"]),
    ("policy", "poddisruptionbudgets", &["list", "watch"]),
    ("karpenter.sh", "nodepools", &["list", "watch"]),
    ("karpenter.sh", "nodeclaims", &["list", "watch"]),
    ("apps", "deployments", &["get", "list", "watch"]),
    ("apps", "statefulsets", &["get", "list", "watch"]),
    ("apps", "replicasets", &["get", "list", "watch"]),
    ("apps", "daemonsets", &["get", "list"]),
    ("autoscaling", "horizontalpodautoscalers", &["list", "watch"]),
    ("keda.sh", "scaledobjects", &["list"]),
    ("karpenter.k8s.aws", "ec2nodeclasses", &["get"]),
    ("eks.amazonaws.com", "nodeclasses", &["get"]),
    ("networking.k8s.io", "networkpolicies", &["list"]),
    ("cilium.io", "ciliumclusterwidenetworkpolicies", &["list"]),
    ("projectcalico.org", "globalnetworkpolicies", &["list"]),
    ("crd.projectcalico.org", "globalnetworkpolicies", &["list"]),
    ("projectcalico.org", "tiers[default]", &["get"]),
    ("projectcalico.org", "tier.globalnetworkpolicies[default.*]", &["get", "list", "watch"]),
    ("crd.projectcalico.org", "hostendpoints", &["list"]),
    ("crd.projectcalico.org", "kubecontrollersconfigurations[default]", &["get"]),
];

/// What a run and `recover` change, cluster-wide: deploy/clusterrole.yaml's `hybrid-drill` grants exactly these, and
/// nothing else (a run needs [`READ_PERMISSIONS`] too).
pub const RUN_PERMISSIONS: Permissions = &[
    // Not a write (a SelfSubjectReview stores nothing), but a create, which the read-only role never grants.
    ("authentication.k8s.io", "selfsubjectreviews", &["create"]),
    ("", "nodes", &["patch"]),
    ("", "pods", &["patch"]),
    ("", "pods/eviction", &["create"]),
    ("karpenter.sh", "nodeclaims", &["delete"]),
    ("networking.k8s.io", "networkpolicies", &["create", "delete"]),
    ("cilium.io", "ciliumclusterwidenetworkpolicies", &["create", "delete"]),
    ("projectcalico.org", "globalnetworkpolicies", &["create", "delete"]),
    ("crd.projectcalico.org", "globalnetworkpolicies", &["create", "delete"]),
    ("projectcalico.org", "tier.globalnetworkpolicies[default.*]", &["create", "delete"]),
];

/// What the tool reads or changes in one namespace, by Role (namespace, Role, permissions): deploy/roles.yaml grants
/// exactly these. The restarts' namespaces and names are the scheduled drill's `return.restart` target and the
/// collateral its return restarts.
pub const NAMESPACED_PERMISSIONS: &[(&str, &str, Permissions)] = &[
    (
        "kube-system",
        "hybrid-drill-read",
        &[("", "configmaps[cilium-config]", &["get"]), ("", "configmaps[hybrid-drill-freeze]", &["get"])],
    ),
    (
        "default",
        "hybrid-drill-read",
        &[("", "endpoints[kubernetes]", &["get"]), ("discovery.k8s.io", "endpointslices", &["list"])],
    ),
    ("inference", "hybrid-drill-restart", &[("apps", "deployments[llm-inference]", &["patch"])]),
    ("batch", "hybrid-drill-restart", &[("apps", "deployments[embeddings]", &["patch"])]),
];

/// An error with its causes, `outer: inner: root`, repeated causes folded.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    // A failed credential plugin anywhere in the chain is the whole story: the errors around it repeat its raw output.
    let mut link = Some(e);
    while let Some(l) = link {
        if let Some(hint) = exec_plugin_failure(l) {
            return hint;
        }
        link = l.source();
    }
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

/// A kubeconfig credential plugin (`aws eks get-token`, `kubelogin`, `gke-gcloud-auth-plugin`) that exited non-zero,
/// in words: kube-rs prints the plugin's whole `Output { status: ..., stderr: [bytes] }`, which hides the one line
/// that matters (an expired SSO session, most often) and the fix.
fn exec_plugin_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let Some(kube::client::AuthError::AuthExecRun { cmd, out }) = e.downcast_ref::<kube::client::AuthError>() else {
        return None;
    };
    let said = String::from_utf8_lossy(&out.stderr);
    let said = said.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("nothing on stderr");
    let program = cmd.split_whitespace().next().unwrap_or(cmd);
    let fix = match program.rsplit('/').next().unwrap_or(program) {
        "aws" => {
            let profile = cmd
                .split_whitespace()
                .skip_while(|a| *a != "--profile")
                .nth(1)
                .map(|p| format!(" --profile {p}"))
                .unwrap_or_default();
            format!("log in again: run `aws sso login{profile}` (or refresh the credentials `aws` uses), then retry")
        }
        "kubelogin" => "log in again: run `kubelogin` or `az login`, then retry".to_string(),
        "gke-gcloud-auth-plugin" | "gcloud" => "log in again: run `gcloud auth login`, then retry".to_string(),
        _ => format!("run `{cmd}` yourself to see why, log in again, then retry"),
    };
    let code = out.status.code().map_or_else(|| "a signal".to_string(), |c| c.to_string());
    Some(format!("the kubeconfig's credential plugin `{cmd}` failed (exit {code}): {said}; {fix}"))
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
mod exec_plugin_tests {
    #[test]
    fn a_failed_credential_plugin_is_named_with_its_last_words_and_the_login_to_run() {
        use std::os::unix::process::ExitStatusExt;
        let out = std::process::Output {
            status: std::process::ExitStatus::from_raw(255 << 8),
            stdout: Vec::new(),
            stderr: b"\nError when retrieving token from sso: Token has expired and refresh failed\n\n".to_vec(),
        };
        let cmd = "aws --region eu-west-1 eks get-token --cluster-name prod --profile gpu-admin".to_string();
        let e = kube::Error::Auth(kube::client::AuthError::AuthExecRun { cmd, out: Box::new(out) });
        assert_eq!(
            super::error_chain(&e),
            "the kubeconfig's credential plugin `aws --region eu-west-1 eks get-token --cluster-name prod --profile \
             gpu-admin` failed (exit 255): Error when retrieving token from sso: Token has expired and refresh failed; \
             log in again: run `aws sso login --profile gpu-admin` (or refresh the credentials `aws` uses), then retry"
        );
    }
}

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

/// The documents of a multi-document YAML file of deploy/.
#[cfg(test)]
pub(crate) fn deploy_documents(file: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(file))
        .unwrap_or_else(|e| panic!("deploy/{file}: {e}"));
    text.split("\n---\n").map(|d| crate::drill::parse::parse_document(d).unwrap().value).collect()
}

#[cfg(test)]
mod tests {
    use super::{NAMESPACED_PERMISSIONS, READ_PERMISSIONS, RUN_PERMISSIONS, deploy_documents, granted_by, used_by};

    fn assert_grants(file: &str, role: &serde_json::Value, table: super::Permissions) {
        let (granted, used) = (granted_by(role), used_by(table));
        let name = &role["metadata"]["name"];
        let missing: Vec<_> = used.difference(&granted).collect();
        let extra: Vec<_> = granted.difference(&used).collect();
        assert!(missing.is_empty(), "deploy/{file}'s {name} lacks {missing:?}");
        assert!(extra.is_empty(), "deploy/{file}'s {name} grants more than the tool uses: {extra:?}");
    }

    #[test]
    fn the_committed_roles_grant_exactly_what_the_code_uses_split_by_command() {
        let roles = deploy_documents("clusterrole.yaml");
        let names: Vec<&str> = roles.iter().map(|r| r["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["hybrid-drill-read", "hybrid-drill"]);
        assert_grants("clusterrole.yaml", &roles[0], READ_PERMISSIONS);
        assert_grants("clusterrole.yaml", &roles[1], RUN_PERMISSIONS);
        for (_, resource, verb) in granted_by(&roles[0]) {
            assert!(["get", "list", "watch"].contains(&verb.as_str()), "hybrid-drill-read may {verb} {resource}");
        }
        for (_, resource, verb) in granted_by(&roles[1]) {
            assert!(!["get", "list", "watch"].contains(&verb.as_str()), "a read ({verb} {resource}) in the run role");
        }
        let namespaced: Vec<serde_json::Value> =
            deploy_documents("roles.yaml").into_iter().filter(|d| d["kind"] == "Role").collect();
        assert_eq!(namespaced.len(), NAMESPACED_PERMISSIONS.len());
        for (role, (namespace, name, table)) in namespaced.iter().zip(NAMESPACED_PERMISSIONS) {
            assert_eq!(
                (&role["metadata"]["namespace"], &role["metadata"]["name"]),
                (&(*namespace).into(), &(*name).into())
            );
            assert_grants("roles.yaml", role, table);
        }
    }

    /// Every grant is bound to the ServiceAccount of the scheduled drill, and nothing else is.
    #[test]
    fn the_scheduled_drills_service_account_holds_every_role() {
        let bindings: Vec<serde_json::Value> = ["clusterrolebinding.yaml", "roles.yaml", "lock-role.yaml"]
            .iter()
            .flat_map(|f| deploy_documents(f))
            .filter(|d| d["kind"].as_str().unwrap().ends_with("Binding"))
            .collect();
        let bound: Vec<String> = bindings
            .iter()
            .map(|b| {
                format!(
                    "{}/{}",
                    b["metadata"]["namespace"].as_str().unwrap_or(""),
                    b["roleRef"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            bound,
            [
                "/hybrid-drill-read",
                "/hybrid-drill",
                "kube-system/hybrid-drill-read",
                "default/hybrid-drill-read",
                "inference/hybrid-drill-restart",
                "batch/hybrid-drill-restart",
                "kube-system/hybrid-drill-lock"
            ]
        );
        for binding in &bindings {
            let subjects = binding["subjects"].as_array().unwrap();
            assert_eq!(subjects.len(), 1, "{binding}");
            assert_eq!(
                (&subjects[0]["name"], &subjects[0]["namespace"]),
                (&"hybrid-drill".into(), &"hybrid-drill".into())
            );
        }
    }
}
