//! The progress bar of `wirebench run` on stderr: runs done of the plan, the configuration
//! running now, its repeat, elapsed time and the estimated time left. Hidden when stderr is not a
//! terminal or with --quiet; never touches stdout, whose output it only pauses around.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar over a plan of runs.
pub struct Progress {
    bar: ProgressBar,
    labels: Vec<String>,
}

impl Progress {
    /// A bar over runs labelled `labels` (plan order); hidden when `quiet` or stderr is no
    /// terminal.
    pub fn new(labels: Vec<String>, quiet: bool) -> Progress {
        let total = labels.len() as u64;
        let bar = if quiet || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
        };
        // The template is a constant known to parse; fall back to the default style anyway.
        let style = ProgressStyle::with_template(
            "{bar:20.cyan/blue} {pos}/{len} runs [{elapsed_precise}, ETA {eta}] {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style.progress_chars("=> "));
        bar.enable_steady_tick(Duration::from_millis(250));
        let progress = Progress { bar, labels };
        progress.note_next(0);
        progress
    }

    /// Whether the bar is drawn at all.
    pub fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// Records that run `position` (1-based) finished, printing `print` above the bar.
    pub fn finished(&self, position: usize, print: impl FnOnce()) {
        self.bar.suspend(print);
        self.bar.set_position(position as u64);
        self.note_next(position);
    }

    /// Prints a line (`print`) above the bar while a run goes, e.g. an interval line.
    pub fn print_above(&self, print: impl FnOnce()) {
        self.bar.suspend(print);
    }

    /// Shows what is happening now (e.g. a warm-up).
    pub fn note(&self, message: &str) {
        self.bar.set_message(message.to_string());
    }

    /// Shows which run comes at 0-based plan index `index`.
    pub fn note_next(&self, index: usize) {
        if let Some(label) = self.labels.get(index) {
            self.bar.set_message(format!("now: {label}"));
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
