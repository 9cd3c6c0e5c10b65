//! The API requests that a change and its undo both make: the tool's field manager, and making a node schedulable.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::cluster::marks::RUN_ANNOTATION;
use crate::cluster::{Cluster, is_not_found};

/// Names the tool in the managedFields of every object it changes, for whoever audits the cluster later.
pub(super) const FIELD_MANAGER: &str = "hybrid-drill";

/// Patches are attributed to the tool in each object's managedFields.
pub(super) fn patch_params() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

/// Makes a node schedulable and drops the run's mark; a node that is gone has nothing left to restore.
pub(super) async fn uncordon_node(cluster: &Cluster, node: &str) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let patch = json!({"spec": {"unschedulable": null}, "metadata": {"annotations": {RUN_ANNOTATION: null}}});
    match nodes.patch(node, &patch_params(), &Patch::Merge(&patch)).await {
        Err(e) if is_not_found(&e) => Ok(()),
        result => result.map(drop),
    }
}
