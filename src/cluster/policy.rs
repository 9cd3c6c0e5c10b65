//! The deny policies a link-cut drill creates: a Kubernetes `NetworkPolicy` around the on-prem pods
//! (`pod-network` fidelity), or a host firewall policy around the on-prem nodes themselves (`host` fidelity: Cilium's
//! `CiliumClusterwideNetworkPolicy` or Calico's `GlobalNetworkPolicy`). Built here as plain objects; created and
//! deleted only through the safety module's mutator. Before a host cut: whether the CNI's host firewall would enforce
//! it at all, and whether `allowCidrs` would leave the nodes talking to the API server.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{ConfigMap, Endpoints};
use k8s_openapi::api::discovery::v1::EndpointSlice;
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
    /// The API server's answer kept whole (a 403 is a missing grant, a timeout a retry); its first line is shown.
    #[error("cannot check for the {cni} policy CRDs: {}", super::first_line(&.error.to_string()))]
    Api { cni: String, error: kube::Error },
    #[error(
        "context `{context}` has no ConfigMap kube-system/cilium-config, so nothing says Cilium's host firewall is on and a host policy may cut nothing; install Cilium with hostFirewall.enabled=true, or cut at `fidelity: pod-network`"
    )]
    NoCiliumConfig { context: String },
    #[error(
        "Cilium's host firewall is off in context `{context}` (kube-system/cilium-config has enable-host-firewall: {value}): a host policy would be stored and cut nothing; enable it (helm upgrade ... --set hostFirewall.enabled=true, then restart the cilium agents), or cut at `fidelity: pod-network`"
    )]
    HostFirewallOff { context: String, value: String },
    #[error(
        "Calico applies host policies only to host endpoints, and {nodes} has none in context `{context}`: the cut would select nothing; enable automatic host endpoints (kubectl patch kubecontrollersconfiguration default --type merge -p '{{\"spec\":{{\"controllers\":{{\"node\":{{\"hostEndpoint\":{{\"autoCreate\":\"Enabled\"}}}}}}}}}}'), or create HostEndpoints for them"
    )]
    NoHostEndpoints { context: String, nodes: String },
    #[error(
        "allowCidrs entry `{cidr}` contains the API server's address {address}: the cut nodes would keep talking to the control plane and the drill would test nothing; remove the entry or narrow it to leave {address} out"
    )]
    ApiServerAllowed { cidr: String, address: IpAddr },
    #[error("cannot read {what} to check the host cut: {}", super::first_line(&.error.to_string()))]
    Read { what: String, error: kube::Error },
}

/// The host firewall kind a drill's `cni` resolves to in this cluster; an error names the missing CRD and the fix.
pub async fn host_firewall(client: &Client, context: &str, cni: Cni) -> Result<PolicyKind, PolicyError> {
    let candidates: &[PolicyKind] = match cni {
        Cni::Cilium => &[CILIUM_CLUSTERWIDE],
        Cni::Calico => &[CALICO_API, CALICO_CRD],
    };
    for kind in candidates {
        let served = kind.served(client).await.map_err(|error| PolicyError::Api { cni: cni.to_string(), error })?;
        if served {
            return Ok(*kind);
        }
    }
    Err(match cni {
        Cni::Cilium => PolicyError::NoCilium { context: context.into() },
        Cni::Calico => PolicyError::NoCalico { context: context.into() },
    })
}

/// Cilium's agent configuration, whose `enable-host-firewall` key (Helm's `hostFirewall.enabled`) turns host policies on.
pub const CILIUM_CONFIG: (&str, &str) = ("kube-system", "cilium-config");
const CILIUM_HOST_FIREWALL_KEY: &str = "enable-host-firewall";
/// Calico's backing CRDs, there whether or not its API server is: host endpoints and kube-controllers' settings.
const CALICO_HOST_ENDPOINTS: PolicyKind = PolicyKind {
    group: "crd.projectcalico.org",
    version: "v1",
    kind: "HostEndpoint",
    plural: "hostendpoints",
    namespaced: false,
};
const CALICO_KUBE_CONTROLLERS: PolicyKind = PolicyKind {
    group: "crd.projectcalico.org",
    version: "v1",
    kind: "KubeControllersConfiguration",
    plural: "kubecontrollersconfigurations",
    namespaced: false,
};

/// Refuses a host cut the cluster would not enforce, or that `allow_cidrs` would leave talking to the API server
/// (`server` is the kubeconfig's URL). Reads only.
pub async fn check_host_cut(
    client: &Client,
    context: &str,
    server: &str,
    cni: Cni,
    nodes: &[String],
    allow_cidrs: &[String],
) -> Result<(), PolicyError> {
    match cni {
        Cni::Cilium => {
            let (namespace, name) = CILIUM_CONFIG;
            let config = Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| read_error("kube-system/cilium-config", e))?;
            cilium_host_firewall(context, config.as_ref())?;
        }
        Cni::Calico => {
            let endpoints = list_or_none(client, CALICO_HOST_ENDPOINTS).await?;
            let settings = CALICO_KUBE_CONTROLLERS.api(client, None).get_opt("default").await.or_else(|e| {
                if is_not_found(&e) { Ok(None) } else { Err(read_error("kubecontrollersconfigurations", e)) }
            })?;
            calico_host_endpoints(context, nodes, &endpoints, settings.as_ref())?;
        }
    }
    api_server_outside(allow_cidrs, &api_server_addresses(client, server).await?)
}

fn read_error(what: &str, error: kube::Error) -> PolicyError {
    PolicyError::Read { what: what.into(), error }
}

async fn list_or_none(client: &Client, kind: PolicyKind) -> Result<Vec<DynamicObject>, PolicyError> {
    match kind.api(client, None).list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(e) if is_not_found(&e) => Ok(Vec::new()),
        Err(e) => Err(read_error(kind.plural, e)),
    }
}

/// Where the API server answers: the `kubernetes` Service's endpoints (EndpointSlices and the older Endpoints) and
/// the kubeconfig's server, when it is an address rather than a name.
async fn api_server_addresses(client: &Client, server: &str) -> Result<Vec<IpAddr>, PolicyError> {
    let mut addresses = Vec::new();
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("kubernetes.io/service-name=kubernetes"))
        .await
        .map_err(|e| read_error("the kubernetes Service's EndpointSlices", e))?;
    for slice in &slices.items {
        addresses.extend(slice.endpoints.iter().flat_map(|e| &e.addresses).filter_map(|a| a.parse::<IpAddr>().ok()));
    }
    let endpoints = Api::<Endpoints>::namespaced(client.clone(), "default")
        .get_opt("kubernetes")
        .await
        .map_err(|e| read_error("the kubernetes Service's Endpoints", e))?;
    let subsets = endpoints.iter().flat_map(|e| e.subsets.iter().flatten());
    addresses.extend(subsets.flat_map(|s| s.addresses.iter().flatten()).filter_map(|a| a.ip.parse::<IpAddr>().ok()));
    addresses.extend(server_address(server));
    addresses.sort();
    addresses.dedup();
    Ok(addresses)
}

/// The kubeconfig server's host, when it is an IP address (`https://10.0.0.1:443`, `https://[fd00::1]`).
fn server_address(server: &str) -> Option<IpAddr> {
    let uri: http::Uri = server.parse().ok()?;
    uri.host()?.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// Cilium enforces host policies only with `enable-host-firewall: "true"` in its agent configuration.
pub fn cilium_host_firewall(context: &str, config: Option<&ConfigMap>) -> Result<(), PolicyError> {
    let config = config.ok_or_else(|| PolicyError::NoCiliumConfig { context: context.into() })?;
    let value = config.data.as_ref().and_then(|d| d.get(CILIUM_HOST_FIREWALL_KEY));
    match value.map(String::as_str) {
        Some("true") => Ok(()),
        other => Err(PolicyError::HostFirewallOff {
            context: context.into(),
            value: other.map_or("unset".into(), |v| format!("\"{v}\"")),
        }),
    }
}

/// Calico enforces host policies on host endpoints: automatic ones (kube-controllers' `autoCreate: Enabled`), or a
/// HostEndpoint whose `spec.node` is the node.
pub fn calico_host_endpoints(
    context: &str,
    nodes: &[String],
    endpoints: &[DynamicObject],
    kube_controllers: Option<&DynamicObject>,
) -> Result<(), PolicyError> {
    let automatic = kube_controllers
        .and_then(|c| c.data.pointer("/spec/controllers/node/hostEndpoint/autoCreate"))
        .is_some_and(|v| v == "Enabled");
    if automatic {
        return Ok(());
    }
    let covered = |node: &String| endpoints.iter().any(|e| e.data.pointer("/spec/node").is_some_and(|n| n == node));
    let missing: Vec<&str> = nodes.iter().filter(|n| !covered(n)).map(String::as_str).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(PolicyError::NoHostEndpoints { context: context.into(), nodes: missing.join(", ") })
}

/// No `allowCidrs` entry may contain an address the API server answers on.
pub fn api_server_outside(allow_cidrs: &[String], api_server: &[IpAddr]) -> Result<(), PolicyError> {
    for cidr in allow_cidrs {
        if let Some(address) = api_server.iter().find(|a| cidr_contains(cidr, **a)) {
            return Err(PolicyError::ApiServerAllowed { cidr: cidr.clone(), address: *address });
        }
    }
    Ok(())
}

/// Whether `address` is in the CIDR (validated earlier); an entry of the other IP family contains nothing.
fn cidr_contains(cidr: &str, address: IpAddr) -> bool {
    let Some((network, bits)) = cidr.split_once('/') else { return false };
    let (Ok(network), Ok(bits)) = (network.parse::<IpAddr>(), bits.parse::<u32>()) else { return false };
    let (network, address, width) = match (network, address) {
        (IpAddr::V4(n), IpAddr::V4(a)) => (u128::from(u32::from(n)), u128::from(u32::from(a)), 32),
        (IpAddr::V6(n), IpAddr::V6(a)) => (u128::from(n), u128::from(a), 128),
        _ => return false,
    };
    let bits = bits.min(width);
    let shift = width - bits;
    shift >= 128 || (network >> shift) == (address >> shift)
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

    fn obj<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        serde_json::from_value(crate::drill::parse::parse_document(yaml).unwrap().value).unwrap()
    }

    fn config(yaml: &str) -> ConfigMap {
        obj(yaml)
    }

    #[test]
    fn cilium_must_have_its_host_firewall_on() {
        assert!(cilium_host_firewall("lab", Some(&config("data: {enable-host-firewall: 'true'}"))).is_ok());
        let off = cilium_host_firewall("lab", Some(&config("data: {enable-host-firewall: 'false'}"))).unwrap_err();
        assert!(off.to_string().contains(r#"has enable-host-firewall: "false""#), "{off}");
        let unset = cilium_host_firewall("lab", Some(&config("data: {debug: 'false'}"))).unwrap_err();
        assert!(unset.to_string().contains("enable-host-firewall: unset"), "{unset}");
        assert!(matches!(cilium_host_firewall("lab", None), Err(PolicyError::NoCiliumConfig { .. })));
    }

    fn object(yaml: &str) -> DynamicObject {
        obj(yaml)
    }

    #[test]
    fn calico_needs_a_host_endpoint_per_node_or_automatic_ones() {
        let nodes = ["h1".to_string(), "h2".to_string()];
        let h1 = object(
            "{apiVersion: crd.projectcalico.org/v1, kind: HostEndpoint, metadata: {name: h1-eth0}, spec: {node: h1}}",
        );
        let err = calico_host_endpoints("lab", &nodes, std::slice::from_ref(&h1), None).unwrap_err();
        assert!(err.to_string().contains("and h2 has none in context `lab`"), "{err}");
        let auto = object(
            "{apiVersion: crd.projectcalico.org/v1, kind: KubeControllersConfiguration, metadata: {name: default}, spec: {controllers: {node: {hostEndpoint: {autoCreate: Enabled}}}}}",
        );
        assert!(calico_host_endpoints("lab", &nodes, &[], Some(&auto)).is_ok());
        let h2 = object(
            "{apiVersion: crd.projectcalico.org/v1, kind: HostEndpoint, metadata: {name: h2-eth0}, spec: {node: h2}}",
        );
        assert!(calico_host_endpoints("lab", &nodes, &[h1, h2], None).is_ok());
    }

    #[test]
    fn an_allowed_api_server_is_refused() {
        let servers: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap(), "fd00::10".parse().unwrap()];
        assert!(api_server_outside(&["10.0.0.0/8".into(), "fd01::/16".into()], &servers).is_ok());
        let err = api_server_outside(&["10.0.0.0/8".into(), "127.0.0.0/8".into()], &servers).unwrap_err();
        assert!(
            err.to_string().starts_with("allowCidrs entry `127.0.0.0/8` contains the API server's address 127.0.0.1")
        );
        assert!(api_server_outside(&["0.0.0.0/0".into()], &servers).is_err());
        assert!(api_server_outside(&["fd00::/64".into()], &servers).is_err());
        assert!(api_server_outside(&["127.0.0.1/32".into()], &servers).is_err());
        assert!(api_server_outside(&["127.0.0.2/32".into()], &servers).is_ok());
        assert_eq!(server_address("https://127.0.0.1:26443"), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(server_address("https://[fd00::10]:443"), Some("fd00::10".parse().unwrap()));
        assert_eq!(server_address("https://ABC.gr7.us-east-1.eks.amazonaws.com"), None);
    }
}
