//! `plan` (and `run --dry-run`): the drill resolved read-only, what a run would touch and the preflight verdict, as
//! text or as JSON, and the code a run would exit with before touching anything.

use std::path::Path;

use chrono::Utc;
use serde_json::{Value, json};

use super::SetupError;
use crate::cluster::{self, KubeContext};
use crate::drill::{Action, Check, Drill, LoadedDrill, OnDeviation};
use crate::exit::{EXIT_INVALID, EXIT_PASSED, EXIT_REFUSED};
use crate::gates::{self, GateState, Override, Reading};
use crate::plan::{self, Plan, PodTarget};
use crate::preflight::{self, PreflightReport};

/// What `plan` found: the cluster reached, the plan, and the preflight report (or why it could not run).
pub struct Planned {
    pub context: String,
    pub server: String,
    pub version: String,
    pub plan: Plan,
    pub preflight: Result<PreflightReport, preflight::PreflightError>,
    pub warnings: Vec<String>,
    /// Each start gate as read now.
    pub gates: Vec<Reading>,
    /// The closed gates `run --dry-run --override-gate` would let through.
    pub overrides: Vec<Override>,
}

/// Resolves everything read-only and says what a run would do.
pub async fn plan_only(loaded: &LoadedDrill, target: &KubeContext, reports_dir: &Path) -> Result<Planned, SetupError> {
    let drill = &loaded.drill;
    let (cluster, version) = cluster::connect(target, &drill.spec.cluster).await?;
    let plan = plan::resolve_for(&cluster, drill, plan::access::Scope::Plan).await?;
    let targets = preflight::PreflightTargets::of(drill);
    let mut preflight = preflight::run(&cluster.reader(), &targets, &preflight::Expectations::of(drill)).await;
    if let (Ok(report), Some(slo)) = (&mut preflight, &drill.spec.slo) {
        let tried = crate::slo::trial::try_queries(slo, &cluster.reader()).await;
        *report = std::mem::replace(report, preflight::PreflightReport::new("", "", targets.clone(), Vec::new()))
            .with_findings(tried);
    }
    if let Ok(report) = &mut preflight {
        let nets = crate::nets::preflight::findings(drill).await;
        *report = std::mem::replace(report, preflight::PreflightReport::new("", "", targets.clone(), Vec::new()))
            .with_findings(nets);
    }
    let warnings = crate::drill::left_in_place::warnings(drill);
    let gates = gates::read(&cluster, drill, reports_dir, Utc::now()).await;
    Ok(Planned {
        context: cluster.context.clone(),
        server: cluster.server.clone(),
        version,
        plan,
        preflight,
        warnings,
        gates,
        overrides: Vec::new(),
    })
}

/// The commands the drill runs on this machine, each line as written, and what `run` needs to start them.
fn commands_text(drill: &Drill) -> String {
    let commands = crate::drill::commands::of(drill);
    if commands.is_empty() {
        return String::new();
    }
    let lines: String = commands.iter().map(|c| format!("  {c}\n")).collect();
    format!(
        "commands run on this machine, with its identity and Secrets at hand (`run` needs --allow-commands):\n{lines}"
    )
}

impl Planned {
    /// The plan as `plan` prints it.
    pub fn text(&self, drill: &Drill) -> String {
        let verdict = match &self.preflight {
            Ok(report) => format!("{}{}\n", preflight::render::table(report), preflight::plan_note(drill, report)),
            Err(e) => format!("preflight could not run: {e}\n"),
        };
        let left: String = self.warnings.iter().map(|w| format!("warning: {w}\n")).collect();
        let gates = gates::describe(&self.gates, &self.overrides);
        format!(
            "context {} ({}, Kubernetes {})\n{}{}{left}\n{gates}\n{verdict}nothing was changed\n",
            self.context,
            self.server,
            self.version,
            self.plan.describe(drill),
            commands_text(drill)
        )
    }

    /// The plan as `plan -o json` prints it (`schema: hybrid-drill.io/plan/v1`).
    pub fn json(&self, drill: &Drill) -> Value {
        let pods = |pods: &[PodTarget]| -> Vec<Value> {
            pods.iter()
                .map(|p| json!({"namespace": p.namespace, "name": p.name, "node": p.node, "gpus": p.gpus, "loss": p.loss}))
                .collect()
        };
        let budgets: Vec<Value> = self
            .plan
            .budgets
            .iter()
            .map(|b| json!({"namespace": b.namespace, "name": b.name, "disruptions_allowed": b.disruptions_allowed}))
            .collect();
        let preflight = match &self.preflight {
            Ok(report) => serde_json::to_value(report).unwrap_or_default(),
            Err(e) => json!({"error": e.to_string()}),
        };
        json!({
            "schema": "hybrid-drill.io/plan/v1",
            "context": self.context,
            "server": self.server,
            "kubernetes": self.version,
            "drill": drill.metadata.name,
            "nodes": self.plan.on_prem_nodes,
            "cordoned_already": self.plan.cordoned_already,
            "pods_to_evict": if self.plan.drains { pods(&self.plan.pods_to_evict) } else { Vec::new() },
            "pods_protected": pods(&self.plan.pods_protected),
            "budgets": budgets,
            "node_pool": self.plan.node_pool,
            "pool_gpu_limit": self.plan.pool_gpu_limit,
            "commands": crate::drill::commands::of(drill),
            "steps": drill.spec.steps.iter().map(|s| json!({"id": s.id, "action": s.action.name(),
                "timeout_seconds": s.timeout.as_secs()})).collect::<Vec<_>>(),
            "warnings": self.warnings,
            "gates": self.gates.iter().map(gate_json).collect::<Vec<_>>(),
            "refused": self.refused(drill),
            "text": self.text(drill),
            "preflight": preflight,
        })
    }

    /// Whether a run would be refused before touching anything: a closed start gate no override lets through, or its
    /// preflight step.
    pub fn refused(&self, drill: &Drill) -> bool {
        if gates::judge(&self.gates, &self.overrides, "").is_err() {
            return true;
        }
        let Ok(report) = &self.preflight else { return false };
        !report.passed(false) && refusing_step(drill)
    }

    /// The code a run would exit with before touching anything: refused (a closed start gate, or a failed check) as
    /// `preflight` and `run` are, 2 when the preflight could not run, else 0.
    pub fn exit_code(&self, drill: &Drill) -> u8 {
        match &self.preflight {
            _ if self.refused(drill) => EXIT_REFUSED,
            Err(_) => EXIT_INVALID,
            Ok(_) if self.refused(drill) => EXIT_REFUSED,
            Ok(_) => EXIT_PASSED,
        }
    }
}

/// Whether the drill has a `check: preflight` step that stops on a failed check.
fn refusing_step(drill: &Drill) -> bool {
    drill.spec.steps.iter().any(|s| matches!(s.action, Action::Check(Check::Preflight, d) if d != OnDeviation::Warn))
}

/// One start gate in `plan -o json`: its name, what it reads, and, when closed, why and what opens it.
fn gate_json(reading: &Reading) -> Value {
    match &reading.state {
        GateState::Open => json!({"gate": reading.gate, "what": reading.what, "open": true}),
        GateState::Closed { why, fix } => {
            json!({"gate": reading.gate, "what": reading.what, "open": false, "why": why, "fix": fix})
        }
    }
}
