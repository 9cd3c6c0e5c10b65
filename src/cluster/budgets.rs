//! The PodDisruptionBudgets of the namespaces a drain evicts from, watched so that an eviction a budget blocked is
//! asked again the moment the budget's status allows a disruption, not when a timer next fires.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::scheduling::selector_matches;

/// One budget as its latest status says: how many disruptions it allows, at which version of the object, and the
/// pods it covers.
#[derive(Debug, Clone, PartialEq)]
struct Budget {
    allowed: i32,
    version: String,
    selector: Option<LabelSelector>,
}

/// The watched budgets by (namespace, name); a namespace is listed once its watch has listed it.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    budgets: BTreeMap<(String, String), Budget>,
    listed: BTreeSet<String>,
}

/// The versions of a namespace's budgets at one moment, to tell a later status from the one an eviction was refused
/// under.
pub type Versions = BTreeMap<String, String>;

impl Budgets {
    /// The version of every budget of `namespace` now.
    pub fn versions(&self, namespace: &str) -> Versions {
        self.budgets
            .iter()
            .filter(|((ns, _), _)| ns == namespace)
            .map(|((_, name), b)| (name.clone(), b.version.clone()))
            .collect()
    }

    /// Whether every one of `names` is watched: otherwise only the timer can retry.
    pub fn covers(&self, namespace: &str, names: &[String]) -> bool {
        self.listed.contains(namespace)
            && names.iter().all(|n| self.budgets.contains_key(&(namespace.to_string(), n.clone())))
    }

    /// Whether one of `names` allows a disruption in a status newer than `before` (the versions when the refused
    /// eviction was sent): the API server refused under a status at least that new, so an unchanged version that
    /// reads "allowed" is a watch that has not caught up yet, not a reason to ask again.
    pub fn allows_since(&self, namespace: &str, names: &[String], before: &Versions) -> bool {
        names.iter().any(|name| {
            self.budgets
                .get(&(namespace.to_string(), name.clone()))
                .is_some_and(|b| b.allowed > 0 && before.get(name) != Some(&b.version))
        })
    }

    /// The budgets of `namespace` whose selector matches a pod's `labels`, by name.
    pub fn covering(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<String> {
        self.budgets
            .iter()
            .filter(|((ns, _), b)| ns == namespace && b.selector.as_ref().is_some_and(|s| selector_matches(s, labels)))
            .map(|((_, name), _)| name.clone())
            .collect()
    }

    fn apply(&mut self, namespace: &str, pdb: &PodDisruptionBudget) {
        let allowed = pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed);
        let selector = pdb.spec.as_ref().and_then(|s| s.selector.clone());
        let budget = Budget { allowed, version: pdb.resource_version().unwrap_or_default(), selector };
        self.budgets.insert((namespace.to_string(), pdb.name_any()), budget);
    }
}

/// The running watches; dropping it stops them.
pub struct BudgetWatch {
    state: watch::Receiver<Budgets>,
    handles: Vec<JoinHandle<()>>,
}

impl BudgetWatch {
    /// Watches the budgets of each namespace (a drain's pods span few): a namespaced watch, so what it lists does not
    /// grow with the cluster.
    pub fn start(client: &Client, namespaces: impl IntoIterator<Item = String>) -> BudgetWatch {
        let (tx, state) = watch::channel(Budgets::default());
        let handles = namespaces
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|namespace| {
                let (api, tx) = (Api::<PodDisruptionBudget>::namespaced(client.clone(), &namespace), tx.clone());
                tokio::spawn(follow(api, namespace, tx))
            })
            .collect();
        BudgetWatch { state, handles }
    }

    /// Resolves once every one of `namespaces` is listed; never if the watches stop (callers bound it).
    pub async fn listed(&self, namespaces: &BTreeSet<String>) {
        let mut state = self.state.clone();
        if state.wait_for(|b| namespaces.is_subset(&b.listed)).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// The budgets as last seen.
    pub fn current(&self) -> Budgets {
        self.state.borrow().clone()
    }

    /// Resolves once one of `names` in `namespace` allows a disruption under a status newer than `before`; never if
    /// the watches stop (the caller's timer is the safety net).
    pub async fn allowed(&self, namespace: &str, names: &[String], before: &Versions) {
        let mut state = self.state.clone();
        if state.wait_for(|b| b.allows_since(namespace, names, before)).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for BudgetWatch {
    fn drop(&mut self) {
        for h in &self.handles {
            h.abort();
        }
    }
}

/// Keeps one namespace's budgets current; a broken watch is listed again with kube's backoff.
async fn follow(api: Api<PodDisruptionBudget>, namespace: String, tx: watch::Sender<Budgets>) {
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut listing = BTreeSet::new();
    while let Some(item) = stream.next().await {
        let Ok(event) = item else { continue };
        match event {
            watcher::Event::Init => listing.clear(),
            watcher::Event::InitApply(pdb) => {
                listing.insert(pdb.name_any());
                tx.send_modify(|b| b.apply(&namespace, &pdb));
            }
            watcher::Event::InitDone => tx.send_modify(|b| {
                // A relist after a gap: a budget not listed again was deleted meanwhile.
                b.budgets.retain(|(ns, name), _| ns != &namespace || listing.contains(name));
                b.listed.insert(namespace.clone());
            }),
            watcher::Event::Apply(pdb) => tx.send_modify(|b| b.apply(&namespace, &pdb)),
            watcher::Event::Delete(pdb) => tx.send_modify(|b| {
                b.budgets.remove(&(namespace.clone(), pdb.name_any()));
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pdb(name: &str, version: &str, allowed: i32) -> PodDisruptionBudget {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "inference", "resourceVersion": version},
            "spec": {"selector": {"matchLabels": {"app": name}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 4},
        }))
        .unwrap()
    }

    #[test]
    fn a_budget_allows_again_only_under_a_newer_status() {
        let names = ["llm-inference".to_string()];
        let mut budgets = Budgets::default();
        budgets.apply("inference", &pdb("llm-inference", "10", 1));
        budgets.listed.insert("inference".into());
        assert!(budgets.covers("inference", &names));
        assert!(!budgets.covers("inference", &["other".to_string()]));
        assert!(!budgets.covers("kube-system", &names));
        // Refused while the watch still showed an allowance: that status is stale, wait for a newer one.
        let before = budgets.versions("inference");
        assert!(!budgets.allows_since("inference", &names, &before));
        // The decrement by another pod's eviction: newer, but it allows nothing.
        budgets.apply("inference", &pdb("llm-inference", "11", 0));
        assert!(!budgets.allows_since("inference", &names, &before));
        // A replacement turned Ready: the disruption controller allows one more.
        budgets.apply("inference", &pdb("llm-inference", "12", 1));
        assert!(budgets.allows_since("inference", &names, &before));
        assert!(!budgets.allows_since("other-ns", &names, &before));
    }

    #[test]
    fn a_pod_is_covered_by_the_budgets_whose_selector_matches_it_in_its_namespace() {
        let mut budgets = Budgets::default();
        budgets.apply("inference", &pdb("llm-inference", "10", 1));
        budgets.apply("inference", &pdb("embeddings", "11", 1));
        budgets.apply("batch", &pdb("llm-inference", "12", 1));
        let labels = BTreeMap::from([("app".to_string(), "llm-inference".to_string())]);
        assert_eq!(budgets.covering("inference", &labels), ["llm-inference"]);
        assert!(budgets.covering("inference", &BTreeMap::new()).is_empty());
        assert!(budgets.covering("other", &labels).is_empty());
    }
}
