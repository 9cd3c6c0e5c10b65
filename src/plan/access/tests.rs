use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;

use super::*;

fn shipped(file: &str, edits: &[(&str, &str)]) -> Drill {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("drills").join(file);
    let mut source = std::fs::read_to_string(&path).unwrap();
    for (from, to) in edits {
        assert!(source.contains(from), "{file} has no `{from}`");
        source = source.replace(from, to);
    }
    crate::drill::from_source(&path, source).unwrap().drill
}

/// The lab's policy kinds: NetworkPolicy, Cilium's and Calico's backing CRD.
fn lab() -> Served {
    Served {
        policy_kinds: vec![policy::NETWORK_POLICY, policy::CILIUM_CLUSTERWIDE, policy::CALICO_CRD],
        calico_tiers: false,
    }
}

/// Calico 3.29 and later with its API server: policies filed under tiers.
fn tiered() -> Served {
    Served { policy_kinds: vec![policy::NETWORK_POLICY, policy::CALICO_API, policy::CALICO_CRD], calico_tiers: true }
}

/// Each need as `verb group/resource[name]@namespace`, for comparing.
fn shown(needs: &[Need]) -> Vec<String> {
    needs
        .iter()
        .map(|n| {
            let name = n.name.as_ref().map(|n| format!("[{n}]")).unwrap_or_default();
            let ns = n.namespace.as_ref().map(|n| format!("@{n}")).unwrap_or_default();
            format!("{} {}{name}{ns}", n.verb, n.resource_path())
        })
        .collect()
}

fn has(needs: &[String], wanted: &[&str]) {
    for w in wanted {
        assert!(needs.iter().any(|n| n == w), "missing `{w}` in {needs:#?}");
    }
}

fn lacks(needs: &[String], unwanted: &[&str]) {
    for u in unwanted {
        assert!(!needs.iter().any(|n| n == u), "unexpected `{u}` in {needs:#?}");
    }
}

#[test]
fn a_drain_needs_its_cordon_evictions_lock_and_the_restore_checks_reads() {
    let needs = shown(&needs(&shipped("drain.yaml", &[]), &lab()));
    has(
        &needs,
        &[
            "get namespaces[kube-system]",
            "create authentication.k8s.io/selfsubjectreviews",
            "create coordination.k8s.io/leases@kube-system",
            "update coordination.k8s.io/leases[hybrid-drill]@kube-system",
            "watch coordination.k8s.io/leases[hybrid-drill]@kube-system",
            "get configmaps[hybrid-drill-freeze]@kube-system",
            "patch nodes",
            "create pods/eviction",
            "watch policy/poddisruptionbudgets",
            "list apps/daemonsets",
            "patch apps/deployments[llm-inference]@inference",
            "list networking.k8s.io/networkpolicies",
            "list cilium.io/ciliumclusterwidenetworkpolicies",
            "list crd.projectcalico.org/globalnetworkpolicies",
            "watch events@inference",
        ],
    );
    lacks(&needs, &["create networking.k8s.io/networkpolicies@inference", "patch pods@inference"]);
    assert!(!needs.iter().any(|n| n.contains("tier")), "no tiers served, none needed: {needs:#?}");
    assert_eq!(needs.len(), needs.iter().collect::<std::collections::BTreeSet<_>>().len(), "each need once");
}

#[test]
fn on_calico_with_tiers_even_a_drain_needs_the_tier_to_list_policies_in_its_restore_check() {
    let needs = shown(&needs(&shipped("drain.yaml", &[]), &tiered()));
    has(
        &needs,
        &[
            "list projectcalico.org/globalnetworkpolicies",
            "get projectcalico.org/tiers[default]",
            "list projectcalico.org/tier.globalnetworkpolicies[default.*]",
        ],
    );
    lacks(
        &needs,
        &["list cilium.io/ciliumclusterwidenetworkpolicies", "create projectcalico.org/globalnetworkpolicies"],
    );
}

#[test]
fn a_calico_host_cut_needs_its_policy_and_tier_on_the_tiered_api_and_only_the_crd_without_it() {
    let calico = shipped("dx-cut.yaml", &[("cni: cilium", "cni: calico")]);
    let needs = shown(&needs(&calico, &tiered()));
    has(
        &needs,
        &[
            "create projectcalico.org/globalnetworkpolicies",
            "delete projectcalico.org/globalnetworkpolicies",
            "create projectcalico.org/tier.globalnetworkpolicies[default.*]",
            "delete projectcalico.org/tier.globalnetworkpolicies[default.*]",
            "list projectcalico.org/tier.globalnetworkpolicies[default.*]",
            "get projectcalico.org/tiers[default]",
            "list crd.projectcalico.org/hostendpoints",
            "get crd.projectcalico.org/kubecontrollersconfigurations[default]",
            "list discovery.k8s.io/endpointslices@default",
            "get endpoints[kubernetes]@default",
            "patch nodes",
        ],
    );
    lacks(&needs, &["get configmaps[cilium-config]@kube-system", "create crd.projectcalico.org/globalnetworkpolicies"]);

    let needs = shown(&super::needs(&calico, &lab()));
    has(
        &needs,
        &["create crd.projectcalico.org/globalnetworkpolicies", "delete crd.projectcalico.org/globalnetworkpolicies"],
    );
    assert!(!needs.iter().any(|n| n.contains("tier")), "the backing CRD has no tiers: {needs:#?}");
}

#[test]
fn a_cilium_host_cut_needs_its_policy_and_config_and_no_calico_write() {
    let needs = shown(&needs(&shipped("dx-cut.yaml", &[]), &lab()));
    has(
        &needs,
        &[
            "create cilium.io/ciliumclusterwidenetworkpolicies",
            "delete cilium.io/ciliumclusterwidenetworkpolicies",
            "get configmaps[cilium-config]@kube-system",
            "list crd.projectcalico.org/globalnetworkpolicies",
        ],
    );
    lacks(&needs, &["create crd.projectcalico.org/globalnetworkpolicies", "create pods/eviction"]);
}

#[test]
fn a_pod_network_cut_needs_network_policies_and_pod_labels_in_the_workload_namespace_only() {
    let needs = shown(&needs(&shipped("dx-cut-pod-network.yaml", &[]), &lab()));
    has(
        &needs,
        &[
            "patch pods@inference",
            "create networking.k8s.io/networkpolicies@inference",
            "delete networking.k8s.io/networkpolicies@inference",
            "list networking.k8s.io/networkpolicies",
        ],
    );
    lacks(&needs, &["patch nodes", "create pods/eviction", "create cilium.io/ciliumclusterwidenetworkpolicies"]);
}

#[test]
fn a_node_failure_needs_its_nodes_read_and_the_return_but_no_eviction_or_policy_write() {
    let needs = shown(&needs(&shipped("node-failure.yaml", &[]), &lab()));
    has(&needs, &["get nodes", "patch nodes", "patch apps/deployments[llm-inference]@inference", "list pods"]);
    lacks(&needs, &["create pods/eviction", "create networking.k8s.io/networkpolicies@inference"]);
}

#[test]
fn missing_rules_are_merged_into_the_rules_that_grant_them() {
    let tier = |verb| Missing {
        need: Need::new("projectcalico.org", CALICO_TIERED_POLICIES, verb, "w").named("default.*"),
        reason: String::new(),
    };
    let lock = Missing {
        need: Need::new("coordination.k8s.io", "leases", "create", "w").within("ops"),
        reason: String::new(),
    };
    let evict = Missing { need: Need::new("", "pods/eviction", "create", "w"), reason: String::new() };
    assert_eq!(
        rules(&[tier("list"), tier("create"), lock, evict, tier("list")]),
        "to the identity's role(s): ClusterRole: {apiGroups: [\"\"], resources: [pods/eviction], verbs: [create]}; \
ClusterRole: {apiGroups: [\"projectcalico.org\"], resources: [tier.globalnetworkpolicies], resourceNames: [\"default.*\"], \
verbs: [list, create]}; Role in namespace ops: {apiGroups: [\"coordination.k8s.io\"], resources: [leases], verbs: [create]}"
    );
}

/// An API server answering every SelfSubjectAccessReview, allowing all but the tier's pseudo-resource.
fn reviewer(asked: Arc<Mutex<Vec<serde_json::Value>>>) -> Client {
    let service = tower::service_fn(move |request: Request<Body>| {
        let asked = asked.clone();
        async move {
            assert_eq!(request.uri().path(), "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews");
            let body = request.into_body().collect_bytes().await.unwrap();
            let mut review: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let attributes = review["spec"]["resourceAttributes"].clone();
            asked.lock().unwrap().push(attributes.clone());
            let allowed = attributes["resource"] != CALICO_TIERED_POLICIES;
            review["status"] = serde_json::json!({"allowed": allowed, "reason": if allowed { "" } else { "no tier" }});
            Ok::<_, tower::BoxError>(Response::new(Body::from(serde_json::to_vec(&review).unwrap())))
        }
    });
    Client::new(service, "default")
}

#[tokio::test]
async fn each_need_is_one_review_and_the_denied_ones_come_back_missing() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let drill = shipped("dx-cut.yaml", &[("cni: cilium", "cni: calico")]);
    let needs = needs(&drill, &tiered());
    let missing = missing(&reviewer(asked.clone()), &needs).await.unwrap();
    assert_eq!(asked.lock().unwrap().len(), needs.len());
    let evict = asked.lock().unwrap().iter().find(|a| a["subresource"] == "eviction").cloned();
    assert!(evict.is_none(), "a cut evicts nothing");
    let shown: Vec<String> = missing.iter().map(|m| format!("{} {}", m.need.verb, m.need.resource)).collect();
    assert_eq!(
        shown,
        ["list tier.globalnetworkpolicies", "create tier.globalnetworkpolicies", "delete tier.globalnetworkpolicies",]
    );
    assert!(missing.iter().all(|m| m.reason == "no tier" && m.need.name.as_deref() == Some("default.*")));
    let error = AccessError::Missing { context: "prod".into(), missing };
    let text = error.to_string();
    assert!(text.starts_with("context `prod` lacks 3 permission(s) this drill needs"), "{text}");
    assert!(
        text.contains(
            "resources: [tier.globalnetworkpolicies], resourceNames: [\"default.*\"], verbs: [list, create, delete]"
        ),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);
}

#[test]
fn the_collaterals_restart_is_a_patch_of_that_owner_by_name_and_a_bare_pod_needs_none() {
    let needs: Vec<Need> =
        [("Deployment", "batch/embeddings"), ("StatefulSet", "batch/vector-index"), ("Pod", "batch/x")]
            .iter()
            .filter_map(|(kind, workload)| collateral_restart(kind, workload))
            .collect();
    assert_eq!(
        shown(&needs),
        ["patch apps/deployments[embeddings]@batch", "patch apps/statefulsets[vector-index]@batch"]
    );
    assert!(needs[0].to_string().contains("unless spec.collateral.leave lists it"), "{}", needs[0]);
}
