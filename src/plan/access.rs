//! The permissions a drill needs, derived from its steps, and checked before anything is touched: one
//! SelfSubjectAccessReview per verb and resource, for every read and change the run, its restore and the restore's
//! check will make. A grant found missing half-way would fail a step or, worse, the restore's check: a Calico API
//! server with policy tiers (3.29 and later) answers a GlobalNetworkPolicy LIST 403 to an identity without the tier's
//! permissions, and every cut would end "restore incomplete". So the drill is refused naming each missing rule.

use std::collections::BTreeMap;
use std::fmt;

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::cluster::policy::{self, PolicyKind};
use crate::cluster::{first_line, is_not_found};
use crate::domain::Cni;
use crate::drill::{Action, Check, CutEnforcement, Drill, WorkloadKind};

/// Calico's API server (3.29 and later) files every GlobalNetworkPolicy under a tier, and authorizes it against the
/// pseudo-resource `tier.globalnetworkpolicies` named `<tier>.<policy>` (`<tier>.*`: any in it), besides `get` on the
/// tier itself. A cut's policy names no tier, so it goes into `default`.
pub const CALICO_TIERS: &str = "tiers";
pub const CALICO_TIERED_POLICIES: &str = "tier.globalnetworkpolicies";
pub const CALICO_DEFAULT_TIER: &str = "default";

/// One permission: a verb on a resource, where and on what name, and why the drill needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub verb: &'static str,
    /// None: a cluster-scoped resource, or every namespace.
    pub namespace: Option<String>,
    /// None: any object (a rule without `resourceNames`).
    pub name: Option<String>,
    pub why: &'static str,
}

impl Need {
    fn new(group: &str, resource: &str, verb: &'static str, why: &'static str) -> Need {
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r.to_string(), Some(s.to_string())),
            None => (resource.to_string(), None),
        };
        Need { group: group.into(), resource, subresource, verb, namespace: None, name: None, why }
    }

    fn within(mut self, namespace: &str) -> Need {
        self.namespace = Some(namespace.into());
        self
    }

    fn named(mut self, name: &str) -> Need {
        self.name = Some(name.into());
        self
    }

    /// `pods/eviction`, `projectcalico.org/tier.globalnetworkpolicies`, as RBAC writes them.
    fn resource_path(&self) -> String {
        let resource = match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        };
        if self.group.is_empty() { resource } else { format!("{}/{resource}", self.group) }
    }

    fn attributes(&self) -> ResourceAttributes {
        ResourceAttributes {
            group: Some(self.group.clone()),
            resource: Some(self.resource.clone()),
            subresource: self.subresource.clone(),
            verb: Some(self.verb.into()),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            ..Default::default()
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.resource_path())?;
        if let Some(name) = &self.name {
            write!(f, " `{name}`")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}")?,
            None => write!(f, " cluster-wide")?,
        }
        write!(f, " ({})", self.why)
    }
}

/// What the cluster serves that changes what a drill needs: which policy kinds exist (the restore's check lists each
/// one served) and whether Calico's API server files its policies under tiers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Served {
    pub policy_kinds: Vec<PolicyKind>,
    pub calico_tiers: bool,
}

impl Served {
    /// The kind a host cut with this CNI creates here, as `policy::host_firewall` resolves it.
    fn host_kind(&self, cni: Cni) -> Option<PolicyKind> {
        let candidates: &[PolicyKind] = match cni {
            Cni::Cilium => &[policy::CILIUM_CLUSTERWIDE],
            Cni::Calico => &[policy::CALICO_API, policy::CALICO_CRD],
        };
        candidates.iter().copied().find(|k| self.policy_kinds.contains(k))
    }
}

/// Reads what the API server serves (discovery, which every authenticated identity may read).
pub async fn served(client: &Client) -> Result<Served, kube::Error> {
    let mut served = Served::default();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for kind in policy::ALL {
        let version = kind.api_version();
        if !groups.contains_key(&version) {
            let resources = match client.list_api_group_resources(&version).await {
                Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
                Err(e) if is_not_found(&e) => Vec::new(),
                Err(e) => return Err(e),
            };
            groups.insert(version.clone(), resources);
        }
        if groups[&version].iter().any(|r| r == kind.plural) {
            served.policy_kinds.push(kind);
        }
    }
    let calico = policy::CALICO_API.api_version();
    served.calico_tiers = groups.get(&calico).is_some_and(|r| r.iter().any(|r| r == CALICO_TIERS));
    Ok(served)
}

/// Every permission `run` needs for this drill in a cluster serving `served`: the plan's reads, the lock, the watches,
/// each step's reads and changes (and so their undo, which reverses them with the same verbs), and the restore's
/// check. Deduplicated, in the order first needed.
pub fn needs(drill: &Drill, served: &Served) -> Vec<Need> {
    let mut out = Vec::new();
    set_up(drill, &mut out);
    for step in &drill.spec.steps {
        step_needs(drill, &step.action, served, &mut out);
    }
    if drill.spec.steps.iter().any(|s| changes(&s.action)) {
        restore_check(served, &mut out);
    }
    let mut unique: Vec<Need> = Vec::new();
    for need in out {
        let same = |n: &Need| {
            (&n.group, &n.resource, &n.subresource, n.verb, &n.namespace, &n.name)
                == (&need.group, &need.resource, &need.subresource, need.verb, &need.namespace, &need.name)
        };
        if !unique.iter().any(same) {
            unique.push(need);
        }
    }
    unique
}

/// Whether the action changes the cluster: its run ends with the restore's check.
fn changes(action: &Action) -> bool {
    matches!(
        action,
        Action::Drain(_)
            | Action::Cut(_)
            | Action::NodeFailure(_)
            | Action::GpuFault(_)
            | Action::Cordon(_)
            | Action::Uncordon(_)
    ) || matches!(action, Action::Return(r) if r.restart.is_some() || r.uncordon)
}

/// The plan, the cluster's identity, the drill lock and the run's watches.
fn set_up(drill: &Drill, out: &mut Vec<Need>) {
    let ns = drill.spec.targets.workload.namespace.as_str();
    let lock = &drill.spec.lock;
    out.extend([
        Need::new("", "namespaces", "get", "the cluster's identity").named("kube-system"),
        Need::new("authentication.k8s.io", "selfsubjectreviews", "create", "the report's initiator"),
        Need::new("karpenter.sh", "nodepools", "list", "the plan reads the fallback NodePools"),
        Need::new("karpenter.sh", "nodepools", "watch", "the run watches the fallback NodePools"),
        Need::new("karpenter.sh", "nodeclaims", "list", "the run watches the fallback's NodeClaims"),
        Need::new("karpenter.sh", "nodeclaims", "watch", "the run watches the fallback's NodeClaims"),
        Need::new("", "nodes", "list", "the plan reads the on-prem nodes; the run watches them"),
        Need::new("", "nodes", "watch", "the run watches the on-prem and fallback nodes"),
        Need::new("", "pods", "list", "the plan reads the pods on the on-prem nodes"),
        Need::new("", "pods", "watch", "the run watches the workload's pods").within(ns),
        Need::new("", "events", "list", "the timeline records the workload's events").within(ns),
        Need::new("", "events", "watch", "the timeline records the workload's events").within(ns),
        Need::new("", "events", "list", "the timeline records the NodeClaims' events").within("default"),
        Need::new("", "events", "watch", "the timeline records the NodeClaims' events").within("default"),
        Need::new("policy", "poddisruptionbudgets", "list", "the plan shows the budgets"),
        Need::new("coordination.k8s.io", "leases", "create", "the drill lock").within(&lock.namespace),
        Need::new("coordination.k8s.io", "leases", "get", "the drill lock").within(&lock.namespace).named(&lock.name),
        Need::new("coordination.k8s.io", "leases", "update", "the drill lock")
            .within(&lock.namespace)
            .named(&lock.name),
        Need::new("coordination.k8s.io", "leases", "list", "the emergency stop (the drill lock's annotation)")
            .within(&lock.namespace)
            .named(&lock.name),
        Need::new("coordination.k8s.io", "leases", "watch", "the emergency stop (the drill lock's annotation)")
            .within(&lock.namespace)
            .named(&lock.name),
    ]);
    if drill.spec.gates.cluster_freeze {
        let marker = crate::cluster::lease::FREEZE_MARKER;
        out.push(
            Need::new("", "configmaps", "get", "the start gate cluster-freeze").within(&lock.namespace).named(marker),
        );
    }
}

/// What one step reads and changes; its undo reverses a change with the same verb on the same objects.
fn step_needs(drill: &Drill, action: &Action, served: &Served, out: &mut Vec<Need>) {
    let ns = drill.spec.targets.workload.namespace.as_str();
    match action {
        Action::Check(Check::Preflight, _) => out.extend([
            Need::new("apps", "daemonsets", "list", "preflight judges the device plugin's DaemonSets"),
            Need::new("apps", "replicasets", "get", "preflight reads the workload's controller").within(ns),
            Need::new("apps", "deployments", "get", "preflight reads the workload's pod template").within(ns),
            Need::new("apps", "statefulsets", "get", "preflight reads the workload's pod template").within(ns),
        ]),
        Action::Check(Check::SteadyState, _) | Action::WaitFor(_) | Action::Exec(_) | Action::Pause(_) => {}
        Action::Drain(_) => out.extend([
            Need::new("", "nodes", "get", "the drain reads each node before its cordon"),
            Need::new("", "nodes", "patch", "the drain cordons the nodes; its undo uncordons them"),
            Need::new("", "pods/eviction", "create", "the drain evicts the pods on the nodes"),
            Need::new("", "pods", "get", "the drain names the budget that blocks an eviction"),
            Need::new("", "pods", "watch", "the drain waits for each evicted pod to go"),
            Need::new("policy", "poddisruptionbudgets", "watch", "the drain asks again when a budget allows it"),
        ]),
        Action::Cordon(_) | Action::Uncordon(_) => out.extend([
            Need::new("", "nodes", "get", "a cordon reads each node first"),
            Need::new("", "nodes", "patch", "cordon and uncordon"),
        ]),
        Action::Return(r) => {
            if r.uncordon {
                out.push(Need::new("", "nodes", "patch", "the return uncordons the nodes"));
            }
            if let Some(target) = &r.restart {
                let resource = match target.kind {
                    WorkloadKind::Deployment => "deployments",
                    WorkloadKind::StatefulSet => "statefulsets",
                };
                let why = "the return restarts the workload";
                out.push(Need::new("apps", resource, "get", why).within(ns).named(&target.name));
                out.push(Need::new("apps", resource, "patch", why).within(ns).named(&target.name));
            }
        }
        Action::NodeFailure(_) | Action::GpuFault(_) => {
            out.push(Need::new("", "nodes", "get", "the hooks' placeholders read each node"))
        }
        // `instanceTypes: all` lists the NodePools, as the run's set-up already may.
        Action::Capacity(_) => {}
        Action::LoseFallbackNode => {
            out.push(Need::new("karpenter.sh", "nodeclaims", "delete", "the step deletes one fallback NodeClaim"))
        }
        Action::Restore(_) => {}
        Action::Cut(cut) => match cut.enforcement {
            CutEnforcement::PodNetwork => {
                let why = "the cut labels the on-prem pods and isolates them; its undo removes both";
                out.push(Need::new("", "pods", "patch", why).within(ns));
                for verb in ["create", "delete"] {
                    out.push(Need::new("networking.k8s.io", "networkpolicies", verb, why).within(ns));
                }
            }
            CutEnforcement::Host(cni) => host_cut(cni, served, out),
        },
    }
}

/// A host cut: the checks before it, the nodes' label, and its policy of the kind the CNI resolves to.
fn host_cut(cni: Cni, served: &Served, out: &mut Vec<Need>) {
    let checks = "the plan checks the cut leaves the API server out";
    out.extend([
        Need::new("discovery.k8s.io", "endpointslices", "list", checks).within("default"),
        Need::new("", "endpoints", "get", checks).within("default").named("kubernetes"),
        Need::new("", "nodes", "get", "the cut reads each node before its label"),
        Need::new("", "nodes", "patch", "the cut labels the nodes; its undo removes the label"),
    ]);
    match cni {
        Cni::Cilium => {
            let why = "the plan checks Cilium's host firewall is on";
            out.push(Need::new("", "configmaps", "get", why).within("kube-system").named("cilium-config"));
        }
        Cni::Calico => out.extend([
            Need::new("crd.projectcalico.org", "hostendpoints", "list", "the plan checks the nodes' host endpoints"),
            Need::new("crd.projectcalico.org", "kubecontrollersconfigurations", "get", "the same").named("default"),
        ]),
    }
    let Some(kind) = served.host_kind(cni) else { return };
    let why = "the cut creates its policy; its undo deletes it";
    for verb in ["list", "create", "delete"] {
        policy_need(
            kind,
            verb,
            if verb == "list" { "the plan checks the policy kind is served" } else { why },
            served,
            out,
        );
    }
}

/// A verb on a policy kind; on Calico's tiered API, the tier's permissions with it.
fn policy_need(kind: PolicyKind, verb: &'static str, why: &'static str, served: &Served, out: &mut Vec<Need>) {
    out.push(Need::new(kind.group, kind.plural, verb, why));
    if kind == policy::CALICO_API && served.calico_tiers {
        let any_in_tier = format!("{CALICO_DEFAULT_TIER}.*");
        out.push(
            Need::new(kind.group, CALICO_TIERS, "get", "Calico authorizes a policy through its tier")
                .named(CALICO_DEFAULT_TIER),
        );
        out.push(Need::new(kind.group, CALICO_TIERED_POLICIES, verb, why).named(&any_in_tier));
    }
}

/// The restore's check: the run's policies of every kind served, and its labelled pods, listed cluster-wide.
fn restore_check(served: &Served, out: &mut Vec<Need>) {
    let why = "the restore's check lists the run's policies";
    for kind in &served.policy_kinds {
        policy_need(*kind, "list", why, served, out);
    }
    out.push(Need::new("", "pods", "list", "the restore's check lists the run's labelled pods"));
    out.push(Need::new("", "nodes", "get", "the restore's check reads the nodes back"));
}

/// A permission the identity lacks, with what the API server said.
#[derive(Debug, Clone)]
pub struct Missing {
    pub need: Need,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(
        "context `{context}` lacks {} permission(s) this drill needs, refused before anything is touched: {}; grant them, {}",
        .missing.len(),
        .missing.iter().map(|m| m.need.to_string()).collect::<Vec<_>>().join("; "),
        rules(.missing)
    )]
    Missing { context: String, missing: Vec<Missing> },
    /// The review itself could not be asked: its answer kept whole.
    #[error("cannot check this drill's permissions: {}", first_line(&.error.to_string()))]
    Review { error: kube::Error },
}

/// Where a rule applies (its namespace, or cluster-wide), and its API group, resource and name.
type RuleKey = (Option<String>, String, String, Option<String>);

/// The RBAC rules that grant what is missing, merged by resource and scope, as flow YAML on one line.
pub fn rules(missing: &[Missing]) -> String {
    let mut merged: BTreeMap<RuleKey, Vec<&str>> = BTreeMap::new();
    for m in missing {
        let n = &m.need;
        let resource = match &n.subresource {
            Some(sub) => format!("{}/{sub}", n.resource),
            None => n.resource.clone(),
        };
        let verbs = merged.entry((n.namespace.clone(), n.group.clone(), resource, n.name.clone())).or_default();
        if !verbs.contains(&n.verb) {
            verbs.push(n.verb);
        }
    }
    let each: Vec<String> = merged
        .iter()
        .map(|((namespace, group, resource, name), verbs)| {
            let names = name.as_ref().map(|n| format!(", resourceNames: [\"{n}\"]")).unwrap_or_default();
            let role = namespace.as_ref().map_or("ClusterRole".to_string(), |ns| format!("Role in namespace {ns}"));
            format!(
                "{role}: {{apiGroups: [\"{group}\"], resources: [{resource}]{names}, verbs: [{}]}}",
                verbs.join(", ")
            )
        })
        .collect();
    format!("to the identity's role(s): {}", each.join("; "))
}

/// Asks the API server, one SelfSubjectAccessReview per need, which of them this identity lacks. A review is a
/// question the API server answers and stores nothing, so it is no change to the cluster and not journalled.
pub async fn missing(client: &Client, needs: &[Need]) -> Result<Vec<Missing>, kube::Error> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let asks = needs.iter().map(|need| {
        let api = api.clone();
        async move {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(need.attributes()),
                    ..Default::default()
                },
                ..Default::default()
            };
            let answer = api.create(&PostParams::default(), &review).await?;
            let status = answer.status.unwrap_or_default();
            let reason = status.reason.or(status.evaluation_error).unwrap_or_default();
            Ok::<_, kube::Error>((!status.allowed).then(|| Missing { need: need.clone(), reason }))
        }
    });
    // A few at a time: tens of small questions, answered in milliseconds each.
    let answers: Vec<_> = futures::stream::iter(asks).buffered(8).collect().await;
    answers.into_iter().filter_map(Result::transpose).collect()
}

/// Who asks: a run needs every permission; `plan` only reads, so a read-only identity (deploy/'s
/// `hybrid-drill-read`) may plan any drill, and is refused only for a read it lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Run,
    Plan,
}

impl Scope {
    fn covers(self, need: &Need) -> bool {
        // The drill lock is the run's alone: a plan neither reads nor takes it.
        self == Scope::Run || (matches!(need.verb, "get" | "list" | "watch") && need.resource != "leases")
    }
}

/// The return's restart of a displaced workload other than the drilled one (`kind` and `namespace/name` as the blast
/// radius names its owner); `None` for an owner with no rollout restart (a bare Pod).
pub fn collateral_restart(kind: &str, workload: &str) -> Option<Need> {
    let resource = match kind {
        "Deployment" => "deployments",
        "StatefulSet" => "statefulsets",
        _ => return None,
    };
    let (namespace, name) = workload.split_once('/')?;
    let why = "the return restarts a displaced workload left on capacity the drill created, unless spec.collateral.leave \
               lists it";
    Some(Need::new("apps", resource, "patch", why).within(namespace).named(name))
}

/// Refuses the drill, before anything is touched, when the identity lacks any permission the scope will use.
pub async fn check(client: &Client, context: &str, drill: &Drill, scope: Scope) -> Result<(), AccessError> {
    let served = served(client).await.map_err(|error| AccessError::Review { error })?;
    let needs: Vec<Need> = needs(drill, &served).into_iter().filter(|need| scope.covers(need)).collect();
    check_needs(client, context, &needs).await
}

/// Refuses the drill when the identity lacks any of `needs` (those [`needs`] derives, or those only the cluster's
/// state shows, as the collateral's restarts).
pub async fn check_needs(client: &Client, context: &str, needs: &[Need]) -> Result<(), AccessError> {
    let missing = missing(client, needs).await.map_err(|error| AccessError::Review { error })?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(AccessError::Missing { context: context.into(), missing })
}

#[cfg(test)]
mod tests;
