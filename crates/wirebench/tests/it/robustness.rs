//! A server survives garbage, protocol mistakes and clients that die mid-session, and keeps
//! serving everyone else correctly.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use wirebench::flows::client::SessionRequest;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::proto::{self, ControlMessage, Preamble, SessionParams};

use crate::support::{Forwarder, TestServer, TEST_TIMEOUT};

fn small_tcp() -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol: Protocol::Tcp,
        mechanism: Mechanism::Stream,
        msg_size: 1000,
        total_bytes: 123_457,
        rto_us: None,
        rate_bps: None,
        grace_us: 100_000,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

/// A normal session still gives exact counts.
async fn still_serves(server: &mut TestServer) {
    let out = SessionRequest::new(server.addr, &small_tcp())
        .run()
        .await
        .expect("normal session");
    assert_eq!(out.server.bytes, 123_457);
    assert_eq!(out.server.messages, 124);
    let summary = server.next_session().await;
    assert!(!summary.report.aborted);
}

/// Reads the server's one error frame and returns its reason.
async fn read_error(conn: &mut TcpStream) -> String {
    let mut all = Vec::new();
    conn.read_to_end(&mut all)
        .await
        .expect("server answers, then closes");
    assert!(all.len() > 4, "an error frame");
    let len = proto::frame_len([all[0], all[1], all[2], all[3]]).expect("a frame");
    match proto::decode_body(&all[4..4 + len]).expect("valid frame") {
        ControlMessage::Error { reason } => reason,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_control_port_gets_a_clear_error() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let mut conn = TcpStream::connect(server.addr).await.unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let reason = read_error(&mut conn).await;
        assert!(reason.contains("magic"), "{reason}");

        // A wirebench of another protocol version.
        let mut conn = TcpStream::connect(server.addr).await.unwrap();
        let mut raw = Preamble::control().encode();
        raw[4] = 0;
        raw[5] = 99;
        conn.write_all(&raw).await.unwrap();
        let reason = read_error(&mut conn).await;
        assert!(reason.contains("99"), "{reason}");

        // A frame that claims to be 4 GiB.
        let mut conn = TcpStream::connect(server.addr).await.unwrap();
        conn.write_all(&Preamble::control().encode()).await.unwrap();
        conn.write_all(&[0xff, 0xff, 0xff, 0xff]).await.unwrap();
        let reason = read_error(&mut conn).await;
        assert!(reason.contains("exceeds"), "{reason}");

        // A malformed body.
        let mut conn = TcpStream::connect(server.addr).await.unwrap();
        conn.write_all(&Preamble::control().encode()).await.unwrap();
        conn.write_all(&[0, 0, 0, 5]).await.unwrap();
        conn.write_all(b"{{{{{").await.unwrap();
        let reason = read_error(&mut conn).await;
        assert!(reason.contains("malformed"), "{reason}");

        // Each refused connection was noted before the server closed it.
        let notices = server.drain_notices();
        assert_eq!(notices.len(), 4, "{notices:?}");

        // Garbage datagrams on the UDP side of the port, ours-looking and QUIC-looking.
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for i in 0..200u32 {
            let mut d = vec![(i % 256) as u8; 1 + (i as usize * 37) % 1400];
            d[0] = (i % 256) as u8;
            udp.send_to(&d, server.addr).await.unwrap();
        }
        assert!(server.is_running());
        still_serves(&mut server).await;
    })
    .await
    .expect("test finished in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_session_ends_only_its_session() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        // The forwarder tells us when the data is flowing, so the kill lands mid-session.
        let fwd = Forwarder::start(server.addr, 0.0, 1, 8 << 20).await;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .args([
                "run",
                "--no-store",
                "--server",
                &fwd.addr.to_string(),
                "--proto",
                "tcp",
                "-l",
                "64KiB",
                "-n",
                "100GiB",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the wirebench client");
        fwd.tcp_threshold_reached.notified().await;
        child.kill().await.expect("kill our own client");
        let summary = server.next_session().await;
        assert!(
            summary.report.aborted,
            "the killed session is marked aborted"
        );
        assert!(summary.report.bytes > 0 && summary.report.bytes < 100 << 30);
        assert!(summary.report.abort_reason.is_some());
        still_serves(&mut server).await;
    })
    .await
    .expect("test finished in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_attaches_data_is_aborted_after_the_setup_timeout() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let mut ctrl = TcpStream::connect(server.addr).await.unwrap();
        ctrl.write_all(&Preamble::control().encode()).await.unwrap();
        let mut frame = Vec::new();
        proto::encode_frame(&ControlMessage::SessionRequest(small_tcp()), &mut frame);
        ctrl.write_all(&frame).await.unwrap();
        // Hang up right after being accepted: the session must end, marked aborted.
        let mut header = [0u8; 4];
        ctrl.read_exact(&mut header).await.unwrap();
        drop(ctrl);
        let summary = tokio::time::timeout(Duration::from_secs(20), server.next_session())
            .await
            .expect("summary");
        assert!(summary.report.aborted);
        still_serves(&mut server).await;
    })
    .await
    .expect("test finished in time");
}
