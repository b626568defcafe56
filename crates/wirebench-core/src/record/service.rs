//! What the long-running services count about themselves — the server's sessions and bytes,
//! the exporter's probes — and one exporter probe's outcome: plain figures, counted by the
//! flows and rendered (as Prometheus text) by the app's `output::prometheus`. Pure data, no I/O.

use crate::vocab::plan::Protocol;

use super::dns::DnsResult;
use super::rr::RrResult;
use super::run::RunRecord;

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
#[derive(Debug, Clone)]
pub struct ProbeOutcome {
    /// The target as the scrape named it (HOST:PORT).
    pub target: String,
    /// Wall time the probe took, ns (set-up, the run, the report).
    pub duration_ns: u64,
    /// The finished test's record; `None` when the probe failed before one finished.
    pub result: Option<ProbeResult>,
    /// Why the probe failed, one line; `None` when it ran to its end.
    pub error: Option<ProbeError>,
}

/// The record of one probe's finished test, by kind (`kind=` of the scrape).
#[derive(Debug, Clone)]
pub enum ProbeResult {
    /// A wirebench transfer (`kind=run`, the default).
    Run(RunRecord),
    /// A transfer against a real iperf3 server (`kind=iperf3`), mapped as `run --iperf3` is.
    Iperf3(RunRecord),
    /// Round trips over one connection, one outstanding (`kind=ping`).
    Ping(RrResult),
    /// Requests with K in flight over T flows (`kind=rr`).
    Rr(RrResult),
    /// Queries against a DNS server (`kind=dns`).
    Dns(DnsResult),
}

impl ProbeResult {
    /// The `kind=` name of the probe.
    pub fn kind(&self) -> &'static str {
        match self {
            ProbeResult::Run(_) => "run",
            ProbeResult::Iperf3(_) => "iperf3",
            ProbeResult::Ping(_) => "ping",
            ProbeResult::Rr(_) => "rr",
            ProbeResult::Dns(_) => "dns",
        }
    }

    /// Why the finished test does not count as a success, when it does not: the server
    /// aborted the session, nothing was answered, or (DNS) an answer's RCODE was not NOERROR.
    pub fn failure(&self) -> Option<ProbeError> {
        let fail = |reason: FailReason, detail: String| Some(ProbeError { reason, detail });
        match self {
            ProbeResult::Run(r) | ProbeResult::Iperf3(r) if r.server.aborted => fail(
                FailReason::Aborted,
                format!(
                    "the server aborted the run: {}",
                    r.server.abort_reason.as_deref().unwrap_or("no reason given")
                ),
            ),
            ProbeResult::Ping(r) | ProbeResult::Rr(r) if r.server.aborted => fail(
                FailReason::Aborted,
                format!(
                    "the server aborted the session: {}",
                    r.server.abort_reason.as_deref().unwrap_or("no reason given")
                ),
            ),
            ProbeResult::Ping(r) | ProbeResult::Rr(r) if r.answered == 0 => fail(
                FailReason::Unanswered,
                format!("none of {} requests was answered", r.sent),
            ),
            ProbeResult::Dns(d) if d.counts.answered == 0 => fail(
                FailReason::Unanswered,
                format!("none of {} queries was answered", d.counts.sent),
            ),
            ProbeResult::Dns(d) if d.counts.noerror != d.counts.answered => fail(
                FailReason::Rcode,
                format!(
                    "{} of {} answers had an RCODE other than NOERROR (NXDOMAIN {}, SERVFAIL {}, REFUSED {}, other {})",
                    d.counts.answered - d.counts.noerror,
                    d.counts.answered,
                    d.counts.nxdomain,
                    d.counts.servfail,
                    d.counts.refused,
                    d.counts.other_rcode
                ),
            ),
            _ => None,
        }
    }
}

/// Why a probe failed, as a class (the `reason` label) and one line of detail (the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeError {
    /// The class.
    pub reason: FailReason,
    /// What happened, one line.
    pub detail: String,
}

/// The classes of probe failure: few and fixed, so they make a bounded label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// The test did not finish within the probe's time.
    Timeout,
    /// The test could not run or broke off (connection refused, a protocol error).
    Error,
    /// The server ended the session abnormally (a limit, shutdown).
    Aborted,
    /// The test ran and nothing was answered.
    Unanswered,
    /// DNS: an answer's RCODE was not NOERROR.
    Rcode,
}

impl FailReason {
    /// The `reason` label's value.
    pub fn as_str(self) -> &'static str {
        match self {
            FailReason::Timeout => "timeout",
            FailReason::Error => "error",
            FailReason::Aborted => "aborted",
            FailReason::Unanswered => "unanswered",
            FailReason::Rcode => "rcode",
        }
    }
}

impl ProbeOutcome {
    /// Whether the probe succeeded: a test finished and its record shows no failure.
    pub fn success(&self) -> bool {
        self.failure().is_none()
    }

    /// Why it failed: the error that stopped it, or what its record shows; `None` on success.
    pub fn failure(&self) -> Option<ProbeError> {
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        match &self.result {
            Some(r) => r.failure(),
            None => Some(ProbeError {
                reason: FailReason::Error,
                detail: "the probe produced no result".into(),
            }),
        }
    }
}
