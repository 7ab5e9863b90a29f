//! A progress bar for work on one input that takes more than about a second.
//!
//! The bar is drawn on standard error only when it is a terminal, and only once the work has
//! taken [`DELAY`] (so a quick command prints nothing extra). It shows the bytes read of the
//! file's size, then the phase the work is in (parsing, counting tokens, validating), with a
//! running count of the text counted. `CONTEXTFOLD_PROGRESS_AFTER_MS` sets the delay (0 shows
//! the bar at once). A shown bar is drawn again at once when the phase changes, so each phase
//! it enters is seen, however short.

use contextfold::core::TokenCounter;
use contextfold::input::ReadProgress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::mpsc;
use std::time::Duration;

/// How long work runs before its bar appears.
const DELAY: Duration = Duration::from_secs(1);

/// The bar of one input's work; cleared when dropped.
pub struct Progress {
    bar: ProgressBar,
    /// Dropping it tells the thread that would reveal the bar that the work is done.
    _done: Option<mpsc::Sender<()>>,
}

impl Progress {
    /// Starts a hidden bar for work on `what` (a file name); it shows itself after the delay
    /// if standard error is a terminal.
    pub fn start(what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_prefix(what.to_string());
        bar.set_style(style("{spinner} {prefix}: reading {bytes}"));
        let delay = std::env::var("CONTEXTFOLD_PROGRESS_AFTER_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(DELAY, Duration::from_millis);
        let reveal = |bar: &ProgressBar| {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar.force_draw();
        };
        if delay.is_zero() {
            reveal(&bar);
            return Progress { bar, _done: None };
        }
        let (done, waiting) = mpsc::channel::<()>();
        let shown = bar.clone();
        // The thread ends after the delay or as soon as the work is done, whichever is first.
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = waiting.recv_timeout(delay) {
                reveal(&shown);
            }
        });
        Progress { bar, _done: Some(done) }
    }

    /// Shows the bytes read of the total.
    pub fn read(&self, read: ReadProgress) {
        match read.total {
            Some(total) if self.bar.length() != Some(total) => {
                self.bar.set_length(total);
                self.bar.set_style(style("{spinner} {prefix}: reading {bytes}/{total_bytes} {wide_bar} {elapsed}"));
            }
            _ => {}
        }
        self.bar.set_position(read.read);
    }

    /// Names the phase the work is in now.
    pub fn phase(&self, phase: &str) {
        self.bar.set_style(style(&format!("{{spinner}} {{prefix}}: {phase} {{elapsed}}")));
        self.bar.force_draw();
    }

    /// `inner`, counting the text it is given on the bar.
    pub fn counting<'a>(&'a self, inner: &'a dyn TokenCounter) -> Counting<'a> {
        self.bar.set_position(0);
        self.bar.unset_length();
        self.bar.set_style(style("{spinner} {prefix}: counting tokens, {bytes} of text counted {elapsed}"));
        self.bar.force_draw();
        Counting { inner, bar: &self.bar }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner())
}

/// A token counter that moves a bar by the bytes of text it counts.
pub struct Counting<'a> {
    inner: &'a dyn TokenCounter,
    bar: &'a ProgressBar,
}

impl TokenCounter for Counting<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn count_text(&self, text: &str) -> u64 {
        self.bar.inc(text.len() as u64);
        self.inner.count_text(text)
    }
}
