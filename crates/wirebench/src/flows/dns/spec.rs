//! What a DNS run hands its flows and what each flow hands back: the run's spec (resolver,
//! transport, question, counts, timeouts) and one flow's counts, spans and histograms, which
//! `run_dns` sums.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::wire::dns::{DnsCounts, DnsTransport, Question};

use super::trust::DotTls;
use crate::engine::stream::rtt_histogram;

/// One run: a transport, a concurrency, and what to ask.
#[derive(Clone)]
pub struct DnsSpec {
    /// Where the resolver listens for this transport.
    pub resolver: SocketAddr,
    /// UDP, TCP or DoT.
    pub transport: DnsTransport,
    /// The question every query asks.
    pub question: Arc<Question>,
    /// Queries per flow.
    pub count: u64,
    /// Flows: each its own UDP socket or connection.
    pub flows: u32,
    /// Queries outstanding per flow.
    pub concurrency: u32,
    /// TCP/DoT: a fresh connection per query.
    pub new_connection: bool,
    /// How long a query (UDP: each copy) waits for its answer.
    pub timeout: Duration,
    /// UDP: copies sent again after a timeout before the query counts as a timeout.
    pub retries: u32,
    /// DoT: the TLS client configuration and server name.
    pub tls: Option<DotTls>,
    /// UDP: where a TC=1 answer is asked again over TCP (the resolver's TCP address).
    pub tcp_fallback: SocketAddr,
}

/// What one flow brings back.
pub(super) struct FlowResult {
    pub(super) counts: DnsCounts,
    pub(super) span: Option<(Instant, Instant)>,
    pub(super) hist: Histogram<u64>,
    pub(super) connect: Histogram<u64>,
    pub(super) tls: Histogram<u64>,
    pub(super) transport: Option<TransportStats>,
    pub(super) answer: Option<Vec<String>>,
}

impl FlowResult {
    pub(super) fn new() -> Result<Self> {
        Ok(FlowResult {
            counts: DnsCounts::default(),
            span: None,
            hist: rtt_histogram()?,
            connect: rtt_histogram()?,
            tls: rtt_histogram()?,
            transport: None,
            answer: None,
        })
    }
}
