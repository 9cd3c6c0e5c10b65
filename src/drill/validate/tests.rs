//! Drill files with one problem each, validated through the real parser: each problem located and worded.

use super::steps::parse_workload_ref;
use super::*;
use crate::cluster::drain_selection::DrainFlags;
use crate::cluster::lease::LeaseRef;
use crate::domain::PhaseId;
use crate::drill::model::{
    Action, CutAction, CutEnforcement, DEFAULT_STEP_TIMEOUT, Drill, Webhook, WorkloadKind, WorkloadRef,
};

use crate::drill::NodeTargetRef;

#[test]
fn selectors() {
    assert!(check_label_selector("eks.amazonaws.com/compute-type=hybrid,gpu.model=h200").is_ok());
    assert!(check_label_selector("app in (a,b),!legacy,tier!=db").is_ok());
    assert!(check_label_selector("").is_err());
    assert!(check_label_selector("app=,").is_err());
    assert!(check_label_selector("app=a b").is_err());
    assert!(check_label_selector("app in (a").is_err());
}

#[test]
fn faults_say_how_they_are_enforced_and_are_restored() {
    assert!(problems("    - {id: c, cut: {fidelity: host, cni: calico}}\n    - {id: r, restore: cut}\n").is_empty());
    let p = problems("    - {id: c, cut: {fidelity: host, allowCidrs: [10.0.0.0/33]}}\n");
    assert!(p[0].starts_with("a host-level cut needs `cni: cilium` or `cni: calico`"), "{p:?}");
    assert!(p[1].contains("not a CIDR"), "{p:?}");
    assert!(p[2].contains("no later step restores it"), "{p:?}");
    let p = problems(
        "    - {id: c, cut: {fidelity: pod-network, effectWithin: 1m, lastResort: {command: [reboot]}}}\n    - {id: r, restore: cut}\n",
    );
    assert_eq!(
        p,
        [
            "`effectWithin` applies only to `fidelity: host`: a pod-network cut leaves the nodes Ready",
            "`lastResort` applies only to `fidelity: host`: a pod-network cut leaves the nodes Ready"
        ]
    );
    let p = problems(
        "    - {id: c, cut: {fidelity: host, cni: cilium, effectWithin: 0s, lastResort: {command: [], timeout: 0s}}}\n    - {id: r, restore: cut}\n",
    );
    assert_eq!(
        p,
        [
            "effectWithin must be longer than zero",
            "`command` needs a program first, e.g. [ipmitool, ...]",
            "timeout must be longer than zero"
        ]
    );
    let p = problems("    - {id: c, cut: {fidelity: pod-network, cni: cilium}}\n    - {id: r, restore: cut}\n");
    assert_eq!(p, ["`cni` applies only to `fidelity: host`; a pod-network cut is a Kubernetes NetworkPolicy"]);
    let p = problems("    - {id: r, restore: node-failure}\n");
    assert_eq!(p, ["`restore: node-failure` needs an earlier `nodeFailure` step to end"]);
    let p = problems(
        "    - {id: f, nodeFailure: {fail: [off, \"{node}\"], recover: [on]}}\n    - {id: r, restore: node-failure}\n",
    );
    assert!(p[0].contains("must appear in both `fail` and `recover`"), "{p:?}");
    assert!(problems("    - {id: f, nodeFailure: {fail: [off, \"{node}\"], recover: [on, \"{node}\"]}}\n    - {id: r, restore: node-failure}\n").is_empty());
}

#[test]
fn workload_refs() {
    assert_eq!(
        parse_workload_ref("deployment/llm").unwrap(),
        WorkloadRef { kind: WorkloadKind::Deployment, name: "llm".into() }
    );
    assert_eq!(parse_workload_ref("StatefulSet/db").unwrap().kind, WorkloadKind::StatefulSet);
    assert!(parse_workload_ref("deploymnet/llm").unwrap_err().to_string().contains("did you mean `deployment`"));
    assert!(parse_workload_ref("llm").is_err());
    assert!(parse_workload_ref("daemonset/llm").unwrap_err().to_string().starts_with("cannot restart a `daemonset`"));
}

#[test]
fn workload_refs_take_every_kubectl_spelling() {
    for (text, kind) in [
        ("deploy/llm", WorkloadKind::Deployment),
        ("deployments/llm", WorkloadKind::Deployment),
        ("deployment.apps/llm", WorkloadKind::Deployment),
        ("deployments.v1.apps/llm", WorkloadKind::Deployment),
        ("sts/llm", WorkloadKind::StatefulSet),
        ("statefulsets.apps/llm", WorkloadKind::StatefulSet),
    ] {
        assert_eq!(parse_workload_ref(text).unwrap(), WorkloadRef { kind, name: "llm".into() }, "{text}");
    }
    assert!(parse_workload_ref("deploy.apps/llm").is_err(), "kubectl has no grouped short name");
    assert!(parse_workload_ref("replicasets.apps/llm").is_err());
}

#[test]
fn a_misspelt_hook_placeholder_is_located_and_a_real_node_address_is_valid() {
    let steps = "    - {id: f, nodeFailure: {fail: [ipmitool, -H, '{internalIp}'], recover: [on, '{internalIP}']}}\n    - {id: r, restore: node-failure}\n";
    let source = drill_source("", steps);
    let d = diagnostics(source.clone());
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].message.contains("did you mean `{internalIP}`"), "{}", d[0].message);
    assert_eq!(&source[d[0].location.start..d[0].location.end], "'{internalIp}'");
    let good = "    - {id: f, nodeFailure: {fail: [ipmitool, -H, '{label:bmc/ip}'], recover: [on, '{address}']}}\n    - {id: r, restore: node-failure}\n";
    assert!(problems(good).is_empty());
}

#[test]
fn a_drain_with_no_later_return_is_left_in_place_unless_kept() {
    let source = drill_source("", "    - {id: d, drain: onPrem}\n");
    let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), source).unwrap().drill;
    let warnings = crate::drill::left_in_place::warnings(&drill);
    assert_eq!(
        warnings,
        ["step `d` cordons the on-prem nodes and no later step uncordons them (`uncordon` or `return`): the run \
              undoes it at its end (spec.keepChanges: true keeps it)"]
    );
    let kept = drill_source(
        "  keepChanges: true\n",
        "    - {id: d, drain: onPrem}\n    - {id: x, exec: {command: [a], undo: [b]}}\n",
    );
    let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), kept).unwrap().drill;
    assert!(drill.spec.keep_changes);
    let warnings = crate::drill::left_in_place::warnings(&drill);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[1].starts_with("step `x` runs a command with an undo") && warnings[1].contains("kept at the end"));
    let returned = drill_source("", "    - {id: d, drain: onPrem}\n    - {id: r, return: {}}\n");
    let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), returned).unwrap().drill;
    assert!(crate::drill::left_in_place::warnings(&drill).is_empty());
}

fn problems(steps: &str) -> Vec<String> {
    diagnostics(drill_source("", steps)).into_iter().map(|d| d.message).collect()
}

#[test]
fn a_drain_takes_kubectl_drains_flags_off_by_default_and_a_mistyped_one_is_located() {
    let flags = |steps: &str| match &valid("", steps).spec.steps[0].action {
        Action::Drain(d) => (d.nodes, d.flags),
        other => panic!("{other:?}"),
    };
    assert_eq!(flags("    - {id: d, drain: onPrem}\n"), (NodeTargetRef::OnPrem, DrainFlags::default()));
    assert_eq!(
        flags("    - {id: d, drain: {nodes: onPrem, force: true, deleteEmptyDirData: true}}\n"),
        (NodeTargetRef::OnPrem, DrainFlags { force: true, delete_empty_dir_data: true })
    );
    assert!(!flags("    - {id: d, drain: {nodes: onPrem, force: true}}\n").1.delete_empty_dir_data);
    let typo = diagnostics(drill_source("", "    - {id: d, drain: {nodes: onPrem, forse: true}}\n"));
    assert_eq!(typo[0].message, "unknown key `forse` in `spec.steps[0].drain`");
    assert!(typo[0].label.as_deref().is_some_and(|l| l.contains("did you mean `force`")), "{:?}", typo[0]);
    let bad = diagnostics(drill_source("", "    - {id: d, drain: cloud}\n"));
    assert_eq!(bad[0].message, "unknown value `cloud` for `drain`");
}

#[test]
fn preflight_must_come_before_any_change() {
    assert!(problems("    - {id: pre, check: preflight}\n    - {id: steady, check: steady-state}\n    - {id: p, pause: 1s}\n    - {id: d, drain: onPrem}\n").is_empty());
    assert!(problems("    - {id: w, pause: 1s}\n    - {id: pre, check: preflight, onDeviation: warn}\n").is_empty());
    assert_eq!(
        problems("    - {id: d, drain: onPrem}\n    - {id: pre, check: preflight}\n"),
        ["`check: preflight` must come before any step that changes the cluster; move it before step `d`"]
    );
}
#[test]
fn every_phase_may_carry_an_objective_and_a_misspelt_one_is_located() {
    let valid = objectives("{rto: 60s, phases: {detection: 30s, restore: 2m, toleration: 5m, image-pull: 1m}}");
    let drill = valid.unwrap();
    let o = &drill.spec.objectives;
    assert_eq!(o.get(PhaseId::Detection), Some(std::time::Duration::from_secs(30)));
    assert_eq!(o.get(PhaseId::Restore), Some(std::time::Duration::from_secs(120)));
    assert_eq!(o.get(PhaseId::ImagePull), Some(std::time::Duration::from_secs(60)));
    assert_eq!(o.get(PhaseId::Rto), Some(std::time::Duration::from_secs(60)));
    assert_eq!(o.get(PhaseId::Reclaim), None);

    let source = drill_source("  objectives: {phases: {detectoin: 30s}}\n", "    - {id: s, pause: 1s}\n");
    let d = diagnostics(source.clone());
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].message.starts_with("unknown key `detectoin` in `spec.objectives.phases`"), "{d:?}");
    assert_eq!(d[0].label.as_deref(), Some("did you mean `detection`?"));
    assert!(d[0].help.as_deref().is_some_and(|h| h.contains("toleration")), "{d:?}");
    assert_eq!(&source[d[0].location.start..d[0].location.end], "detectoin");
    let d = diagnostics(drill_source("  objectives: {phases: {rto: 30s}}\n", "    - {id: s, pause: 1s}\n"));
    assert!(d[0].message.contains("`objectives.rto`"), "{d:?}");
}

#[test]
fn a_validated_step_holds_its_one_action_and_its_timeout() {
    let drill = valid(
        "",
        "    - {id: c, cut: {fidelity: host, cni: cilium}, timeout: 5m}\n    - {id: r, restore: cut}\n    - {id: b, return: {restart: statefulset/db}}\n",
    );
    let steps = &drill.spec.steps;
    assert!(matches!(
        steps[0].action,
        Action::Cut(CutAction { enforcement: CutEnforcement::Host(crate::drill::Cni::Cilium), .. })
    ));
    assert_eq!(steps[0].timeout, std::time::Duration::from_secs(300));
    assert_eq!(steps[1].timeout, DEFAULT_STEP_TIMEOUT);
    let Action::Return(ret) = &steps[2].action else { panic!("{:?}", steps[2]) };
    assert_eq!(ret.restart, Some(WorkloadRef { kind: WorkloadKind::StatefulSet, name: "db".into() }));
    assert_eq!(drill.spec.targets.on_prem.nodes.as_str(), "a=b");
    assert_eq!(drill.spec.targets.on_prem.nodes.requirements().len(), 1);
}

/// Regression: `objectives.phases.detection` and `.restore` were read by name and never found, so neither could
/// be set. Both are now settable, and the analysis judges them.
#[test]
fn detection_and_restore_objectives_are_settable_and_judged() {
    use crate::phases::{PhaseId, Verdict};
    use crate::timeline::{ConditionStatus, Event as E, FaultKind, NodeRole};
    let drill = valid(
        "  objectives: {phases: {detection: 10s, restore: 5s}}\n",
        "    - {id: c, cut: {fidelity: host, cni: calico}}\n    - {id: r, restore: cut}\n",
    );
    let on = NodeRole::OnPrem;
    let events = vec![
        (1.0, None, E::FaultInjected { step: "c".into(), kind: FaultKind::Cut(crate::drill::CutFidelity::Host) }),
        (21.0, Some(21), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::Unknown, gpus: 8 }),
        (60.0, None, E::RestoreStarted { step: "r".into(), what: crate::drill::RestoreTarget::Cut }),
        (60.2, None, E::FaultRemoved { step: "r".into(), what: "link restored".into() }),
        (61.0, Some(61), E::NodeReady { node: "h1".into(), role: on, status: ConditionStatus::True, gpus: 8 }),
        (61.2, None, E::OnPremReady { nodes: 1 }),
    ];
    let base = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().to_utc();
    let analysis = crate::phases::analyse(&drill, &crate::timeline::observations_from(base, events));
    let detection = analysis.phase(PhaseId::Detection).unwrap();
    assert_eq!((detection.objective_seconds, detection.verdict), (Some(10.0), Verdict::Missed), "{detection:?}");
    let restore = analysis.phase(PhaseId::Restore).unwrap();
    assert_eq!((restore.objective_seconds, restore.verdict), (Some(5.0), Verdict::Met), "{restore:?}");
    assert!(analysis.objectives_missed.contains(&PhaseId::Detection), "{:?}", analysis.objectives_missed);
}

#[test]
fn a_cluster_is_named_by_context_kube_system_uid_or_both_and_the_lock_has_defaults() {
    let steps = "    - {id: s, pause: 1s}\n";
    let by_uid = drill_source("", steps).replace("cluster: {context: c}", "cluster: {kubeSystemUID: u-1}");
    let drill = crate::drill::from_source(std::path::Path::new("d.yaml"), by_uid).unwrap().drill;
    assert_eq!((drill.spec.cluster.context, drill.spec.cluster.kube_system_uid.as_deref()), (None, Some("u-1")));
    assert_eq!(drill.spec.lock, LeaseRef::default());
    let unnamed = drill_source("", steps).replace("cluster: {context: c}", "cluster: {}");
    let messages: Vec<String> = diagnostics(unnamed).into_iter().map(|d| d.message).collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].starts_with("name the drill's cluster by `context`"), "{messages:?}");

    let lock = valid("  lock: {namespace: drills, duration: 6s}\n", steps).spec.lock;
    assert_eq!((lock.namespace.as_str(), lock.name.as_str(), lock.duration.as_secs()), ("drills", "hybrid-drill", 6));
    let messages: Vec<String> =
        diagnostics(drill_source("  lock: {name: '', duration: 1s}\n", steps)).into_iter().map(|d| d.message).collect();
    assert_eq!(messages, ["the lock's name must not be empty", "the lock's duration must be at least 3s"]);
}

#[test]
fn the_tools_own_namespace_is_protected_by_default_and_whatever_the_drill_lists() {
    let steps = "    - {id: s, pause: 1s}\n";
    assert_eq!(valid("", steps).spec.guards.protected_namespaces, ["kube-system", "hybrid-drill"]);
    let listed = valid("  guards: {protectedNamespaces: [kube-system, gpu-operator]}\n", steps);
    assert_eq!(listed.spec.guards.protected_namespaces, ["kube-system", "gpu-operator", "hybrid-drill"]);
    let once = valid("  guards: {protectedNamespaces: [hybrid-drill]}\n", steps);
    assert_eq!(once.spec.guards.protected_namespaces, ["hybrid-drill"]);
}

fn valid(spec: &str, steps: &str) -> Drill {
    crate::drill::from_source(std::path::Path::new("d.yaml"), drill_source(spec, steps)).unwrap().drill
}

fn objectives(objectives: &str) -> Result<Drill, Vec<Diagnostic>> {
    let source = drill_source(&format!("  objectives: {objectives}\n"), "    - {id: s, pause: 1s}\n");
    crate::drill::from_source(std::path::Path::new("d.yaml"), source).map(|l| l.drill).map_err(|e| match e {
        crate::drill::DrillError::Invalid { diagnostics, .. } => diagnostics,
        e => panic!("{e}"),
    })
}

fn diagnostics(source: String) -> Vec<Diagnostic> {
    match crate::drill::from_source(std::path::Path::new("d.yaml"), source) {
        Ok(_) => Vec::new(),
        Err(crate::drill::DrillError::Invalid { diagnostics, .. }) => diagnostics,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn webhooks_and_silences_are_checked_and_each_problem_located() {
    let spec = "  notify:\n    - {url: 'https://hooks.example.com/T/B/x', format: slack}\n    - {url: 'hooks:80', timeout: 2m}\n  silences:\n    - alertmanager: http://am:9093\n      matchers: ['alertname=\"KubeNodeNotReady\"', 'node=~\"(\"']\n    - {alertmanager: http://am:9093, matchers: ['node=~\".*\"']}\n";
    let source = drill_source(spec, "    - {id: d, drain: onPrem}\n    - {id: u, uncordon: onPrem}\n");
    let d = diagnostics(source.clone());
    let located: Vec<(&str, &str)> =
        d.iter().map(|d| (d.message.as_str(), &source[d.location.start..d.location.end])).collect();
    assert_eq!(located.len(), 4, "{located:#?}");
    assert!(located[0].0.starts_with("invalid webhook URL `hooks:80`"), "{located:?}");
    assert_eq!(located[0].1, "'hooks:80'");
    assert_eq!(located[1], ("a webhook's timeout must be more than 0s and at most 1m", "2m"));
    assert!(located[2].0.starts_with("invalid matcher `node=~\"(\"`: invalid regular expression"), "{located:?}");
    assert_eq!(located[2].1, "'node=~\"(\"'");
    assert!(located[3].0.starts_with("a silence needs at least one matcher"), "{located:?}");

    let good = "  notify: [{url: 'https://hooks.example.com/T/B/x', format: slack}, {url: 'http://events:8080/'}]\n  silences: [{alertmanager: 'http://am:9093', matchers: ['alertname=\"KubeNodeNotReady\"'], comment: Q3}]\n";
    let drill =
        crate::drill::from_source(std::path::Path::new("d.yaml"), drill_source(good, "    - {id: p, pause: 1s}\n"))
            .unwrap()
            .drill;
    assert_eq!(drill.spec.notify.len(), 2);
    assert_eq!(drill.spec.notify[0].format, crate::drill::NotifyFormat::Slack);
    assert_eq!(drill.spec.notify[1].format, crate::drill::NotifyFormat::Json);
    assert_eq!(drill.spec.notify[1].timeout, Webhook::DEFAULT_TIMEOUT);
    assert_eq!(drill.spec.silences[0].matchers[0].to_string(), "alertname=\"KubeNodeNotReady\"");
    assert_eq!(drill.spec.silences[0].comment.as_deref(), Some("Q3"));
}

#[test]
fn the_fallback_is_one_nodepool_or_a_list_never_both_nor_neither() {
    let with =
        |fallback: &str| drill_source("", "    - {id: s, pause: 1s}\n").replace("fallback: {nodePool: p}", fallback);
    let loaded = |fallback: &str| crate::drill::from_source(std::path::Path::new("d.yaml"), with(fallback));
    let old = loaded("fallback: {nodePool: p}").unwrap().drill.spec.targets.fallback;
    assert_eq!((old.node_pool.as_str(), old.node_pools.as_slice()), ("p", ["p".to_string()].as_slice()));
    assert_eq!(old.label_selector(), "karpenter.sh/nodepool=p");
    let two = loaded("fallback: {nodePools: [od, spot]}").unwrap().drill.spec.targets.fallback;
    assert_eq!(two.node_pool, "od");
    assert_eq!(two.label_selector(), "karpenter.sh/nodepool in (od,spot)");
    assert_eq!(two.describe(), "NodePools od, spot");
    let message = |fallback: &str| diagnostics(with(fallback)).into_iter().map(|d| d.message).collect::<Vec<_>>();
    assert_eq!(
        message("fallback: {nodePool: p, nodePools: [q]}"),
        ["set nodePool (one NodePool) or nodePools (a list), not both"]
    );
    assert_eq!(message("fallback: {}"), ["name the fallback: nodePool: NAME, or nodePools: [NAME, ...] for several"]);
    assert_eq!(message("fallback: {nodePools: []}"), ["nodePools must name at least one NodePool"]);
    assert_eq!(message("fallback: {nodePools: [a, a]}"), ["NodePool `a` is named twice"]);
}

fn drill_source(spec: &str, steps: &str) -> String {
    format!(
        "apiVersion: hybrid-drill.io/v1alpha1\nkind: Drill\nmetadata: {{name: x}}\nspec:\n  cluster: {{context: c}}\n  targets:\n    onPrem: {{nodes: a=b}}\n    workload: {{namespace: n, selector: a=b, restoredWhen: {{readyPods: 1}}}}\n    fallback: {{nodePool: p}}\n{spec}  steps:\n{steps}"
    )
}

#[test]
fn ready_pods_is_a_number_or_a_share_and_a_wrong_one_is_located() {
    let with = |value: &str| drill_source("", "    - {id: s, pause: 1s}\n").replace("readyPods: 1", value);
    let loaded = |value: &str| crate::drill::from_source(std::path::Path::new("d.yaml"), with(value));
    let ready = |value: &str| loaded(value).unwrap().drill.spec.targets.workload.restored_when.ready_pods;
    assert_eq!(ready("readyPods: 4"), crate::drill::ReadyPods::Count(4));
    assert_eq!(ready("readyPods: \"75%\""), crate::drill::ReadyPods::Share(75.0));
    assert_eq!(ready("readyPods: 62.5%"), crate::drill::ReadyPods::Share(62.5));
    // Line 8 holds the workload: each problem points at the value written.
    for (value, message) in [
        ("readyPods: 0", "readyPods must be at least 1"),
        ("readyPods: \"0%\"", "readyPods `0%` must be a share above 0% and at most 100%"),
        ("readyPods: 150%", "readyPods `150%` must be a share above 0% and at most 100%"),
        (
            "readyPods: most",
            "readyPods `most` is neither a number of pods (4) nor a share of the desired replicas (\"75%\")",
        ),
    ] {
        let found = diagnostics(with(value));
        assert_eq!(found.iter().map(|d| d.message.as_str()).collect::<Vec<_>>(), [message], "{value}");
        assert_eq!(found[0].location.line, 8, "{value}");
        let at = with(value).lines().nth(7).unwrap().find(value).unwrap() + "readyPods: ".len() + 1;
        assert_eq!(found[0].location.column, at, "{value}");
    }
    let negative = diagnostics(with("readyPods: -2"));
    assert!(negative[0].message.starts_with("readyPods must be at least 1"), "{:?}", negative[0].message);
}

#[test]
fn the_evidence_a_drill_requires_is_read_and_an_empty_owner_located() {
    let steps = "    - {id: s, pause: 1s}\n";
    let none = valid("", steps);
    assert_eq!(none.spec.evidence, crate::drill::EvidencePolicy::default());
    assert!(none.spec.evidence.missing(None, None).is_empty());
    let strict = valid("  evidence: {requireChange: true, requireApprover: true, owner: gpu-platform}\n", steps);
    assert_eq!(strict.spec.evidence.owner.as_deref(), Some("gpu-platform"));
    assert_eq!(strict.spec.evidence.missing(None, Some(" ")), ["--change", "--approved-by"]);
    assert_eq!(strict.spec.evidence.missing(Some("CHG-1"), None), ["--approved-by"]);
    assert!(strict.spec.evidence.missing(Some("CHG-1"), Some("alice")).is_empty());
    let source = drill_source("  evidence: {owner: ''}\n", steps);
    let d = diagnostics(source.clone());
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].message.starts_with("the action items' owner must not be empty"), "{d:?}");
    assert_eq!(&source[d[0].location.start..d[0].location.end], "''");
    assert!(!diagnostics(drill_source("  evidence: {requireChnage: true}\n", steps)).is_empty(), "a typo is refused");
}

#[test]
fn a_shipping_location_is_read_and_a_bad_one_located() {
    let steps = "    - {id: s, pause: 1s}\n";
    let shipped = valid(
        "  evidence:\n    ship: {to: 's3://drill-evidence/prod/', endpoint: 'http://127.0.0.1:28070', pathStyle: true, \
         credentials: '${env:PATH}', retention: 400d}\n",
        steps,
    );
    let ship = shipped.spec.evidence.ship.unwrap();
    assert_eq!(ship.location.to_string(), "s3://drill-evidence/prod");
    assert_eq!(ship.connection.endpoint.as_deref(), Some("http://127.0.0.1:28070"));
    assert!(ship.connection.path_style);
    assert_eq!(ship.connection.credentials.as_deref(), Some("${env:PATH}"));
    assert_eq!(ship.retention, Some(std::time::Duration::from_secs(400 * 86_400)));
    let source = drill_source("  evidence: {ship: {to: 'drill-evidence/prod', endpoint: 'not a url'}}\n", steps);
    let d = diagnostics(source.clone());
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(d[0].message.contains("is not an object storage location: write it as s3://bucket/prefix"), "{d:?}");
    assert_eq!(&source[d[0].location.start..d[0].location.end], "'drill-evidence/prod'");
    assert!(d[1].message.starts_with("invalid endpoint URL `not a url`"), "{d:?}");
    // A retention past what object lock keeps (and the calendar holds) is refused here, not at the end of a run.
    let source = drill_source("  evidence: {ship: {to: 's3://drill-evidence/p', retention: 110000000d}}\n", steps);
    let d = diagnostics(source.clone());
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].message.contains("is not between 1 second and 36500d"), "{d:?}");
    assert_eq!(&source[d[0].location.start..d[0].location.end], "110000000d");
}

#[test]
fn collateral_leave_names_workloads_as_namespace_slash_name_once() {
    let steps = "    - {id: s, pause: 1s}\n";
    let left = valid("  collateral: {leave: [batch/embeddings]}\n", steps);
    assert_eq!(left.spec.collateral_leave, ["batch/embeddings"]);
    let wrong = diagnostics(drill_source("  collateral: {leave: [embeddings, batch/a, batch/a]}\n", steps));
    let messages: Vec<&str> = wrong.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        ["`embeddings` must name a workload as `namespace/name`, e.g. `batch/embeddings`", "`batch/a` is listed twice"]
    );
}

#[test]
fn a_last_tier_needs_a_url_and_both_prices_and_its_wait_needs_it() {
    let waits = "    - {id: w, waitFor: last-tier-serving}\n";
    assert_eq!(
        problems(waits),
        ["`last-tier-serving` waits on the last tier's probe: declare `spec.lastTier` with its URL"]
    );
    let spec = "  lastTier: {url: 'gateway:80', interval: 10ms, pricePerRequest: 0.01, fallbackNodes: 0}\n";
    let p: Vec<String> = diagnostics(drill_source(spec, waits)).into_iter().map(|d| d.message).collect();
    assert!(p[0].starts_with("invalid last tier URL `gateway:80`"), "{p:?}");
    assert_eq!(p[1], "probe the last tier at most every 100ms");
    assert!(p[2].starts_with("give `pricePerRequest` and `requestsPerHour` together"), "{p:?}");
    assert_eq!(p[3], "the fallback runs at least one node to carry the service");
    let good = "  lastTier: {url: 'http://gateway:80/v1/last', pricePerRequest: 0.01, requestsPerHour: 100}\n";
    let tier = valid(good, waits).spec.last_tier.unwrap();
    assert_eq!(
        (tier.expect_status, tier.interval, tier.fallback_nodes),
        (200, std::time::Duration::from_secs(1), None)
    );
}

#[test]
fn a_hook_may_not_be_handed_the_tools_own_secrets() {
    let found = problems("    - {id: x, exec: {command: [env], env: [HYBRID_DRILL_SIGNING_KEY, SLACK_TOKEN]}}\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("`HYBRID_DRILL_SIGNING_KEY` holds one of hybrid-drill's own secrets"), "{found:?}");
}
