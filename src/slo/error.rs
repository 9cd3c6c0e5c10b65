//! Why the SLIs refuse a drill before its fault, and why a stop condition could not be judged in a round.

use crate::prometheus::QueryError;

/// The users' steady state could not be shown before the fault: the drill is refused, nothing touched.
#[derive(Debug, thiserror::Error)]
pub enum SteadyStateError {
    #[error("the SLIs' steady state cannot be checked: {0}")]
    Connect(QueryError),
    #[error("SLI {sli} could not be read, so the steady state is unknown: {error}")]
    Unread { sli: String, error: QueryError },
    #[error("SLI {sli} has no value (its query returned no number): the steady state is unknown")]
    NoValue { sli: String },
    #[error(
        "SLI {sli} is {value} before the fault, outside its objective {objective}: the service is not in its steady state"
    )]
    Outside { sli: String, value: f64, objective: String },
    #[error(
        "{window}: rate() needs two samples in its window, so the SLI is empty; widen it to at least four scrape intervals"
    )]
    WindowTooShort { window: String },
}

/// A stop condition that could not be read this round.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    #[error("alert {name}: {error}")]
    Alert { name: String, error: crate::alertmanager::AlertmanagerError },
    #[error("stop {name}: {error}")]
    Query { name: String, error: QueryError },
}
