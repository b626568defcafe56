//! Runs the flows of one run at once (`-P`, `--bidir`), each its own session with its own
//! connection, and sums each direction's figures into one outcome; must not print or decide
//! the plan (the runner splits the total across the flows and hands their requests down).
//!
//! The summed client time runs from the first flow's first byte to the last flow's end, on
//! this host's clock. `--bidir` runs the client → server flows and the server → client ones
//! (as `-R` runs them) at once, each direction summed on its own.
//!
//! [`run_beside`] runs them with what measures beside them: `-i`'s interval samples and
//! `--latency-probe`'s probe flows.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::task::JoinSet;
use wirebench_core::record::LoadedLatency;
use wirebench_core::record::{RttFigures, UdpReceipt};
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::counters::{Cumulative, IntervalSample};
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{Omitted, ServerReport};

use crate::engine::interval;
use crate::engine::SendTally;
use crate::flows::client::{ClientFigures, SessionOutcome, SessionRequest};
use crate::flows::latency_probe::{ProbeFlows, ProbePlan};
use crate::transport::counters::CpuMeter;

/// The sessions of one run, built once by whoever plans it: `flows` in the run's direction
/// (one, or `-P` of them), and with `--bidir` the server → client flows in `back`.
pub struct RunFlows {
    /// The flows in the run's direction (client → server with `--bidir`).
    pub flows: Vec<SessionRequest<'static>>,
    /// `--bidir`: the server → client flows; empty otherwise.
    pub back: Vec<SessionRequest<'static>>,
}

/// One direction of a run: its flows summed, and each flow's outcome in flow order.
pub type Direction = (SessionOutcome, Vec<SessionOutcome>);

/// What a run's flows measured.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run's direction (client → server with `--bidir`).
    pub forward: Direction,
    /// `--bidir`: the server → client direction.
    pub back: Option<Direction>,
}

/// Runs every flow of `run` at once and sums each direction; the first failure ends it, named
/// by its flow when there are several.
pub async fn run(run: RunFlows) -> Result<RunOutcome> {
    let (forward, back) = (run.flows.len(), run.back.len());
    let name = |index: usize| match (index <= forward, back) {
        (_, 0) if forward == 1 => None,
        (_, 0) => Some(format!("flow {index} of {forward}")),
        (true, _) => Some(format!("client → server flow {index} of {forward}")),
        (false, _) => Some(format!(
            "server → client flow {} of {back}",
            index - forward
        )),
    };
    let cpu = CpuMeter::start();
    let mut outcomes = run_each(run.flows.into_iter().chain(run.back), name).await?;
    // Each flow's meter saw the whole process, so every other flow too (both directions,
    // with --bidir): only the meter around all of them means something.
    for o in &mut outcomes {
        o.client.cpu = None;
    }
    let back_flows = outcomes.split_off(forward);
    let cpu = cpu.stop();
    let sum = |flows: Vec<SessionOutcome>| -> Result<Direction> {
        let mut total = combine(&flows).context("no flow finished")?;
        total.client.cpu = cpu;
        Ok((total, flows))
    };
    Ok(RunOutcome {
        forward: sum(outcomes)?,
        back: if back == 0 {
            None
        } else {
            Some(sum(back_flows)?)
        },
    })
}

/// What measures beside a run's flows.
pub struct Beside<'a, R, S> {
    /// `-i`: how often `read` is sampled while the flows run (None: never); each sample goes
    /// to `on_sample` as it is taken.
    pub interval: Option<Duration>,
    /// What the flows have moved so far.
    pub read: R,
    /// Hears each interval sample.
    pub on_sample: S,
    /// `--latency-probe`: probe flows to this server, by this plan, beside a run of this
    /// protocol.
    pub probe: Option<(SocketAddr, &'a ProbePlan, Protocol, Option<&'a Psk>)>,
}

/// What [`run_beside`] returns: the flows' outcome, the interval samples (oldest first) and
/// the probes' record.
pub type Measured = (
    Result<RunOutcome>,
    Vec<IntervalSample>,
    Option<LoadedLatency>,
);

/// Runs `run`'s flows with what measures beside them: the probe flows open and probe idle
/// first, then the flows run, sampled every interval from their start, with the probes beside
/// them until they end. An error opening the probes is this function's; the flows' own
/// outcome is the first part of what it returns.
pub async fn run_beside<R, S>(run: RunFlows, beside: Beside<'_, R, S>) -> Result<Measured>
where
    R: FnMut() -> Cumulative,
    S: FnMut(&IntervalSample),
{
    let probes = match beside.probe {
        Some((server, plan, protocol, psk)) => {
            Some(ProbeFlows::open(server, plan, protocol, psk).await?)
        }
        None => None,
    };
    let sampled = interval::sampled(
        self::run(run),
        beside.interval,
        beside.read,
        beside.on_sample,
    );
    Ok(match probes {
        Some(p) => {
            let ((outcome, samples), latency) = p.around(sampled).await;
            (outcome, samples, Some(latency))
        }
        None => {
            let (outcome, samples) = sampled.await;
            (outcome, samples, None)
        }
    })
}

/// Runs every flow at once; their outcomes in flow order, or the first failure, named by
/// `name(1-based index)` when it gives a name.
async fn run_each(
    flows: impl Iterator<Item = SessionRequest<'static>>,
    name: impl Fn(usize) -> Option<String>,
) -> Result<Vec<SessionOutcome>> {
    let mut set = JoinSet::new();
    let mut count = 0;
    for (index, request) in flows.enumerate() {
        set.spawn(async move { (index, request.run().await) });
        count += 1;
    }
    let mut done: Vec<Option<SessionOutcome>> = vec![None; count];
    while let Some(joined) = set.join_next().await {
        let (index, result) = joined.context("a flow's task failed")?;
        let outcome = match name(index + 1) {
            Some(name) => result.with_context(|| format!("{name} failed"))?,
            None => result?,
        };
        if let Some(slot) = done.get_mut(index) {
            *slot = Some(outcome);
        }
    }
    Ok(done.into_iter().flatten().collect())
}

/// Sums flows into one outcome: counts add up; the client's time spans the first start to the
/// last end; the server's time is its longest session (its clock is not ours to line up);
/// round trips merge. One flow is its own sum (its per-connection figures kept). `None` for no
/// flows.
pub fn combine(flows: &[SessionOutcome]) -> Option<SessionOutcome> {
    if let [only] = flows {
        return Some(only.clone());
    }
    let first = flows.first()?;
    let started = flows.iter().map(|f| f.client.started).min()?;
    let ended = flows
        .iter()
        .map(|f| f.client.started + f.client.elapsed)
        .max()?;
    let mut rtt_histogram = first.client.rtt_histogram.clone();
    for f in &flows[1..] {
        // Same bounds everywhere (every client session makes them alike); a refusal would only drop samples.
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
        not_sent: a.not_sent + b.not_sent,
    }
}

fn add_report(mut a: ServerReport, b: &ServerReport) -> ServerReport {
    a.messages += b.messages;
    a.bytes += b.bytes;
    a.read_calls += b.read_calls;
    a.elapsed_ns = a.elapsed_ns.max(b.elapsed_ns);
    a.idle_after_last_ns = a.idle_after_last_ns.min(b.idle_after_last_ns);
    a.lost += b.lost;
    // The host's share adds up where every session's socket said it.
    a.dropped_by_host = a.dropped_by_host.zip(b.dropped_by_host).map(|(x, y)| x + y);
    a.not_sent += b.not_sent;
    a.duplicates += b.duplicates;
    a.out_of_order += b.out_of_order;
    a.acks_sent += b.acks_sent;
    // No flow's report is aborted: the client refuses one before it is a flow's outcome.
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
                dropped_by_host: acc
                    .dropped_by_host
                    .zip(r.dropped_by_host)
                    .map(|(x, y)| x + y),
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
