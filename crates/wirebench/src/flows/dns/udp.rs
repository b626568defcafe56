//! One DNS-over-UDP flow: a connected socket, K queries outstanding, timeouts and retries by
//! core's `RequestTracker`, every datagram checked before it counts, and answers with TC=1 asked
//! again over TCP (as a resolver would), in tasks of their own so the window keeps moving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::net::UdpSocket;
use tokio::task::JoinSet;
use wirebench_core::machine::rr::{Answer, RequestTracker};
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::dns::{answer_lines, response_id, IdMap, Verdict};

use super::spec::{DnsSpec, FlowResult};
use super::stream;

/// Runs one UDP flow of `spec.count` queries.
pub(super) async fn flow(spec: Arc<DnsSpec>) -> Result<FlowResult> {
    let mut out = FlowResult::new()?;
    let local = crate::transport::net::udp_socket(spec.resolver.is_ipv6(), None, None)?;
    let sock = UdpSocket::from_std(local).context("while registering the UDP socket")?;
    sock.connect(spec.resolver)
        .await
        .with_context(|| format!("cannot address the resolver at {}", spec.resolver))?;
    let ids = IdMap::new(rand::random());
    let mut tracker = RequestTracker::new(spec.timeout, spec.retries);
    let k = spec.concurrency.max(1) as usize;
    let mut issued = 0u64;
    let mut query = Vec::with_capacity(512);
    let mut buf = vec![0u8; 65_535];
    let mut fallbacks: JoinSet<Fallback> = JoinSet::new();
    let begun = Instant::now();
    loop {
        while tracker.outstanding() + fallbacks.len() < k && issued < spec.count {
            let seq = tracker.send_new(Instant::now());
            issued += 1;
            spec.question.encode_into(ids.id_of(seq), &mut query);
            // A send the OS refuses is counted; the query then times out like a lost one.
            if sock.send(&query).await.is_err() {
                out.counts.send_errors += 1;
            }
        }
        if issued >= spec.count && tracker.outstanding() == 0 && fallbacks.is_empty() {
            break;
        }
        let deadline = tracker.poll_timeout();
        tokio::select! {
            got = sock.recv(&mut buf) => match got {
                Ok(n) => {
                    let now = Instant::now();
                    on_datagram(&spec, &buf[..n], now, ids, issued, &mut tracker, &mut out, &mut fallbacks)?;
                }
                // An ICMP error (port unreachable) reported on the connected socket: the query
                // it belonged to times out.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    out.counts.send_errors += 1;
                }
                Err(e) => return Err(e).context("while reading DNS answers over UDP"),
            },
            _ = sleep_until(deadline), if deadline.is_some() => {
                let now = Instant::now();
                while let Some(expiry) = tracker.handle_timeout(now) {
                    if let wirebench_core::machine::rr::Expiry::Retry { seq } = expiry {
                        spec.question.encode_into(ids.id_of(seq), &mut query);
                        if sock.send(&query).await.is_err() {
                            out.counts.send_errors += 1;
                        }
                    }
                }
            },
            Some(done) = fallbacks.join_next(), if !fallbacks.is_empty() => {
                let fb = done.context("a TCP fallback task failed")?;
                out.counts.add(&fb.result.counts);
                out.hist.add(&fb.result.hist).context("while merging response times")?;
                out.connect.add(&fb.result.connect).context("while merging connect times")?;
                if out.answer.is_none() {
                    out.answer = fb.result.answer;
                }
            },
        }
    }
    out.span = Some((begun, Instant::now()));
    let t = tracker.counts();
    out.counts.sent = t.sent;
    out.counts.timeouts = t.lost;
    out.counts.retries = t.retries;
    out.counts.late = t.late;
    out.counts.duplicates = t.duplicates;
    out.counts.wrong += t.unknown;
    // As for UDP stop-and-wait runs: datagrams sent again over datagrams sent.
    out.transport = Some(TransportStats::from_udp(t.sent + t.retries, t.retries));
    Ok(out)
}

/// A TC=1 answer asked again over TCP: what it counted, merged by the flow.
struct Fallback {
    result: FlowResult,
}

#[allow(clippy::too_many_arguments)]
fn on_datagram(
    spec: &Arc<DnsSpec>,
    bytes: &[u8],
    now: Instant,
    ids: IdMap,
    issued: u64,
    tracker: &mut RequestTracker,
    out: &mut FlowResult,
    fallbacks: &mut JoinSet<Fallback>,
) -> Result<()> {
    let Some(seq) = response_id(bytes).and_then(|id| ids.seq_of(id, issued)) else {
        out.counts.wrong += 1;
        return Ok(());
    };
    let verdict = spec.question.check(bytes);
    if let Verdict::Wrong(_) = verdict {
        // Not trusted, and not an answer: the query keeps waiting (and may time out).
        out.counts.wrong += 1;
        return Ok(());
    }
    let Answer::Answered { response_time, .. } = tracker.on_response(seq, now) else {
        // Late, duplicate or unknown: the tracker counts it.
        return Ok(());
    };
    match verdict {
        Verdict::Answer { rcode, .. } => {
            out.counts.answered += 1;
            out.counts.count_rcode(rcode);
            out.hist.saturating_record(duration_ns(response_time));
            if out.answer.is_none() {
                out.answer = Some(answer_lines(bytes));
            }
        }
        Verdict::Truncated => {
            out.counts.tc_retries += 1;
            let first_sent = now.checked_sub(response_time).unwrap_or(now);
            let spec = spec.clone();
            let id = ids.id_of(seq);
            let mut result = FlowResult::new()?;
            fallbacks.spawn(async move {
                let addr = spec.tcp_fallback;
                // A failed connect is counted (failed) in `result`; the flow goes on.
                let _ =
                    stream::one_query(&spec, addr, None, id, Some(first_sent), &mut result).await;
                Fallback { result }
            });
        }
        Verdict::Wrong(_) => {}
    }
    Ok(())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => tokio::time::sleep(Duration::from_secs(3600)).await,
    }
}
