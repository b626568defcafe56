//! The real `iperf3 -c` against wirebench's iperf3 listener: TCP and UDP both ways, and what
//! the listener does not serve refused while it keeps serving.

use std::time::Duration;

use tokio::process::Command;

use super::{have_iperf3, real_client, OurIperf3};
use crate::support::TEST_TIMEOUT;

#[tokio::test]
async fn real_client_tcp_forward_and_parallel() {
    if !have_iperf3("real_client_tcp_forward_and_parallel") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    let doc = real_client(ours.addr, &["-n", "8M", "-l", "128K", "-P", "3"]).await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    assert_eq!(doc["end"]["sum_sent"]["bytes"], 8 << 20);
    assert_eq!(doc["end"]["sum_received"]["bytes"], s.report.bytes);
    // Data the client had not yet delivered when it sent TEST_END is still counted.
    assert_eq!(s.report.bytes, 8 << 20);
    assert_eq!(doc["end"]["streams"].as_array().map(Vec::len), Some(3));
    assert_eq!(s.params.msg_size, 128 * 1024);
}

#[tokio::test]
async fn real_client_tcp_reverse() {
    if !have_iperf3("real_client_tcp_reverse") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    let doc = real_client(ours.addr, &["-n", "1M", "-R"]).await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    // We sent exactly the bytes asked for; the client read them all.
    assert_eq!(doc["end"]["sum_sent"]["bytes"], 1 << 20);
    assert_eq!(doc["end"]["sum_received"]["bytes"], 1 << 20);
    assert_eq!(s.report.bytes, 1 << 20);
}

#[tokio::test]
async fn a_bidir_test_says_what_the_client_read_of_what_we_sent_alone() {
    if !have_iperf3("a_bidir_test_says_what_the_client_read_of_what_we_sent_alone") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    let doc = real_client(ours.addr, &["-P", "2", "--bidir", "-t", "1"]).await;
    // The client's results list the streams it sent on too: what it read of ours is its
    // reverse direction alone (the notice once added both, 1.6 GB for 0.2 GB sent).
    let notice = ours.next_notice().await;
    let read: u64 = notice
        .split("reported reading ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {notice:?}"));
    let received = doc["end"]["sum_received_bidir_reverse"]["bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(read, received, "{notice}");
}

#[tokio::test]
async fn real_client_udp_forward_and_reverse() {
    if !have_iperf3("real_client_udp_forward_and_reverse") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    let doc = real_client(ours.addr, &["-u", "-n", "30000", "-l", "1000", "-b", "10M"]).await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    assert_eq!(doc["end"]["sum_received"]["bytes"], s.report.bytes);
    assert_eq!(doc["end"]["sum_received"]["packets"], 30);
    assert_eq!(s.report.bytes + 1000 * s.report.lost, 30_000);
    assert_eq!(s.report.read_calls, 30 - s.report.lost);

    let doc = real_client(
        ours.addr,
        &[
            "-u", "-R", "-P", "2", "-n", "30000", "-l", "1000", "-b", "10M",
        ],
    )
    .await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    // As iperf3's own, our UDP sender goes on until TEST_END: the client counts to -n, and
    // waits for more after a datagram lost on the way. The line shows what we sent.
    assert!(s.params.reverse);
    assert_eq!(doc["end"]["sum_sent"]["bytes"], s.report.bytes);
    let received = doc["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert!(
        received >= 30_000 && received <= s.report.bytes,
        "{received}"
    );

    // 64-bit datagram counters, both directions.
    let doc = real_client(
        ours.addr,
        &[
            "-u",
            "--udp-counters-64bit",
            "-n",
            "20000",
            "-l",
            "1000",
            "-b",
            "10M",
        ],
    )
    .await;
    let s = ours.next_session().await;
    assert_eq!(doc["end"]["sum_received"]["packets"], 20);
    assert_eq!(doc["end"]["sum_received"]["bytes"], s.report.bytes);
    let doc = real_client(
        ours.addr,
        &[
            "-u",
            "-R",
            "--udp-counters-64bit",
            "-n",
            "20000",
            "-l",
            "1000",
            "-b",
            "10M",
        ],
    )
    .await;
    let s = ours.next_session().await;
    assert_eq!(doc["end"]["sum_sent"]["bytes"], s.report.bytes);
    assert!(doc["end"]["sum_received"]["bytes"].as_u64().unwrap() >= 20_000);
}

#[tokio::test]
async fn iperf3_listener_refuses_what_it_does_not_serve_and_keeps_serving() {
    if !have_iperf3("iperf3_listener_refuses_what_it_does_not_serve_and_keeps_serving") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    // SCTP is not served: the client gets iperf3's own error, the listener a refused test.
    let port = ours.addr.port().to_string();
    let out = tokio::time::timeout(
        TEST_TIMEOUT,
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "--sctp", "-n", "1M"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("in time")
    .expect("ran");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    // A client built without SCTP refuses the flag itself, before it reaches us.
    if !said.contains("unrecognized option") {
        assert!(said.contains("SCTP support available"), "{said}");
        let refused = ours.next_notice().await;
        assert!(refused.contains("SCTP"), "{refused}");
    }
    // Garbage instead of a cookie costs one notice, nothing more.
    let mut junk = tokio::net::TcpStream::connect(ours.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut junk, &[0xff; 37])
        .await
        .unwrap();
    drop(junk);
    let doc = real_client(ours.addr, &["-n", "128K"]).await;
    assert_eq!(doc["end"]["sum_received"]["bytes"], 128 * 1024);
}

/// Issue 37: an iperf3 test holds the data connections it declared and no more. A client
/// that opens 50 more with its cookie (4,000 were held until the test's end, 4,027 fds) sees
/// each closed at once. The dialogue is written by hand, as a hostile client would.
#[tokio::test]
async fn a_test_holds_only_the_streams_it_declared() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    let ours = OurIperf3::start().await;
    let mut cookie = [b'a'; 37];
    cookie[36] = 0;
    let mut ctrl = TcpStream::connect(ours.addr).await.unwrap();
    ctrl.write_all(&cookie).await.unwrap();
    let mut state = [0u8; 1];
    ctrl.read_exact(&mut state).await.unwrap();
    assert_eq!(state[0], 9, "PARAM_EXCHANGE");
    let params = br#"{"tcp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;
    ctrl.write_all(&(params.len() as u32).to_be_bytes())
        .await
        .unwrap();
    ctrl.write_all(params).await.unwrap();
    ctrl.read_exact(&mut state).await.unwrap();
    assert_eq!(state[0], 10, "CREATE_STREAMS");
    let mut data = Vec::new();
    for _ in 0..51 {
        let mut c = TcpStream::connect(ours.addr).await.unwrap();
        c.write_all(&cookie).await.unwrap();
        data.push(c);
    }
    ctrl.read_exact(&mut state).await.unwrap();
    assert_eq!(
        state[0], 1,
        "TEST_START: the one stream it declared is there"
    );
    // The test waits for its client's TEST_END for a minute: a connection still open after
    // 5 s is held by it.
    let mut closed = 0;
    for c in &mut data {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), c.read(&mut byte)).await;
        if matches!(read, Ok(Ok(0)) | Ok(Err(_))) {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 50,
        "of 51 data connections for a test of one stream"
    );
}
