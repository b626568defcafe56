//! The block printed after each run — the headline (goodput, sent rate, UDP loss), each side's
//! counts, intervals, round trips, transport counters, CPU and data path — and the plan's
//! headings. Formats only; the caller decides where it goes.

use std::fmt::Write as _;

use wirebench_core::record::{
    count_of, ClientRecord, CpuRecord, Delivery, EndedBy, Headline, RttFigures, RunRecord,
    ServerRecord, TransportRecord, MIN_TIMED_NS,
};
use wirebench_core::vocab::counters::{IntervalSample, StatsSource};
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::units::{format_byterate_iec, ByteSize, RateUnit};
use wirebench_core::wire::proto::DataPathInfo;

use super::session::{aborted_text, bitrate_text, interval_line_in, rate_text, udp_receipt_text};

/// The heading printed before a plan starts.
/// `time_us`: a timed plan (`-t`) says how long each run sends instead of its total.
pub fn plan_heading(
    runs: usize,
    combinations: usize,
    repeat: u32,
    msg_size: u32,
    (total, time_us): (u64, Option<u64>),
) -> String {
    let limit = match time_us {
        Some(us) => format!("{} s each", us as f64 / 1e6),
        None => ByteSize(total).to_string(),
    };
    format!(
        "wirebench: {}: {} × {}, {msg_size}-byte messages, {limit}",
        count_of(runs, "run", "runs"),
        count_of(combinations, "combination", "combinations"),
        count_of(repeat as usize, "repeat", "repeats"),
    )
}

/// The heading of a run in a plan: `[2/6] udp stream, run 1`. Printed before the run's
/// interval lines (with `-i`) or as the first line of its block.
pub fn run_heading(position: usize, of: usize, run: &RunRecord) -> String {
    format!(
        "[{position}/{of}] {} {}, run {}",
        run.protocol,
        run.mechanism,
        run.repeat_index + 1
    )
}

/// How a run block is laid out besides the run itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockLayout {
    /// The heading was printed already, before the run's interval lines.
    pub headed: bool,
    /// Data-path options were asked for: show what each end's data path ran with.
    pub show_path: bool,
    /// `-f`: the unit of every bit rate in the block; None picks one per figure.
    pub rate_unit: Option<RateUnit>,
}

/// The block printed after each run: the headline (goodput, sent rate, UDP loss), then each
/// side's counts. A `--bidir` run prints both directions added up, then each direction's
/// block (`server_line` belongs to the client → server one).
pub fn run_block(
    position: usize,
    of: usize,
    run: &RunRecord,
    server_line: Option<&str>,
    layout: BlockLayout,
) -> String {
    let Some(back) = &run.server_to_client else {
        return direction_block(position, of, run, server_line, layout);
    };
    let mut out = String::new();
    if !layout.headed {
        let _ = writeln!(out, "{}", run_heading(position, of, run));
    }
    let _ = writeln!(
        out,
        "  goodput, both directions added up: {}",
        headline_text_in(&run.headline(), layout.rate_unit)
    );
    let one_way = |reverse: bool| RunRecord {
        client: if reverse {
            back.client.clone()
        } else {
            run.client.clone()
        },
        server: if reverse {
            back.server.clone()
        } else {
            run.server.clone()
        },
        session: if reverse { back.session } else { run.session },
        flows: run
            .flows
            .iter()
            .filter(|f| f.reverse == reverse)
            .cloned()
            .collect(),
        reverse,
        server_to_client: None,
        ..run.clone()
    };
    let headed = BlockLayout {
        headed: true,
        ..layout
    };
    for (reverse, name, line) in [
        (false, "client → server", server_line),
        (true, "server → client", None),
    ] {
        let _ = writeln!(out, "  {name}:");
        for l in direction_block(position, of, &one_way(reverse), line, headed).lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    out
}

/// The middle of an interval, ns: an interval whose middle lies before the omit mark is
/// shown "(omitted)" (the two ends' clocks differ by a little, so no edge is exact).
pub fn midpoint_ns(s: &IntervalSample) -> u64 {
    s.start_ns + (s.end_ns.saturating_sub(s.start_ns)) / 2
}

/// Whether the interval `s` falls in the omitted start of a run whose omit mark (`-O`) is
/// `omit` after its start: its middle lies before the mark (as iperf3 marks it).
pub fn omitted(s: &IntervalSample, omit: Option<std::time::Duration>) -> bool {
    omit.is_some_and(|o| u128::from(midpoint_ns(s)) < o.as_nanos())
}

/// The lines of an omit mark (`-O`): what each end moved before its mark, which the figures
/// leave out.
fn omitted_text(run: &RunRecord) -> Option<String> {
    let (c, s) = (run.client.omitted?, run.server.omitted?);
    let (client_verb, server_verb) = if run.reverse {
        ("received", "sent")
    } else {
        ("sent", "read")
    };
    Some(format!(
        "the first {:.4} s, left out of the goodput: client {client_verb} {} B, server {server_verb} {} B before their marks",
        c.elapsed_ns.min(run.client.elapsed_ns) as f64 / 1e9,
        c.bytes,
        s.bytes
    ))
}

/// [`run_block`] of one direction.
fn direction_block(
    position: usize,
    of: usize,
    run: &RunRecord,
    server_line: Option<&str>,
    layout: BlockLayout,
) -> String {
    let c = &run.client;
    let s = &run.server;
    let mut out = String::new();
    if !layout.headed {
        let _ = writeln!(out, "{}", run_heading(position, of, run));
    }
    let unit = layout.rate_unit;
    let _ = writeln!(
        out,
        "  goodput: {}",
        headline_text_in(&run.headline(), unit)
    );
    if let Some(line) = omitted_text(run) {
        let _ = writeln!(out, "  omitted: {line}");
    }
    let _ = writeln!(out, "  client: {}", client_text(c, run, unit));
    if run.ended_by == EndedBy::Time {
        // Runs ended by their total (the default) say nothing, as before -t existed.
        let _ = writeln!(
            out,
            "  ended by: time (-t): the sender stopped after its last whole message"
        );
    }
    match server_line {
        Some(line) if run.flows.is_empty() => {
            let _ = writeln!(out, "  server: {line}");
        }
        _ if !run.flows.is_empty() => {
            let _ = writeln!(
                out,
                "  server: {} sessions: {}",
                run.flows.len(),
                server_sum_text(s, run.reverse, unit)
            );
            for (i, f) in run.flows.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "  flow {}: client {}; server {}",
                    i + 1,
                    flow_client_text(&f.client, run.reverse, unit),
                    server_sum_text(&f.server, run.reverse, unit)
                );
            }
        }
        _ => {
            let _ = writeln!(out, "  server: {}", server_record_text(run));
        }
    }
    if !s.measured.intervals.is_empty() {
        let _ = writeln!(out, "  server intervals:");
        let verb = if run.reverse { "sent" } else { "read" };
        for sample in &s.measured.intervals {
            let mut line = interval_line_in(verb, &sample.sample, unit);
            let mark = s
                .omitted
                .map(|o| std::time::Duration::from_nanos(o.elapsed_ns));
            if omitted(&sample.sample, mark) {
                line.push_str(" (omitted)");
            }
            let _ = writeln!(out, "    {line}");
        }
    }
    if let Some(rtt) = &c.rtt {
        let _ = writeln!(out, "  rtt:    {}", rtt_text(rtt));
    }
    if c.measured.transport.is_some() || s.measured.transport.is_some() {
        let _ = writeln!(
            out,
            "  transport: client {}; server {}",
            transport_text(c.measured.transport.as_ref()),
            transport_text(s.measured.transport.as_ref())
        );
    }
    if let Some(line) = cpu_line(c.measured.cpu.as_ref(), s.measured.cpu.as_ref()) {
        let _ = writeln!(out, "  cpu:    {line}");
    }
    if layout.show_path {
        let _ = writeln!(
            out,
            "  path:   client {}; server {}",
            path_text(&c.data_path),
            path_text(&s.data_path)
        );
    }
    out
}

/// The headline of a run in one line: goodput over the transfer time, how much of what was
/// sent arrived, the offered rate, and for UDP what was lost, repeated and reordered.
pub fn headline_text(h: &Headline) -> String {
    headline_text_in(h, None)
}

/// [`headline_text`] with its rates in `unit` (`run -f`) when one is given.
pub fn headline_text_in(h: &Headline, unit: Option<RateUnit>) -> String {
    let rate = |bps: f64| bitrate_text(bps, unit);
    let secs = h.transfer_seconds();
    let mut s = match h.goodput_bps {
        Some(goodput) => format!(
            "{} ({} of {} bytes sent arrived in {secs:.4} s; sent at {})",
            rate(goodput),
            h.received_bytes,
            h.sent_bytes,
            h.sent_bps.map_or("n/a".into(), rate)
        ),
        None if h.omitted_ns > 0 => format!(
            "nothing to time after the -O/--omit mark ({secs:.6} s left: the run ended before or just after it); {} of {} bytes sent after it arrived",
            h.received_bytes, h.sent_bytes
        ),
        None => format!(
            "too short to time ({secs:.6} s, under {} ms: send more data with -n); {} of {} bytes sent arrived",
            MIN_TIMED_NS / 1_000_000,
            h.received_bytes,
            h.sent_bytes
        ),
    };
    if let (Some(d), true) = (&h.delivery, h.omitted_ns > 0) {
        // The counts cover the whole run, the omitted span too: "of N" would mislead.
        let _ = write!(
            s,
            ", over the whole run: lost {} ({:.3} %{}), duplicates {} ({:.3} %), out of order {} ({:.3} %)",
            d.lost,
            d.lost_pct,
            loss_split_text(d),
            d.duplicates,
            d.duplicates_pct,
            d.out_of_order,
            d.out_of_order_pct
        );
    } else if let Some(d) = &h.delivery {
        let _ = write!(
            s,
            ", lost {} of {} messages ({:.3} %{}), duplicates {} ({:.3} %), out of order {} ({:.3} %)",
            d.lost,
            h.sent_messages,
            d.lost_pct,
            loss_split_text(d),
            d.duplicates,
            d.duplicates_pct,
            d.out_of_order,
            d.out_of_order_pct
        );
    }
    if let Some(rate) = h.retrans_rate.filter(|_| h.delivery.is_none()) {
        let _ = write!(s, ", retransmitted {:.4} %", rate * 100.0);
    }
    s
}

/// The server's line of a run rebuilt from its record (no live line from an embedded server).
fn server_record_text(run: &RunRecord) -> String {
    let s = &run.server;
    let verb = if run.reverse { "sent" } else { "read" };
    let mut line = format!(
        "session {}: {verb} {} messages, {} bytes in {:.4} s, {} {}",
        run.session,
        s.messages,
        s.bytes,
        s.seconds,
        s.read_calls,
        if run.reverse {
            "send calls"
        } else {
            "read calls"
        }
    );
    line.push_str(&aborted_text(s.aborted, s.abort_reason.as_deref()));
    line
}

/// The short form of a server's figures, for summed flows and per-flow lines: what it read
/// (or, with -R, sent) over its own span.
fn server_sum_text(r: &ServerRecord, reverse: bool, unit: Option<RateUnit>) -> String {
    let mut s = format!(
        "{} {} messages, {} bytes in {:.4} s ({})",
        if reverse { "sent" } else { "read" },
        r.messages,
        r.bytes,
        r.seconds,
        rate_text(r.bytes, r.seconds, unit)
    );
    if r.protocol == Protocol::Udp && !reverse {
        let _ = write!(
            s,
            ", lost {}, duplicates {}, out of order {}",
            r.lost, r.duplicates, r.out_of_order
        );
    }
    s.push_str(&aborted_text(r.aborted, r.abort_reason.as_deref()));
    s
}

/// The short form of one flow's client figures: what it sent (or, with -R, received).
fn flow_client_text(c: &ClientRecord, reverse: bool, unit: Option<RateUnit>) -> String {
    format!(
        "{} {} messages, {} bytes in {:.4} s ({})",
        if reverse { "received" } else { "sent" },
        c.messages,
        c.bytes,
        c.seconds,
        rate_text(c.bytes, c.seconds, unit)
    )
}

/// One end's transport counters: retransmissions over packets sent, then RTT and window.
fn transport_text(t: Option<&TransportRecord>) -> String {
    let Some(t) = t.map(|t| &t.stats) else {
        return "n/a".into();
    };
    let (what, unit) = match t.source {
        StatsSource::TcpInfo => ("retransmitted", "segments"),
        StatsSource::Quic => ("lost", "packets"),
        StatsSource::Udp => ("resent or lost", "datagrams"),
    };
    let mut s = format!(
        "{what} {} of {} {unit}",
        t.packets_retransmitted, t.packets_sent
    );
    if let Some(rate) = t.retrans_rate() {
        let _ = write!(s, " (retrans_rate {:.4} %)", rate * 100.0);
    }
    if let Some(srtt) = t.srtt_us {
        let _ = write!(s, ", srtt {srtt} µs");
    }
    if let Some(cwnd) = t.cwnd_bytes {
        let _ = write!(s, ", cwnd {}", ByteSize(cwnd));
    }
    if let Some(events) = t.congestion_events {
        let _ = write!(s, ", {events} congestion events");
    }
    if let Some(mtu) = t.path_mtu {
        let _ = write!(s, ", MTU {mtu}");
    }
    if let Some(window) = t.send_window_bytes {
        let _ = write!(s, ", send window {}", ByteSize(window));
    }
    s
}

/// CPU seconds (user + system) and seconds per GiB of each end; one figure when the client and
/// an embedded server share the process.
fn cpu_line(client: Option<&CpuRecord>, server: Option<&CpuRecord>) -> Option<String> {
    let one = |c: &CpuRecord| {
        let mut s = format!(
            "{:.3} s user + {:.3} s sys",
            c.usage.user_us as f64 / 1e6,
            c.usage.system_us as f64 / 1e6
        );
        if let Some(per_gib) = c.seconds_per_gib {
            let _ = write!(s, " ({per_gib:.3} s/GiB)");
        }
        s
    };
    match (client, server) {
        (Some(c), _) if c.usage.shared_process => Some(format!(
            "client and embedded server (one process) {}",
            one(c)
        )),
        (None, None) => None,
        (c, s) => Some(format!(
            "client {}; server {}",
            c.map_or("n/a".into(), one),
            s.map_or("n/a".into(), one)
        )),
    }
}

/// Socket buffers, congestion control, flags and CPU of one end, as the OS reported them.
fn path_text(p: &DataPathInfo) -> String {
    let mut s = format!(
        "rcvbuf {} sndbuf {}",
        ByteSize(p.recv_buffer),
        ByteSize(p.send_buffer)
    );
    if let Some(cc) = &p.congestion {
        let _ = write!(s, ", {cc}");
    }
    if p.nodelay {
        s.push_str(", nodelay");
    }
    if p.busy_poll {
        s.push_str(", busy-poll");
    }
    if p.gso_segments > 1 {
        let _ = write!(s, ", GSO {} segments", p.gso_segments);
    }
    if p.own_socket {
        s.push_str(", own socket");
    }
    if let Some(cpu) = p.cpu {
        let _ = write!(s, ", cpu {cpu}");
    }
    s
}

fn client_text(c: &ClientRecord, run: &RunRecord, unit: Option<RateUnit>) -> String {
    // Reversed (-R), the client is the receiver: what it reports is what it read.
    let (verb, calls) = if run.reverse {
        ("received", "read calls")
    } else {
        ("sent", "send calls")
    };
    let timed = c.elapsed_ns >= MIN_TIMED_NS;
    let mut s = format!(
        "{verb} {} messages, {} bytes in {:.4} s ({} {verb}{}), {} {calls}",
        c.messages,
        c.bytes,
        c.seconds,
        rate_text(c.bytes, c.seconds, unit),
        // With -f, the one unit asked for alone.
        if timed && unit.is_none() {
            format!(", {}", format_byterate_iec(c.bytes as f64 / c.seconds))
        } else {
            String::new()
        },
        c.send_calls
    );
    if c.datagrams > 0 {
        let _ = write!(s, ", {} datagrams", c.datagrams);
    }
    if let Some(u) = &c.udp_received {
        s.push_str(&udp_receipt_text(
            (u.lost, u.dropped_by_host),
            u.duplicates,
            u.out_of_order,
            u.jitter_us,
        ));
    }
    if run.protocol == Protocol::Udp && run.mechanism == Mechanism::StopAndWait && !run.reverse {
        let _ = write!(
            s,
            ", retransmissions {}, timeouts {}",
            c.retransmissions, c.timeouts
        );
    }
    if c.send_errors > 0 {
        let _ = write!(s, ", send errors {}", c.send_errors);
    }
    if c.not_sent > 0 {
        let _ = write!(
            s,
            ", {} messages not sent (the host dropped them: its device queue was full)",
            c.not_sent
        );
    }
    s
}

/// One line of round-trip (or response) times: min / avg / max, stddev and the percentile ladder.
pub fn rtt_text(r: &RttFigures) -> String {
    format!(
        "min {} / avg {} / max {} / stddev {} (p50 {}, p90 {}, p99 {}, p99.9 {}, {} samples)",
        micros(r.min_ns as f64),
        micros(r.mean_ns),
        micros(r.max_ns as f64),
        micros(r.stddev_ns),
        micros(r.p50_ns as f64),
        micros(r.p90_ns as f64),
        micros(r.p99_ns as f64),
        micros(r.p999_ns as f64),
        r.samples
    )
}

/// A time in nanoseconds in microseconds, one decimal, with its unit: "12.3 µs".
pub fn micros(ns: f64) -> String {
    format!("{:.1} µs", ns / 1000.0)
}

/// Where a UDP run's lost messages went, when any were lost and the receiver could tell:
/// ": 120 dropped by the receiving host, 0 not sent by the sending host, 12 on the path".
fn loss_split_text(d: &Delivery) -> String {
    match d.loss_split.filter(|_| d.lost > 0) {
        Some(split) => format!(
            ": {} dropped by the receiving host, {} not sent by the sending host, {} on the path",
            split.receiving_host, split.sending_host, split.path
        ),
        None => String::new(),
    }
}
