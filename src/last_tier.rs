//! The service's last tier (Tier 3) as the run sees it: its probe, through the whole run, recording each change of
//! whether it serves on the timeline (report/last_tier.rs measures from them).

use std::time::Duration;

use tokio::sync::watch;

use crate::drill::LastTier;
use crate::timeline::{Event, Timeline};

/// The header a lab stand-in names itself in: quoted in the report, so a measure of a stand-in is never taken for
/// one of the real last tier.
pub const STAND_IN_HEADER: &str = "hybrid-lab-stand-in";

/// One answer of the last tier: serving or not, in words, and a stand-in's name.
async fn probe_once(client: &reqwest::Client, tier: &LastTier) -> (bool, String, Option<String>) {
    let url = match crate::http::service_url(&tier.url) {
        Ok(url) => url,
        Err(e) => return (false, format!("invalid last tier URL: {e}"), None),
    };
    let shown = crate::http::bare(&url);
    match client.get(url).send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let stand_in = resp.headers().get(STAND_IN_HEADER).and_then(|v| v.to_str().ok()).map(String::from);
            let (serving, detail) = crate::http::judge_answer(&shown, status, tier.expect_status);
            (serving, detail, stand_in)
        }
        Err(e) => (false, format!("{shown}: {}", crate::cluster::error_chain(&e)), None),
    }
}

/// Probes the last tier until the run ends, publishing whether it serves and recording each change.
pub async fn probe_forever(tier: LastTier, out: watch::Sender<Option<bool>>, timeline: Timeline) {
    let client = match crate::http::client(tier.timeout) {
        Ok(c) => c,
        Err(e) => {
            let detail = format!("cannot build an HTTP client: {e}");
            timeline.record(Event::LastTierProbe { serving: false, detail, stand_in: None });
            let _ = out.send(Some(false));
            return;
        }
    };
    let mut last: Option<bool> = None;
    loop {
        let (serving, detail, stand_in) = probe_once(&client, &tier).await;
        if last != Some(serving) {
            timeline.record(Event::LastTierProbe { serving, detail, stand_in });
            last = Some(serving);
            let _ = out.send(Some(serving));
        }
        tokio::time::sleep(tier.interval.max(Duration::from_millis(100))).await;
    }
}
