//! Where the client's configuration comes from: a kubeconfig as kubectl finds one or, in a pod without one, the
//! pod's ServiceAccount.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Which kubeconfig and context to use, as kubectl takes them.
#[derive(Debug, Clone, Default)]
pub struct KubeContext {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// The context name a cluster reached through the pod's ServiceAccount goes by: there is no kubeconfig to name it.
pub const IN_CLUSTER_CONTEXT: &str = "in-cluster";

/// Where kube's in-cluster config reads the pod's ServiceAccount token.
const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

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
pub fn select(target: &KubeContext, env: &Environment) -> Source {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(select(&KubeContext::default(), &in_pod(dir.path())), Source::InCluster);
    }

    #[test]
    fn a_kubeconfig_given_or_found_wins_over_the_pod() {
        let dir = tempfile::tempdir().unwrap();
        let pod = in_pod(dir.path());
        let flag = KubeContext { kubeconfig: Some("/k".into()), context: None };
        assert_eq!(select(&flag, &pod), Source::Kubeconfig(Some("/k".into())));
        let variable = Environment { kubeconfig: Some("/etc/kubeconfig".into()), ..pod.clone() };
        assert_eq!(select(&KubeContext::default(), &variable), Source::Kubeconfig(None));
        std::fs::create_dir_all(dir.path().join("home/.kube")).unwrap();
        std::fs::write(dir.path().join("home/.kube/config"), "").unwrap();
        assert_eq!(select(&KubeContext::default(), &pod), Source::Kubeconfig(None));
    }

    #[test]
    fn outside_a_pod_or_with_a_context_the_kubeconfig_is_read_and_its_absence_is_the_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(select(&KubeContext::default(), &env(dir.path())), Source::Kubeconfig(None));
        // The service host without a token is not a pod with a ServiceAccount (automount off).
        let no_token = Environment { service_host: Some("10.96.0.1".into()), ..env(dir.path()) };
        assert_eq!(select(&KubeContext::default(), &no_token), Source::Kubeconfig(None));
        let empty = Environment { service_host: Some("".into()), ..in_pod(dir.path()) };
        assert_eq!(select(&KubeContext::default(), &empty), Source::Kubeconfig(None));
        let context = KubeContext { kubeconfig: None, context: Some("prod".into()) };
        assert_eq!(select(&context, &in_pod(dir.path())), Source::Kubeconfig(None));
    }
}
