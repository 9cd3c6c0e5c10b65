//! The drill's rate windows against the scrape interval of the targets they read, from Prometheus's
//! `/api/v1/targets`: a `rate()` needs two samples in its window (fewer than two scrape intervals and it is empty,
//! so the steady state is refused), one missed scrape empties a window under four, and every window delays what
//! the SLIs say of users by about half its length plus a scrape.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::drill::slo::{SloSpec, StopCondition};
use crate::prometheus::{Prometheus, QueryError};

/// One range window of one of the drill's queries and the longest scrape interval among the targets it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowCheck {
    /// `SLI success-ratio`, `stop condition stopWhen[1]`.
    pub object: String,
    pub selector: String,
    pub window: Duration,
    pub scrape: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// At least four scrapes: a missed scrape leaves samples.
    Fits,
    /// Two or three: the query answers, but one missed or late scrape empties it.
    Tight,
    /// Fewer than two: `rate()` has at most one sample and returns nothing.
    TooShort,
}

impl WindowCheck {
    pub fn fit(&self) -> Fit {
        let scrapes = self.window.as_secs_f64() / self.scrape.as_secs_f64().max(f64::EPSILON);
        if scrapes < 2.0 {
            Fit::TooShort
        } else if scrapes < 4.0 {
            Fit::Tight
        } else {
            Fit::Fits
        }
    }

    pub fn describe(&self) -> String {
        let (w, s) = (humantime::format_duration(self.window), humantime::format_duration(self.scrape));
        let scrapes = self.window.as_secs_f64() / self.scrape.as_secs_f64().max(f64::EPSILON);
        format!(
            "{}: the [{w}] window over {} holds {scrapes:.1} scrapes at its target's {s}",
            self.object, self.selector
        )
    }

    /// How much later than users the query shows a change: a scrape, then half the window to move the average.
    pub fn lag(&self) -> Duration {
        self.scrape + self.window / 2
    }
}

/// Every range window of the SLIs and of the stop conditions' own queries, with its targets' scrape interval; a
/// window whose selector matches no series now is left out (the steady-state check says so).
pub async fn windows(spec: &SloSpec, prometheus: &Prometheus) -> Result<Vec<WindowCheck>, QueryError> {
    let mut queries: Vec<(String, &str)> = spec.slis.iter().map(|s| (format!("SLI {}", s.name), &*s.query)).collect();
    for stop in &spec.stop_when {
        if let StopCondition::Query { name, query, .. } = stop
            && !spec.slis.iter().any(|s| &s.query == query)
        {
            queries.push((format!("stop condition {name}"), query));
        }
    }
    let targets = targets(prometheus).await?;
    let mut known: BTreeMap<String, Option<Duration>> = BTreeMap::new();
    let mut out = Vec::new();
    for (object, query) in queries {
        for (window, selector) in crate::drill::windows::of(query) {
            let scrape = match known.get(&selector) {
                Some(s) => *s,
                None => {
                    let s = interval_of(prometheus, &targets, &selector).await?;
                    *known.entry(selector.clone()).or_insert(s)
                }
            };
            if let Some(scrape) = scrape {
                out.push(WindowCheck { object: object.clone(), selector, window, scrape });
            }
        }
    }
    Ok(out)
}

/// A target: its `job` and `instance` labels and its scrape interval.
type Target = (String, String, Duration);

async fn targets(prometheus: &Prometheus) -> Result<Vec<Target>, QueryError> {
    #[derive(Deserialize)]
    struct Answer {
        data: Data,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Data {
        active_targets: Vec<Active>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Active {
        #[serde(default)]
        labels: BTreeMap<String, String>,
        #[serde(default)]
        scrape_interval: Option<String>,
    }
    let (url, body) = prometheus.text("api/v1/targets", &[("state", "active")]).await?;
    let answer: Answer =
        serde_json::from_str(&body).map_err(|e| QueryError::Answer { url: url.clone(), reason: e.to_string() })?;
    Ok(answer
        .data
        .active_targets
        .into_iter()
        .filter_map(|t| {
            let interval = humantime::parse_duration(t.scrape_interval.as_deref()?).ok()?;
            let label = |k: &str| t.labels.get(k).cloned().unwrap_or_default();
            Some((label("job"), label("instance"), interval))
        })
        .collect())
}

/// The longest scrape interval of the targets whose series `selector` reads now.
async fn interval_of(
    prometheus: &Prometheus,
    targets: &[Target],
    selector: &str,
) -> Result<Option<Duration>, QueryError> {
    let query = format!("count by (job, instance) ({selector})");
    let series = prometheus.instant_vector(&query, chrono::Utc::now()).await?;
    let label = |s: &super::Series, k: &str| s.labels.get(k).cloned().unwrap_or_default();
    Ok(series
        .iter()
        .filter_map(|s| {
            let (job, instance) = (label(s, "job"), label(s, "instance"));
            targets.iter().filter(|t| t.0 == job && t.1 == instance).map(|t| t.2).max()
        })
        .max())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(window: u64, scrape: u64) -> WindowCheck {
        WindowCheck {
            object: "SLI success-ratio".into(),
            selector: "x_total".into(),
            window: Duration::from_secs(window),
            scrape: Duration::from_secs(scrape),
        }
    }

    #[test]
    fn a_window_needs_two_scrapes_and_four_to_spare_one() {
        assert_eq!(check(20, 30).fit(), Fit::TooShort);
        assert_eq!(check(60, 30).fit(), Fit::Tight);
        assert_eq!(check(120, 30).fit(), Fit::Fits);
        assert_eq!(check(20, 2).lag(), Duration::from_secs(12));
        assert!(check(20, 30).describe().contains("[20s] window over x_total holds 0.7 scrapes at its target's 30s"));
    }
}
