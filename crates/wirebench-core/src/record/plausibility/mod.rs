//! Whether a server's report can be believed: owns the one check a client makes of the report
//! it receives against what it did itself (more bytes or messages arrived than were sent,
//! times longer than the session lasted, loss beyond what was sent, a report marked aborted),
//! so a lying or broken server's figures are never stored or shown as a complete run. Pure: the
//! client passes in what it counted and how long it waited.

use crate::vocab::plan::Protocol;
use crate::wire::iperf3::TestResults;
use crate::wire::proto::ServerReport;

/// What the client itself counted in the session the report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientView {
    /// The client sent (a forward transfer): messages (UDP: unique ones) and payload bytes.
    Sent {
        /// Messages sent, each counted once.
        messages: u64,
        /// Payload bytes sent, each counted once.
        bytes: u64,
    },
    /// The client received (`-R`): what it read of what the server says it sent.
    Received {
        /// Messages read (UDP: unique ones).
        messages: u64,
        /// Payload bytes read (unique).
        bytes: u64,
    },
    /// A request-response session: requests sent, retries included.
    Requests {
        /// Request messages the client put on the wire.
        sent: u64,
    },
}

impl ClientView {
    /// What a transfer's client counted: sent forward, received when `reverse`.
    pub fn of(reverse: bool, messages: u64, bytes: u64) -> ClientView {
        if reverse {
            ClientView::Received { messages, bytes }
        } else {
            ClientView::Sent { messages, bytes }
        }
    }
}

/// Slack allowed between the server's clock and the client's wait for it (one scheduling
/// delay, one round trip): a server span longer than the client's whole wait plus this is
/// impossible.
pub const CLOCK_SLACK_NS: u64 = 2_000_000_000;

/// Why a report is not a complete run's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportIssue {
    /// The server says it ended the session early.
    #[error("the server ended the session: {0}")]
    Aborted(String),
    /// The figures cannot all be true.
    #[error("the server's report is inconsistent: {0}")]
    Inconsistent(String),
}

/// Checks `report` against what the client counted (`client`) and how long the client's side
/// of the session lasted (`waited_ns`, from its request to the report's arrival). Every figure
/// a later view derives (goodput, loss, the server's rate) comes from a report that passed.
pub fn check_report(
    client: ClientView,
    waited_ns: u64,
    report: &ServerReport,
) -> Result<(), ReportIssue> {
    let wrong = |what: String| Err(ReportIssue::Inconsistent(what));
    match client {
        ClientView::Sent { messages, bytes } => {
            if report.bytes > bytes {
                return wrong(format!(
                    "it says {} bytes arrived, but {bytes} were sent",
                    report.bytes
                ));
            }
            if report.messages > messages {
                return wrong(format!(
                    "it says {} messages arrived, but {messages} were sent",
                    report.messages
                ));
            }
            let lost_and_delivered = report.lost.saturating_add(report.messages);
            if report.protocol == Protocol::Udp && lost_and_delivered > messages {
                return wrong(format!(
                    "it says {} messages arrived and {} were lost, but {messages} were sent",
                    report.messages, report.lost
                ));
            }
        }
        ClientView::Received { messages, bytes } => {
            if bytes > report.bytes {
                return wrong(format!(
                    "it says it sent {} bytes, but {bytes} arrived",
                    report.bytes
                ));
            }
            if messages > report.messages {
                return wrong(format!(
                    "it says it sent {} messages, but {messages} arrived",
                    report.messages
                ));
            }
        }
        ClientView::Requests { sent } => {
            if report.messages > sent {
                return wrong(format!(
                    "it says it answered {} requests, but {sent} were sent",
                    report.messages
                ));
            }
        }
    }
    if let Some(dropped) = report.dropped_by_host.filter(|d| *d > report.lost) {
        return wrong(format!(
            "it says its host dropped {dropped} messages, but {} were lost",
            report.lost
        ));
    }
    if report.not_sent > report.messages {
        return wrong(format!(
            "it says its host did not send {} of the {} messages it sent",
            report.not_sent, report.messages
        ));
    }
    let longest = waited_ns.saturating_add(CLOCK_SLACK_NS);
    for (name, ns) in [
        ("its transfer time", report.elapsed_ns),
        (
            "its idle time after the last byte",
            report.idle_after_last_ns,
        ),
    ] {
        if ns > longest {
            return wrong(format!(
                "{name} is {:.3} s, but the session lasted {:.3} s",
                ns as f64 / 1e9,
                waited_ns as f64 / 1e9
            ));
        }
    }
    if let Some(j) = report.jitter_us {
        if !j.is_finite() || j < 0.0 {
            return wrong(format!("its jitter is {j} µs"));
        }
    }
    if let Some(o) = report.omitted {
        if o.bytes > report.bytes || o.messages > report.messages {
            return wrong(format!(
                "it omitted {} bytes of the {} it counted",
                o.bytes, report.bytes
            ));
        }
    }
    if let Some(s) = report
        .intervals
        .iter()
        .find(|s| s.end_ns < s.start_ns || s.bytes > report.bytes)
    {
        return wrong(format!(
            "an interval from {} ns to {} ns holds {} bytes of the {} it counted",
            s.start_ns, s.end_ns, s.bytes, report.bytes
        ));
    }
    check_series_and_counters(waited_ns, report)?;
    // Figures that cannot be true say more than the flag: they are checked first.
    if report.aborted {
        return Err(ReportIssue::Aborted(
            report
                .abort_reason
                .clone()
                .unwrap_or_else(|| "no reason given".into()),
        ));
    }
    Ok(())
}

/// A rate no path carries (10 Tbit/s, beyond any link of today): a figure above it is made up.
pub const MAX_PLAUSIBLE_BPS: f64 = 1e13;

/// The shortest span an interval's rate is taken over (1 ms): shorter intervals are real (the
/// last one of a series), but their bytes came in reads that took longer than the interval.
pub const SHORTEST_RATED_NS: u64 = 1_000_000;

/// A window or congestion window no TCP stack keeps (256 TiB).
pub const MAX_PLAUSIBLE_WINDOW: u64 = 1 << 48;

/// CPUs a host may have at most, for the bound on the CPU time a report may claim.
pub const MAX_PLAUSIBLE_CPUS: u64 = 4096;

/// Whether `bytes` over `ns` is a rate a path could carry ([`MAX_PLAUSIBLE_BPS`]); nothing moved
/// is always plausible, something moved in no time never is.
pub fn plausible_rate(bytes: u64, ns: u64) -> bool {
    bytes == 0 || (ns > 0 && bytes as f64 * 8.0 / (ns as f64 / 1e9) <= MAX_PLAUSIBLE_BPS)
}

/// The figures of a report beyond its counts: the interval series adds up to no more than the
/// totals and runs at a possible rate; the byte streams (TCP, QUIC) neither lose nor duplicate;
/// the transport's counters and the CPU time fit the session.
fn check_series_and_counters(waited_ns: u64, report: &ServerReport) -> Result<(), ReportIssue> {
    let wrong = |what: String| Err(ReportIssue::Inconsistent(what));
    let longest = waited_ns.saturating_add(CLOCK_SLACK_NS);
    let series_bytes = report
        .intervals
        .iter()
        .fold(0u64, |sum, s| sum.saturating_add(s.bytes));
    if series_bytes > report.bytes {
        return wrong(format!(
            "its intervals add up to {series_bytes} bytes, but it counted {}",
            report.bytes
        ));
    }
    // An interval's rate is taken over at least SHORTEST_RATED_NS: a series' last interval can
    // be a few hundred nanoseconds long and hold one whole read (the work ended right after a
    // tick), which over its own span reads as tens of Tbit/s from an honest server.
    if let Some(s) = report.intervals.iter().find(|s| {
        let span = s.end_ns.saturating_sub(s.start_ns).max(SHORTEST_RATED_NS);
        s.end_ns > longest || !plausible_rate(s.bytes, span)
    }) {
        return wrong(format!(
            "an interval from {} ns to {} ns with {} bytes: faster than any path, or past the session's end",
            s.start_ns, s.end_ns, s.bytes
        ));
    }
    if report.protocol != Protocol::Udp
        && (report.lost > 0 || report.duplicates > 0 || report.out_of_order > 0)
    {
        return wrong(format!(
            "a {} byte stream lost {}, duplicated {} and reordered {} messages",
            report.protocol, report.lost, report.duplicates, report.out_of_order
        ));
    }
    if report.protocol == Protocol::Udp && report.duplicates > report.read_calls {
        return wrong(format!(
            "it counted {} duplicates among {} datagrams received",
            report.duplicates, report.read_calls
        ));
    }
    if let Some(t) = &report.transport {
        let retransmitted = [
            Some(t.packets_retransmitted),
            t.tcp_total_retrans,
            t.tcp_dsack_dups,
        ];
        if let Some(n) = retransmitted
            .into_iter()
            .flatten()
            .find(|n| *n > t.packets_sent)
        {
            return wrong(format!(
                "its transport retransmitted {n} of the {} packets it sent",
                t.packets_sent
            ));
        }
        let windows = [t.cwnd_bytes, t.send_window_bytes];
        if let Some(w) = windows
            .into_iter()
            .flatten()
            .find(|w| *w > MAX_PLAUSIBLE_WINDOW)
        {
            return wrong(format!("its transport reports a window of {w} bytes"));
        }
        if let Some(rtt) = t.srtt_us.filter(|us| us.saturating_mul(1000) > longest) {
            return wrong(format!(
                "its smoothed round trip is {rtt} µs, but the session lasted {:.3} s",
                waited_ns as f64 / 1e9
            ));
        }
    }
    if let Some(cpu) = &report.cpu {
        let used_us = cpu.user_us.saturating_add(cpu.system_us);
        let most_us = (longest / 1000).saturating_mul(MAX_PLAUSIBLE_CPUS);
        if used_us > most_us {
            return wrong(format!(
                "it used {:.3} s of CPU in a session of {:.3} s",
                used_us as f64 / 1e6,
                waited_ns as f64 / 1e9
            ));
        }
    }
    // Its socket's address goes into documents as iperf3's local_host: an address, nothing else.
    if let Some(addr) = &report.data_path.local_addr {
        if addr.parse::<std::net::SocketAddr>().is_err() {
            return wrong(format!(
                "its data socket's address is {} bytes that are no IP:PORT",
                addr.len()
            ));
        }
    }
    Ok(())
}

/// Bytes a TCP sender may have written that never reached the receiver when a test ends: its
/// socket buffer and what is in flight (Linux's largest send buffer is far below this).
pub const TCP_UNDELIVERED_MAX: u64 = 256 << 20;

/// Checks the results an iperf3 server sent (`theirs`) against ours (`ours`, what this client
/// counted on each stream, on its own clock): the same streams and no others; per stream, times
/// that are numbers, in order and within the test (our last stream's end plus
/// [`CLOCK_SLACK_NS`]); a rate no path exceeds; forward (`we_sent`), no more received than
/// we sent; reversed, no less sent than we received, and over TCP no more than we received
/// plus what a socket can hold; loss and jitter that can be. Every figure of a stored
/// `run --iperf3` comes from results that passed.
pub fn check_iperf3_results(
    ours: &TestResults,
    theirs: &TestResults,
    we_sent: bool,
    udp: bool,
) -> Result<(), ReportIssue> {
    let wrong = |what: String| Err(ReportIssue::Inconsistent(what));
    if theirs.streams.len() > ours.streams.len() {
        return wrong(format!(
            "it reports {} streams, but the test had {}",
            theirs.streams.len(),
            ours.streams.len()
        ));
    }
    let our_end = ours.duration_s().max(0.0);
    let latest = our_end + CLOCK_SLACK_NS as f64 / 1e9;
    for (i, t) in theirs.streams.iter().enumerate() {
        let Some(o) = ours.streams.iter().find(|o| o.id == t.id) else {
            return wrong(format!(
                "it reports a stream {} the test never opened",
                t.id
            ));
        };
        if theirs.streams[..i].iter().any(|e| e.id == t.id) {
            return wrong(format!("it reports stream {} twice", t.id));
        }
        let times_ok = [t.start_time, t.end_time]
            .iter()
            .all(|x| x.is_finite() && *x >= 0.0 && *x <= latest);
        if !times_ok || t.end_time < t.start_time {
            return wrong(format!(
                "stream {} ran from {} s to {} s of a test of {our_end:.3} s",
                t.id, t.start_time, t.end_time
            ));
        }
        let ns = ((t.end_time - t.start_time) * 1e9) as u64;
        if !plausible_rate(t.bytes, ns) {
            return wrong(format!(
                "stream {} moved {} bytes in {} s, faster than any path",
                t.id,
                t.bytes,
                t.end_time - t.start_time
            ));
        }
        if we_sent && t.bytes > o.bytes {
            return wrong(format!(
                "it says {} bytes arrived on stream {}, but {} were sent",
                t.bytes, t.id, o.bytes
            ));
        }
        if !we_sent && t.bytes < o.bytes {
            return wrong(format!(
                "it says it sent {} bytes on stream {}, but {} arrived",
                t.bytes, t.id, o.bytes
            ));
        }
        if !we_sent && !udp && t.bytes > o.bytes.saturating_add(TCP_UNDELIVERED_MAX) {
            return wrong(format!(
                "it says it sent {} bytes on stream {}, but only {} arrived",
                t.bytes, t.id, o.bytes
            ));
        }
        if udp && we_sent && t.packets > o.packets {
            return wrong(format!(
                "it says {} datagrams arrived on stream {}, but {} were sent",
                t.packets, t.id, o.packets
            ));
        }
        let counts_ok = t.retransmits >= -1 && t.errors >= 0 && t.packets >= 0;
        if !counts_ok || (udp && t.errors > t.packets) {
            return wrong(format!(
                "stream {} has {} retransmissions, {} of {} datagrams lost",
                t.id, t.retransmits, t.errors, t.packets
            ));
        }
        if !(t.jitter.is_finite() && (0.0..=3600.0).contains(&t.jitter)) {
            return wrong(format!("stream {} has a jitter of {} s", t.id, t.jitter));
        }
    }
    let most_cpu = 100.0 * MAX_PLAUSIBLE_CPUS as f64;
    let cpu = [
        theirs.cpu_util_total,
        theirs.cpu_util_user,
        theirs.cpu_util_system,
    ];
    if let Some(c) = cpu
        .iter()
        .find(|c| !(c.is_finite() && (0.0..=most_cpu).contains(*c)))
    {
        return wrong(format!("its CPU use is {c} %"));
    }
    Ok(())
}

pub mod stored;

#[cfg(test)]
mod tests;
