//! The signals that stop a measuring command — SIGINT (Ctrl-C), SIGTERM (`timeout`, CI
//! runners, systemd) and SIGHUP (a closed terminal) — and the exit status each one maps to.
//! Owns watching for them and ending the process at a second one; must not store or print
//! results (the commands do that between the first signal and their exit).

use std::process::ExitCode;

use tokio::signal::unix::{signal, Signal, SignalKind};

/// A signal that asked a command to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM: `kill`, `timeout`, CI runners, systemd.
    Terminate,
    /// SIGHUP: the terminal went away.
    Hangup,
}

impl StopSignal {
    /// The conventional name, e.g. `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        }
    }

    /// The exit status of a command stopped by this signal: 128 + the signal number, as a
    /// shell reports a process the signal killed (130 for SIGINT, 143 for SIGTERM, 129 for
    /// SIGHUP), so scripts can tell a stop from a failed run (1).
    pub fn exit_code(self) -> u8 {
        128 + match self {
            StopSignal::Interrupt => 2,
            StopSignal::Terminate => 15,
            StopSignal::Hangup => 1,
        }
    }

    /// Why a campaign stopped, as stored and printed: `interrupted (SIGTERM)`.
    pub fn reason(self) -> String {
        match self {
            StopSignal::Interrupt => "interrupted (SIGINT, Ctrl-C)".to_string(),
            other => format!("interrupted ({})", other.name()),
        }
    }
}

/// How a measuring command ended, for its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It ran to its end; `false` when a run failed (exit status 1).
    Ran(bool),
    /// A signal stopped it (exit status 128 + the signal number).
    Stopped(StopSignal),
}

impl Ended {
    /// The process exit status: 0 ok, 1 a run failed, 129/130/143 stopped by a signal.
    pub fn exit_code(self) -> ExitCode {
        match self {
            Ended::Ran(true) => ExitCode::SUCCESS,
            Ended::Ran(false) => ExitCode::from(1),
            Ended::Stopped(s) => ExitCode::from(s.exit_code()),
        }
    }
}

/// Watches SIGINT, SIGTERM and SIGHUP from the moment it is made: while it lives, they no
/// longer kill the process, they are reported by [`Stops::next`].
#[derive(Debug)]
pub struct Stops {
    watched: Vec<(StopSignal, Signal)>,
}

impl Stops {
    /// Starts watching. A signal that cannot be watched (no handler could be installed) keeps
    /// its default action: it still ends the process, only unrecorded.
    pub fn watch() -> Stops {
        let kinds = [
            (StopSignal::Interrupt, SignalKind::interrupt()),
            (StopSignal::Terminate, SignalKind::terminate()),
            (StopSignal::Hangup, SignalKind::hangup()),
        ];
        Stops {
            watched: kinds
                .into_iter()
                .filter_map(|(stop, kind)| signal(kind).ok().map(|s| (stop, s)))
                .collect(),
        }
    }

    /// Waits for the next of the watched signals (for ever when none is watched).
    pub async fn next(&mut self) -> StopSignal {
        if self.watched.is_empty() {
            return std::future::pending().await;
        }
        std::future::poll_fn(|cx| {
            for (stop, s) in &mut self.watched {
                if s.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(*stop);
                }
            }
            std::task::Poll::Pending
        })
        .await
    }

    /// From now on, the next watched signal ends the process at once with its exit status
    /// (a second Ctrl-C when storing takes too long). Needs a running tokio runtime.
    pub fn second_ends_process(mut self) {
        tokio::spawn(async move {
            let second = self.next().await;
            eprintln!("{} again: exiting at once", second.name());
            std::process::exit(i32::from(second.exit_code()));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_are_128_plus_the_signal_number() {
        assert_eq!(StopSignal::Interrupt.exit_code(), 128 + libc::SIGINT as u8);
        assert_eq!(StopSignal::Terminate.exit_code(), 128 + libc::SIGTERM as u8);
        assert_eq!(StopSignal::Hangup.exit_code(), 128 + libc::SIGHUP as u8);
        assert_eq!(StopSignal::Terminate.reason(), "interrupted (SIGTERM)");
    }
}
