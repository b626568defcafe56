//! Human-readable output: one block per run, the server's per-session summary line, and the
//! Min/Avg/Max tables in the shape our users paste into their reports. Formats only; the
//! caller decides where it goes.

use std::fmt::Write as _;

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
    let mut line = format!(
        "session {session:08x} {} {} from {peer}: read {} messages, {} bytes in {secs:.4} s ({}), {} {}",
        r.protocol,
        r.mechanism,
        r.messages,
        r.bytes,
        rate_text(r.bytes, secs),
        r.read_calls,
        if r.protocol == Protocol::Udp { "datagrams" } else { "read calls" },
    );
    if r.protocol == Protocol::Udp {
        let _ = write!(
            line,
            ", lost {}, duplicates {}, out of order {}",
            r.lost, r.duplicates, r.out_of_order
        );
    }
    if r.mechanism == Mechanism::StopAndWait {
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
    let _ = writeln!(out, "  client: {}", client_text(c, rec.combination));
    match server_line {
        Some(line) => {
            let _ = writeln!(out, "  server: {line}");
        }
        None => {
            let _ = writeln!(
                out,
                "  server: {}",
                session_line(rec.outcome.session, "this client", &rec.params, s)
            );
        }
    }
    if let Some(rtt) = &c.rtt {
        let _ = writeln!(out, "  rtt:    {}", rtt_text(rtt));
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

fn client_text(c: &ClientFigures, combination: Combination) -> String {
    let secs = c.elapsed.as_secs_f64();
    let t = &c.tally;
    let mut s = format!(
        "sent {} messages, {} bytes in {secs:.4} s ({}, {}), {} send calls",
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
    if combination.protocol == Protocol::Udp && combination.mechanism == Mechanism::StopAndWait {
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
            "{:>4}  {:<19}  {:<8}  {:>9}  {}{}",
            c.id,
            format_utc(c.started_at_unix_s),
            c.status.as_str(),
            format!("{}/{}", c.stored_runs, c.planned_runs),
            campaign_what(c),
            if c.origin == "import" {
                " (imported)"
            } else {
                ""
            }
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
