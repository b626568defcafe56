//! What `server --iperf3` does with a real iperf3 client's test beyond its figures: the
//! client's socket options on the server's own data sockets, the omitted seconds left out of
//! the session's figures and span, and the test's one session line. The line-by-line
//! comparison with a real iperf3 server is iperf3_conformance/. Skips without iperf3.

use crate::interop::{have_iperf3, real_client, OurIperf3};

#[tokio::test]
async fn the_clients_socket_options_are_applied_on_the_servers_data_sockets() {
    if !have_iperf3("the_clients_socket_options_are_applied_on_the_servers_data_sockets") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    let doc = real_client(
        ours.addr,
        &["-t", "1", "-w", "1M", "-C", "reno", "-N", "-M", "1000"],
    )
    .await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    let path = &s.report.data_path;
    // Linux reports a buffer set with SO_RCVBUF doubled for its own bookkeeping.
    assert_eq!(path.recv_buffer, 2 << 20, "{path:?}");
    assert_eq!(path.congestion.as_deref(), Some("reno"));
    assert!(path.nodelay);
    assert_eq!(doc["end"]["receiver_tcp_congestion"], "reno");
    // One line for the test: what the server read, over the test's span.
    assert_eq!(doc["end"]["sum_received"]["bytes"], s.report.bytes);
    let span_s = s.report.elapsed_ns as f64 / 1e9;
    assert!((0.9..5.0).contains(&span_s), "{span_s}");
}

#[tokio::test]
async fn the_omitted_seconds_are_left_out_of_the_servers_figures() {
    if !have_iperf3("the_omitted_seconds_are_left_out_of_the_servers_figures") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    for args in [
        &["-O", "1", "-t", "1"][..],
        &["-u", "-b", "10M", "-O", "1", "-t", "1"][..],
    ] {
        let doc = real_client(ours.addr, args).await;
        let s = ours.next_session().await;
        assert!(!s.report.aborted, "{args:?}: {:?}", s.report.abort_reason);
        let omitted = s.report.omitted.expect("the omit mark");
        // The line has the whole test; the mark a second in, and what had moved by then.
        let mark_s = omitted.elapsed_ns as f64 / 1e9;
        assert!((1.0..2.0).contains(&mark_s), "{args:?}: {mark_s}");
        assert!(
            omitted.bytes > 0 && omitted.bytes < s.report.bytes,
            "{args:?}"
        );
        // The client's receiver figures are the rest: after the mark, over the span after it.
        let received = &doc["end"]["sum_received"];
        let counted = received["bytes"].as_u64().unwrap();
        assert_eq!(counted, s.report.bytes - omitted.bytes, "{args:?}");
        let seconds = received["seconds"].as_f64().unwrap();
        let sent_seconds = doc["end"]["sum_sent"]["seconds"].as_f64().unwrap();
        assert!(
            (seconds - sent_seconds).abs() < 0.2,
            "{args:?}: {seconds} vs {sent_seconds}"
        );
    }
}

/// Issue 37: every stream of an iperf3 test reads from the gate's one budget as it goes. With
/// 32 streams under `--max-rate 100Mbit --max-bytes 50MiB` the server read 211 MB at
/// 562 Mbit/s (its streams drained what the client had queued in their receive buffers at the
/// end, unpaced); now what it reads stays within the rate over the test's span, give or take
/// one read per stream, and within the byte limit.
#[tokio::test]
async fn thirty_two_streams_are_held_to_the_servers_rate_and_byte_limits() {
    if !have_iperf3("thirty_two_streams_are_held_to_the_servers_rate_and_byte_limits") {
        return;
    }
    const RATE: u64 = 100_000_000;
    const MAX_BYTES: u64 = 50 << 20;
    let limits = wirebench::flows::server::Limits {
        max_rate_bps: Some(RATE),
        max_bytes: MAX_BYTES,
        ..Default::default()
    };
    let mut ours = OurIperf3::start_with(&limits).await;
    let _ = real_client(ours.addr, &["-P", "32", "-t", "3"]).await;
    let s = ours.next_session().await;
    let r = &s.report;
    let secs = r.elapsed_ns as f64 / 1e9;
    // One read of 128 KiB per stream may land past the pause that follows it, and one more
    // per stream when the test ends (what the client queued is read while within the rate).
    let allowed = RATE as f64 / 8.0 * secs + 2.0 * 32.0 * 131072.0;
    assert!(r.bytes > 0, "{r:?}");
    assert!(r.bytes <= MAX_BYTES, "{} bytes under --max-bytes", r.bytes);
    assert!(
        r.bytes as f64 <= allowed,
        "{} bytes read in {secs:.3} s under --max-rate {RATE} (allowed {allowed:.0})",
        r.bytes
    );
}
