//! What the long-running services count about themselves — the server's sessions and bytes,
//! the exporter's probes — and one exporter probe's outcome: plain figures, counted by the
//! flows and rendered (as OpenMetrics) by the app's `output::metrics`. Pure data, no I/O.

use crate::plan::Protocol;

use super::rr::RrResult;
use super::RunRecord;

/// A server's counters since it started (`wirebench server --metrics`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerCounts {
    /// Sessions admitted and accepted (past admission and the request checks).
    pub sessions_started: u64,
    /// Sessions that ended with a complete report.
    pub sessions_finished: u64,
    /// Sessions that ended aborted (client gone, a limit, shutdown).
    pub sessions_aborted: u64,
    /// Sessions running now.
    pub sessions_running: u64,
    /// Session requests refused, by reason: the limit flag's name (`max-sessions`,
    /// `max-bytes`, …), `shutdown` or `invalid-request`; sorted by reason.
    pub sessions_refused: Vec<(String, u64)>,
    /// Times a limit was hit (a refusal or an abort naming it), by the limit flag's name.
    pub limit_hits: Vec<(String, u64)>,
    /// Payload bytes per protocol, counted when each session ends; every protocol listed.
    pub bytes: Vec<ProtocolBytes>,
}

/// Payload bytes a server read and sent over one protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolBytes {
    /// The protocol.
    pub protocol: Protocol,
    /// Bytes read from clients (forward sessions, request-response).
    pub read: u64,
    /// Bytes sent to clients (reversed sessions).
    pub sent: u64,
}

/// The exporter's counters since it started (its own `/metrics`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExporterCounts {
    /// Probes run (successful or not).
    pub probes_run: u64,
    /// Probes that ran and failed (`wirebench_probe_success` 0).
    pub probes_failed: u64,
    /// Probe requests refused before running, by reason (`not-allowed`, `bad-request`,
    /// `too-many`); sorted by reason.
    pub probes_refused: Vec<(String, u64)>,
    /// Probes running now.
    pub probes_in_flight: u64,
}

/// One exporter probe: what ran against which target, and what came of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeOutcome {
    /// The target as the scrape named it (HOST:PORT).
    pub target: String,
    /// Wall time the probe took, ns (set-up, the run, the report).
    pub duration_ns: u64,
    /// The finished run of a transfer probe; `None` when the probe failed or was a ping.
    pub run: Option<RunRecord>,
    /// The finished exchange of a ping probe (`kind=ping`); `None` otherwise.
    pub ping: Option<RrResult>,
    /// Why the probe failed, one line; `None` when it succeeded.
    pub error: Option<String>,
}

impl ProbeOutcome {
    /// Whether the probe succeeded: a run or ping finished and was not aborted.
    pub fn success(&self) -> bool {
        self.error.is_none()
            && (self.run.as_ref().is_some_and(|r| !r.server.aborted)
                || self.ping.as_ref().is_some_and(|p| !p.server.aborted))
    }
}
