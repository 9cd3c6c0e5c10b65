//! The cluster objects that set the critical path, read before a drill (read-only): the workload's
//! PodDisruptionBudget and replicas, its toleration of a lost node, the fallback NodePool's consolidateAfter.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::api::ListParams;
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::drill::Drill;

/// What the objects said; a field the cluster did not answer is absent, and the model says so.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Objects {
    /// The workload's budget, `namespace/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdb: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<String>,
    /// The budget's status: how many pods it lets go at once in the steady state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruptions_allowed: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// The longest `tolerationSeconds` of the pod template's NoExecute tolerations of a lost node (absent: the
    /// admission default of 300 s applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidate_after_seconds: Option<f64>,
}

impl Objects {
    /// The pods the budget lets go at once out of `pods`.
    pub fn wave_size(&self, pods: u32) -> Option<u32> {
        let resolve = |v: &str| -> Option<u32> {
            match v.strip_suffix('%') {
                Some(pct) => pct.parse::<f64>().ok().map(|p| (p / 100.0 * f64::from(pods)).ceil() as u32),
                None => v.parse().ok(),
            }
        };
        if let Some(max) = self.max_unavailable.as_deref().and_then(resolve) {
            return Some(max.max(1));
        }
        if let Some(min) = self.min_available.as_deref().and_then(resolve) {
            return Some(pods.saturating_sub(min).max(1));
        }
        self.disruptions_allowed.map(|d| d.max(1))
    }
}

fn int_or_string(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// Reads the objects; what cannot be read stays absent (a prediction is never worth failing a drill for).
pub async fn read(cluster: &Cluster, drill: &Drill) -> Objects {
    let workload = &drill.spec.targets.workload;
    let ns = workload.namespace.as_str();
    let selector = workload.selector.to_string();
    let mut objects = Objects::default();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(cluster.client.clone(), ns);
    if let Ok(list) = pdbs.list(&ListParams::default()).await {
        let labels = template_labels(cluster, ns, &selector).await;
        let covering = list.items.into_iter().find(|pdb| {
            let sel = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
            sel.and_then(|s| s.match_labels.as_ref())
                .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels.get(k) == Some(v)))
        });
        if let Some(pdb) = covering {
            objects.pdb = Some(format!("{ns}/{}", pdb.metadata.name.clone().unwrap_or_default()));
            let spec = pdb.spec.unwrap_or_default();
            objects.max_unavailable = spec.max_unavailable.as_ref().map(int_or_string);
            objects.min_available = spec.min_available.as_ref().map(int_or_string);
            objects.disruptions_allowed = pdb.status.map(|s| s.disruptions_allowed.max(0) as u32);
        }
    }
    if let Some(d) = deployment(cluster, ns, &selector).await {
        let spec = d.spec.unwrap_or_default();
        objects.replicas = spec.replicas.map(|r| r.max(0) as u32);
        objects.toleration_seconds = spec
            .template
            .spec
            .and_then(|s| s.tolerations)
            .unwrap_or_default()
            .iter()
            .filter(|t| t.effect.as_deref() == Some("NoExecute"))
            .filter(|t| t.key.as_deref().is_some_and(|k| k.starts_with("node.kubernetes.io/")))
            .filter_map(|t| t.toleration_seconds)
            .max()
            .map(|s| s.max(0) as u32);
    }
    objects.consolidate_after_seconds = consolidate_after(cluster, &drill.spec.targets.fallback.node_pool).await;
    objects
}

async fn deployment(cluster: &Cluster, ns: &str, selector: &str) -> Option<Deployment> {
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), ns);
    let list = api.list(&ListParams::default()).await.ok()?;
    let wanted = crate::cluster::selector::parse(selector).ok()?;
    list.items.into_iter().find(|d| {
        let labels = d.spec.as_ref().and_then(|s| s.template.metadata.as_ref()).and_then(|m| m.labels.clone());
        selects(&wanted, &labels.unwrap_or_default())
    })
}

async fn template_labels(cluster: &Cluster, ns: &str, selector: &str) -> std::collections::BTreeMap<String, String> {
    deployment(cluster, ns, selector).await.and_then(|d| d.spec?.template.metadata?.labels).unwrap_or_default()
}

/// Whether a selector's requirements hold for these labels.
fn selects(
    wanted: &[crate::cluster::selector::LabelRequirement],
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    use crate::cluster::selector::Operator;
    wanted.iter().all(|r| {
        let value = labels.get(&r.key);
        match r.operator {
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !r.values.contains(v)),
            _ => value.is_some_and(|v| r.values.contains(v)),
        }
    })
}

/// The NodePool's `spec.disruption.consolidateAfter` in seconds (`Never`: absent).
async fn consolidate_after(cluster: &Cluster, pool: &str) -> Option<f64> {
    let api: Api<crate::cluster::karpenter::NodePool> = Api::all(cluster.client.clone());
    let pool = api.get(pool).await.ok()?;
    let value = serde_json::to_value(&pool).ok()?;
    let text = value.pointer("/spec/disruption/consolidateAfter")?.as_str()?.to_string();
    crate::drill::duration::parse(&text).ok().map(|d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wave_is_what_the_budget_lets_go_at_once() {
        let o = |max: Option<&str>, min: Option<&str>| Objects {
            max_unavailable: max.map(String::from),
            min_available: min.map(String::from),
            ..Objects::default()
        };
        assert_eq!(o(Some("2"), None).wave_size(4), Some(2));
        assert_eq!(o(Some("50%"), None).wave_size(4), Some(2));
        assert_eq!(o(None, Some("3")).wave_size(4), Some(1));
        assert_eq!(o(None, Some("75%")).wave_size(4), Some(1));
        assert_eq!(o(Some("0"), None).wave_size(4), Some(1));
        assert_eq!(o(None, None).wave_size(4), None);
    }
}
