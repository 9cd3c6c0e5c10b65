//! The safety nets in the report: each expected alert with its time to detect, each warmer with the time it saved or
//! why it was not in effect, and the action items of each miss (the judging is `crate::nets::judge`).

use std::fmt::{self, Write};

use super::model::{ActionItem, ActionSource, Report};
use super::words::human_seconds;
use crate::nets::{AlertCheck, AlertVerdict, SafetyNets, WarmerCheck, WarmerVerdict};

/// One line per expected alert, then one per warmer.
pub fn lines(nets: &SafetyNets) -> Vec<String> {
    nets.alerts.iter().map(alert_line).chain(nets.warmers.iter().map(warmer_line)).collect()
}

fn alert_line(a: &AlertCheck) -> String {
    let within = human_seconds(a.within_seconds);
    let muted = if a.silenced { ", silenced" } else { "" };
    let detected = |d: Option<f64>| d.map(human_seconds).unwrap_or_else(|| "?".into());
    match a.verdict {
        AlertVerdict::Fired => format!(
            "alert {}: fired {} after the fault (seen {}{muted}), within {within}",
            a.name,
            detected(a.detect_seconds),
            detected(a.seen_seconds)
        ),
        AlertVerdict::Late => format!(
            "alert {}: LATE, fired {} after the fault{muted}, past its deadline of {within}",
            a.name,
            detected(a.detect_seconds)
        ),
        AlertVerdict::Missing => {
            format!("alert {}: MISSING, never fired in Alertmanager during the drill (deadline {within})", a.name)
        }
        AlertVerdict::FiringBeforeFault => {
            format!(
                "alert {}: firing before the fault ({}): it says nothing of this fault's detection",
                a.name, a.detail
            )
        }
        AlertVerdict::NotJudged => format!("alert {}: not judged, the drill injected no fault", a.name),
    }
}

fn warmer_line(w: &WarmerCheck) -> String {
    match w.verdict {
        WarmerVerdict::InEffect => format!(
            "warmer {} ({}): in effect, saved {} against {} without it: {}",
            w.name,
            w.kind,
            human_seconds(w.saved_seconds.unwrap_or_default()),
            human_seconds(w.without_it_seconds),
            w.detail
        ),
        WarmerVerdict::NotInEffect => format!("warmer {} ({}): NOT IN EFFECT: {}", w.name, w.kind, w.detail),
        WarmerVerdict::NotMeasured => format!("warmer {} ({}): not checked: {}", w.name, w.kind, w.detail),
    }
}

/// `report.md`'s section.
pub fn markdown(md: &mut String, report: &Report) -> fmt::Result {
    let Some(nets) = &report.safety_nets else { return Ok(()) };
    writeln!(md, "\n## Safety nets\n")?;
    writeln!(md, "Time to detect is from the fault (t0) to the alert's `startsAt` in Alertmanager.\n")?;
    for line in lines(nets) {
        writeln!(md, "- {line}")?;
    }
    Ok(())
}

/// `report.html`'s section.
pub fn html(report: &Report) -> maud::Markup {
    let Some(nets) = &report.safety_nets else { return maud::html! {} };
    maud::html! {
        section id="safety-nets" {
            h2 { "Safety nets" }
            p class="muted" { "Time to detect is from the fault (t0) to the alert's startsAt in Alertmanager." }
            ul { @for line in lines(nets) { li { (line) } } }
        }
    }
}

/// An action item for each expected alert missed and each warmer not in effect.
pub fn action_items(report: &Report, owner: &str) -> Vec<ActionItem> {
    let Some(nets) = &report.safety_nets else { return Vec::new() };
    let alerts = nets.alerts.iter().filter(|a| a.verdict.missed()).map(|a| ActionItem {
        source: ActionSource::MissedObjective,
        objective: format!("alert {} fires within {}", a.name, human_seconds(a.within_seconds)),
        measured: a.detect_seconds.map(human_seconds).unwrap_or_else(|| "not fired".into()),
        cause: "no page for this failure: check the rule exists and its expression and `for:` fit the fault \
                (runbooks/warmers-and-alerts.md)"
            .into(),
        owner: owner.into(),
    });
    let warmers = nets.warmers.iter().filter(|w| w.verdict == WarmerVerdict::NotInEffect).map(|w| ActionItem {
        source: ActionSource::Warmer,
        objective: format!("warmer {} ({}) in effect on the fallback", w.name, w.kind),
        measured: w.measured_seconds.map(human_seconds).unwrap_or_else(|| "not measured".into()),
        cause: format!("{}; see runbooks/warmers-and-alerts.md", w.detail),
        owner: owner.into(),
    });
    alerts.chain(warmers).collect()
}
