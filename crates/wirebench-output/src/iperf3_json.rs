//! iperf3's `-J` document, rendered from wirebench's run record (`run -J --iperf3-shape`, and
//! the events of `--json-stream --iperf3-shape`): `start` (with `test_start`), `intervals`,
//! `end` (`streams`, `sum_sent`, `sum_received`, for UDP `sum` with `lost_percent` and
//! `jitter_ms`, the CPU and the congestion controls), with iperf3's key names, so scripts and
//! dashboards written for iperf3 read wirebench. Every figure comes from the record and its
//! headline (docs/iperf3-shape.schema.json lists the keys); nothing is measured here.

use serde_json::{json, Map, Value};
use wirebench_core::record::{
    bits_per_second, ClientRecord, EndMetrics, Headline, Parameters, RunRecord, ServerRecord,
};
use wirebench_core::vocab::counters::IntervalSample;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::iperf3::stream_id;
use wirebench_core::wire::proto::DataPathInfo;

/// What the document says about the test beside the run: the campaign's parameters, and the
/// facts the caller knows (nothing here reads a clock).
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// What was asked.
    pub params: &'a Parameters,
    /// wirebench's version.
    pub version: &'a str,
    /// When the test started, milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    /// `-T`.
    pub title: Option<&'a str>,
    /// `-i`, seconds (0 without).
    pub interval_s: f64,
    /// `-S`.
    pub tos: u8,
}

/// The whole `-J` document of one run.
pub fn document(ctx: &Context<'_>, run: &RunRecord) -> Value {
    // --bidir: the client's series of what it received, read at the same moments.
    let back = run
        .server_to_client
        .as_ref()
        .map_or(&[][..], |d| &d.client.measured.intervals[..]);
    let intervals: Vec<Value> = run
        .client
        .measured
        .intervals
        .iter()
        .enumerate()
        .filter(|(_, i)| shown(ctx, &i.sample))
        .map(|(at, i)| {
            let mut entry = interval(ctx, run.protocol, run.reverse, &i.sample);
            if let Some(b) = back.get(at) {
                let mut reverse = interval(ctx, run.protocol, true, &b.sample);
                if let (Value::Object(e), Value::Object(r)) = (&mut entry, &mut reverse) {
                    if let (Some(Value::Array(streams)), Some(Value::Array(more))) =
                        (e.get_mut("streams"), r.remove("streams"))
                    {
                        for mut s in more {
                            insert(&mut s, "socket", stream_id(ctx.params.parallel).into());
                            streams.push(s);
                        }
                    }
                    if let Some(sum) = r.remove("sum") {
                        e.insert("sum_bidir_reverse".into(), sum);
                    }
                }
            }
            entry
        })
        .collect();
    let mut doc = Map::new();
    // Each flow's own socket, in the order of its stream; the run's when it had one.
    let sockets: Vec<&DataPathInfo> = if run.flows.is_empty() {
        let mut one = vec![&run.client.data_path];
        one.extend(run.server_to_client.iter().map(|d| &d.client.data_path));
        one
    } else {
        run.flows.iter().map(|f| &f.client.data_path).collect()
    };
    doc.insert(
        "start".into(),
        start(ctx, run.protocol, run.mechanism, &sockets),
    );
    doc.insert("intervals".into(), Value::Array(intervals));
    doc.insert("end".into(), end(run));
    if let Some(title) = ctx.title {
        doc.insert("title".into(), title.into());
    }
    Value::Object(doc)
}

/// Whether iperf3 would print the interval `s`: it leaves out a last interval shorter than a
/// tenth of `-i` that moved nothing (the few milliseconds between the last tick and the end).
pub fn shown(ctx: &Context<'_>, s: &IntervalSample) -> bool {
    let seconds = s.end_ns.saturating_sub(s.start_ns) as f64 / 1e9;
    s.bytes > 0 || seconds >= ctx.interval_s * 0.1
}

/// The `start` object: where, what and when. `sockets` is what the client's data sockets ran
/// with, one per stream, when known (the `--json-stream` start line goes out before the run's
/// record and passes none): their local addresses, buffers and TCP segment size.
pub fn start(
    ctx: &Context<'_>,
    protocol: Protocol,
    mechanism: Mechanism,
    sockets: &[&DataPathInfo],
) -> Value {
    let p = ctx.params;
    let (host, port) = host_port(&p.server);
    let client_path = sockets.first().copied();
    let local = |i: u32| {
        sockets
            .get(i as usize)
            .and_then(|d| d.local_addr.as_deref())
            .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
    };
    let seconds = |us: Option<u64>| us.map_or(0, |us| us / 1_000_000);
    let rate = p.rate_bps.unwrap_or(0);
    // wirebench paces TCP in the kernel (SO_MAX_PACING_RATE): that is iperf3's --fq-rate.
    let fq_rate = if protocol == Protocol::Tcp { rate } else { 0 };
    let gso = client_path.map_or(0, |d| i32::from(d.gso_segments > 1));
    // --bidir opens each stream in both directions, as iperf3 does.
    let connections = p.parallel.saturating_mul(if p.bidir { 2 } else { 1 });
    let connected: Vec<Value> = (0..connections)
        .map(|i| {
            let mut c = json!({"socket": stream_id(i), "remote_host": host, "remote_port": port});
            if let Some(a) = local(i) {
                insert(&mut c, "local_host", a.ip().to_string().into());
                insert(&mut c, "local_port", a.port().into());
            }
            c
        })
        .collect();
    let secs = ctx.started_unix_ms.div_euclid(1000);
    let mut start = json!({
        "connected": connected,
        "version": format!("wirebench {}", ctx.version),
        "system_info": format!("wirebench {} {} ({mechanism})", ctx.version, protocol),
        "timestamp": {
            "time": http_date(secs),
            "timesecs": secs,
            "timemillisecs": ctx.started_unix_ms,
        },
        "connecting_to": {"host": host, "port": port},
        "cookie": "",
        "target_bitrate": rate,
        "fq_rate": fq_rate,
        "sock_bufsize": p.options.window.unwrap_or(0),
        "test_start": {
            "protocol": protocol_name(protocol),
            "num_streams": p.parallel,
            "blksize": p.msg_size,
            "omit": seconds(p.omit_us),
            "duration": seconds(p.duration_us),
            "bytes": if p.duration_us.is_some() { 0 } else { p.total_bytes },
            "blocks": 0,
            "reverse": i32::from(p.reverse),
            "tos": ctx.tos,
            "target_bitrate": rate,
            "bidir": i32::from(p.bidir),
            "fqrate": fq_rate,
            "interval": ctx.interval_s,
            "gso": gso,
            "gro": 0,
        },
    });
    if let Some(d) = client_path {
        insert(&mut start, "sndbuf_actual", d.send_buffer.into());
        insert(&mut start, "rcvbuf_actual", d.recv_buffer.into());
    }
    if protocol == Protocol::Tcp {
        // iperf3 names the segment size `tcp_mss` when -M set it, else `tcp_mss_default`.
        match (p.options.mss, client_path.and_then(|d| d.mss)) {
            (Some(mss), _) => insert(&mut start, "tcp_mss", mss.into()),
            (None, Some(mss)) => insert(&mut start, "tcp_mss_default", mss.into()),
            (None, None) => {}
        }
    }
    start
}

/// iperf3's `timestamp.time`: the start in GMT, as `Sat, 28 Nov 2026 03:14:24 GMT`.
fn http_date(unix_s: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_s.max(0).unsigned_abs());
    httpdate::fmt_http_date(at)
}

/// One `intervals[]` entry: what the client sent (or with -R received) in the interval, as
/// its only stream and as the sum. A UDP sender's entry counts its datagrams; a UDP
/// receiver's its losses.
pub fn interval(ctx: &Context<'_>, protocol: Protocol, reverse: bool, s: &IntervalSample) -> Value {
    let start = s.start_ns as f64 / 1e9;
    let end = s.end_ns as f64 / 1e9;
    let omitted =
        super::run_block::omitted(s, ctx.params.omit_us.map(std::time::Duration::from_micros));
    let mut one = json!({
        "start": start,
        "end": end,
        "seconds": end - start,
        "bytes": s.bytes,
        "bits_per_second": s.bits_per_second(),
        "omitted": omitted,
        "sender": !reverse,
    });
    if let Some(retransmits) = s.retransmitted {
        insert(&mut one, "retransmits", retransmits.into());
    }
    if protocol == Protocol::Udp {
        // Every datagram carries one message of -l bytes (the last one of a total may be
        // shorter), so the bytes give the datagrams.
        let packets = s.bytes.div_ceil(u64::from(ctx.params.msg_size.max(1)));
        match (reverse, s.lost) {
            (true, Some(lost)) => {
                let all = packets + lost;
                if let Some(ns) = s.jitter_ns {
                    insert(&mut one, "jitter_ms", (ns as f64 / 1e6).into());
                }
                insert(&mut one, "lost_packets", lost.into());
                insert(&mut one, "packets", all.into());
                insert(
                    &mut one,
                    "lost_percent",
                    wirebench_core::record::headline::percent(lost, all).into(),
                );
            }
            (true, None) => {}
            (false, _) => insert(&mut one, "packets", packets.into()),
        }
    }
    let mut stream = one.clone();
    insert(&mut stream, "socket", stream_id(0).into());
    // iperf3's stream (not its sum) carries the sender's TCP_INFO at the interval's end.
    if let Some(t) = s.tcp {
        insert(&mut stream, "snd_cwnd", t.snd_cwnd.into());
        insert(&mut stream, "snd_wnd", t.snd_wnd.into());
        insert(&mut stream, "rtt", t.rtt_us.into());
        insert(&mut stream, "rttvar", t.rttvar_us.into());
        insert(&mut stream, "pmtu", t.pmtu.into());
        insert(&mut stream, "reorder", t.reorder.into());
    }
    json!({"streams": [stream], "sum": one})
}

/// The `end` object: each stream's sender and receiver, their sums, the CPU and the
/// congestion controls.
pub fn end(run: &RunRecord) -> Value {
    let h = run.headline();
    let seconds = h.transfer_seconds();
    // Forward the client sends; with -R the server does (its record is then what it sent).
    let (sender_path, sender_measured, receiver_path) = if run.reverse {
        (
            &run.server.data_path,
            &run.server.measured,
            &run.client.data_path,
        )
    } else {
        (
            &run.client.data_path,
            &run.client.measured,
            &run.server.data_path,
        )
    };
    let udp = run.protocol == Protocol::Udp;
    let mut end = Map::new();
    let streams = end_streams(run, seconds, sender_measured, udp);
    end.insert("streams".into(), Value::Array(streams));
    insert_sums(&mut end, run, &h, sender_measured, udp);
    insert_bidir_reverse_sums(&mut end, run);
    end.insert(
        "cpu_utilization_percent".into(),
        cpu_utilization(run, seconds),
    );
    if run.protocol == Protocol::Tcp {
        if let Some(cc) = &sender_path.congestion {
            end.insert("sender_tcp_congestion".into(), cc.clone().into());
        }
        if let Some(cc) = &receiver_path.congestion {
            end.insert("receiver_tcp_congestion".into(), cc.clone().into());
        }
    }
    Value::Object(end)
}

/// iperf3's `end.streams`: one stream per flow (-P, and with --bidir each direction's), else
/// the run itself; a UDP stream is one side with the receiver's losses, a TCP stream a sender
/// and a receiver.
fn end_streams(
    run: &RunRecord,
    seconds: f64,
    sender_measured: &EndMetrics,
    udp: bool,
) -> Vec<Value> {
    let flows: Vec<(&ClientRecord, &ServerRecord, bool)> = if run.flows.is_empty() {
        let mut one = vec![(&run.client, &run.server, run.reverse)];
        if let Some(back) = &run.server_to_client {
            one.push((&back.client, &back.server, true));
        }
        one
    } else {
        run.flows
            .iter()
            .map(|f| (&f.client, &f.server, f.reverse))
            .collect()
    };
    flows
        .iter()
        .enumerate()
        .map(|(i, (c, s, reverse))| {
            let (sent, got, sending_end) = if *reverse {
                (s.bytes, c.bytes, &s.measured)
            } else {
                (c.bytes, s.bytes, &c.measured)
            };
            // The run's own series stands for its first stream (with -P it holds the
            // first flow's window and round trip).
            let series = if sending_end.intervals.is_empty() && i == 0 {
                &sender_measured.intervals
            } else {
                &sending_end.intervals
            };
            let socket = stream_id(i as u32);
            if udp {
                // iperf3's UDP stream: the sender's bytes and rate, the receiver's losses.
                let mut u = side(socket, sent, seconds, !reverse);
                if let Value::Object(m) = &mut u {
                    m.extend(udp_fields(c, s, *reverse));
                }
                json!({"udp": u})
            } else {
                let mut sender = side(socket, sent, seconds, !reverse);
                if let Value::Object(m) = &mut sender {
                    m.extend(tcp_sender_fields(sending_end, series));
                }
                let receiver = side(socket, got, seconds, !reverse);
                json!({"sender": sender, "receiver": receiver})
            }
        })
        .collect()
}

/// iperf3's `end.sum_sent` and `end.sum_received` (and UDP's `end.sum`): the sender's
/// retransmissions, UDP's datagram counts, loss and jitter.
fn insert_sums(
    end: &mut Map<String, Value>,
    run: &RunRecord,
    h: &Headline,
    sender_measured: &EndMetrics,
    udp: bool,
) {
    let seconds = h.transfer_seconds();
    let mut sum_sent = side_sum(h.sent_bytes, seconds, h.sent_bps, !run.reverse);
    // iperf3's `sender` says whether this end (the client) sent the figures' stream; its
    // UDP sums say the sum_sent is the sender's and the sum_received the receiver's.
    let mut sum_received = side_sum(
        h.received_bytes,
        seconds,
        h.goodput_bps,
        !run.reverse && !udp,
    );
    if let Some(retransmits) = sender_measured
        .transport
        .as_ref()
        .and_then(|t| t.stats.tcp_total_retrans)
    {
        insert(&mut sum_sent, "retransmits", retransmits.into());
    }
    if udp {
        let fields = udp_sum(h, receiver_jitter_us(run));
        // iperf3 3.21: the sender's sum counts its datagrams and claims no loss; the
        // receiver's counts what arrived and what was lost.
        insert(&mut sum_sent, "sender", true.into());
        let sent_fields = [
            ("jitter_ms", Value::from(0.0)),
            ("lost_packets", 0.into()),
            ("packets", h.sent_messages.into()),
            ("lost_percent", Value::from(0.0)),
        ];
        for (k, v) in sent_fields {
            insert(&mut sum_sent, k, v);
        }
        for (k, v) in &fields {
            insert(&mut sum_received, k, v.clone());
        }
        insert(&mut sum_received, "packets", h.received_messages.into());
        // iperf3's UDP `sum`: the sender's bytes and rate with the receiver's loss and jitter.
        let mut sum = side_sum(h.sent_bytes, seconds, h.sent_bps, !run.reverse);
        for (k, v) in fields {
            insert(&mut sum, &k, v);
        }
        end.insert("sum".into(), sum);
    }
    end.insert("sum_sent".into(), sum_sent);
    end.insert("sum_received".into(), sum_received);
}

/// `--bidir`: iperf3's `end.sum_sent_bidir_reverse` and `end.sum_received_bidir_reverse`, the
/// server → client direction's own sums.
fn insert_bidir_reverse_sums(end: &mut Map<String, Value>, run: &RunRecord) {
    if let Some(directions) = run.direction_headlines() {
        let back = &directions.server_to_client;
        let s = back.transfer_seconds();
        let mut sent_back = side_sum(back.sent_bytes, s, back.sent_bps, false);
        // The server sent this direction: its TCP_INFO counts the retransmissions.
        if let Some(retransmits) = run
            .server_to_client
            .as_ref()
            .and_then(|d| d.server.measured.transport.as_ref())
            .and_then(|t| t.stats.tcp_total_retrans)
        {
            insert(&mut sent_back, "retransmits", retransmits.into());
        }
        end.insert("sum_sent_bidir_reverse".into(), sent_back);
        end.insert(
            "sum_received_bidir_reverse".into(),
            side_sum(back.received_bytes, s, back.goodput_bps, false),
        );
    }
}

/// iperf3's `end.cpu_utilization_percent`: this end's CPU time and the server's over the
/// transfer time.
fn cpu_utilization(run: &RunRecord, seconds: f64) -> Value {
    let cpu = |c: &Option<wirebench_core::record::CpuRecord>| {
        c.as_ref()
            .map_or((0.0, 0.0, 0.0), |c| c.usage.percent_of(seconds))
    };
    let host = cpu(&run.client.measured.cpu);
    let remote = cpu(&run.server.measured.cpu);
    json!({
        "host_total": host.0, "host_user": host.1, "host_system": host.2,
        "remote_total": remote.0, "remote_user": remote.1, "remote_system": remote.2,
    })
}

/// A TCP sender's stream fields: its retransmissions (TCP_INFO at the end), and as iperf3
/// takes them, the largest congestion and peer windows, the largest, smallest and mean
/// round trip and the reorderings seen, over the TCP_INFO readings at each interval's end. Without intervals (`-i 0`)
/// the one reading at the end stands for them; a figure the kernel did not give is left out.
fn tcp_sender_fields(
    sending_end: &wirebench_core::record::EndMetrics,
    series: &[wirebench_core::record::IntervalRecord],
) -> Map<String, Value> {
    let mut m = Map::new();
    let end = sending_end.transport.as_ref().map(|t| &t.stats);
    if let Some(retransmits) = end.and_then(|t| t.tcp_total_retrans) {
        m.insert("retransmits".into(), retransmits.into());
    }
    let readings: Vec<_> = series.iter().filter_map(|i| i.sample.tcp).collect();
    if !readings.is_empty() {
        let rtts = || readings.iter().map(|t| t.rtt_us);
        let max = |f: fn(&wirebench_core::vocab::counters::TcpSnapshot) -> u64| {
            readings.iter().map(f).max().unwrap_or(0)
        };
        m.insert("max_snd_cwnd".into(), max(|t| t.snd_cwnd).into());
        m.insert("max_snd_wnd".into(), max(|t| t.snd_wnd).into());
        m.insert("max_rtt".into(), rtts().max().unwrap_or(0).into());
        m.insert("min_rtt".into(), rtts().min().unwrap_or(0).into());
        let mean = rtts().sum::<u64>() / readings.len() as u64;
        m.insert("mean_rtt".into(), mean.into());
        // The kernel's count so far, as iperf3 takes it from its last reading.
        let reorder = readings.last().map_or(0, |t| t.reorder);
        m.insert("reorder".into(), reorder.into());
        return m;
    }
    if let Some(cwnd) = end.and_then(|t| t.cwnd_bytes) {
        m.insert("max_snd_cwnd".into(), cwnd.into());
    }
    if let Some(rtt) = end.and_then(|t| t.srtt_us) {
        for key in ["max_rtt", "min_rtt", "mean_rtt"] {
            m.insert(key.into(), rtt.into());
        }
    }
    m
}

fn receiver_jitter_us(run: &RunRecord) -> Option<f64> {
    if run.reverse {
        run.client.udp_received.and_then(|u| u.jitter_us)
    } else {
        run.server.jitter_us
    }
}

/// A UDP stream's receiver fields.
fn udp_fields(c: &ClientRecord, s: &ServerRecord, reverse: bool) -> Map<String, Value> {
    let (packets, lost, jitter_us, out_of_order) = if reverse {
        let u = c.udp_received.unwrap_or_default();
        (s.messages, u.lost, u.jitter_us, u.out_of_order)
    } else {
        (c.messages, s.lost, s.jitter_us, s.out_of_order)
    };
    let mut m = Map::new();
    m.insert("jitter_ms".into(), (jitter_us.unwrap_or(0.0) / 1e3).into());
    m.insert("lost_packets".into(), lost.into());
    m.insert("packets".into(), packets.into());
    m.insert(
        "lost_percent".into(),
        wirebench_core::record::headline::percent(lost, packets).into(),
    );
    m.insert("out_of_order".into(), out_of_order.into());
    m
}

/// The UDP delivery fields of a sum, from the headline.
fn udp_sum(h: &Headline, jitter_us: Option<f64>) -> Map<String, Value> {
    let (lost, lost_pct, out_of_order) = h
        .delivery
        .map_or((0, 0.0, 0), |d| (d.lost, d.lost_pct, d.out_of_order));
    let mut m = Map::new();
    m.insert("jitter_ms".into(), (jitter_us.unwrap_or(0.0) / 1e3).into());
    m.insert("lost_packets".into(), lost.into());
    m.insert("packets".into(), h.sent_messages.into());
    m.insert("lost_percent".into(), lost_pct.into());
    m.insert("out_of_order".into(), out_of_order.into());
    m
}

fn side(socket: u32, bytes: u64, seconds: f64, sender: bool) -> Value {
    json!({
        "socket": socket,
        "start": 0.0,
        "end": seconds,
        "seconds": seconds,
        "bytes": bytes,
        "bits_per_second": bits_per_second(bytes, seconds),
        "sender": sender,
    })
}

fn side_sum(bytes: u64, seconds: f64, bps: Option<f64>, sender: bool) -> Value {
    json!({
        "start": 0.0,
        "end": seconds,
        "seconds": seconds,
        "bytes": bytes,
        "bits_per_second": bps.unwrap_or(0.0),
        "sender": sender,
    })
}

fn insert(v: &mut Value, key: &str, value: Value) {
    if let Value::Object(m) = v {
        m.insert(key.to_string(), value);
    }
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::Quic => "QUIC",
    }
}

/// HOST and PORT of a server as the parameters name it (`iperf3://HOST:PORT`, `HOST:PORT`,
/// `embedded ADDR`), best effort.
fn host_port(server: &str) -> (String, u16) {
    let name = server
        .trim_start_matches("iperf3://")
        .rsplit(' ')
        .next()
        .unwrap_or(server);
    match name.parse::<std::net::SocketAddr>() {
        Ok(a) => (a.ip().to_string(), a.port()),
        Err(_) => match name.rsplit_once(':') {
            Some((h, p)) => (
                h.trim_matches(['[', ']']).to_string(),
                p.parse().unwrap_or(0),
            ),
            None => (name.to_string(), 0),
        },
    }
}
