//! Who runs a drill, as the API server authenticated them: one SelfSubjectReview (authentication.k8s.io/v1), the
//! user, groups and extra the server sees, EKS's mapped IAM identity and a pod's ServiceAccount read from them.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::Api;
use kube::api::PostParams;
use serde::{Deserialize, Serialize};

use super::client::Cluster;

/// The identity the API server authenticated the tool's requests as.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Initiator {
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The authenticator's extra attributes (on EKS the IAM `arn`, `canonicalArn`, `sessionName`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
    /// The IAM principal EKS mapped to the user: `extra.arn` (or `canonicalArn`), when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iam_arn: Option<String>,
    /// `namespace/name` when the user is a ServiceAccount (the scheduled drill in its pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
}

/// EKS's (aws-iam-authenticator's and access entries') extra keys naming the IAM principal, preferred first.
const ARN_KEYS: [&str; 2] = ["arn", "canonicalArn"];
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

impl Initiator {
    /// The identity a user info names, with its IAM principal and ServiceAccount read out.
    pub fn of(user: String, groups: Vec<String>, extra: BTreeMap<String, Vec<String>>) -> Initiator {
        let iam_arn = ARN_KEYS.iter().find_map(|k| extra.get(*k).and_then(|v| v.first()).cloned());
        let service_account = user
            .strip_prefix(SERVICE_ACCOUNT_PREFIX)
            .and_then(|rest| rest.split_once(':'))
            .map(|(ns, name)| format!("{ns}/{name}"));
        Initiator { user, groups, extra, iam_arn, service_account }
    }

    /// One line: `alice (IAM arn:aws:iam::...; groups a, b)`.
    pub fn describe(&self) -> String {
        let mut details = Vec::new();
        if let Some(sa) = &self.service_account {
            details.push(format!("ServiceAccount {sa}"));
        }
        if let Some(arn) = &self.iam_arn {
            details.push(format!("IAM {arn}"));
        }
        if !self.groups.is_empty() {
            details.push(format!("groups {}", self.groups.join(", ")));
        }
        if details.is_empty() { self.user.clone() } else { format!("{} ({})", self.user, details.join("; ")) }
    }
}

impl Cluster {
    /// Asks the API server who this client is. A review creates nothing: the server answers and keeps no object.
    pub async fn initiator(&self) -> Result<Initiator, kube::Error> {
        let api: Api<SelfSubjectReview> = Api::all(self.client.clone());
        let review = api.create(&PostParams::default(), &SelfSubjectReview::default()).await?;
        let info = review.status.and_then(|s| s.user_info).unwrap_or_default();
        Ok(Initiator::of(
            info.username.unwrap_or_default(),
            info.groups.unwrap_or_default(),
            info.extra.unwrap_or_default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_iam_arn_and_the_service_account_are_read_from_the_user_info() {
        let extra = BTreeMap::from([
            ("sessionName".to_string(), vec!["alice".to_string()]),
            ("arn".to_string(), vec!["arn:aws:sts::111122223333:assumed-role/ops/alice".to_string()]),
        ]);
        let eks = Initiator::of("alice".into(), vec!["ops".into()], extra);
        assert_eq!(eks.iam_arn.as_deref(), Some("arn:aws:sts::111122223333:assumed-role/ops/alice"));
        assert_eq!(eks.describe(), "alice (IAM arn:aws:sts::111122223333:assumed-role/ops/alice; groups ops)");
        let pod = Initiator::of("system:serviceaccount:hybrid-drill:hybrid-drill".into(), vec![], BTreeMap::new());
        assert_eq!(pod.service_account.as_deref(), Some("hybrid-drill/hybrid-drill"));
        assert_eq!(pod.iam_arn, None);
    }
}
