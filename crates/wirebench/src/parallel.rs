//! Runs one test as N concurrent flows (`-P`), each its own session with its own connection,
//! and sums their figures into one outcome; must not print or decide the plan.
//!
//! The total is split across flows by whole messages (`plan::split_flows`), so the flows' bytes
//! and messages add up to the requested ones exactly. The summed client time runs from the
//! first flow's first byte to the last flow's end, on this host's clock.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use tokio::task::JoinSet;
use wirebench_core::metrics::TransportStats;
use wirebench_core::plan;
use wirebench_core::proto::{ServerReport, SessionParams};

use crate::client::{self, ClientFigures, SessionOutcome};
use crate::counters::CpuMeter;
use crate::engine::SendTally;
use crate::interval::Progress;
use wirebench_core::record::{RttFigures, UdpReceipt};

/// Runs one session per `progress` counter at once against `server`, splitting
/// `params.total_bytes` across them; each flow stores its bytes sent so far in its counter.
/// Returns the summed outcome and each flow's, in flow order.
pub async fn run_flows(
    server: SocketAddr,
    params: &SessionParams,
    progress: &[Arc<Progress>],
) -> Result<(SessionOutcome, Vec<SessionOutcome>)> {
    run_flows_auth(server, params, progress, None).await
}

/// Like [`run_flows`], every flow proving it holds `psk` when given.
pub async fn run_flows_auth(
    server: SocketAddr,
    params: &SessionParams,
    progress: &[Arc<Progress>],
    psk: Option<&wirebench_core::auth::Psk>,
) -> Result<(SessionOutcome, Vec<SessionOutcome>)> {
    let flows = u32::try_from(progress.len()).context("too many flows")?;
    let totals =
        plan::split_flows(params.total_bytes, params.msg_size, flows).ok_or_else(|| {
            anyhow!(
                "cannot split {} B of {} B messages into {flows} flows",
                params.total_bytes,
                params.msg_size
            )
        })?;
    let cpu = CpuMeter::start();
    let mut set = JoinSet::new();
    for (index, (total_bytes, counter)) in totals.into_iter().zip(progress).enumerate() {
        let flow_params = SessionParams {
            total_bytes,
            ..params.clone()
        };
        let counter = Arc::clone(counter);
        let psk = psk.cloned();
        set.spawn(async move {
            let result =
                client::run_session_auth(server, &flow_params, &counter, psk.as_ref()).await;
            (index, result)
        });
    }
    let mut done: Vec<Option<SessionOutcome>> = vec![None; flows as usize];
    while let Some(joined) = set.join_next().await {
        let (index, result) = joined.context("a flow's task failed")?;
        let outcome = result.with_context(|| format!("flow {} of {flows} failed", index + 1))?;
        if let Some(slot) = done.get_mut(index) {
            *slot = Some(outcome);
        }
    }
    let mut outcomes: Vec<SessionOutcome> = done.into_iter().flatten().collect();
    let mut total = combine(&outcomes).context("no flow finished")?;
    // Each flow's meter saw the whole process, so every other flow too: only the meter around
    // all of them means something.
    total.client.cpu = cpu.stop();
    for o in &mut outcomes {
        o.client.cpu = None;
    }
    Ok((total, outcomes))
}

/// Sums flows into one outcome: counts add up; the client's time spans the first start to the
/// last end; the server's time is its longest session (its clock is not ours to line up);
/// round trips merge. `None` for no flows.
pub fn combine(flows: &[SessionOutcome]) -> Option<SessionOutcome> {
    let first = flows.first()?;
    let started = flows.iter().map(|f| f.client.started).min()?;
    let ended = flows
        .iter()
        .map(|f| f.client.started + f.client.elapsed)
        .max()?;
    let mut rtt_histogram = first.client.rtt_histogram.clone();
    for f in &flows[1..] {
        // Same bounds everywhere (client::run_session makes them); a refusal would only drop samples.
        let _ = rtt_histogram.add(&f.client.rtt_histogram);
    }
    let client = ClientFigures {
        tally: flows.iter().fold(SendTally::default(), |acc, f| {
            add_tally(acc, &f.client.tally)
        }),
        started,
        elapsed: ended.saturating_duration_since(started),
        rtt: RttFigures::of(&rtt_histogram),
        rtt_histogram,
        data_path: first.client.data_path.clone(),
        transport: sum_transport(flows.iter().map(|f| f.client.transport.as_ref())),
        cpu: None,
        intervals: Vec::new(),
        udp_received: sum_receipts(flows.iter().map(|f| f.client.udp_received)),
    };
    let server = flows
        .iter()
        .skip(1)
        .fold(first.server.clone(), |acc, f| add_report(acc, &f.server));
    Some(SessionOutcome {
        session: first.session,
        client,
        server,
    })
}

fn add_tally(a: SendTally, b: &SendTally) -> SendTally {
    SendTally {
        messages: a.messages + b.messages,
        bytes: a.bytes + b.bytes,
        send_calls: a.send_calls + b.send_calls,
        datagrams: a.datagrams + b.datagrams,
        retransmissions: a.retransmissions + b.retransmissions,
        timeouts: a.timeouts + b.timeouts,
        send_errors: a.send_errors + b.send_errors,
    }
}

fn add_report(mut a: ServerReport, b: &ServerReport) -> ServerReport {
    a.messages += b.messages;
    a.bytes += b.bytes;
    a.read_calls += b.read_calls;
    a.elapsed_ns = a.elapsed_ns.max(b.elapsed_ns);
    a.idle_after_last_ns = a.idle_after_last_ns.min(b.idle_after_last_ns);
    a.lost += b.lost;
    a.duplicates += b.duplicates;
    a.out_of_order += b.out_of_order;
    a.acks_sent += b.acks_sent;
    if b.aborted && !a.aborted {
        a.aborted = true;
        a.abort_reason.clone_from(&b.abort_reason);
    }
    // Interval k of every session, summed (each session's series starts at its own start).
    for (k, sample) in b.intervals.iter().enumerate() {
        match a.intervals.get_mut(k) {
            Some(x) => {
                x.bytes += sample.bytes;
                x.lost = add_opt(x.lost, sample.lost);
            }
            None => a.intervals.push(*sample),
        }
    }
    a.transport = sum_transport([a.transport.as_ref(), b.transport.as_ref()].into_iter());
    // Every session's figure covers the whole server process over its own span; the longest
    // span covers the others.
    a.cpu = match (a.cpu, b.cpu) {
        (Some(x), Some(y)) => Some(if y.user_us + y.system_us > x.user_us + x.system_us {
            y
        } else {
            x
        }),
        (x, y) => x.or(y),
    };
    a
}

/// Packet counts add up; per-connection figures (RTT, window) have no sum and are left out.
fn sum_transport<'a>(
    mut each: impl Iterator<Item = Option<&'a TransportStats>>,
) -> Option<TransportStats> {
    let first = each.next()??.clone();
    each.try_fold(
        TransportStats {
            srtt_us: None,
            cwnd_bytes: None,
            ..first
        },
        |acc, t| {
            let t = t?;
            Some(TransportStats {
                packets_sent: acc.packets_sent + t.packets_sent,
                packets_retransmitted: acc.packets_retransmitted + t.packets_retransmitted,
                tcp_total_retrans: add_opt(acc.tcp_total_retrans, t.tcp_total_retrans),
                tcp_dsack_dups: add_opt(acc.tcp_dsack_dups, t.tcp_dsack_dups),
                congestion_events: add_opt(acc.congestion_events, t.congestion_events),
                ..acc
            })
        },
    )
}

/// Receiver counts of reversed UDP flows add up; jitter has no sum and is left out.
fn sum_receipts(mut each: impl Iterator<Item = Option<UdpReceipt>>) -> Option<UdpReceipt> {
    let first = each.next()??;
    each.try_fold(
        UdpReceipt {
            jitter_us: None,
            ..first
        },
        |acc, r| {
            let r = r?;
            Some(UdpReceipt {
                lost: acc.lost + r.lost,
                duplicates: acc.duplicates + r.duplicates,
                out_of_order: acc.out_of_order + r.out_of_order,
                jitter_us: None,
            })
        },
    )
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a? + b?)
}
