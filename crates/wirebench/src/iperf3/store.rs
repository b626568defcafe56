//! Stores one `run --iperf3` test in the results database as a one-run campaign, so `runs`,
//! `show`, `report` and `export` list it. Owns the mapping of both views onto a stored run;
//! must not run tests or print beyond the one "stored as" note.
//!
//! Mapping: the stored run's client view is the sender, its server view the receiver (as in
//! wirebench's own runs). Forward: the sender is wirebench, the receiver the iperf3 server;
//! with `-R` the sender is the iperf3 server and the receiver wirebench. The campaign's server
//! is recorded as `iperf3://HOST:PORT`.

use std::path::Path;

use anyhow::{Context, Result};
use wirebench_core::plan::{Mechanism, Protocol};
use wirebench_core::proto::DataPathInfo;
use wirebench_core::sweep::Point;

use super::client::{ClientConfig, ClientOutcome, Limit};
use super::report::{document, SideJson};
use crate::environment::Environment;
use crate::output::json::{ClientJson, EndMetrics, Parameters, RunJson, ServerJson};
use crate::store::{NewCampaign, Status, Store};

/// Stores the test; returns the campaign id.
pub fn store(path: &Path, cfg: &ClientConfig, o: &ClientOutcome, now_unix_s: i64) -> Result<i64> {
    let mut store = Store::open(path)?;
    let protocol = if cfg.udp {
        Protocol::Udp
    } else {
        Protocol::Tcp
    };
    let doc = document(cfg, o);
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
    let campaign = store
        .begin_campaign(&NewCampaign {
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
            },
            planned_runs: 1,
            msg_sizes: vec![cfg.len],
            totals: vec![total_bytes],
            environment: Environment::detect(),
        })
        .with_context(|| format!("cannot store in {}", path.display()))?;
    let run = RunJson {
        protocol,
        mechanism: Mechanism::Stream,
        repeat_index: 0,
        session: 0,
        client: client_view(sender, cfg.len),
        server: server_view(receiver, protocol),
        flows: Vec::new(),
        relay: None,
    };
    store.add_run(campaign, 1, point, &run)?;
    store.finish_campaign(campaign, Status::Complete, now_unix_s, None)?;
    Ok(campaign)
}

fn client_view(s: &SideJson, len: u32) -> ClientJson {
    // UDP: datagrams; TCP: blocks of `len` bytes (the last one may be short).
    let messages = s
        .packets
        .unwrap_or_else(|| s.bytes.div_ceil(u64::from(len.max(1))));
    ClientJson {
        messages,
        bytes: s.bytes,
        seconds: s.seconds,
        elapsed_ns: (s.seconds * 1e9) as u64,
        throughput_bps: s.throughput_bps,
        send_calls: 0,
        datagrams: s.packets.unwrap_or(0),
        retransmissions: 0,
        timeouts: 0,
        send_errors: 0,
        rtt: None,
        data_path: DataPathInfo::default(),
        measured: EndMetrics::default(),
        udp_received: None,
    }
}

fn server_view(s: &SideJson, protocol: Protocol) -> ServerJson {
    let lost = s.lost.unwrap_or(0);
    ServerJson {
        protocol,
        mechanism: Mechanism::Stream,
        messages: s.packets.map_or(0, |p| p.saturating_sub(lost)),
        bytes: s.bytes,
        seconds: s.seconds,
        elapsed_ns: (s.seconds * 1e9) as u64,
        throughput_bps: s.throughput_bps,
        read_calls: 0,
        lost,
        duplicates: 0,
        out_of_order: 0,
        jitter_us: s.jitter_ms.map(|ms| ms * 1000.0),
        acks_sent: 0,
        aborted: false,
        abort_reason: None,
        data_path: DataPathInfo::default(),
        measured: EndMetrics::default(),
    }
}
