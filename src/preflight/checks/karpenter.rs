//! karpenter-crds: Karpenter's NodePool and NodeClaim are served at `karpenter.sh/v1`.

use super::support::{Findings, names};
use crate::preflight::finding::{CheckId, Status};
use crate::preflight::snapshot::Snapshot;

pub(super) fn karpenter_crds(s: &Snapshot, out: &mut Findings) {
    let id = CheckId::KarpenterCrds;
    let object = "API group karpenter.sh";
    if s.karpenter_versions.is_empty() {
        out.fix(
            id,
            Status::Fail,
            object,
            "Karpenter's CRDs are not installed: the API server serves no karpenter.sh group",
            "install Karpenter (1.0 or later) and its CRDs, e.g. `helm upgrade --install karpenter-crd \
             oci://public.ecr.aws/karpenter/karpenter-crd -n kube-system`; check with `kubectl api-resources \
             --api-group=karpenter.sh`",
        );
        return;
    }
    if !s.karpenter_versions.iter().any(|v| v == "v1") {
        out.fix(
            id,
            Status::Fail,
            object,
            format!(
                "karpenter.sh is served only at {}; hybrid-drill reads karpenter.sh/v1",
                names(&s.karpenter_versions)
            ),
            "upgrade Karpenter and its CRDs to v1 (Karpenter 1.0 or later; see its v1 migration guide)",
        );
        return;
    }
    let missing: Vec<&str> =
        ["nodepools", "nodeclaims"].into_iter().filter(|r| !s.karpenter_v1_resources.iter().any(|h| h == r)).collect();
    if missing.is_empty() {
        out.add(id, Status::Pass, object, "NodePool and NodeClaim are served at karpenter.sh/v1");
    } else {
        out.fix(
            id,
            Status::Fail,
            object,
            format!("karpenter.sh/v1 does not serve {}", names(&missing)),
            "re-install Karpenter's CRDs at the version of the running Karpenter",
        );
    }
}
