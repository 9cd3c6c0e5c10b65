//! Live progress on stderr: a spinner line on a terminal (step, elapsed, what it waits on, latest observation),
//! plain timestamped lines otherwise.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::timeline::{Observation, Timeline};

#[derive(Default)]
struct State {
    step: String,
    waiting: String,
    latest: String,
}

#[derive(Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
    state: Arc<Mutex<State>>,
    quiet: bool,
}

impl Progress {
    /// `quiet` keeps plain mode silent (for `--output json` consumers who read only stdout anyway).
    pub fn new(quiet: bool) -> Progress {
        let bar = (std::io::stderr().is_terminal() && !quiet).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress { bar, state: Arc::default(), quiet }
    }

    fn redraw(&self) {
        if let Some(bar) = &self.bar {
            let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let message = format!("{} · {} · last: {}", s.step, s.waiting, s.latest);
            bar.set_message(crate::secrets::redact(&message).into_owned());
        }
    }

    /// A line that stays on screen above the spinner.
    pub fn line(&self, text: &str) {
        let text = &*crate::secrets::redact(text);
        match &self.bar {
            Some(bar) => bar.println(text),
            None if !self.quiet => eprintln!("{text}"),
            None => {}
        }
    }

    pub fn step(&self, text: &str) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).step = text.to_string();
        self.redraw();
    }

    pub fn waiting(&self, text: &str) {
        let changed = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let changed = s.waiting != text;
            s.waiting = text.to_string();
            changed
        };
        if self.bar.is_none() && changed {
            self.line(&format!("          {text}"));
        }
        self.redraw();
    }

    fn observed(&self, obs: &Observation) {
        let text = obs.event.describe();
        if self.bar.is_none() {
            self.line(&format!("[{:>7.1}s] {text}", obs.t_ms as f64 / 1000.0));
        }
        self.state.lock().unwrap_or_else(|p| p.into_inner()).latest = text;
        self.redraw();
    }

    /// Follows the timeline until the returned handle is aborted.
    pub fn follow(&self, timeline: &Timeline) -> tokio::task::JoinHandle<()> {
        let mut rx = timeline.subscribe();
        let me = self.clone();
        tokio::spawn(async move {
            while let Some(obs) = rx.recv().await {
                me.observed(&obs);
            }
        })
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
