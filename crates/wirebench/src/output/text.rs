//! Human-readable output: one block per run, the server's per-session summary line, and the
//! Min/Avg/Max tables in the shape our users paste into their reports. Formats only; the
//! caller decides where it goes.

use std::fmt::Write as _;

use wirebench_core::metrics::{CpuUsage, IntervalSample, StatsSource, TransportStats};
use wirebench_core::plan::{Combination, Mechanism, Protocol};
use wirebench_core::proto::{DataPathInfo, ServerReport, SessionParams};
use wirebench_core::stats::Summary;
use wirebench_core::units::{format_bitrate, format_byterate_iec, ByteSize};

use crate::client::{ClientFigures, RttFigures};
use wirebench_core::sweep::Point;

use crate::output::json::RunJson;
use crate::runner::RunRecord;
use crate::store::CampaignInfo;

/// Bits per second for `bytes` over `seconds`; 0 when no time passed.
pub fn bits_per_second(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

/// A bit rate for `bytes` over `seconds`, or "n/a" when no measurable time passed (a single
/// small message arrives within one clock reading).
fn rate_text(bytes: u64, seconds: f64) -> String {
    if seconds > 0.0 {
        format_bitrate(bits_per_second(bytes, seconds))
    } else {
        "n/a".to_string()
    }
}

/// The server's one-line summary of a session, as `wirebench server` prints it.
pub fn session_line(session: u32, peer: &str, params: &SessionParams, r: &ServerReport) -> String {
    let secs = r.elapsed_ns as f64 / 1e9;
    // Reversed (-R), the server is the sender: what it reports is what it sent.
    let (verb, calls) = match (params.reverse, r.protocol) {
        (true, _) => ("sent", "send calls"),
        (false, Protocol::Udp) => ("read", "datagrams"),
        (false, _) => ("read", "read calls"),
    };
    let mut line = format!(
        "session {session:08x} {} {}{} from {peer}: {verb} {} messages, {} bytes in {secs:.4} s ({}), {} {calls}",
        r.protocol,
        r.mechanism,
        if params.reverse { " reverse" } else { "" },
        r.messages,
        r.bytes,
        rate_text(r.bytes, secs),
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
    let _ = write!(
        line,
        " [msg {} B, total {} B]",
        params.msg_size, params.total_bytes
    );
    if r.aborted {
        let _ = write!(
            line,
            " ABORTED: {}",
            r.abort_reason.as_deref().unwrap_or("unknown reason")
        );
    }
    line
}

/// The heading printed before a plan starts.
pub fn plan_heading(
    runs: usize,
    combinations: usize,
    repeat: u32,
    msg_size: u32,
    total: u64,
) -> String {
    format!(
        "wirebench: {runs} run(s): {combinations} combination(s) × {repeat} repeat(s), {msg_size}-byte messages, {}",
        ByteSize(total)
    )
}

/// The block printed after each run.
pub fn run_block(position: usize, of: usize, rec: &RunRecord, server_line: Option<&str>) -> String {
    let c = &rec.outcome.client;
    let s = &rec.outcome.server;
    let mut out = format!(
        "[{position}/{of}] {} {}, run {}\n",
        rec.combination.protocol,
        rec.combination.mechanism,
        rec.repeat_index + 1
    );
    let _ = writeln!(
        out,
        "  client: {}",
        client_text(c, rec.combination, rec.params.reverse)
    );
    match server_line {
        Some(line) if rec.flows.is_empty() => {
            let _ = writeln!(out, "  server: {line}");
        }
        _ if !rec.flows.is_empty() => {
            let _ = writeln!(
                out,
                "  server: {} sessions: {}",
                rec.flows.len(),
                server_sum_text(s)
            );
            for (i, f) in rec.flows.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "  flow {}: client {}; server {}",
                    i + 1,
                    flow_client_text(&f.client),
                    server_sum_text(&f.server)
                );
            }
        }
        _ => {
            let _ = writeln!(
                out,
                "  server: {}",
                session_line(rec.outcome.session, "this client", &rec.params, s)
            );
        }
    }
    if !s.intervals.is_empty() {
        let _ = writeln!(out, "  server intervals:");
        for sample in &s.intervals {
            let _ = writeln!(out, "    {}", interval_line("read", sample));
        }
    }
    if let Some(rtt) = &c.rtt {
        let _ = writeln!(out, "  rtt:    {}", rtt_text(rtt));
    }
    if c.transport.is_some() || s.transport.is_some() {
        let _ = writeln!(
            out,
            "  transport: client {}; server {}",
            transport_text(c.transport.as_ref()),
            transport_text(s.transport.as_ref())
        );
    }
    if let Some(line) = cpu_line(c.cpu.as_ref(), c.tally.bytes, s.cpu.as_ref(), s.bytes) {
        let _ = writeln!(out, "  cpu:    {line}");
    }
    let o = &rec.params.options;
    if o.window.is_some() || o.congestion.is_some() || o.nodelay || o.busy_poll {
        let _ = writeln!(
            out,
            "  path:   client {}; server {}",
            path_text(&c.data_path),
            path_text(&s.data_path)
        );
    }
    out
}

/// One interval line: `[  1.00-  2.00 s] sent 119.21 MiB (1.00 Gbit/s)`, with the UDP loss
/// in the interval where the receiver counted it.
pub fn interval_line(verb: &str, s: &IntervalSample) -> String {
    let mut line = format!(
        "[{:>7.2}-{:>7.2} s] {verb} {} B ({}, {})",
        s.start_ns as f64 / 1e9,
        s.end_ns as f64 / 1e9,
        s.bytes,
        format_bitrate(s.bits_per_second()),
        format_byterate_iec(s.bits_per_second() / 8.0)
    );
    if let Some(retransmitted) = s.retransmitted {
        let _ = write!(line, ", retransmitted {retransmitted}");
    }
    if let Some(lost) = s.lost {
        let _ = write!(line, ", lost {lost}");
    }
    line
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

/// The short form of a server's figures, for summed flows and per-flow lines.
fn server_sum_text(r: &ServerReport) -> String {
    let secs = r.elapsed_ns as f64 / 1e9;
    let mut s = format!(
        "read {} messages, {} bytes in {secs:.4} s ({})",
        r.messages,
        r.bytes,
        format_bitrate(bits_per_second(r.bytes, secs))
    );
    if r.protocol == Protocol::Udp {
        let _ = write!(
            s,
            ", lost {}, duplicates {}, out of order {}",
            r.lost, r.duplicates, r.out_of_order
        );
    }
    if r.aborted {
        let _ = write!(
            s,
            " ABORTED: {}",
            r.abort_reason.as_deref().unwrap_or("unknown reason")
        );
    }
    s
}

/// The short form of one flow's client figures.
fn flow_client_text(c: &ClientFigures) -> String {
    let secs = c.elapsed.as_secs_f64();
    format!(
        "sent {} messages, {} bytes in {secs:.4} s ({})",
        c.tally.messages,
        c.tally.bytes,
        format_bitrate(bits_per_second(c.tally.bytes, secs))
    )
}

/// One end's transport counters: retransmissions over packets sent, then RTT and window.
fn transport_text(t: Option<&TransportStats>) -> String {
    let Some(t) = t else {
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
    s
}

/// CPU seconds (user + system) and seconds per GiB of each end; one figure when the client and
/// an embedded server share the process.
fn cpu_line(
    client: Option<&CpuUsage>,
    client_bytes: u64,
    server: Option<&CpuUsage>,
    server_bytes: u64,
) -> Option<String> {
    let one = |c: &CpuUsage, bytes: u64| {
        let mut s = format!(
            "{:.3} s user + {:.3} s sys",
            c.user_us as f64 / 1e6,
            c.system_us as f64 / 1e6
        );
        if let Some(per_gib) = c.seconds_per_gib(bytes) {
            let _ = write!(s, " ({per_gib:.3} s/GiB)");
        }
        s
    };
    match (client, server) {
        (Some(c), _) if c.shared_process => Some(format!(
            "client and embedded server (one process) {}",
            one(c, client_bytes)
        )),
        (None, None) => None,
        (c, s) => Some(format!(
            "client {}; server {}",
            c.map_or("n/a".into(), |c| one(c, client_bytes)),
            s.map_or("n/a".into(), |s| one(s, server_bytes))
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

fn client_text(c: &ClientFigures, combination: Combination, reverse: bool) -> String {
    let secs = c.elapsed.as_secs_f64();
    let t = &c.tally;
    // Reversed (-R), the client is the receiver: what it reports is what it read.
    let (verb, calls) = if reverse {
        ("received", "read calls")
    } else {
        ("sent", "send calls")
    };
    let mut s = format!(
        "{verb} {} messages, {} bytes in {secs:.4} s ({}, {}), {} {calls}",
        t.messages,
        t.bytes,
        format_bitrate(bits_per_second(t.bytes, secs)),
        format_byterate_iec(if secs > 0.0 {
            t.bytes as f64 / secs
        } else {
            0.0
        }),
        t.send_calls
    );
    if t.datagrams > 0 {
        let _ = write!(s, ", {} datagrams", t.datagrams);
    }
    if let Some(u) = &c.udp_received {
        s.push_str(&udp_receipt_text(
            u.lost,
            u.duplicates,
            u.out_of_order,
            u.jitter_us,
        ));
    }
    if combination.protocol == Protocol::Udp
        && combination.mechanism == Mechanism::StopAndWait
        && !reverse
    {
        let _ = write!(
            s,
            ", retransmissions {}, timeouts {}",
            t.retransmissions, t.timeouts
        );
    }
    if t.send_errors > 0 {
        let _ = write!(s, ", send errors {}", t.send_errors);
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

/// Min/Avg/Max tables, client view then server view, for every combination with runs.
pub fn summary_tables(
    combinations: &[Combination],
    runs: &[RunRecord],
    total_bytes: u64,
) -> String {
    let mut out = String::new();
    for combo in combinations {
        let these: Vec<&RunRecord> = runs.iter().filter(|r| r.combination == *combo).collect();
        if these.is_empty() {
            continue;
        }
        let name = format!(
            "{} {}",
            protocol_title(combo.protocol),
            mechanism_title(combo.mechanism)
        );
        let size = ByteSize(total_bytes).to_string();
        let client = Views {
            messages: these
                .iter()
                .map(|r| r.outcome.client.tally.messages as f64)
                .collect(),
            bytes: these
                .iter()
                .map(|r| r.outcome.client.tally.bytes as f64)
                .collect(),
            seconds: these
                .iter()
                .map(|r| r.outcome.client.elapsed.as_secs_f64())
                .collect(),
        };
        let server = Views {
            messages: these
                .iter()
                .map(|r| r.outcome.server.messages as f64)
                .collect(),
            bytes: these
                .iter()
                .map(|r| r.outcome.server.bytes as f64)
                .collect(),
            seconds: these
                .iter()
                .map(|r| r.outcome.server.elapsed_ns as f64 / 1e9)
                .collect(),
        };
        table(
            &mut out,
            &format!("Client {name} ({size}), {} runs", these.len()),
            &client,
        );
        table(
            &mut out,
            &format!("Server {name} ({size}), {} runs", these.len()),
            &server,
        );
    }
    out
}

struct Views {
    messages: Vec<f64>,
    bytes: Vec<f64>,
    seconds: Vec<f64>,
}

fn table(out: &mut String, title: &str, v: &Views) {
    let _ = writeln!(out, "Statistics for {title}:\n-----");
    if let Some(s) = Summary::of(&v.messages) {
        let _ = writeln!(out, "Messages: {}", count_min_avg_max(&s));
    }
    if let Some(s) = Summary::of(&v.bytes) {
        let _ = writeln!(out, "Bytes: {}", count_min_avg_max(&s));
    }
    if let Some(s) = Summary::of(&v.seconds) {
        let _ = writeln!(
            out,
            "Time (s): Min = {:.4}, Avg = {:.4}, Max = {:.4}",
            s.min, s.mean, s.max
        );
    }
    let rates: Vec<f64> = v
        .bytes
        .iter()
        .zip(&v.seconds)
        .map(|(b, s)| if *s > 0.0 { b * 8.0 / s / 1e9 } else { 0.0 })
        .collect();
    if let Some(s) = Summary::of(&rates) {
        let _ = writeln!(
            out,
            "Throughput (Gbit/s): Min = {:.3}, Avg = {:.3}, Max = {:.3}",
            s.min, s.mean, s.max
        );
    }
    let _ = writeln!(out, "-----");
}

/// Counts print as integers for Min and Max, the average with two decimals.
fn count_min_avg_max(s: &Summary) -> String {
    format!(
        "Min = {:.0}, Avg = {:.2}, Max = {:.0}",
        s.min, s.mean, s.max
    )
}

fn protocol_title(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::Quic => "QUIC",
    }
}

fn mechanism_title(m: Mechanism) -> &'static str {
    match m {
        Mechanism::Stream => "Streaming",
        Mechanism::StopAndWait => "Stop and Wait",
    }
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
    format!(
        "{} × {}, {sizes}, {} × {}",
        list(p.protocols.iter().map(|p| p.to_string()).collect()),
        list(p.mechanisms.iter().map(|m| m.to_string()).collect()),
        list(c.totals.iter().map(|t| ByteSize(*t).to_string()).collect()),
        p.repeat
    )
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
            "{:>4}  {:<19}  {:<8}  {:>9}  {}{}{}",
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
            }
        );
    }
    out
}

/// The `wirebench runs` table of DNS campaigns (`wirebench report --dns ID` shows one).
pub fn dns_campaign_list(campaigns: &[(crate::store::dns::DnsCampaignInfo, u64)]) -> String {
    let mut out = format!(
        "{:>4}  {:<19}  {:<8}  {:>9}  {}
",
        "DNS", "STARTED (UTC)", "STATUS", "RESULTS", "WHAT (wirebench report --dns ID)"
    );
    for (info, stored) in campaigns {
        let c = &info.campaign;
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {:<8}  {:>9}  {} {} at {} over {}, concurrency {}",
            info.id,
            format_utc(c.started_at_unix_s),
            info.status.as_str(),
            format!("{stored}/{}", c.planned_results),
            c.record_type,
            c.name,
            c.resolver,
            c.transports,
            c.concurrency
        );
    }
    out
}

/// The `wirebench show` text: the campaign, its host and every run with both views.
pub fn campaign_detail(c: &CampaignInfo, runs: &[(Point, RunJson)]) -> String {
    let p = &c.parameters;
    let e = &c.environment;
    let unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    let mut out = format!(
        "campaign {}: {}, {} of {} run(s) stored{}\n",
        c.id,
        c.status.as_str(),
        c.stored_runs,
        c.planned_runs,
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
        let _ = writeln!(
            out,
            "[{}] {} {} {} B × {} B, run {}: client {} messages, {} bytes in {:.4} s ({}); server {} messages, {} bytes in {:.4} s ({}){}",
            i + 1,
            r.protocol,
            r.mechanism,
            point.msg_size,
            point.total_bytes,
            r.repeat_index + 1,
            r.client.messages,
            r.client.bytes,
            r.client.seconds,
            format_bitrate(r.client.throughput_bps),
            r.server.messages,
            r.server.bytes,
            r.server.seconds,
            format_bitrate(r.server.throughput_bps),
            if r.server.protocol == Protocol::Udp {
                format!(", lost {}", r.server.lost)
            } else {
                String::new()
            }
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
