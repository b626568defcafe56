//! The abuse suite of issue 24: each row of its table replayed against a real server (relay,
//! exporter, client) started by the test, asserting the bounded outcome — limits that hold for
//! every kind of session both ways, peer fields refused by name, no panic, memory within its
//! bound, a relay that will not feed itself, SIGHUP handled like SIGTERM, no raw control byte
//! in a log or page, and a lying server's run stored as what it is.

mod edges;
mod server;

use std::net::SocketAddr;

use tokio::net::TcpStream;
use wirebench::flows::server::{Limits, ServerOptions};
use wirebench::transport::control;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::proto::{ControlMessage, Preamble, SessionParams};

/// The issue's server: `--max-bytes 10MiB --max-rate 10Mbit --max-duration 3s`.
fn issue_limits() -> Limits {
    Limits {
        max_bytes: 10 << 20,
        max_rate_bps: Some(10_000_000),
        max_duration: std::time::Duration::from_secs(3),
        ..Limits::default()
    }
}

fn options(limits: Limits) -> ServerOptions {
    ServerOptions {
        limits,
        ..ServerOptions::default()
    }
}

/// A transfer request as a hand-written client would send it.
fn request(protocol: Protocol, mechanism: Mechanism, msg_size: u32, total: u64) -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol,
        mechanism,
        msg_size,
        total_bytes: total,
        rto_us: None,
        rate_bps: None,
        grace_us: 0,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

/// Opens a control connection, sends `request`, returns the connection and the answer.
async fn raw_request(server: SocketAddr, request: &ControlMessage) -> (TcpStream, ControlMessage) {
    let mut stream = TcpStream::connect(server).await.expect("connect");
    control::write_preamble(&mut stream, &Preamble::control())
        .await
        .expect("preamble");
    control::send(&mut stream, request).await.expect("request");
    let answer = control::recv_setup(&mut stream).await.expect("an answer");
    (stream, answer)
}

/// The reason of a refusal.
fn refusal(answer: &ControlMessage) -> &str {
    match answer {
        ControlMessage::Rejected { reason } | ControlMessage::Error { reason } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Sends `signal` to our own child, by its pid.
fn signal(child: &tokio::process::Child, signal: i32) {
    let pid = i32::try_from(child.id().expect("still running")).expect("a pid");
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill {pid}");
}

/// Whether `bytes` hold a control character other than the line breaks between lines.
fn has_raw_control(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes)
        .chars()
        .any(|c| c.is_control() && c != '\n')
}
