//! Which cluster the tool talks to and whether it is the drill's: where the client's configuration comes from (a
//! kubeconfig as kubectl finds one or, in a pod without one, the pod's ServiceAccount), and the cluster's identity
//! (the kubeconfig context's name, the UID of its `kube-system` namespace).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use super::{Cluster, ClusterError, Target, first_line};

/// The context name a cluster reached through the pod's ServiceAccount goes by: there is no kubeconfig to name it.
pub const IN_CLUSTER_CONTEXT: &str = "in-cluster";

/// Where kube's in-cluster config reads the pod's ServiceAccount token.
const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// The cluster a drill is meant for: the tool refuses any other. At least one of the two is set (validation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedCluster {
    /// The kubeconfig context the drill must run in; not checked in a pod, which has none.
    pub context: Option<String>,
    /// The UID of the cluster's `kube-system` namespace: fixed for the cluster's life, whatever a kubeconfig calls it.
    pub kube_system_uid: Option<String>,
}

/// Where the client's configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A kubeconfig: the file given, or (`None`) `$KUBECONFIG`, then `~/.kube/config`.
    Kubeconfig(Option<PathBuf>),
    /// kube's in-cluster config: the pod's ServiceAccount token and the API server from the pod's environment.
    InCluster,
}

/// What decides the [`Source`], read from the process's environment, or made up by a test.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    pub kubeconfig: Option<OsString>,
    pub home: Option<PathBuf>,
    pub service_host: Option<OsString>,
    pub token_file: PathBuf,
}

impl Environment {
    pub fn current() -> Environment {
        Environment {
            kubeconfig: std::env::var_os("KUBECONFIG"),
            home: std::env::var_os("HOME").map(PathBuf::from),
            service_host: std::env::var_os("KUBERNETES_SERVICE_HOST"),
            token_file: PathBuf::from(SERVICE_ACCOUNT_TOKEN),
        }
    }
}

fn non_empty(value: &Option<OsString>) -> bool {
    value.as_ref().is_some_and(|v| !v.is_empty())
}

/// A kubeconfig whenever one is given or found, as kubectl does (a context given on the command line needs one
/// too); otherwise, in a pod (`KUBERNETES_SERVICE_HOST` set and the ServiceAccount token mounted), the in-cluster
/// config. Without either, the kubeconfig, whose absence is then the error.
pub fn select(target: &Target, env: &Environment) -> Source {
    if let Some(path) = &target.kubeconfig {
        return Source::Kubeconfig(Some(path.clone()));
    }
    let default_file = env.home.as_deref().map(|h| h.join(".kube").join("config"));
    let found = non_empty(&env.kubeconfig) || default_file.as_deref().is_some_and(Path::is_file);
    let in_pod = non_empty(&env.service_host) && env.token_file.is_file();
    if found || target.context.is_some() || !in_pod {
        return Source::Kubeconfig(None);
    }
    Source::InCluster
}

impl Cluster {
    /// The UID of the cluster's `kube-system` namespace, which names the cluster whatever a kubeconfig calls it.
    pub async fn kube_system_uid(&self) -> Result<String, ClusterError> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let found = namespaces.get("kube-system").await.map_err(|e| ClusterError::Identity {
            context: self.context.clone(),
            message: first_line(&super::error_chain(&e)),
        })?;
        found.metadata.uid.ok_or_else(|| ClusterError::Identity {
            context: self.context.clone(),
            message: "the kube-system namespace has no uid".into(),
        })
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

    fn env(dir: &Path) -> Environment {
        Environment {
            kubeconfig: None,
            home: Some(dir.join("home")),
            service_host: None,
            token_file: dir.join("token"),
        }
    }

    fn in_pod(dir: &Path) -> Environment {
        std::fs::write(dir.join("token"), "a-token").unwrap();
        Environment { service_host: Some("10.96.0.1".into()), ..env(dir) }
    }

    #[test]
    fn in_a_pod_without_a_kubeconfig_the_service_account_is_used() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(select(&Target::default(), &in_pod(dir.path())), Source::InCluster);
    }

    #[test]
    fn a_kubeconfig_given_or_found_wins_over_the_pod() {
        let dir = tempfile::tempdir().unwrap();
        let pod = in_pod(dir.path());
        let flag = Target { kubeconfig: Some("/k".into()), context: None };
        assert_eq!(select(&flag, &pod), Source::Kubeconfig(Some("/k".into())));
        let variable = Environment { kubeconfig: Some("/etc/kubeconfig".into()), ..pod.clone() };
        assert_eq!(select(&Target::default(), &variable), Source::Kubeconfig(None));
        std::fs::create_dir_all(dir.path().join("home/.kube")).unwrap();
        std::fs::write(dir.path().join("home/.kube/config"), "").unwrap();
        assert_eq!(select(&Target::default(), &pod), Source::Kubeconfig(None));
    }

    #[test]
    fn outside_a_pod_or_with_a_context_the_kubeconfig_is_read_and_its_absence_is_the_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(select(&Target::default(), &env(dir.path())), Source::Kubeconfig(None));
        // The service host without a token is not a pod with a ServiceAccount (automount off).
        let no_token = Environment { service_host: Some("10.96.0.1".into()), ..env(dir.path()) };
        assert_eq!(select(&Target::default(), &no_token), Source::Kubeconfig(None));
        let empty = Environment { service_host: Some("".into()), ..in_pod(dir.path()) };
        assert_eq!(select(&Target::default(), &empty), Source::Kubeconfig(None));
        let context = Target { kubeconfig: None, context: Some("prod".into()) };
        assert_eq!(select(&context, &in_pod(dir.path())), Source::Kubeconfig(None));
    }

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
