//! iperf3's `-J` document, rendered from wirebench's run record (`run -J --iperf3-shape`, and
//! the events of `--json-stream --iperf3-shape`): `start` (with `test_start`), `intervals`,
//! `end` (`streams`, `sum_sent`, `sum_received`, for UDP `sum` with `lost_percent` and
//! `jitter_ms`, the CPU and the congestion controls), with iperf3's key names, so scripts and
//! dashboards written for iperf3 read wirebench. Every figure comes from the record and its
//! headline (docs/iperf3-shape.schema.json lists the keys); nothing is measured here.

use serde_json::{json, Map, Value};
use wirebench_core::record::{
    bits_per_second, ClientRecord, Headline, Parameters, RunRecord, ServerRecord,
};
use wirebench_core::vocab::counters::IntervalSample;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::iperf3::stream_id;

/// What the document says about the test beside the run: the campaign's parameters, and the
/// facts the caller knows (nothing here reads a clock).
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// What was asked.
    pub params: &'a Parameters,
    /// wirebench's version.
    pub version: &'a str,
    /// When the test started, seconds since the Unix epoch.
    pub started_unix_s: i64,
    /// `-T`.
    pub title: Option<&'a str>,
    /// `-i`, seconds (0 without).
    pub interval_s: f64,
    /// `-S`.
    pub tos: u8,
}

/// The whole `-J` document of one run.
pub fn document(ctx: &Context<'_>, run: &RunRecord) -> Value {
    let intervals: Vec<Value> = run
        .client
        .measured
        .intervals
        .iter()
        .map(|i| interval(ctx, run.protocol, run.reverse, &i.sample))
        .collect();
    let mut doc = Map::new();
    doc.insert("start".into(), start(ctx, run.protocol, run.mechanism));
    doc.insert("intervals".into(), Value::Array(intervals));
    doc.insert("end".into(), end(run));
    if let Some(title) = ctx.title {
        doc.insert("title".into(), title.into());
    }
    Value::Object(doc)
}

/// The `start` object: where, what and when.
pub fn start(ctx: &Context<'_>, protocol: Protocol, mechanism: Mechanism) -> Value {
    let p = ctx.params;
    let (host, port) = host_port(&p.server);
    let seconds = |us: Option<u64>| us.map_or(0, |us| us / 1_000_000);
    json!({
        "connected": (0..p.parallel)
            .map(|i| json!({"socket": stream_id(i), "remote_host": host, "remote_port": port}))
            .collect::<Vec<_>>(),
        "version": format!("wirebench {}", ctx.version),
        "system_info": format!("wirebench {} {} ({mechanism})", ctx.version, protocol),
        "timestamp": {"timesecs": ctx.started_unix_s},
        "connecting_to": {"host": host, "port": port},
        "cookie": "",
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
            "target_bitrate": p.rate_bps.unwrap_or(0),
            "bidir": i32::from(p.bidir),
            "fqrate": 0,
            "interval": ctx.interval_s,
        },
    })
}

/// One `intervals[]` entry: what the client sent (or with -R received) in the interval, as
/// its only stream and as the sum.
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
    if let (Some(retransmits), Value::Object(m)) = (s.retransmitted, &mut one) {
        m.insert("retransmits".into(), retransmits.into());
    }
    if let (Some(lost), Protocol::Udp, Value::Object(m)) = (s.lost, protocol, &mut one) {
        m.insert("lost_packets".into(), lost.into());
    }
    let mut stream = one.clone();
    if let Value::Object(m) = &mut stream {
        m.insert("socket".into(), stream_id(0).into());
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
    // One stream per flow (-P), else the run itself.
    let flows: Vec<(&ClientRecord, &ServerRecord)> = if run.flows.is_empty() {
        vec![(&run.client, &run.server)]
    } else {
        run.flows
            .iter()
            .filter(|f| !f.reverse)
            .map(|f| (&f.client, &f.server))
            .collect()
    };
    let streams: Vec<Value> = flows
        .iter()
        .enumerate()
        .map(|(i, (c, s))| {
            let (sent, got) = if run.reverse {
                (s.bytes, c.bytes)
            } else {
                (c.bytes, s.bytes)
            };
            let socket = stream_id(i as u32);
            let sender = side(socket, sent, seconds, true);
            let receiver = side(socket, got, seconds, false);
            if udp {
                let mut u = receiver;
                if let Value::Object(m) = &mut u {
                    m.extend(udp_fields(c, s, run.reverse));
                }
                json!({"udp": u})
            } else {
                json!({"sender": sender, "receiver": receiver})
            }
        })
        .collect();
    end.insert("streams".into(), Value::Array(streams));
    let mut sum_sent = side_sum(h.sent_bytes, seconds, h.sent_bps, true);
    let mut sum_received = side_sum(h.received_bytes, seconds, h.goodput_bps, false);
    if let Some(retransmits) = sender_measured
        .transport
        .as_ref()
        .and_then(|t| t.stats.tcp_total_retrans)
    {
        insert(&mut sum_sent, "retransmits", retransmits.into());
    }
    if udp {
        let fields = udp_sum(&h, receiver_jitter_us(run));
        for (k, v) in &fields {
            insert(&mut sum_received, k, v.clone());
        }
        // iperf3's UDP `sum`: the sender's bytes and rate with the receiver's loss and jitter.
        let mut sum = sum_sent.clone();
        for (k, v) in fields {
            insert(&mut sum, &k, v);
        }
        end.insert("sum".into(), sum);
    }
    end.insert("sum_sent".into(), sum_sent);
    end.insert("sum_received".into(), sum_received);
    if let Some(directions) = run.direction_headlines() {
        let back = &directions.server_to_client;
        let s = back.transfer_seconds();
        end.insert(
            "sum_sent_bidir_reverse".into(),
            side_sum(back.sent_bytes, s, back.sent_bps, true),
        );
        end.insert(
            "sum_received_bidir_reverse".into(),
            side_sum(back.received_bytes, s, back.goodput_bps, false),
        );
    }
    let cpu = |c: &Option<wirebench_core::record::CpuRecord>| {
        c.as_ref()
            .map_or((0.0, 0.0, 0.0), |c| c.usage.percent_of(seconds))
    };
    let host = cpu(&run.client.measured.cpu);
    let remote = cpu(&run.server.measured.cpu);
    end.insert(
        "cpu_utilization_percent".into(),
        json!({
            "host_total": host.0, "host_user": host.1, "host_system": host.2,
            "remote_total": remote.0, "remote_user": remote.1, "remote_system": remote.2,
        }),
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
