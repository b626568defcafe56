//! One `run --iperf3` test as result records: a one-run campaign, so the store, `runs`,
//! `show`, `report` and `export` treat it like our own. Owns the mapping of both views onto a
//! run record; must not run tests, store or print.
//!
//! Mapping, as in wirebench's own runs: the stored run's client view is wirebench, its server
//! view the iperf3 server. Forward the client sends and the server receives; with `-R` the
//! iperf3 server sends (its view counts what it sent) and wirebench receives (its view counts
//! what arrived, and for UDP what was lost). The campaign's server is recorded as
//! `iperf3://HOST:PORT`.

use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::wire::proto::DataPathInfo;

use super::client::{ClientConfig, ClientOutcome, Limit};
use wirebench_core::record::bits_per_second;
use wirebench_core::record::iperf3_test::{self, Iperf3Side, Iperf3Test};
use wirebench_core::record::{
    ClientRecord, CpuRecord, EndMetrics, EndedBy, IntervalRecord, NewCampaign, Parameters,
    RunRecord, ServerRecord, TransportRecord, UdpReceipt,
};
use wirebench_core::vocab::counters::CpuUsage;
use wirebench_core::wire::iperf3::TestResults;

/// The test's record, which its text and JSON document show.
pub fn test_record(cfg: &ClientConfig, o: &ClientOutcome) -> Iperf3Test {
    let (ours_role, theirs_role) = if cfg.reverse {
        ("receiver", "sender")
    } else {
        ("sender", "receiver")
    };
    let mut ours = Iperf3Side::of(ours_role, &o.our_results, cfg.udp);
    // Our own clock for our time, not the rounded end_time we sent.
    ours.seconds = o.our_seconds();
    ours.throughput_bps = bits_per_second(ours.bytes, ours.seconds);
    Iperf3Test {
        schema_version: iperf3_test::SCHEMA_VERSION,
        kind: "iperf3",
        server: cfg.name.clone(),
        protocol: if cfg.udp { "udp" } else { "tcp" },
        reverse: cfg.reverse,
        parallel: cfg.parallel,
        block_len: cfg.len,
        limit_bytes: match cfg.limit {
            Limit::Bytes(n) => Some(n),
            Limit::Time(_) => None,
        },
        limit_seconds: match cfg.limit {
            Limit::Time(d) => Some(d.as_secs_f64()),
            Limit::Bytes(_) => None,
        },
        rate_bps: cfg.rate_bps,
        wirebench: ours,
        iperf3_server: Iperf3Side::of(theirs_role, &o.server, cfg.udp),
        server_output: o.server.server_output_text.clone(),
    }
}

/// The campaign, the point and the one run of a finished test started at `now_unix_s`.
pub fn records(
    cfg: &ClientConfig,
    o: &ClientOutcome,
    now_unix_s: i64,
) -> (NewCampaign, Point, RunRecord) {
    let protocol = if cfg.udp {
        Protocol::Udp
    } else {
        Protocol::Tcp
    };
    let doc = test_record(cfg, o);
    let (sender, receiver) = if cfg.reverse {
        (&doc.iperf3_server, &doc.wirebench)
    } else {
        (&doc.wirebench, &doc.iperf3_server)
    };
    let total_bytes = match cfg.limit {
        Limit::Bytes(n) => n,
        Limit::Time(_) => sender.bytes,
    };
    let point = Point {
        msg_size: cfg.len,
        total_bytes,
    };
    let campaign = NewCampaign {
        started_at_unix_s: now_unix_s,
        parameters: Parameters {
            server: format!("iperf3://{}", cfg.name),
            embedded_server: false,
            protocols: vec![protocol],
            mechanisms: vec![Mechanism::Stream],
            msg_size: cfg.len,
            total_bytes,
            repeat: 1,
            rto_us: None,
            rate_bps: (cfg.rate_bps > 0).then_some(cfg.rate_bps),
            grace_us: 0,
            options: Default::default(),
            parallel: cfg.parallel,
            reverse: cfg.reverse,
            duration_us: match cfg.limit {
                Limit::Bytes(_) => None,
                Limit::Time(d) => Some(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            },
            bidir: false,
            omit_us: None,
        },
        planned_runs: 1,
        msg_sizes: vec![cfg.len],
        totals: vec![total_bytes],
        environment: crate::transport::environment::detect(),
    };
    let run = RunRecord {
        protocol,
        mechanism: Mechanism::Stream,
        repeat_index: 0,
        session: 0,
        client: if cfg.reverse {
            client_receiving(receiver, cfg.len, cfg.udp)
        } else {
            client_view(sender, cfg.len)
        },
        server: if cfg.reverse {
            server_sending(sender, protocol, cfg.len)
        } else {
            server_view(receiver, protocol)
        },
        flows: Vec::new(),
        relay: None,
        reverse: cfg.reverse,
        ended_by: match cfg.limit {
            Limit::Bytes(_) => EndedBy::Bytes,
            Limit::Time(_) => EndedBy::Time,
        },
        loaded_latency: None,
        server_to_client: None,
        rate_search: None,
    };
    let mut run = run;
    // Our CPU time and interval series, and the server's CPU as it reported it.
    // Our TCP senders' counters, summed over the streams (forward: the client view is ours).
    let transport = o
        .ours
        .iter()
        .fold(None, |sum, s| {
            crate::flows::rr_client::sum_transport(sum, s.transport.clone())
        })
        .filter(|_| !cfg.reverse)
        .map(|t| TransportRecord::of(&t));
    run.client.measured = EndMetrics {
        cpu: o.cpu.map(|c| CpuRecord::of(&c, o.our_bytes())),
        intervals: o.intervals.iter().map(IntervalRecord::of).collect(),
        transport,
        ..EndMetrics::default()
    };
    run.server.measured = EndMetrics {
        cpu: reported_cpu(&o.server, receiver.seconds.max(sender.seconds))
            .map(|c| CpuRecord::of(&c, receiver.bytes)),
        ..EndMetrics::default()
    };
    (campaign, point, run)
}

/// The iperf3 server's CPU as it reported it (percent of the test's time), as CPU time over
/// `seconds`; None when it reported none. (Its figures are checked before a run is stored.)
fn reported_cpu(r: &TestResults, seconds: f64) -> Option<CpuUsage> {
    let believable = |p: f64| p.is_finite() && p >= 0.0;
    if !(believable(r.cpu_util_user) && believable(r.cpu_util_system) && r.cpu_util_total > 0.0) {
        return None;
    }
    let us = |percent: f64| (percent / 100.0 * seconds.max(0.0) * 1e6) as u64;
    Some(CpuUsage {
        user_us: us(r.cpu_util_user),
        system_us: us(r.cpu_util_system),
        shared_process: false,
    })
}

fn client_view(s: &Iperf3Side, len: u32) -> ClientRecord {
    // UDP: datagrams; TCP: blocks of `len` bytes (the last one may be short).
    let messages = s
        .packets
        .unwrap_or_else(|| s.bytes.div_ceil(u64::from(len.max(1))));
    ClientRecord {
        messages,
        bytes: s.bytes,
        seconds: s.seconds,
        elapsed_ns: (s.seconds * 1e9) as u64,
        rate_bps: s.throughput_bps,
        send_calls: 0,
        datagrams: s.packets.unwrap_or(0),
        retransmissions: 0,
        timeouts: 0,
        send_errors: 0,
        not_sent: 0,
        rtt: None,
        data_path: DataPathInfo::default(),
        measured: EndMetrics::default(),
        udp_received: None,
        omitted: None,
    }
}

/// With -R: wirebench received what the iperf3 server sent (UDP: the highest datagram count
/// seen, less what was lost, arrived).
fn client_receiving(s: &Iperf3Side, len: u32, udp: bool) -> ClientRecord {
    let lost = s.lost.unwrap_or(0);
    let messages = match s.packets {
        Some(p) => p.saturating_sub(lost),
        None => s.bytes.div_ceil(u64::from(len.max(1))),
    };
    ClientRecord {
        messages,
        datagrams: if udp { messages } else { 0 },
        udp_received: udp.then(|| UdpReceipt {
            lost,
            jitter_us: s.jitter_ms.map(|ms| ms * 1000.0),
            ..UdpReceipt::default()
        }),
        ..client_view(s, len)
    }
}

/// With -R: the iperf3 server sent (UDP: its datagrams; TCP: blocks of `len` bytes).
fn server_sending(s: &Iperf3Side, protocol: Protocol, len: u32) -> ServerRecord {
    ServerRecord {
        messages: s
            .packets
            .unwrap_or_else(|| s.bytes.div_ceil(u64::from(len.max(1)))),
        lost: 0,
        jitter_us: None,
        ..server_view(s, protocol)
    }
}

fn server_view(s: &Iperf3Side, protocol: Protocol) -> ServerRecord {
    let lost = s.lost.unwrap_or(0);
    ServerRecord {
        protocol,
        mechanism: Mechanism::Stream,
        messages: s.packets.map_or(0, |p| p.saturating_sub(lost)),
        bytes: s.bytes,
        seconds: s.seconds,
        elapsed_ns: (s.seconds * 1e9) as u64,
        rate_bps: s.throughput_bps,
        read_calls: 0,
        lost,
        dropped_by_host: None,
        not_sent: 0,
        duplicates: 0,
        out_of_order: 0,
        jitter_us: s.jitter_ms.map(|ms| ms * 1000.0),
        acks_sent: 0,
        aborted: false,
        abort_reason: None,
        data_path: DataPathInfo::default(),
        measured: EndMetrics::default(),
        omitted: None,
    }
}
