//! A validated drill resolved read-only against a cluster: the nodes, pods and budgets it would touch, and the
//! set-up problems that must stop it before anything is touched, a permission the run would lack among them.

pub mod access;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::cluster::autoscaler::{self, WorkloadScale};
use crate::cluster::collateral::{self, BlastGroup};
use crate::cluster::drain_selection::{self, DrainFlags, DrainPod, DrainSelection, displaced};
use crate::cluster::karpenter::{GPU_RESOURCE, NodePool};
use crate::cluster::marks::CUT_LABEL;
use crate::cluster::policy;
use crate::cluster::quantity::as_integer;
use crate::cluster::scheduling::NodeShape;
use crate::cluster::tolerations::{self, TaintTolerance, tolerance};
use crate::cluster::{Cluster, first_line, is_not_found};
use crate::drill::{Action, CutAction, CutEnforcement, Drill, ReturnAction, WorkloadKind};

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(
        "Karpenter's NodePool CRD (karpenter.sh/v1) is not installed in context `{context}`; install Karpenter's CRDs, or check the drill targets the right cluster"
    )]
    NoKarpenter { context: String },
    #[error(
        "NodePool `{name}` not found (existing: {existing}); fix spec.targets.fallback (nodePool or nodePools) or list them with `kubectl get nodepools`"
    )]
    NoNodePool { name: String, existing: String },
    #[error("on-prem selector `{selector}` matches no node; check it with `kubectl get nodes -l '{selector}'`")]
    NoNodes { selector: String },
    #[error(
        "on-prem selector `{selector}` matches {count} nodes, above guards.maxNodes ({max}); narrow the selector or raise the guard"
    )]
    TooManyNodes { selector: String, count: usize, max: u32 },
    #[error(
        "no pod in namespace `{namespace}` matches `{selector}`; check it with `kubectl get pods -n {namespace} -l '{selector}'`"
    )]
    NoWorkload { namespace: String, selector: String },
    #[error("{kind} `{name}` named by step `{step}` not found in namespace `{namespace}`")]
    NoRestartTarget { step: String, kind: String, name: String, namespace: String },
    /// The API server's answer, or the request that got none, kept whole: a caller can tell a refusal (403, 404)
    /// from a timeout. The message shows its first line only.
    #[error("cannot read {what}: {}", first_line(&.error.to_string()))]
    Api { what: String, error: kube::Error },
    #[error(transparent)]
    HostFirewall(#[from] crate::cluster::policy::PolicyError),
    /// kubectl drain would refuse: a bare pod without `force`, emptyDir data without `deleteEmptyDirData`.
    #[error("{0}")]
    DrainRefused(String),
    #[error("hook `{program}` of step `{step}` is not an executable file{hint}")]
    NoHook { step: String, program: String, hint: String },
    #[error(transparent)]
    Access(#[from] access::AccessError),
}

/// Pods (or their template) annotated `hybrid-drill.io/single-writer: "true"` declare that two copies must never
/// run at once: a cut or an unreachable node may leave the old copy running while the fallback starts another.
pub const SINGLE_WRITER_ANNOTATION: &str = "hybrid-drill.io/single-writer";

#[derive(Debug, Clone)]
pub struct PodTarget {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub gpus: i64,
    /// What evicting it costs beyond a restart (lost, emptyDir data deleted), when its flag allows it.
    pub loss: Option<String>,
}

impl PodTarget {
    fn of(p: &DrainPod) -> PodTarget {
        PodTarget {
            namespace: p.pod.namespace().unwrap_or_default(),
            name: p.pod.name_any(),
            node: p.node.clone(),
            gpus: p.gpus(),
            loss: (!p.loss.is_none()).then(|| p.loss.to_string()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct BudgetState {
    pub namespace: String,
    pub name: String,
    pub disruptions_allowed: i32,
}

/// What a drill would touch, resolved before it touches anything.
#[derive(Debug, Clone)]
pub struct Plan {
    pub on_prem_nodes: Vec<String>,
    pub cordoned_already: Vec<String>,
    pub pods_to_evict: Vec<PodTarget>,
    /// Pods on the drained nodes left alone because their namespace is protected.
    pub pods_protected: Vec<PodTarget>,
    /// For any fault: the GPU pods it would move to the fallback, the workload's and every other's.
    pub displaced_gpu_pods: Vec<PodTarget>,
    /// For any fault: every workload it displaces, by owner, and the NodePools each may land on.
    pub blast_radius: Vec<BlastGroup>,
    pub max_fallback_gpus: Option<u64>,
    pub budgets: Vec<BudgetState>,
    pub workload_pods: usize,
    pub node_pool: String,
    pub pool_gpu_limit: Option<i64>,
    pub drains: bool,
    /// For a cut or a node failure: how long the workload tolerates a lost node's taints (the eviction delay).
    pub tolerations: Vec<TaintTolerance>,
    /// For a cut or a node failure: why two copies of the workload running at once would hurt.
    pub split_brain: Vec<String>,
    /// The workload's controller and the autoscaler setting its replicas, if any.
    pub scale: WorkloadScale,
}

fn api_error(what: &str, e: kube::Error) -> PlanError {
    PlanError::Api { what: what.into(), error: e }
}

/// Resolves the drill against the cluster for a run, read-only, refusing with the fix whatever would make it fail
/// part-way.
pub async fn resolve(cluster: &Cluster, drill: &Drill) -> Result<Plan, PlanError> {
    resolve_for(cluster, drill, access::Scope::Run).await
}

/// [`resolve`], for a run or for `plan` alone (which needs only the run's reads).
pub async fn resolve_for(cluster: &Cluster, drill: &Drill, scope: access::Scope) -> Result<Plan, PlanError> {
    // First: a grant the run lacks is named with its rule, rather than found by the read or change it refuses.
    access::check(&cluster.client, &cluster.context, drill, scope).await?;
    let targets = &drill.spec.targets;
    let (pool_gpu_limit, pool_shapes, all_pools) = fallback_pools(cluster, drill).await?;
    let (on_prem_nodes, cordoned_already) = on_prem_nodes(cluster, drill).await?;
    let pods = workload_pods(cluster, drill).await?;
    check_restart_targets(cluster, drill).await?;
    let (tolerations, split_brain) = if check_faults(cluster, drill, &on_prem_nodes).await? {
        (
            vec![tolerance(&pods, tolerations::UNREACHABLE), tolerance(&pods, tolerations::NOT_READY)],
            single_writer(&pods),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let drain = drill.spec.steps.iter().find_map(|s| match &s.action {
        Action::Drain(d) => Some((s.id.as_str(), d.flags, d.chosen(&on_prem_nodes))),
        _ => None,
    });
    let drains = drain.is_some();
    // A partial drain evicts from the nodes it takes only.
    let drained_nodes = drain.as_ref().map_or_else(|| on_prem_nodes.clone(), |(_, _, nodes)| nodes.clone());
    let pods_by_node = pods_by_node(cluster, &drained_nodes).await?;
    let protected = &drill.spec.guards.protected_namespaces;
    let (pods_to_evict, pods_protected) = match drain {
        Some((step, flags, _)) => {
            let missing = drain_selection::missing_daemonsets(&cluster.client, pods_by_node.values().flatten())
                .await
                .map_err(|e| api_error("the DaemonSets of the on-prem nodes' pods", e))?;
            drain_targets(&pods_by_node, protected, step, flags, missing)?
        }
        None => (Vec::new(), Vec::new()),
    };
    let displaced_gpu_pods = if drill.spec.steps.iter().any(|s| s.action.is_fault()) {
        // A pod no fallback pool's nodes may take (batch work asking for Spot only, with an on-demand fallback)
        // does not move to the fallback.
        let can_land = |p: &DrainPod| {
            p.pod.spec.as_ref().is_none_or(|spec| pool_shapes.iter().any(|f| f.may_be_selected_by(spec)))
        };
        displaced(&pods_by_node, protected).iter().filter(|p| p.gpus() > 0 && can_land(p)).map(PodTarget::of).collect()
    } else {
        Vec::new()
    };
    let blast_radius = if drill.spec.steps.iter().any(|s| s.action.is_fault()) {
        let pods: Vec<Pod> = displaced(&pods_by_node, protected).into_iter().map(|p| p.pod).collect();
        collateral::blast_radius(&pods, &all_pools)
    } else {
        Vec::new()
    };
    if scope == access::Scope::Run {
        check_collateral_restarts(cluster, drill, &pods, &blast_radius).await?;
    }
    let budgets = budgets_of(cluster, &pods_to_evict).await?;
    let scale = autoscaler::read(&cluster.client, &targets.workload.namespace, &pods)
        .await
        .map_err(|e| api_error("the workload's controller and autoscalers", e))?;
    Ok(Plan {
        on_prem_nodes,
        cordoned_already,
        pods_to_evict,
        pods_protected,
        displaced_gpu_pods,
        blast_radius,
        max_fallback_gpus: drill.spec.guards.max_fallback_gpus,
        budgets,
        workload_pods: pods.len(),
        node_pool: targets.fallback.node_pools.join(", "),
        pool_gpu_limit,
        drains,
        tolerations,
        split_brain,
        scale,
    })
}

/// Every fallback NodePool must exist (and Karpenter's CRDs with them); their GPU limits added up, if each has one
/// (a pool without a limit takes whatever the others leave), and the nodes each would create.
async fn fallback_pools(
    cluster: &Cluster,
    drill: &Drill,
) -> Result<(Option<i64>, Vec<NodeShape>, Vec<NodePool>), PlanError> {
    let pools: Api<NodePool> = Api::all(cluster.client.clone());
    let pool_list = match pools.list(&ListParams::default()).await {
        Ok(l) => l,
        Err(e) if is_not_found(&e) => {
            return Err(PlanError::NoKarpenter { context: cluster.context.clone() });
        }
        Err(e) => return Err(api_error("NodePools", e)),
    };
    let mut limit = Some(0);
    let mut shapes = Vec::new();
    for wanted in &drill.spec.targets.fallback.node_pools {
        let pool = pool_list.items.iter().find(|p| &p.name_any() == wanted).ok_or_else(|| {
            let names: Vec<String> = pool_list.items.iter().map(|p| p.name_any()).collect();
            PlanError::NoNodePool {
                name: wanted.clone(),
                existing: if names.is_empty() { "none".into() } else { names.join(", ") },
            }
        })?;
        let own = pool.spec.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE)).and_then(as_integer);
        limit = limit.zip(own).map(|(a, b)| a + b);
        shapes.push(NodeShape::of_pool(pool));
    }
    Ok((limit, shapes, pool_list.items))
}

/// The on-prem nodes the selector matches (at least one, at most `guards.maxNodes`), and those already cordoned.
async fn on_prem_nodes(cluster: &Cluster, drill: &Drill) -> Result<(Vec<String>, Vec<String>), PlanError> {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let selector = drill.spec.targets.on_prem.nodes.to_string();
    let node_list = nodes.list(&ListParams::default().labels(&selector)).await.map_err(|e| api_error("nodes", e))?;
    if node_list.items.is_empty() {
        return Err(PlanError::NoNodes { selector });
    }
    let max = drill.spec.guards.max_nodes;
    if node_list.items.len() > max as usize {
        return Err(PlanError::TooManyNodes { selector, count: node_list.items.len(), max });
    }
    let names = node_list.items.iter().map(|n| n.name_any()).collect();
    let cordoned = node_list
        .items
        .iter()
        .filter(|n| n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false))
        .map(|n| n.name_any())
        .collect();
    Ok((names, cordoned))
}

/// The workload's pods; a selector that matches none refuses the drill.
async fn workload_pods(cluster: &Cluster, drill: &Drill) -> Result<Vec<Pod>, PlanError> {
    let workload = &drill.spec.targets.workload;
    let api: Api<Pod> = Api::namespaced(cluster.client.clone(), &workload.namespace);
    let pods = api
        .list(&ListParams::default().labels(workload.selector.as_str()))
        .await
        .map_err(|e| api_error("workload pods", e))?
        .items;
    if pods.is_empty() {
        return Err(PlanError::NoWorkload {
            namespace: workload.namespace.clone(),
            selector: workload.selector.to_string(),
        });
    }
    Ok(pods)
}

/// Every `return.restart` target must exist, or the return would fail with the workload on the cloud.
async fn check_restart_targets(cluster: &Cluster, drill: &Drill) -> Result<(), PlanError> {
    let ns = &drill.spec.targets.workload.namespace;
    for step in &drill.spec.steps {
        let Action::Return(ReturnAction { restart: Some(target), .. }) = &step.action else { continue };
        let name = &target.name;
        let client = cluster.client.clone();
        let found = match target.kind {
            WorkloadKind::StatefulSet => {
                Api::<StatefulSet>::namespaced(client, ns).get_opt(name).await.map(|o| o.is_some())
            }
            WorkloadKind::Deployment => {
                Api::<Deployment>::namespaced(client, ns).get_opt(name).await.map(|o| o.is_some())
            }
        }
        .map_err(|e| api_error(&target.to_string(), e))?;
        if !found {
            return Err(PlanError::NoRestartTarget {
                step: step.id.clone(),
                kind: target.kind.to_string(),
                name: name.clone(),
                namespace: ns.clone(),
            });
        }
    }
    Ok(())
}

/// The return restarts each other displaced workload it finds on capacity the drill created: a grant missing for one
/// would fail the return half-way, after the fault. Those whose pods may land on some NodePool are asked about now;
/// the refusal names the rule, and `spec.collateral.leave` is the other way out.
async fn check_collateral_restarts(
    cluster: &Cluster,
    drill: &Drill,
    drilled: &[Pod],
    blast_radius: &[BlastGroup],
) -> Result<(), PlanError> {
    if !drill.spec.steps.iter().any(|s| matches!(s.action, Action::Return(_))) {
        return Ok(());
    }
    let drilled: BTreeSet<String> = collateral::blast_radius(drilled, &[]).into_iter().map(|g| g.workload).collect();
    let needs: Vec<access::Need> = blast_radius
        .iter()
        .filter(|g| !g.lands.is_empty() && !drilled.contains(&g.workload))
        .filter(|g| !drill.spec.collateral_leave.contains(&g.workload))
        .filter_map(|g| access::collateral_restart(&g.kind, &g.workload))
        .collect();
    Ok(access::check_needs(&cluster.client, &cluster.context, &needs).await?)
}

/// A host cut needs its CNI's policy CRD, its host firewall on, `allowCidrs` clear of the API server and its
/// last-resort hook's program; a node failure its hooks' programs. `true` when the drill may leave the on-prem nodes
/// unreachable (a cut or a node failure).
async fn check_faults(cluster: &Cluster, drill: &Drill, nodes: &[String]) -> Result<bool, PlanError> {
    let mut unreachable = false;
    for step in &drill.spec.steps {
        match &step.action {
            Action::Cut(cut) => {
                unreachable = true;
                if let CutEnforcement::Host(cni) = cut.enforcement {
                    let (client, context) = (&cluster.client, &cluster.context);
                    policy::host_firewall(client, context, cni).await?;
                    policy::check_host_cut(client, context, &cluster.server, cni, nodes, &cut.allow_cidrs).await?;
                    if let Some(hook) = &cut.last_resort {
                        check_hook(&step.id, &hook.command)?;
                    }
                }
            }
            Action::NodeFailure(failure) => {
                unreachable = true;
                for hook in [&failure.fail, &failure.recover] {
                    check_hook(&step.id, hook)?;
                }
            }
            Action::GpuFault(fault) => {
                for hook in [&fault.hooks.fail, &fault.hooks.recover] {
                    check_hook(&step.id, hook)?;
                }
            }
            Action::Capacity(capacity) => {
                for hook in [&capacity.remove, &capacity.give_back] {
                    check_hook(&step.id, hook)?;
                }
            }
            _ => {}
        }
    }
    Ok(unreachable)
}

/// The pods bound to each on-prem node, read once for the drain's selection and the GPU count.
async fn pods_by_node(cluster: &Cluster, nodes: &[String]) -> Result<BTreeMap<String, Vec<Pod>>, PlanError> {
    let all_pods: Api<Pod> = Api::all(cluster.client.clone());
    let mut by_node = BTreeMap::new();
    for node in nodes {
        let list = all_pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .map_err(|e| api_error(&format!("pods on {node}"), e))?;
        by_node.insert(node.clone(), list.items);
    }
    Ok(by_node)
}

/// The pods a drain of these nodes would evict, and those it leaves because their namespace is protected; refuses
/// as kubectl drain would (a bare pod without `force`, emptyDir data without `deleteEmptyDirData`).
fn drain_targets(
    pods_by_node: &BTreeMap<String, Vec<Pod>>,
    protected: &[String],
    step: &str,
    flags: DrainFlags,
    missing_daemonsets: BTreeSet<String>,
) -> Result<(Vec<PodTarget>, Vec<PodTarget>), PlanError> {
    let mut selection = DrainSelection::knowing(missing_daemonsets);
    for (node, pods) in pods_by_node {
        selection.add_node(node, pods.clone(), protected, flags);
    }
    if let Some(why) = selection.refusal(step, flags) {
        return Err(PlanError::DrainRefused(why));
    }
    Ok((selection.evict.iter().map(PodTarget::of).collect(), selection.protected.iter().map(PodTarget::of).collect()))
}

/// The PodDisruptionBudgets of the namespaces a drain would evict from, with the disruptions each allows now.
async fn budgets_of(cluster: &Cluster, pods: &[PodTarget]) -> Result<Vec<BudgetState>, PlanError> {
    let namespaces: BTreeSet<&str> = pods.iter().map(|p| p.namespace.as_str()).collect();
    let mut budgets = Vec::new();
    for ns in namespaces {
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(cluster.client.clone(), ns);
        let list = pdbs.list(&ListParams::default()).await.map_err(|e| api_error("PodDisruptionBudgets", e))?;
        budgets.extend(list.items.iter().map(|p| BudgetState {
            namespace: ns.to_string(),
            name: p.name_any(),
            disruptions_allowed: p.status.as_ref().map(|s| s.disruptions_allowed).unwrap_or(0),
        }));
    }
    Ok(budgets)
}

/// A hook's program must be there before anything is touched: a path that exists, or a name on the PATH.
fn check_hook(step: &str, hook: &[String]) -> Result<(), PlanError> {
    let Some(program) = hook.first() else { return Ok(()) };
    let executable = |p: &std::path::Path| p.is_file();
    let found = if program.contains('/') {
        executable(std::path::Path::new(program))
    } else {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(program))))
    };
    if found {
        return Ok(());
    }
    let hint = if program.contains('/') && !program.starts_with('/') {
        format!(
            " (relative to {}; run from the directory it is relative to)",
            std::env::current_dir().unwrap_or_default().display()
        )
    } else {
        String::new()
    };
    Err(PlanError::NoHook { step: step.into(), program: program.clone(), hint })
}

fn host_cuts(drill: &Drill) -> impl Iterator<Item = (&str, &CutAction)> {
    drill.spec.steps.iter().filter_map(|s| match &s.action {
        Action::Cut(cut @ CutAction { enforcement: CutEnforcement::Host(_), .. }) => Some((s.id.as_str(), cut)),
        _ => None,
    })
}

/// How a host cut pins, proves and undoes itself, as the plan shows it.
fn host_cut_line(step: &str, cut: &CutAction) -> String {
    let last_resort = cut.last_resort.as_ref().map_or("none: a node not back needs its console".into(), |h| {
        format!("`{}` for a node not Ready {} after", h.command.join(" "), humantime::format_duration(h.after))
    });
    format!(
        "  host cut `{step}`: labels the nodes {CUT_LABEL}=<run id> and selects that label alone; fails \"cut had no \
effect\" if no node is NotReady within {}; last resort: {last_resort}\n",
        humantime::format_duration(cut.effect_within)
    )
}

/// Every cut of the drill, for the lines saying what each blocks and what it does not.
fn cuts(drill: &Drill) -> impl Iterator<Item = (&str, &CutAction)> {
    drill.spec.steps.iter().filter_map(|s| match &s.action {
        Action::Cut(cut) => Some((s.id.as_str(), cut)),
        _ => None,
    })
}

/// What a cut's policy blocks, for which endpoints, and what it leaves, as the plan shows it.
fn cut_reach_lines(step: &str, cut: &CutAction) -> String {
    let e = cut.enforcement;
    format!("  cut `{step}` ({}) blocks: {}\n    does not block: {}\n", e.policy_type(), e.blocks(), e.leaves())
}

/// Why the workload must not run twice: StatefulSet pods, or pods that declare themselves single-writer.
fn single_writer(pods: &[Pod]) -> Vec<String> {
    let mut reasons = BTreeSet::new();
    for pod in pods {
        if let Some(owner) = pod.owner_references().iter().find(|o| o.kind == "StatefulSet") {
            reasons.insert(format!("its pods belong to StatefulSet {}", owner.name));
        }
        if pod.annotations().get(SINGLE_WRITER_ANNOTATION).is_some_and(|v| v == "true") {
            reasons.insert(format!("its pods are annotated {SINGLE_WRITER_ANNOTATION}: \"true\""));
        }
    }
    reasons.into_iter().collect()
}

impl Plan {
    /// What a lost on-prem node costs before its pods are evicted, from the workload's own tolerations.
    pub fn eviction_delay(&self) -> Option<String> {
        if self.tolerations.is_empty() {
            return None;
        }
        let each: Vec<String> = self.tolerations.iter().map(|t| format!("    {}\n", t.describe())).collect();
        Some(format!(
            "expected eviction delay once an on-prem node stops answering: the node-monitor grace period \
(kube-controller-manager, 40-50 s by default; the API does not show it), then the workload's tolerationSeconds:\n{}",
            each.concat()
        ))
    }

    /// The loud warning for a workload that must not run twice, when the drill may leave its old copies running.
    pub fn split_brain_warning(&self) -> Option<String> {
        (!self.split_brain.is_empty()).then(|| {
            format!(
                "SPLIT BRAIN RISK: the workload must not run twice ({}), but while the on-prem nodes are unreachable \
their pods may keep running next to the fallback's replacements; fence it (leases, locks) before running this drill",
                self.split_brain.join("; ")
            )
        })
    }

    /// The GPUs of every pod the fault moves to the fallback (not only the workload's), as `gpus x pods`.
    pub fn displaced_gpus(&self) -> (i64, String) {
        let gpus = self.displaced_gpu_pods.iter().map(|p| p.gpus).sum();
        let pods: Vec<String> =
            self.displaced_gpu_pods.iter().map(|p| format!("{}/{} x {}", p.namespace, p.name, p.gpus)).collect();
        (gpus, pods.join(", "))
    }

    /// The warning for a fault that moves more GPUs than `guards.maxFallbackGpus`: its guard will abort the drill.
    pub fn gpu_ceiling_warning(&self) -> Option<String> {
        let (gpus, pods) = self.displaced_gpus();
        let max = self.max_fallback_gpus?;
        (gpus > max as i64).then(|| {
            format!(
                "the fault moves {gpus} GPUs to the fallback ({pods}), above guards.maxFallbackGpus ({max}): its guard \
will abort the drill once the fallback holds them; raise the ceiling or move those pods first"
            )
        })
    }

    /// Every workload the fault displaces, by owner, with where each can land; empty when it displaces none.
    fn blast_radius_lines(&self) -> String {
        if self.blast_radius.is_empty() {
            return String::new();
        }
        let mut out = String::from("  workloads the fault displaces, and where each can land:\n");
        for group in &self.blast_radius {
            out.push_str(&format!("    {group}\n"));
        }
        out
    }

    /// The blast radius, in the order the drill would act.
    pub fn describe(&self, drill: &Drill) -> String {
        let mut out = String::new();
        out.push_str(&format!("drill `{}` would touch:\n", drill.metadata.name));
        out.push_str(&format!("  nodes ({}): {}\n", self.on_prem_nodes.len(), self.on_prem_nodes.join(", ")));
        if !self.cordoned_already.is_empty() {
            out.push_str(&format!("  already cordoned, left as they are: {}\n", self.cordoned_already.join(", ")));
        }
        if self.drains {
            out.push_str(&format!("  pods to evict ({}):\n", self.pods_to_evict.len()));
            for p in &self.pods_to_evict {
                let loss = p.loss.as_ref().map(|l| format!(" ({l})")).unwrap_or_default();
                out.push_str(&format!("    {}/{} on {}{loss}\n", p.namespace, p.name, p.node));
            }
        }
        for p in &self.pods_protected {
            out.push_str(&format!("  left alone (protected namespace): {}/{} on {}\n", p.namespace, p.name, p.node));
        }
        for b in &self.budgets {
            out.push_str(&format!(
                "  PodDisruptionBudget {}/{}: {} disruptions allowed now\n",
                b.namespace, b.name, b.disruptions_allowed
            ));
        }
        if let Some(a) = &self.scale.autoscaler {
            out.push_str(&format!(
                "  autoscaled by {}, desired {} now: restored is judged against the desired replicas at the fault\n",
                a.describe(),
                self.scale.desired().map_or("unknown".into(), |d| d.to_string())
            ));
        }
        out.push_str(&format!(
            "  fallback NodePool: {} (GPU limit {})\n",
            self.node_pool,
            self.pool_gpu_limit.map_or("none".into(), |l| l.to_string())
        ));
        if !self.displaced_gpu_pods.is_empty() {
            let (gpus, pods) = self.displaced_gpus();
            let over = match self.pool_gpu_limit {
                Some(limit) if gpus > limit => format!(", above the NodePool's limit of {limit}: some stay Pending"),
                _ => String::new(),
            };
            out.push_str(&format!("  GPUs moving to the fallback: {gpus} ({pods}){over}\n"));
        }
        out.push_str(&self.blast_radius_lines());
        if let Some(warning) = self.gpu_ceiling_warning() {
            out.push_str(&format!("  WARNING: {warning}\n"));
        }
        for silence in &drill.spec.silences {
            let matchers: Vec<String> = silence.matchers.iter().map(ToString::to_string).collect();
            out.push_str(&format!(
                "  silence in {} from the fault to the end: {{{}}}\n",
                silence.alertmanager,
                matchers.join(", ")
            ));
        }
        if !drill.spec.notify.is_empty() {
            let hooks: Vec<String> = drill.spec.notify.iter().map(|h| h.shown()).collect();
            out.push_str(&format!("  webhooks told: {}\n", hooks.join(", ")));
        }
        if let Some(delay) = self.eviction_delay() {
            out.push_str(&format!("  {delay}"));
        }
        if let Some(warning) = self.split_brain_warning() {
            out.push_str(&format!("  {warning}\n"));
        }
        for (step, cut) in host_cuts(drill) {
            out.push_str(&host_cut_line(step, cut));
        }
        for (step, cut) in cuts(drill) {
            out.push_str(&cut_reach_lines(step, cut));
        }
        out.push_str("  steps, in order:\n");
        for s in &drill.spec.steps {
            let action = s.action.name();
            out.push_str(&format!("    {:<12} {action} (timeout {})\n", s.id, humantime::format_duration(s.timeout)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A pod on `node` in namespace `ns`, owned by `owner` (a kind) or by nothing, with extra annotations.
    fn pod(name: &str, ns: &str, node: &str, owner: Option<&str>, annotations: Value) -> Pod {
        let owners: Vec<Value> = owner
            .map(|kind| json!({"apiVersion": "apps/v1", "kind": kind, "name": "w", "uid": "u", "controller": true}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "ownerReferences": owners, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    fn on(node: &str, pods: Vec<Pod>) -> BTreeMap<String, Vec<Pod>> {
        BTreeMap::from([(node.to_string(), pods)])
    }

    #[test]
    fn a_statefulset_or_a_declared_single_writer_must_not_run_twice() {
        let deployment = pod("a", "n", "h1", Some("ReplicaSet"), json!({}));
        assert!(single_writer(std::slice::from_ref(&deployment)).is_empty());
        let stateful = pod("db-0", "n", "h1", Some("StatefulSet"), json!({}));
        let declared = pod("b", "n", "h1", Some("ReplicaSet"), json!({SINGLE_WRITER_ANNOTATION: "true"}));
        let not_declared = pod("c", "n", "h1", Some("ReplicaSet"), json!({SINGLE_WRITER_ANNOTATION: "false"}));
        assert_eq!(
            single_writer(&[deployment, stateful, declared, not_declared]),
            [
                "its pods are annotated hybrid-drill.io/single-writer: \"true\"".to_string(),
                "its pods belong to StatefulSet w".to_string(),
            ]
        );
    }

    #[test]
    fn a_drain_evicts_controlled_pods_leaves_protected_namespaces_and_refuses_a_bare_pod_without_force() {
        let pods = vec![
            pod("a", "n", "h1", Some("ReplicaSet"), json!({})),
            pod("agent", "kube-system", "h1", Some("ReplicaSet"), json!({})),
            pod("ds", "n", "h1", Some("DaemonSet"), json!({})),
        ];
        let (evict, protected) =
            drain_targets(&on("h1", pods), &["kube-system".into()], "d", DrainFlags::default(), Default::default())
                .unwrap();
        let names =
            |t: &[PodTarget]| t.iter().map(|p| format!("{}/{} {}", p.namespace, p.name, p.gpus)).collect::<Vec<_>>();
        assert_eq!(names(&evict), ["n/a 2"], "a DaemonSet's pod is never evicted");
        assert_eq!(names(&protected), ["kube-system/agent 2"]);

        let bare = on("h1", vec![pod("lonely", "n", "h1", None, json!({}))]);
        let refused = drain_targets(&bare, &[], "d", DrainFlags::default(), Default::default()).unwrap_err();
        assert!(matches!(&refused, PlanError::DrainRefused(why) if why.contains("lonely")), "{refused}");
        let force = DrainFlags { force: true, ..DrainFlags::default() };
        let (evict, _) = drain_targets(&bare, &[], "d", force, Default::default()).unwrap();
        assert!(evict[0].loss.is_some(), "evicted with force, the pod is lost and the plan says so");
    }

    #[test]
    fn a_hook_must_exist_before_anything_is_touched() {
        assert!(check_hook("f", &[]).is_ok(), "no hook, nothing to check");
        assert!(check_hook("f", &["sh".into(), "-c".into(), "true".into()]).is_ok(), "a program on the PATH");
        let missing = check_hook("f", &["./no-such-hook".into()]).unwrap_err();
        assert!(
            matches!(&missing, PlanError::NoHook { step, program, hint } if step == "f" && program == "./no-such-hook"
                && hint.contains("relative to")),
            "{missing}"
        );
    }

    #[test]
    fn the_plan_says_what_each_cut_blocks_and_what_it_does_not_per_policy_type() {
        let cut = |enforcement| CutAction {
            enforcement,
            allow_cidrs: Vec::new(),
            effect_within: std::time::Duration::from_secs(120),
            last_resort: None,
        };
        let cilium = cut_reach_lines("cut", &cut(CutEnforcement::Host(crate::domain::Cni::Cilium)));
        assert!(cilium.starts_with("  cut `cut` (Cilium host policy) blocks: the on-prem nodes' own traffic"));
        assert!(cilium.contains("\n    does not block: the pods' own traffic: a Cilium host policy"), "{cilium}");
        let calico = cut_reach_lines("cut", &cut(CutEnforcement::Host(crate::domain::Cni::Calico)));
        assert!(calico.contains("does not block: Calico's failsafe ports"), "{calico}");
        let pods = cut_reach_lines("cut", &cut(CutEnforcement::PodNetwork));
        assert!(pods.starts_with("  cut `cut` (Kubernetes NetworkPolicy) blocks: the traffic of the workload's pods"));
        assert!(pods.contains("does not block: the nodes' own traffic"), "{pods}");
    }
}
