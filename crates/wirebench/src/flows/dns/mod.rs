//! The DNS probe's client side (`wirebench dns`): T flows with K queries outstanding against a
//! resolver over UDP, TCP or DNS-over-TLS, response times, set-up times (TCP connect, TLS
//! handshake) and counts. It measures; it never prints. Query building and response checks live
//! in `wirebench_core::wire::dns`.

mod spec;
mod stream;
pub mod trust;
mod udp;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::task::JoinSet;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::wire::dns::{DnsCounts, DnsTransport};

use crate::flows::rr_client::sum_transport;
use wirebench_core::record::RttFigures;

pub use spec::DnsSpec;
pub use trust::DotTls;

use spec::FlowResult;

/// What one run measured.
#[derive(Debug, Clone)]
pub struct DnsOutcome {
    /// Queries sent, answered, timed out, retried, wrong, by RCODE.
    pub counts: DnsCounts,
    /// First query sent → last answered or given up, all flows (set-up of the first
    /// connections excluded; with a new connection per query each set-up is inside it).
    pub elapsed: Duration,
    /// Query sent → valid answer read, ns (UDP with TC=1: through the TCP answer).
    pub response: Option<RttFigures>,
    /// TCP connect, ns: one sample per connection (UDP: the TC fallbacks' connections).
    pub connect: Option<RttFigures>,
    /// TLS handshake after the TCP connect, ns, one sample per DoT connection.
    pub tls_handshake: Option<RttFigures>,
    /// The client's transport counters summed over its connections (TCP_INFO), or UDP
    /// datagrams sent and sent again.
    pub transport: Option<TransportStats>,
    /// The answer section of the first valid answer, one line per record.
    pub answer: Vec<String>,
}

/// Runs one transport × concurrency against the resolver.
pub async fn run_dns(spec: &DnsSpec) -> Result<DnsOutcome> {
    let mut tasks: JoinSet<Result<FlowResult>> = JoinSet::new();
    let spec = Arc::new(spec.clone());
    match spec.transport {
        DnsTransport::Udp => {
            for _ in 0..spec.flows.max(1) {
                tasks.spawn(udp::flow(spec.clone()));
            }
        }
        DnsTransport::Tcp | DnsTransport::Dot if spec.new_connection => {
            // Every flow's K outstanding queries are K workers, each opening a connection per query.
            let claims = Arc::new(AtomicU64::new(0));
            let total = spec.count.saturating_mul(u64::from(spec.flows));
            for _ in 0..spec.flows.max(1) * spec.concurrency.max(1) {
                tasks.spawn(stream::new_connection_worker(
                    spec.clone(),
                    claims.clone(),
                    total,
                ));
            }
        }
        DnsTransport::Tcp | DnsTransport::Dot => {
            for _ in 0..spec.flows.max(1) {
                tasks.spawn(stream::flow(spec.clone()));
            }
        }
    }
    let mut sum = FlowResult::new()?;
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(r)) => {
                sum.counts.add(&r.counts);
                sum.span = match (sum.span, r.span) {
                    (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
                    (a, b) => a.or(b),
                };
                sum.hist
                    .add(&r.hist)
                    .context("while merging response times")?;
                sum.connect
                    .add(&r.connect)
                    .context("while merging connect times")?;
                sum.tls.add(&r.tls).context("while merging TLS times")?;
                sum.transport = sum_transport(sum.transport, r.transport);
                if sum.answer.is_none() {
                    sum.answer = r.answer;
                }
            }
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(e) => {
                failure.get_or_insert(anyhow::anyhow!("a flow failed: {e}"));
            }
        }
    }
    if let Some(e) = failure {
        return Err(e.context(format!("the DNS run over {} failed", spec.transport)));
    }
    Ok(DnsOutcome {
        counts: sum.counts,
        elapsed: sum
            .span
            .map_or(Duration::ZERO, |(a, b)| b.saturating_duration_since(a)),
        response: RttFigures::of(&sum.hist),
        connect: RttFigures::of(&sum.connect),
        tls_handshake: RttFigures::of(&sum.tls),
        transport: sum.transport,
        answer: sum.answer.unwrap_or_default(),
    })
}
