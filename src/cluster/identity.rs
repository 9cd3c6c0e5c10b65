//! Whether the cluster reached is the drill's: its identity (the kubeconfig context's name, the UID of its
//! `kube-system` namespace), checked before anything else is read.

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use super::client::{Cluster, ClusterError};
use super::source::KubeContext;

/// The cluster a drill is meant for: the tool refuses any other. At least one of the two is set (validation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedCluster {
    /// The kubeconfig context the drill must run in; not checked in a pod, which has none.
    pub context: Option<String>,
    /// The UID of the cluster's `kube-system` namespace: fixed for the cluster's life, whatever a kubeconfig calls it.
    pub kube_system_uid: Option<String>,
}

/// The cluster a drill names, proven to answer and to be that cluster: the context checked, one request, then its
/// kube-system UID when the drill names it. Returns the server's version.
pub async fn connect(target: &KubeContext, expected: &ExpectedCluster) -> Result<(Cluster, String), ClusterError> {
    let cluster = Cluster::connect(target).await?;
    if !cluster.in_cluster
        && let Some(context) = &expected.context
    {
        cluster.expect_context(context)?;
    }
    let version = cluster.ping().await?;
    cluster.expect(expected).await?;
    Ok((cluster, version))
}

/// The label of the `kube-system` namespace that names the cluster's profile for `history`.
pub const PROFILE_LABEL: &str = "hybrid-drill.io/profile";

/// The cluster a run was against, as it observed it before its first change: written into the run directory
/// (`cluster.json`) so that `recover` acts on that cluster alone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObservedCluster {
    /// The kubeconfig context (`in-cluster` in a pod).
    pub context: String,
    pub server: String,
    pub kube_system_uid: String,
    /// The `hybrid-drill.io/profile` label of the `kube-system` namespace (the lab's `fast` or `realistic`): runs of
    /// another profile are another series in `history`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl ObservedCluster {
    pub const FILE: &'static str = "cluster.json";

    pub fn write(&self, run_dir: &std::path::Path) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(run_dir.join(Self::FILE), json + "\n")
    }

    /// The identity a run recorded; `None` for a run that recorded none (older runs) or whose file is unreadable.
    pub fn read(run_dir: &std::path::Path) -> Option<ObservedCluster> {
        serde_json::from_slice(&std::fs::read(run_dir.join(Self::FILE)).ok()?).ok()
    }

    /// How a user tells two clusters apart: the context, the server and the UID.
    pub fn describe(&self) -> String {
        format!("context `{}` at {} (kube-system UID {})", self.context, self.server, self.kube_system_uid)
    }
}

impl Cluster {
    /// This cluster's identity as a run records it.
    pub async fn observe(&self) -> Result<ObservedCluster, ClusterError> {
        let found = self.kube_system().await?;
        Ok(ObservedCluster {
            context: self.context.clone(),
            server: self.server.clone(),
            profile: found.metadata.labels.as_ref().and_then(|l| l.get(PROFILE_LABEL)).cloned(),
            kube_system_uid: found.metadata.uid.ok_or_else(|| ClusterError::NoUid { context: self.context.clone() })?,
        })
    }

    async fn kube_system(&self) -> Result<Namespace, ClusterError> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        namespaces
            .get("kube-system")
            .await
            .map_err(|error| ClusterError::Identity { context: self.context.clone(), error })
    }

    /// The UID of the cluster's `kube-system` namespace, which names the cluster whatever a kubeconfig calls it.
    pub async fn kube_system_uid(&self) -> Result<String, ClusterError> {
        let found = self.kube_system().await?;
        found.metadata.uid.ok_or_else(|| ClusterError::NoUid { context: self.context.clone() })
    }

    /// Refuses a cluster other than the one the drill names: its context (not in a pod, which has none), then, when
    /// the drill names it, the UID of its `kube-system` namespace (one read). Nothing is touched either way.
    pub async fn expect(&self, expected: &ExpectedCluster) -> Result<(), ClusterError> {
        match (&expected.context, self.in_cluster) {
            (Some(context), true) if expected.kube_system_uid.is_none() => {
                return Err(ClusterError::NoContextInPod { expected: context.clone() });
            }
            (Some(context), false) => self.expect_context(context)?,
            _ => {}
        }
        let Some(uid) = &expected.kube_system_uid else { return Ok(()) };
        let actual = self.kube_system_uid().await?;
        if &actual != uid {
            return Err(ClusterError::WrongCluster { expected: uid.clone(), actual, context: self.context.clone() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::safety::tests::{Answer, serve, status};

    fn kube_system(uid: &str) -> Answer {
        Answer::Json(
            200,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system", "uid": uid}}),
        )
    }

    async fn expect(
        cluster: Cluster,
        handle: tower_test::mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>,
        expected: ExpectedCluster,
        answer: Answer,
    ) -> (Result<(), ClusterError>, Vec<String>) {
        let mut answer = Some(answer);
        let server = serve(handle, move |_| answer.take().unwrap_or_else(|| status(500, "InternalError")));
        let result = cluster.expect(&expected).await;
        drop(cluster);
        (result, server.await.unwrap().into_iter().map(|s| format!("{} {}", s.method, s.uri)).collect())
    }

    fn expected(context: Option<&str>, uid: Option<&str>) -> ExpectedCluster {
        ExpectedCluster { context: context.map(Into::into), kube_system_uid: uid.map(Into::into) }
    }

    #[tokio::test]
    async fn the_kube_system_uid_names_the_cluster_with_one_read() {
        let (cluster, handle) = Cluster::mock();
        let (result, seen) = expect(cluster, handle, expected(None, Some("u-1")), kube_system("u-1")).await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(seen, ["GET /api/v1/namespaces/kube-system"]);

        let (cluster, handle) = Cluster::mock();
        let (result, _) = expect(cluster, handle, expected(Some("mock"), Some("u-1")), kube_system("u-2")).await;
        let message = result.unwrap_err().to_string();
        assert_eq!(
            message,
            "this drill is for the cluster whose kube-system namespace has UID `u-1`, but context `mock` reaches one \
             whose kube-system UID is `u-2`; point at the drill's cluster, or if this is the one, set \
             spec.cluster.kubeSystemUID: u-2 (`hybrid-drill identify` prints it)"
        );
        assert!(!message.contains('\n'));
    }

    #[tokio::test]
    async fn a_wrong_context_is_refused_before_any_request() {
        let (cluster, handle) = Cluster::mock();
        let (result, seen) = expect(cluster, handle, expected(Some("prod"), Some("u-1")), kube_system("u-1")).await;
        assert!(matches!(result, Err(ClusterError::WrongContext { .. })), "{result:?}");
        assert!(seen.is_empty(), "{seen:?}");
        // Without a UID in the drill, the context alone decides and nothing is read.
        let (cluster, handle) = Cluster::mock();
        let (result, seen) = expect(cluster, handle, expected(Some("mock"), None), kube_system("u-1")).await;
        assert!(result.is_ok() && seen.is_empty(), "{result:?} {seen:?}");
    }

    #[tokio::test]
    async fn in_a_pod_the_context_is_not_checked_and_a_drill_naming_only_a_context_is_refused() {
        let (mut cluster, handle) = Cluster::mock();
        cluster.in_cluster = true;
        let (result, seen) = expect(cluster, handle, expected(Some("prod"), None), kube_system("u-1")).await;
        let message = result.unwrap_err().to_string();
        assert!(message.contains("spec.cluster.kubeSystemUID") && message.contains("`prod`"), "{message}");
        assert!(seen.is_empty());
        let (mut cluster, handle) = Cluster::mock();
        cluster.in_cluster = true;
        let (result, _) = expect(cluster, handle, expected(Some("prod"), Some("u-1")), kube_system("u-1")).await;
        assert!(result.is_ok(), "{result:?}");
    }

    #[tokio::test]
    async fn a_role_without_the_namespace_read_says_what_to_grant() {
        let (cluster, handle) = Cluster::mock();
        let (result, _) = expect(cluster, handle, expected(None, Some("u-1")), status(403, "Forbidden")).await;
        let message = result.unwrap_err().to_string();
        assert!(message.contains("grant get on namespaces/kube-system"), "{message}");
    }
}
