//! The validated `spec.expectedAlerts` and `spec.warmers`: the alerts the design relies on, with their deadlines, and
//! the warmers its RTO relies on, with what each must achieve on a fallback node.

use std::time::Duration;

use crate::alertmanager::Matcher;

pub use super::raw_nets::WarmerKind;

/// The alerts a drill expects to fire, and where to read them.
#[derive(Debug, Clone)]
pub struct ExpectedAlerts {
    pub alertmanager: String,
    /// Where `preflight` looks for their rules; `None` when neither the section nor `spec.slo` names a Prometheus.
    pub prometheus: Option<String>,
    pub interval: Duration,
    pub alerts: Vec<ExpectedAlert>,
}

impl ExpectedAlerts {
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(2);
}

/// One expected alert: its name, its deadline after t0, and further matchers.
#[derive(Debug, Clone)]
pub struct ExpectedAlert {
    pub name: String,
    pub within: Duration,
    pub matchers: Vec<Matcher>,
}

impl ExpectedAlert {
    /// The matchers Alertmanager is asked with: the alert's name first, then the drill's own.
    pub fn all_matchers(&self) -> Vec<Matcher> {
        let name = Matcher::parse(&format!("alertname={:?}", self.name));
        name.into_iter().chain(self.matchers.iter().cloned()).collect()
    }
}

/// One warmer and what it must achieve on a fallback node.
#[derive(Debug, Clone)]
pub struct Warmer {
    pub name: String,
    pub kind: WarmerKind,
    /// The bound a measured step must stay under: the pull (`imageCache`) or the model's download
    /// (`weightsCache`); `None` for `warmCapacity`, judged by whether a new node was needed.
    pub under: Option<Duration>,
    pub priority_class: Option<String>,
    pub without_it: Duration,
}

impl WarmerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WarmerKind::ImageCache => "imageCache",
            WarmerKind::WeightsCache => "weightsCache",
            WarmerKind::WarmCapacity => "warmCapacity",
        }
    }
}
