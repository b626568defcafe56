//! wirebench's iperf3 client against Debian's `iperf3 -s`: exact byte and datagram counts
//! forward (ours; the server counts what arrived before TEST_END, which goes as iperf3's client
//! sends it), reverse and in parallel, a timed test ending on time, and `run --iperf3`'s JSON.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use wirebench::flows::iperf3::client::{self, ClientConfig, ClientOutcome, Limit};

use super::{have_iperf3, RealServer};
use crate::cli::{stderr, wirebench};
use crate::support::{TempPath, TEST_TIMEOUT};

fn cfg(
    server: SocketAddr,
    udp: bool,
    reverse: bool,
    parallel: u32,
    len: u32,
    limit: Limit,
) -> ClientConfig {
    ClientConfig {
        name: server.to_string(),
        server,
        udp,
        reverse,
        parallel,
        len,
        limit,
        rate_bps: if udp { 10_000_000 } else { 0 },
        json: false,
        notes: Vec::new(),
        options: Default::default(),
        fq_rate_bps: 0,
        server_output: false,
        server_cpu: None,
        counters_64bit: false,
        dont_fragment: false,
        interval: None,
    }
}

/// What an iperf3 server counted of what we sent: no more than that, stream by stream (it
/// stops counting at TEST_END, which goes as soon as our last write returned, as iperf3's
/// client sends it: what was still on its way is not counted, with iperf3's client either).
fn assert_counted_no_more_than_sent(o: &ClientOutcome) {
    let ids: Vec<u32> = o.ours.iter().map(|s| s.id).collect();
    let theirs: Vec<u32> = o.server.streams.iter().map(|s| s.id).collect();
    assert_eq!(ids, theirs, "{:?}", o.server);
    for (ours, theirs) in o.ours.iter().zip(&o.server.streams) {
        assert!(theirs.bytes <= ours.bytes, "{ours:?} {theirs:?}");
    }
}

/// A UDP receiver's view that adds up: every datagram up to the highest count it saw was
/// either read (`len` bytes each) or lost, and it saw none we did not send.
fn assert_udp_view_adds_up(o: &ClientOutcome, len: u64, sent: u64) {
    assert!(o.server.total_packets() <= sent, "{:?}", o.server);
    assert_eq!(
        o.server.total_bytes() + len * o.server.total_errors(),
        len * o.server.total_packets(),
        "{:?}",
        o.server
    );
}

async fn against_real_server(c: ClientConfig) -> ClientOutcome {
    tokio::time::timeout(TEST_TIMEOUT, client::run(&c))
        .await
        .expect("iperf3 test finished in time")
        .expect("iperf3 test succeeded")
}

#[tokio::test]
async fn tcp_forward_sends_the_exact_total_in_whole_blocks() {
    if !have_iperf3("tcp_forward_sends_the_exact_total_in_whole_blocks") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(
        server.addr,
        false,
        false,
        1,
        100_000,
        Limit::Bytes(1_000_000),
    ))
    .await;
    assert_eq!(o.our_bytes(), 1_000_000);
    assert!(o.server.total_bytes() > 0);
    assert_counted_no_more_than_sent(&o);
    assert_eq!(o.server.streams[0].id, 1);
}

#[tokio::test]
async fn tcp_parallel_streams_match_stream_by_stream() {
    if !have_iperf3("tcp_parallel_streams_match_stream_by_stream") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(
        server.addr,
        false,
        false,
        2,
        128 * 1024,
        Limit::Bytes(4 << 20),
    ))
    .await;
    assert_eq!(o.our_bytes(), 4 << 20);
    let ids: Vec<u32> = o.server.streams.iter().map(|s| s.id).collect();
    assert_eq!(ids, [1, 3]);
    assert_counted_no_more_than_sent(&o);
}

#[tokio::test]
async fn tcp_reverse_receives_exactly_what_the_server_sent() {
    if !have_iperf3("tcp_reverse_receives_exactly_what_the_server_sent") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(
        server.addr,
        false,
        true,
        2,
        64 * 1024,
        Limit::Bytes(2 << 20),
    ))
    .await;
    // The server sends whole blocks until the total is reached: 2 MiB is 32 blocks exactly.
    assert_eq!(o.server.total_bytes(), 2 << 20);
    assert_eq!(o.our_bytes(), 2 << 20);
}

#[tokio::test]
async fn udp_forward_sends_every_datagram_and_the_server_view_adds_up() {
    if !have_iperf3("udp_forward_sends_every_datagram_and_the_server_view_adds_up") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(server.addr, true, false, 1, 1000, Limit::Bytes(30_000))).await;
    assert_eq!(o.our_bytes(), 30_000);
    assert_eq!(o.ours[0].datagrams, 30);
    // The server's receiver view: the highest datagram count seen, and what was lost.
    assert_udp_view_adds_up(&o, 1000, 30);
}

#[tokio::test]
async fn udp_with_64_bit_counters_counts_every_datagram_both_ways() {
    if !have_iperf3("udp_with_64_bit_counters_counts_every_datagram_both_ways") {
        return;
    }
    // --udp-counters-64bit: the count field is 8 bytes. A side that read the other's header
    // at the wrong width would see counts in the billions (the timestamp's bytes).
    let server = RealServer::start().await;
    let mut forward = cfg(server.addr, true, false, 1, 1000, Limit::Bytes(30_000));
    forward.counters_64bit = true;
    let o = against_real_server(forward).await;
    assert_eq!(o.ours[0].datagrams, 30);
    assert!(o.server.total_packets() > 0, "{:?}", o.server);
    assert_udp_view_adds_up(&o, 1000, 30);
    // iperf3 -s takes a moment after a test before it takes the next: a server of its own.
    let server = RealServer::start().await;
    let mut reverse = cfg(server.addr, true, true, 1, 1000, Limit::Bytes(30_000));
    reverse.counters_64bit = true;
    let o = against_real_server(reverse).await;
    let lost: u64 = o
        .ours
        .iter()
        .map(|s| s.udp.as_ref().map_or(0, |u| u.lost))
        .sum();
    assert!(o.our_bytes() > 0, "{:?}", o.ours);
    assert_eq!(o.our_bytes() + 1000 * lost, o.server.total_bytes());
}

#[tokio::test]
async fn udp_reverse_parallel_receives_what_the_server_sent() {
    if !have_iperf3("udp_reverse_parallel_receives_what_the_server_sent") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(server.addr, true, true, 2, 1000, Limit::Bytes(30_000))).await;
    // iperf3's UDP sender stops when it reads TEST_END, a datagram or so after the limit.
    assert!(o.server.total_bytes() >= 30_000, "{:?}", o.server);
    let lost: u64 = o
        .ours
        .iter()
        .map(|s| s.udp.as_ref().map_or(0, |u| u.lost))
        .sum();
    assert_eq!(o.our_bytes() + 1000 * lost, o.server.total_bytes());
    assert_eq!(o.server.streams.len(), 2);
}

#[tokio::test]
async fn time_limited_test_ends_on_time() {
    if !have_iperf3("time_limited_test_ends_on_time") {
        return;
    }
    let server = RealServer::start().await;
    let started = std::time::Instant::now();
    let o = against_real_server(cfg(
        server.addr,
        false,
        false,
        1,
        128 * 1024,
        Limit::Time(Duration::from_secs(1)),
    ))
    .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(o.our_bytes() > 0);
    assert_counted_no_more_than_sent(&o);
}

#[tokio::test]
async fn run_iperf3_prints_both_views_as_json() {
    if !have_iperf3("run_iperf3_prints_both_views_as_json") {
        return;
    }
    let server = RealServer::start().await;
    let target = server.addr.to_string();
    let db = TempPath::new(".sqlite3");
    let out = wirebench(&[
        "run",
        "--iperf3",
        &target,
        "-n",
        "1MiB",
        "-l",
        "64KiB",
        "-R",
        "-P",
        "2",
        "--json",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    crate::iperf3_client::assert_schema(&doc, "iperf3-output.schema.json");
    assert_eq!(doc["kind"], "iperf3");
    assert_eq!(doc["wirebench"]["role"], "receiver");
    assert_eq!(doc["wirebench"]["bytes"], 1 << 20);
    assert_eq!(doc["iperf3_server"]["role"], "sender");
    assert_eq!(doc["iperf3_server"]["bytes"], 1 << 20);
    assert_eq!(
        doc["iperf3_server"]["streams"].as_array().map(Vec::len),
        Some(2)
    );
    // Stored as a one-run campaign: sender (the iperf3 server) as the client view.
    let export = wirebench(&["export", "1", "--db", db.arg()]).await;
    assert!(export.status.success(), "{}", stderr(&export));
    let stored: Value = serde_json::from_slice(&export.stdout).expect("export is JSON");
    assert_eq!(stored["parameters"]["server"], format!("iperf3://{target}"));
    assert_eq!(stored["runs"][0]["client"]["bytes"], 1 << 20);
    assert_eq!(stored["runs"][0]["server"]["bytes"], 1 << 20);
}
