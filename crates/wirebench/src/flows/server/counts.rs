//! The server's own counters for `wirebench server --metrics`: sessions started, finished,
//! aborted and refused (by the limit flag that refused them), limit hits, bytes per protocol
//! read and sent (the gate's meter, so every kind counts, perf and iperf3 included).
//! Counted once per session start, refusal or end — never per message — with atomics (a
//! refusal's reason under a mutex, off the data path). It renders nothing: see
//! [`MetricsHandle::snapshot`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use wirebench_core::record::service::{ProtocolBytes, ServerCounts};
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::proto::ServerReport;

use super::admission::Admission;
use super::meter::Moved;

const PROTOCOLS: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Quic];

/// The counters one server shares between its sessions.
#[derive(Debug, Default)]
pub(super) struct ServerMetrics {
    started: AtomicU64,
    finished: AtomicU64,
    aborted: AtomicU64,
    /// Per protocol (in [`PROTOCOLS`] order): bytes read, bytes sent.
    bytes: [[AtomicU64; 2]; 3],
    refused: Mutex<BTreeMap<String, u64>>,
    limit_hits: Mutex<BTreeMap<String, u64>>,
}

impl ServerMetrics {
    /// A session passed admission and the request checks.
    pub(super) fn started(&self) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    /// A session request was refused with `reason` (the text sent to the client).
    pub(super) fn refused(&self, reason: &str) {
        let flag = limit_flag(reason);
        let key = flag.clone().unwrap_or_else(|| {
            if reason.contains("shutting down") {
                "shutdown".into()
            } else {
                "invalid-request".into()
            }
        });
        bump(&self.refused, key);
        if let Some(flag) = flag {
            bump(&self.limit_hits, flag);
        }
    }

    /// A session of `protocol` ended with `report` (once per session, aborted ones
    /// included), having moved `moved`.
    pub(super) fn ended(&self, protocol: Protocol, report: &ServerReport, moved: Moved) {
        if report.aborted {
            self.aborted.fetch_add(1, Ordering::Relaxed);
            if let Some(flag) = report.abort_reason.as_deref().and_then(limit_flag) {
                bump(&self.limit_hits, flag);
            }
        } else {
            self.finished.fetch_add(1, Ordering::Relaxed);
        }
        let Some(p) = PROTOCOLS.iter().position(|p| *p == protocol) else {
            return;
        };
        self.bytes[p][0].fetch_add(moved.read, Ordering::Relaxed);
        self.bytes[p][1].fetch_add(moved.sent, Ordering::Relaxed);
    }
}

/// A running server's counters, for whoever serves them (cheap to clone).
#[derive(Debug, Clone)]
pub struct MetricsHandle {
    pub(super) metrics: Arc<ServerMetrics>,
    pub(super) admission: Arc<Admission>,
}

impl MetricsHandle {
    /// Waits until at most `n` sessions hold a place. A session frees its place once it has
    /// sent its report, just after its summary is announced.
    pub async fn sessions_running_at_most(&self, n: usize) {
        self.admission.at_most(n).await;
    }

    /// Waits until at least `n` sessions hold a place (a test that must act while they run).
    pub async fn sessions_running_at_least(&self, n: usize) {
        self.admission.at_least(n).await;
    }

    /// The counters now.
    pub fn snapshot(&self) -> ServerCounts {
        let m = &self.metrics;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServerCounts {
            sessions_started: load(&m.started),
            sessions_finished: load(&m.finished),
            sessions_aborted: load(&m.aborted),
            sessions_running: self.admission.running() as u64,
            sessions_refused: pairs(&m.refused),
            limit_hits: pairs(&m.limit_hits),
            bytes: PROTOCOLS
                .iter()
                .zip(&m.bytes)
                .map(|(protocol, [read, sent])| ProtocolBytes {
                    protocol: *protocol,
                    read: load(read),
                    sent: load(sent),
                })
                .collect(),
        }
    }
}

/// The limit flag a refusal or abort reason names (`"… (--max-sessions) …"` → `max-sessions`):
/// every limit message names the flag that sets it.
fn limit_flag(reason: &str) -> Option<String> {
    let at = reason.find("--max-")?;
    let name: String = reason[at + 2..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    Some(name)
}

fn bump(map: &Mutex<BTreeMap<String, u64>>, key: String) {
    *map.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(key)
        .or_insert(0) += 1;
}

fn pairs(map: &Mutex<BTreeMap<String, u64>>) -> Vec<(String, u64)> {
    map.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_by_the_flag_they_name() {
        let m = ServerMetrics::default();
        m.refused("the server is busy: 2 sessions are running, its limit is 2 (--max-sessions); try again later");
        m.refused("127.0.0.1 already runs 1 sessions, the server allows 1 per client (--max-sessions-per-client)");
        m.refused("the server is shutting down");
        m.refused("total must be at least 1 byte");
        let refused = pairs(&m.refused);
        assert_eq!(
            refused,
            [
                ("invalid-request".to_string(), 1),
                ("max-sessions".to_string(), 1),
                ("max-sessions-per-client".to_string(), 1),
                ("shutdown".to_string(), 1),
            ]
        );
        assert_eq!(pairs(&m.limit_hits).len(), 2);
    }
}
