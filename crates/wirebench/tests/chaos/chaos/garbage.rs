//! The abuse: garbage on the TCP and UDP sides of the port, slowloris connections, silent
//! sessions, and the host's count of UDP datagrams dropped for a full receive buffer.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use wirebench::transport::control::{self, SETUP_TIMEOUT};
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::datagram::{Header, Kind, HEADER_LEN};
use wirebench_core::wire::proto::{ControlMessage, Preamble, MAGIC};

use super::sessions::spec;
use super::{GARBAGE_CONNECTIONS, GARBAGE_DATAGRAMS};

/// Phase 3a: fresh TCP connections carrying random bytes: pure noise, our magic followed by
/// noise, a control preamble followed by a random frame, a data preamble with a random session.
/// Returns the bytes the kernel accepted.
pub(super) async fn tcp_garbage(addr: SocketAddr, seed: u64) -> u64 {
    let sent = Arc::new(AtomicU64::new(0));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..GARBAGE_CONNECTIONS {
        let mut bytes: Vec<u8> = match i % 4 {
            0 => Vec::new(),
            1 => MAGIC.to_vec(),
            2 => Preamble::control().encode().to_vec(),
            _ => Preamble::data(rng.gen(), rng.gen()).encode().to_vec(),
        };
        let len = rng.gen_range(1..8192);
        bytes.extend((0..len).map(|_| rng.gen::<u8>()));
        let sent = sent.clone();
        runs.spawn(async move {
            let Ok(mut conn) = TcpStream::connect(addr).await else {
                return;
            };
            // Written piecewise: the server may close after the first 16 bytes.
            for chunk in bytes.chunks(1024) {
                match conn.write(chunk).await {
                    Ok(n) => sent.fetch_add(n as u64, Ordering::Relaxed),
                    Err(_) => break,
                };
            }
            // The server answers (an error frame) and closes; wait for that, bounded.
            let mut sink = Vec::new();
            let _ =
                tokio::time::timeout(Duration::from_secs(20), conn.read_to_end(&mut sink)).await;
        });
        if runs.len() >= 50 {
            runs.join_next().await;
        }
    }
    while runs.join_next().await.is_some() {}
    sent.load(Ordering::Relaxed)
}

/// Phase 3b: datagrams to the UDP side of the port: noise, wirebench headers with random
/// session ids, QUIC-looking long headers (version 1 Initial-sized, and unknown versions) and
/// short headers. Returns the bytes sent.
pub(super) async fn udp_garbage(addr: SocketAddr, seed: u64) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sockets = Vec::new();
    for _ in 0..4 {
        sockets.push(UdpSocket::bind("127.0.0.1:0").await.expect("bind UDP"));
    }
    let mut sent = 0u64;
    let mut buf = vec![0u8; 1500];
    for i in 0..GARBAGE_DATAGRAMS {
        let len = match i % 5 {
            2 => 1200 + rng.gen_range(0..300),
            _ => rng.gen_range(1..1500),
        };
        let d = &mut buf[..len];
        rng.fill(&mut d[..]);
        match i % 5 {
            0 => {}
            1 if len >= HEADER_LEN => {
                let kind = [
                    Kind::Data,
                    Kind::Ack,
                    Kind::Request,
                    Kind::Response,
                    Kind::Hello,
                ][rng.gen_range(0..5)];
                let h = Header {
                    kind,
                    retransmit: rng.gen(),
                    session: rng.gen(),
                    seq: rng.gen(),
                };
                h.write_to(d).expect("room for a header");
            }
            2 => {
                d[0] = 0xC0 | (d[0] & 0x3F);
                d[1..5].copy_from_slice(&1u32.to_be_bytes());
            }
            3 if len >= 5 => d[0] = 0xC0 | (d[0] & 0x3F),
            _ => d[0] = 0x40 | (d[0] & 0x3F),
        }
        let socket = &sockets[i % sockets.len()];
        if socket.send_to(d, addr).await.is_ok() {
            sent += len as u64;
        }
        // Let the server breathe between bursts; a flood, not a benchmark of the sender.
        if i % 200 == 199 {
            tokio::task::yield_now().await;
        }
    }
    sent
}

/// How a slowloris connection ended.
pub(super) struct Slow {
    /// Time from connecting to the server closing it.
    pub(super) closed_after: Duration,
}

/// Phase 4: connections that open and go quiet. `hellos`: a valid control preamble, then
/// nothing; `partial`: a preamble dribbled out a byte at a time, never finished. Each must be
/// closed by the server once its timeout passes. Returns how long each took.
pub(super) async fn slowloris(addr: SocketAddr, hellos: usize, partial: usize) -> Vec<Slow> {
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..hellos + partial {
        runs.spawn(async move {
            let start = Instant::now();
            let mut conn = TcpStream::connect(addr).await.expect("connect");
            let preamble = Preamble::control().encode();
            if i < hellos {
                conn.write_all(&preamble).await.expect("preamble");
            } else {
                for b in &preamble[..8] {
                    if conn.write_all(&[*b]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            let mut sink = Vec::new();
            let closed = tokio::time::timeout(
                SETUP_TIMEOUT + Duration::from_secs(30),
                conn.read_to_end(&mut sink),
            )
            .await;
            assert!(
                closed.is_ok(),
                "the server never closed a silent connection"
            );
            Slow {
                closed_after: start.elapsed(),
            }
        });
    }
    let mut out = Vec::new();
    while let Some(s) = runs.join_next().await {
        out.push(s.expect("slowloris task"));
    }
    out
}

/// Phase 4b: a valid session request, then no data connection while the control connection
/// stays open: the session must end aborted after the setup timeout, with a summary and a
/// report. Returns the session ids.
pub(super) async fn silent_sessions(addr: SocketAddr, n: usize) -> Vec<u32> {
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..n {
        runs.spawn(async move {
            let protocol = if i % 2 == 0 {
                Protocol::Tcp
            } else {
                Protocol::Quic
            };
            let request =
                ControlMessage::SessionRequest(spec(protocol, Mechanism::Stream, 1000, 1_000_000));
            let (mut ctrl, granted) = control::request_session(addr, &request)
                .await
                .expect("session accepted");
            let report = tokio::time::timeout(
                SETUP_TIMEOUT + Duration::from_secs(30),
                control::read_report(&mut ctrl),
            )
            .await
            .expect("the server ends a session that never attached")
            .expect("a report");
            assert!(report.aborted, "a session without data is aborted");
            granted.session
        });
    }
    let mut ids = Vec::new();
    while let Some(id) = runs.join_next().await {
        ids.push(id.expect("silent session task"));
    }
    ids
}

/// The host's count of UDP datagrams dropped for a full receive buffer (/proc/net/snmp).
pub(super) fn udp_rcvbuf_errors() -> u64 {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}
