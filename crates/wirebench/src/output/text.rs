//! Human-readable output: one block per run, the server's per-session summary line, and the
//! Min/Avg/Max tables in the shape our users paste into their reports. Formats only; the
//! caller decides where it goes.

use std::fmt::Write as _;

use wirebench_core::record::campaign::AbortedDetail;
use wirebench_core::record::dns::DnsCampaignInfo;
use wirebench_core::record::rr::RrCampaignInfo;
use wirebench_core::record::{
    bits_per_second, count_of, AbortedRun, CampaignInfo, ClientRecord, CpuRecord, EndedBy,
    Headline, RttFigures, RunRecord, ServerRecord, TransportRecord, MIN_TIMED_NS,
};
use wirebench_core::vocab::metrics::{IntervalSample, StatsSource};
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::{format_bitrate, format_byterate_iec, ByteSize, RateUnit};
use wirebench_core::wire::proto::{DataPathInfo, ServerReport, SessionParams};

/// A bit rate for `bytes` over `seconds`, or "too short to time" when the span is under
/// [`MIN_TIMED_NS`] (a single small message arrives within one clock reading).
fn rate_text(bytes: u64, seconds: f64, unit: Option<RateUnit>) -> String {
    if seconds * 1e9 >= MIN_TIMED_NS as f64 {
        bitrate_text(bits_per_second(bytes, seconds), unit)
    } else {
        "too short to time".to_string()
    }
}

/// A bit rate in `unit` (`-f`), or in the unit that reads best when none was asked for.
fn bitrate_text(bits_per_second: f64, unit: Option<RateUnit>) -> String {
    match unit {
        Some(u) => u.format(bits_per_second),
        None => format_bitrate(bits_per_second),
    }
}

/// The server's one-line summary of a session, as `wirebench server` prints it.
pub fn session_line(session: u32, peer: &str, params: &SessionParams, r: &ServerReport) -> String {
    session_line_in(session, peer, params, r, None)
}

/// [`session_line`] with its rate in `unit` (`run -f`) when one is given.
pub fn session_line_in(
    session: u32,
    peer: &str,
    params: &SessionParams,
    r: &ServerReport,
    unit: Option<RateUnit>,
) -> String {
    let secs = r.elapsed_ns as f64 / 1e9;
    // Reversed (-R), the server is the sender: what it reports is what it sent.
    let (verb, calls) = match (params.reverse, r.protocol) {
        (true, _) => ("sent", "send calls"),
        (false, Protocol::Udp) => ("read", "datagrams"),
        (false, _) => ("read", "read calls"),
    };
    let mut line = format!(
        "session {session} {} {}{} from {peer}: {verb} {} messages, {} bytes in {secs:.4} s ({}), {} {calls}",
        r.protocol,
        r.mechanism,
        if params.reverse { " reverse" } else { "" },
        r.messages,
        r.bytes,
        rate_text(r.bytes, secs, unit),
        r.read_calls,
    );
    // The receiver's view of UDP; reversed, the client has it.
    if r.protocol == Protocol::Udp && !params.reverse {
        line.push_str(&udp_receipt_text(
            r.lost,
            r.duplicates,
            r.out_of_order,
            r.jitter_us,
        ));
    }
    if r.mechanism == Mechanism::StopAndWait && !params.reverse {
        let _ = write!(line, ", acks sent {}", r.acks_sent);
    }
    match params.duration_us {
        Some(us) => {
            let _ = write!(
                line,
                " [msg {} B, timed {} s, at most {} B]",
                params.msg_size,
                us as f64 / 1e6,
                params.total_bytes
            );
        }
        None => {
            let _ = write!(
                line,
                " [msg {} B, total {} B]",
                params.msg_size, params.total_bytes
            );
        }
    }
    line.push_str(&aborted_text(r.aborted, r.abort_reason.as_deref()));
    line
}

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
            if s.omitted
                .is_some_and(|o| midpoint_ns(&sample.sample) < o.elapsed_ns)
            {
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
            ", over the whole run: lost {} ({:.3} %), duplicates {} ({:.3} %), out of order {} ({:.3} %)",
            d.lost, d.lost_pct, d.duplicates, d.duplicates_pct, d.out_of_order, d.out_of_order_pct
        );
    } else if let Some(d) = &h.delivery {
        let _ = write!(
            s,
            ", lost {} of {} messages ({:.3} %), duplicates {} ({:.3} %), out of order {} ({:.3} %)",
            d.lost,
            h.sent_messages,
            d.lost_pct,
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

/// One interval line: `[  1.00-  2.00 s] sent 119.21 MiB (1.00 Gbit/s)`, with the UDP loss
/// in the interval where the receiver counted it.
pub fn interval_line(verb: &str, s: &IntervalSample) -> String {
    interval_line_in(verb, s, None)
}

/// [`interval_line`] with its rate in `unit` (`run -f`) alone when one is given.
pub fn interval_line_in(verb: &str, s: &IntervalSample, unit: Option<RateUnit>) -> String {
    let rates = match unit {
        Some(u) => u.format(s.bits_per_second()),
        None => format!(
            "{}, {}",
            format_bitrate(s.bits_per_second()),
            format_byterate_iec(s.bits_per_second() / 8.0)
        ),
    };
    let mut line = format!(
        "[{:>7.2}-{:>7.2} s] {verb} {} B ({rates})",
        s.start_ns as f64 / 1e9,
        s.end_ns as f64 / 1e9,
        s.bytes,
    );
    if let Some(retransmitted) = s.retransmitted {
        let _ = write!(line, ", retransmitted {retransmitted}");
    }
    if let Some(lost) = s.lost {
        let _ = write!(line, ", lost {lost}");
    }
    line
}

/// " ABORTED: why" for a session that ended early; nothing otherwise.
fn aborted_text(aborted: bool, reason: Option<&str>) -> String {
    if aborted {
        format!(" ABORTED: {}", reason.unwrap_or("unknown reason"))
    } else {
        String::new()
    }
}

/// What a UDP receiver counted beyond messages and bytes.
fn udp_receipt_text(
    lost: u64,
    duplicates: u64,
    out_of_order: u64,
    jitter_us: Option<f64>,
) -> String {
    let mut s = format!(", lost {lost}, duplicates {duplicates}, out of order {out_of_order}");
    if let Some(jitter) = jitter_us {
        let _ = write!(s, ", jitter {jitter:.1} µs");
    }
    s
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
            u.lost,
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

fn micros(ns: f64) -> String {
    format!("{:.1} µs", ns / 1000.0)
}

/// The `show` line of a run stored as aborted: what it was, why it stopped and what the client
/// had done by then (when known: runs stored before schema version 6 say neither).
pub fn aborted_run_line(a: &AbortedRun, detail: Option<&AbortedDetail>) -> String {
    let p = &a.params;
    let reason = detail
        .and_then(|d| d.reason.as_deref())
        .unwrap_or("interrupted");
    let so_far = match detail.and_then(|d| d.so_far) {
        Some(f) => format!(
            "the client had moved {} messages, {} bytes in {:.4} s",
            f.messages,
            f.bytes,
            f.elapsed.as_secs_f64()
        ),
        None => "no figures".to_string(),
    };
    format!(
        "[{}] {} {} {} B × {} B, run {}: aborted ({reason}); {so_far}\n",
        a.position,
        p.protocol,
        p.mechanism,
        p.msg_size,
        p.total_bytes,
        a.repeat_index + 1
    )
}

/// A Unix time as `YYYY-MM-DD HH:MM:SS` UTC (proleptic Gregorian calendar).
pub fn format_utc(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let secs = unix_s.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// What a campaign ran, in one phrase: `tcp,quic × stream,saw, 1000-byte messages, 97.7 KiB`.
pub fn campaign_what(c: &CampaignInfo) -> String {
    let p = &c.parameters;
    let list = |items: Vec<String>| items.join(",");
    let sizes = match c.msg_sizes.as_slice() {
        [one] => format!("{one}-byte messages"),
        many => format!(
            "{} message sizes ({}..{} B)",
            many.len(),
            many.iter().min().copied().unwrap_or(0),
            many.iter().max().copied().unwrap_or(0)
        ),
    };
    // A timed campaign (-t) says its time: its total is only an upper bound.
    let limit = match p.duration_us {
        Some(us) => format!("{} s", us as f64 / 1e6),
        None => list(c.totals.iter().map(|t| ByteSize(*t).to_string()).collect()),
    };
    format!(
        "{} × {}, {sizes}, {limit} × {}",
        list(p.protocols.iter().map(|p| p.to_string()).collect()),
        list(p.mechanisms.iter().map(|m| m.to_string()).collect()),
        p.repeat
    )
}

/// The measuring host at the end of a `wirebench runs` line (nothing when not recorded): a
/// store many hosts share (PostgreSQL) lists every host's campaigns.
fn host_suffix(host: &Option<String>) -> String {
    host.as_deref()
        .map_or_else(String::new, |h| format!("; host {h}"))
}

/// The `wirebench runs` table: one line per campaign.
pub fn campaign_list(campaigns: &[CampaignInfo]) -> String {
    let mut out = format!(
        "{:>4}  {:<19}  {:<8}  {:>9}  {}\n",
        "ID", "STARTED (UTC)", "STATUS", "RUNS", "WHAT"
    );
    for c in campaigns {
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {:<8}  {:>9}  {}{}{}{}",
            c.id,
            format_utc(c.started_at_unix_s),
            c.status.as_str(),
            format!("{}/{}", c.stored_runs, c.planned_runs),
            campaign_what(c),
            if c.origin == "import" {
                " (imported)"
            } else {
                ""
            },
            if c.aborted_runs > 0 {
                format!(" (+{} aborted in flight)", c.aborted_runs)
            } else {
                String::new()
            },
            host_suffix(&c.environment.host_name),
        );
    }
    out
}

/// The `wirebench runs` table of DNS campaigns (`wirebench report --dns ID` shows one).
pub fn dns_campaign_list(campaigns: &[(DnsCampaignInfo, u64)]) -> String {
    let mut out = format!(
        "{:>4}  {:<19}  {:<8}  {:>9}  {}
",
        "DNS", "STARTED (UTC)", "STATUS", "RESULTS", "WHAT (wirebench report --dns ID)"
    );
    for (info, stored) in campaigns {
        let c = &info.campaign;
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {:<8}  {:>9}  {} {} at {} over {}, concurrency {}{}",
            info.id,
            format_utc(c.started_at_unix_s),
            info.status.as_str(),
            format!("{stored}/{}", c.planned_results),
            c.record_type,
            c.name,
            c.resolver,
            c.transports,
            c.concurrency,
            host_suffix(&c.host_name),
        );
    }
    out
}

/// The `wirebench runs` table of rr sweeps (`wirebench report --rr ID` shows one).
pub fn rr_campaign_list(campaigns: &[(RrCampaignInfo, u64)]) -> String {
    let mut out = format!(
        "{:>4}  {:<19}  {:<8}  {:>9}  {}\n",
        "RR", "STARTED (UTC)", "STATUS", "RESULTS", "WHAT (wirebench report --rr ID)"
    );
    for (info, stored) in campaigns {
        let c = &info.campaign;
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {:<8}  {:>9}  {} B requests, {} B responses to {} over {}, {}, requests in flight {}{}",
            info.id,
            format_utc(c.started_at_unix_s),
            info.status.as_str(),
            format!("{stored}/{}", c.planned_results),
            c.request_bytes,
            c.response_bytes,
            c.server,
            c.protocols,
            count_of(c.flows as usize, "flow", "flows"),
            c.concurrency,
            host_suffix(&c.host_name),
        );
    }
    out
}

/// The `wirebench runs` block of rpm campaigns: id, start, status, tests stored of planned,
/// what ran and the RPM of each test with the draft's rating word.
pub fn rpm_campaign_list(
    campaigns: &[(
        wirebench_core::record::rpm::RpmCampaignInfo,
        Vec<Option<f64>>,
    )],
) -> String {
    use wirebench_core::machine::responsiveness::Rating;
    let mut out = format!(
        "{:>4}  {:<19}  {:<8}  {:>9}  {}\n",
        "RPM", "STARTED (UTC)", "STATUS", "RESULTS", "WHAT (wirebench report --rpm ID)"
    );
    for (info, rpms) in campaigns {
        let c = &info.campaign;
        let figures: Vec<String> = rpms
            .iter()
            .map(|r| match r {
                Some(v) => format!("RPM {v:.0} ({})", Rating::of(*v).word()),
                None => "no RPM".to_string(),
            })
            .collect();
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {:<8}  {:>9}  {} load against {} over {}, up to {} per direction{}{}{}",
            info.id,
            format_utc(c.started_at_unix_s),
            info.status.as_str(),
            format!("{}/{}", rpms.len(), c.planned_results),
            c.direction.as_str(),
            c.server,
            c.protocol,
            count_of(c.max_flows as usize, "flow", "flows"),
            if figures.is_empty() { "" } else { ": " },
            figures.join(", "),
            host_suffix(&c.host_name),
        );
    }
    out
}

/// The `wirebench show` text: the campaign, its host and every run with both views.
pub fn campaign_detail(c: &CampaignInfo, runs: &[(Point, RunRecord)]) -> String {
    let p = &c.parameters;
    let e = &c.environment;
    let unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    let mut out = format!(
        "campaign {}: {}, {} of {} stored{}\n",
        c.id,
        c.status.as_str(),
        c.stored_runs,
        count_of(c.planned_runs as usize, "run", "runs"),
        if c.origin == "import" {
            ", imported"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  started:  {} UTC{}",
        format_utc(c.started_at_unix_s),
        c.finished_at_unix_s
            .map(|f| format!(", finished {} UTC", format_utc(f)))
            .unwrap_or_default()
    );
    if let Some(err) = &c.error {
        let _ = writeln!(out, "  stopped:  {err}");
    }
    let _ = writeln!(out, "  what:     {}", campaign_what(c));
    let _ = writeln!(
        out,
        "  server:   {}{}",
        p.server,
        if p.embedded_server && !p.server.starts_with("embedded") {
            " (embedded)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  host:     {}, kernel {}, CPU {}, wirebench {}",
        unknown(&e.host_name),
        unknown(&e.kernel),
        unknown(&e.cpu_model),
        e.wirebench_version
    );
    let bytes = |v: Option<u64>| v.map_or_else(|| "unknown".to_string(), |b| format!("{b} B"));
    let _ = writeln!(
        out,
        "  sockets:  rmem_max {}, wmem_max {}",
        bytes(e.rmem_max_bytes),
        bytes(e.wmem_max_bytes)
    );
    for (i, (point, r)) in runs.iter().enumerate() {
        let limit = match (r.ended_by, c.parameters.duration_us) {
            (EndedBy::Time, Some(us)) => format!("{} s", us as f64 / 1e6),
            _ => format!("{} B", point.total_bytes),
        };
        let _ = writeln!(
            out,
            "[{}] {} {} {} B × {limit}, run {}: goodput {}; client {} messages, {} bytes in {:.4} s; server {} messages, {} bytes",
            i + 1,
            r.protocol,
            r.mechanism,
            point.msg_size,
            r.repeat_index + 1,
            headline_text(&r.headline()),
            r.client.messages,
            r.client.bytes,
            r.client.seconds,
            r.server.messages,
            r.server.bytes,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_timestamps_match_the_calendar() {
        for (t, expected) in [
            (0, "1970-01-01 00:00:00"),
            (1_763_800_000, "2025-11-22 08:26:40"),
            (951_782_400, "2000-02-29 00:00:00"),
            (4_107_542_399, "2100-02-28 23:59:59"),
            (-86_400, "1969-12-31 00:00:00"),
        ] {
            assert_eq!(format_utc(t), expected, "{t}");
        }
    }
}
