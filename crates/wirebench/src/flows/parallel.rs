//! Runs one test as N concurrent flows (`-P`), each its own session with its own connection,
//! and sums their figures into one outcome; must not print or decide the plan.
//!
//! The total is split across flows by whole messages (`plan::split_flows`), so the flows' bytes
//! and messages add up to the requested ones exactly. The summed client time runs from the
//! first flow's first byte to the last flow's end, on this host's clock.
//!
//! `--bidir` runs N flows each way at once ([`run_bidir`]): the client → server flows and the
//! server → client ones (as `-R` runs them), each direction summed on its own.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use tokio::task::JoinSet;
use wirebench_core::vocab::metrics::TransportStats;
use wirebench_core::vocab::plan;
use wirebench_core::wire::proto::{Omitted, ServerReport, SessionParams};

use crate::engine::interval::Progress;
use crate::engine::SendTally;
use crate::flows::client::{self, ClientFigures, SessionOutcome};
use crate::transport::counters::CpuMeter;
use wirebench_core::record::{RttFigures, UdpReceipt};
use wirebench_core::vocab::units::duration_ns;

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
    psk: Option<&wirebench_core::security::auth::Psk>,
) -> Result<(SessionOutcome, Vec<SessionOutcome>)> {
    let flows = split(params, progress)?;
    let cpu = CpuMeter::start();
    let mut outcomes = run_each(server, flows, psk, |index, of| {
        format!("flow {index} of {of}")
    })
    .await?;
    let mut total = combine(&outcomes).context("no flow finished")?;
    // Each flow's meter saw the whole process, so every other flow too: only the meter around
    // all of them means something.
    total.client.cpu = cpu.stop();
    for o in &mut outcomes {
        o.client.cpu = None;
    }
    Ok((total, outcomes))
}

/// Both directions of a `--bidir` run: each summed, with its flows in flow order.
#[derive(Debug, Clone)]
pub struct Bidir {
    /// The client sent, the server received.
    pub client_to_server: (SessionOutcome, Vec<SessionOutcome>),
    /// The server sent, the client received (`-R` sessions).
    pub server_to_client: (SessionOutcome, Vec<SessionOutcome>),
}

/// `--bidir`: runs `progress.len() / 2` flows each way at the same time, each direction
/// splitting `params.total_bytes` across its own flows (so `-n` is per direction). The first
/// half of `progress` counts the client → server flows, the second the server → client ones.
pub async fn run_bidir(
    server: SocketAddr,
    params: &SessionParams,
    progress: &[Arc<Progress>],
    psk: Option<&wirebench_core::security::auth::Psk>,
) -> Result<Bidir> {
    let half = progress.len() / 2;
    let (up, down) = progress.split_at(half);
    let forward = SessionParams {
        reverse: false,
        ..params.clone()
    };
    let back = SessionParams {
        reverse: true,
        ..params.clone()
    };
    let mut flows = split(&forward, up)?;
    flows.extend(split(&back, down)?);
    let cpu = CpuMeter::start();
    let name = |index: usize, _of: usize| {
        if index <= half {
            format!("client → server flow {index} of {half}")
        } else {
            format!("server → client flow {} of {half}", index - half)
        }
    };
    let mut outcomes = run_each(server, flows, psk, name).await?;
    for o in &mut outcomes {
        o.client.cpu = None;
    }
    let back_flows = outcomes.split_off(half);
    let cpu = cpu.stop();
    // One process ran both directions: each direction's figure is that whole process's.
    let sum = |flows: Vec<SessionOutcome>| -> Result<(SessionOutcome, Vec<SessionOutcome>)> {
        let mut total = combine(&flows).context("no flow finished")?;
        total.client.cpu = cpu;
        Ok((total, flows))
    };
    Ok(Bidir {
        client_to_server: sum(outcomes)?,
        server_to_client: sum(back_flows)?,
    })
}

/// One session's parameters per `progress` counter, `params.total_bytes` split across them.
fn split(
    params: &SessionParams,
    progress: &[Arc<Progress>],
) -> Result<Vec<(SessionParams, Arc<Progress>)>> {
    let flows = u32::try_from(progress.len()).context("too many flows")?;
    let totals =
        plan::split_flows(params.total_bytes, params.msg_size, flows).ok_or_else(|| {
            anyhow!(
                "cannot split {} B of {} B messages into {flows} flows",
                params.total_bytes,
                params.msg_size
            )
        })?;
    Ok(totals
        .into_iter()
        .zip(progress)
        .map(|(total_bytes, counter)| {
            let p = SessionParams {
                total_bytes,
                ..params.clone()
            };
            (p, Arc::clone(counter))
        })
        .collect())
}

/// Runs every flow at once; their outcomes in flow order, or the first failure, named by
/// `name(1-based index, flows)`.
async fn run_each(
    server: SocketAddr,
    flows: Vec<(SessionParams, Arc<Progress>)>,
    psk: Option<&wirebench_core::security::auth::Psk>,
    name: impl Fn(usize, usize) -> String,
) -> Result<Vec<SessionOutcome>> {
    let count = flows.len();
    let mut set = JoinSet::new();
    for (index, (flow_params, counter)) in flows.into_iter().enumerate() {
        let psk = psk.cloned();
        set.spawn(async move {
            let result = client::run_flow(server, &flow_params, &counter, psk.as_ref()).await;
            (index, result)
        });
    }
    let mut done: Vec<Option<SessionOutcome>> = vec![None; count];
    while let Some(joined) = set.join_next().await {
        let (index, result) = joined.context("a flow's task failed")?;
        let outcome = result.with_context(|| format!("{} failed", name(index + 1, count)))?;
        if let Some(slot) = done.get_mut(index) {
            *slot = Some(outcome);
        }
    }
    Ok(done.into_iter().flatten().collect())
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
        omitted: sum_omitted(flows.iter().map(|f| {
            let o = f.client.omitted?;
            // Each flow's mark on the summed clock, which starts at the first flow's start.
            let at = f.client.started + std::time::Duration::from_nanos(o.elapsed_ns);
            Some(Omitted {
                elapsed_ns: duration_ns(at.saturating_duration_since(started)),
                ..o
            })
        })),
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
    a.omitted = sum_omitted([a.omitted, b.omitted].into_iter());
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

/// Packet counts add up; per-connection figures (RTT, windows) have no sum and are left out.
fn sum_transport<'a>(
    mut each: impl Iterator<Item = Option<&'a TransportStats>>,
) -> Option<TransportStats> {
    let first = each.next()??.clone();
    each.try_fold(
        TransportStats {
            srtt_us: None,
            cwnd_bytes: None,
            send_window_bytes: None,
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

/// Omit marks of several flows: counts add up, the span is the latest mark's; none unless
/// every flow has one.
fn sum_omitted(mut each: impl Iterator<Item = Option<Omitted>>) -> Option<Omitted> {
    let first = each.next()??;
    each.try_fold(first, |acc, o| {
        let o = o?;
        Some(Omitted {
            bytes: acc.bytes + o.bytes,
            messages: acc.messages + o.messages,
            elapsed_ns: acc.elapsed_ns.max(o.elapsed_ns),
        })
    })
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a? + b?)
}
