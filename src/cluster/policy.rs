//! The deny policies a link-cut drill creates: a Kubernetes `NetworkPolicy` around the on-prem pods
//! (`pod-network` fidelity), or a host firewall policy around the on-prem nodes themselves (`host` fidelity: Cilium's
//! `CiliumClusterwideNetworkPolicy` or Calico's `GlobalNetworkPolicy`). Built here as plain objects; created and
//! deleted only through the safety module's mutator.

use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::is_not_found;
use super::marks::RUN_ANNOTATION as RUN;
use super::selector::{self, LabelRequirement};
use crate::domain::Cni;

/// A kind of policy object the tool may create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

pub const NETWORK_POLICY: PolicyKind = PolicyKind {
    group: "networking.k8s.io",
    version: "v1",
    kind: "NetworkPolicy",
    plural: "networkpolicies",
    namespaced: true,
};
pub const CILIUM_CLUSTERWIDE: PolicyKind = PolicyKind {
    group: "cilium.io",
    version: "v2",
    kind: "CiliumClusterwideNetworkPolicy",
    plural: "ciliumclusterwidenetworkpolicies",
    namespaced: false,
};
/// Calico's policy through its API server (`projectcalico.org/v3`), the supported way to write it.
pub const CALICO_API: PolicyKind = PolicyKind {
    group: "projectcalico.org",
    version: "v3",
    kind: "GlobalNetworkPolicy",
    plural: "globalnetworkpolicies",
    namespaced: false,
};
/// Calico's backing CRD, for clusters without the Calico API server (calicoctl's Kubernetes datastore mode).
pub const CALICO_CRD: PolicyKind = PolicyKind {
    group: "crd.projectcalico.org",
    version: "v1",
    kind: "GlobalNetworkPolicy",
    plural: "globalnetworkpolicies",
    namespaced: false,
};

/// Every kind a run may have created, for recovery from the marks left in the cluster.
pub const ALL: [PolicyKind; 4] = [NETWORK_POLICY, CILIUM_CLUSTERWIDE, CALICO_API, CALICO_CRD];

impl PolicyKind {
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    pub fn resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.into(),
            version: self.version.into(),
            api_version: self.api_version(),
            kind: self.kind.into(),
            plural: self.plural.into(),
        }
    }

    /// The kind named by a journal entry, if this tool knows it.
    pub fn of(api_version: &str, kind: &str) -> Option<PolicyKind> {
        ALL.into_iter().find(|k| k.api_version() == api_version && k.kind == kind)
    }

    pub fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) if self.namespaced => Api::namespaced_with(client.clone(), ns, &self.resource()),
            _ => Api::all_with(client.clone(), &self.resource()),
        }
    }

    /// Whether the API server serves this kind (its CRD is installed); a 404 on the list says it does not.
    pub async fn served(&self, client: &Client) -> Result<bool, kube::Error> {
        match self.api(client, None).list(&ListParams::default().limit(1)).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// One policy object a run created, as the journal records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl std::fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "a host-level cut with `cni: cilium` needs Cilium's CiliumClusterwideNetworkPolicy CRD (cilium.io/v2), which context `{context}` does not serve; install Cilium with its host firewall (hostFirewall.enabled=true), choose `cni: calico`, or cut at `fidelity: pod-network`"
    )]
    NoCilium { context: String },
    #[error(
        "a host-level cut with `cni: calico` needs Calico's GlobalNetworkPolicy (projectcalico.org/v3 or crd.projectcalico.org/v1), which context `{context}` does not serve; install Calico, choose `cni: cilium`, or cut at `fidelity: pod-network`"
    )]
    NoCalico { context: String },
    #[error("cannot check for the {cni} policy CRDs: {message}")]
    Api { cni: String, message: String },
}

/// The host firewall kind a drill's `cni` resolves to in this cluster; an error names the missing CRD and the fix.
pub async fn host_firewall(client: &Client, context: &str, cni: Cni) -> Result<PolicyKind, PolicyError> {
    let candidates: &[PolicyKind] = match cni {
        Cni::Cilium => &[CILIUM_CLUSTERWIDE],
        Cni::Calico => &[CALICO_API, CALICO_CRD],
    };
    for kind in candidates {
        let served = kind
            .served(client)
            .await
            .map_err(|e| PolicyError::Api { cni: cni.to_string(), message: super::first_line(&e.to_string()) })?;
        if served {
            return Ok(*kind);
        }
    }
    Err(match cni {
        Cni::Cilium => PolicyError::NoCilium { context: context.into() },
        Cni::Calico => PolicyError::NoCalico { context: context.into() },
    })
}

/// The name of the policy a run creates: the run's label value, so it reads back to the run.
pub fn name(run_label: &str) -> String {
    format!("hybrid-drill-cut-{run_label}")
}

fn metadata(name: &str, namespace: Option<&str>, run_id: &str, run_label: &str, what: &str) -> Value {
    let mut meta = json!({
        "name": name,
        "labels": {RUN: run_label},
        "annotations": {
            RUN: run_id,
            "hybrid-drill.io/purpose": format!("link-cut drill: {what}; removed by the drill's restore, its abort, or `hybrid-drill recover`"),
        },
    });
    if let Some(ns) = namespace {
        meta["namespace"] = Value::from(ns);
    }
    meta
}

/// `pod-network`: isolates the pods labelled for the run (the workload's pods on the on-prem nodes) from everything
/// but each other and `allow_cidrs` (the on-prem side). NetworkPolicy selects pods, never nodes: the nodes stay Ready.
pub fn pod_network(namespace: &str, run_id: &str, run_label: &str, allow_cidrs: &[String]) -> (PolicyRef, Value) {
    let name = name(run_label);
    let run_pods = json!({"podSelector": {"matchLabels": {RUN: run_label}}});
    let mut peers = vec![run_pods.clone()];
    peers.extend(allow_cidrs.iter().map(|c| json!({"ipBlock": {"cidr": c}})));
    let object = json!({
        "apiVersion": NETWORK_POLICY.api_version(),
        "kind": NETWORK_POLICY.kind,
        "metadata": metadata(&name, Some(namespace), run_id, run_label, "isolates the on-prem pods of the workload"),
        "spec": {
            "podSelector": run_pods["podSelector"],
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": peers}],
            "egress": [{"to": peers}],
        },
    });
    let reference = PolicyRef {
        api_version: NETWORK_POLICY.api_version(),
        kind: NETWORK_POLICY.kind.into(),
        name,
        namespace: Some(namespace.into()),
    };
    (reference, object)
}

/// `host`: a host firewall policy on the on-prem nodes that denies everything in and out but the host itself and
/// `allow_cidrs`, so the kubelet loses the API server and the nodes go Unknown, as on a DX/VPN cut.
pub fn host(
    kind: PolicyKind,
    nodes: &[LabelRequirement],
    run_id: &str,
    run_label: &str,
    allow_cidrs: &[String],
) -> (PolicyRef, Value) {
    let name = name(run_label);
    let meta = metadata(&name, None, run_id, run_label, "cuts the on-prem nodes off the control plane and the VPC");
    let spec = if kind == CILIUM_CLUSTERWIDE {
        // With a rule in a direction, Cilium denies whatever no rule allows: only the node itself and the
        // allowed networks stay reachable.
        let mut ingress = vec![json!({"fromEntities": ["host"]})];
        let mut egress = vec![json!({"toEntities": ["host"]})];
        if !allow_cidrs.is_empty() {
            ingress.push(json!({"fromCIDR": allow_cidrs}));
            egress.push(json!({"toCIDR": allow_cidrs}));
        }
        json!({
            "description": "hybrid-drill link cut: the on-prem nodes lose the control plane and the VPC",
            "nodeSelector": selector::to_label_selector(nodes),
            "ingress": ingress,
            "egress": egress,
        })
    } else {
        let mut ingress = Vec::new();
        let mut egress = Vec::new();
        if !allow_cidrs.is_empty() {
            ingress.push(json!({"action": "Allow", "source": {"nets": allow_cidrs}}));
            egress.push(json!({"action": "Allow", "destination": {"nets": allow_cidrs}}));
        }
        ingress.push(json!({"action": "Deny"}));
        egress.push(json!({"action": "Deny"}));
        json!({
            // Lowest order first: ahead of the cluster's own policies. Calico's failsafe ports stay open.
            "order": 0,
            "selector": selector::to_calico(nodes),
            "types": ["Ingress", "Egress"],
            "applyOnForward": true,
            "ingress": ingress,
            "egress": egress,
        })
    };
    let object = json!({"apiVersion": kind.api_version(), "kind": kind.kind, "metadata": meta, "spec": spec});
    (PolicyRef { api_version: kind.api_version(), kind: kind.kind.into(), name, namespace: None }, object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_network_policy_selects_the_run_label_and_keeps_the_on_prem_side() {
        let (r, o) = pod_network("inference", "dx-20260101t000000z", "dx-20260101t000000z", &["10.0.0.0/8".into()]);
        assert_eq!(r.to_string(), "NetworkPolicy/inference/hybrid-drill-cut-dx-20260101t000000z");
        assert_eq!(o["metadata"]["labels"]["hybrid-drill.io/run-id"], "dx-20260101t000000z");
        assert_eq!(o["spec"]["podSelector"]["matchLabels"]["hybrid-drill.io/run-id"], "dx-20260101t000000z");
        assert_eq!(o["spec"]["egress"][0]["to"][1]["ipBlock"]["cidr"], "10.0.0.0/8");
        assert_eq!(o["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    }

    #[test]
    fn host_policies_select_the_on_prem_nodes() {
        let nodes = selector::parse("eks.amazonaws.com/compute-type=hybrid").unwrap();
        let (r, cilium) = host(CILIUM_CLUSTERWIDE, &nodes, "run", "run", &[]);
        assert_eq!((r.api_version.as_str(), r.namespace), ("cilium.io/v2", None));
        assert_eq!(cilium["spec"]["nodeSelector"]["matchLabels"]["eks.amazonaws.com/compute-type"], "hybrid");
        assert_eq!(cilium["spec"]["egress"], json!([{"toEntities": ["host"]}]));
        let (_, calico) = host(CALICO_CRD, &nodes, "run", "run", &["192.168.0.0/16".into()]);
        assert_eq!(calico["apiVersion"], "crd.projectcalico.org/v1");
        assert_eq!(calico["spec"]["selector"], "eks.amazonaws.com/compute-type == 'hybrid'");
        assert_eq!(calico["spec"]["egress"][1], json!({"action": "Deny"}));
        assert_eq!(PolicyKind::of("crd.projectcalico.org/v1", "GlobalNetworkPolicy"), Some(CALICO_CRD));
    }
}
