//! UDP round trips on a socket of the session's own (`engine::udp::own_socket`): a ping's
//! requests are answered there, from the address the client asked at, and a stream received
//! on the lanes meanwhile keeps every count although each ping's socket, between its bind and
//! its connect, can catch the stream's datagrams (they are handed back).

use std::net::SocketAddr;

use serde_json::Value;
use wirebench::flows::server::ServerOptions;
use wirebench_core::vocab::plan::Mechanism;

use crate::support::{within, TestServer};

/// Runs `wirebench ping` over UDP, `count` requests of 1 KiB, to `server`; the JSON result.
async fn ping(server: &str, count: u32) -> Value {
    let out = crate::cli::wirebench(&[
        "ping",
        "--server",
        server,
        "--proto",
        "udp",
        "-l",
        "1024",
        "--count",
        &count.to_string(),
        "--json",
        "--no-store",
    ])
    .await;
    assert!(
        out.status.success(),
        "{server}: {}",
        crate::cli::stderr(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    doc["results"][0].clone()
}

/// A server on the wildcard address answers a ping on the ping's own socket from the address
/// the client asked at: 127.0.0.1 and 127.0.0.2 (IPv4, mapped on a dual-stack socket) and ::1.
/// An answer from another source would be dropped by the client's connected socket, and the
/// ping would count it lost.
#[tokio::test]
async fn a_ping_is_answered_on_its_own_socket_from_the_address_asked_at() {
    within(async {
        let v6 = std::net::UdpSocket::bind("[::1]:0").is_ok();
        let bind: SocketAddr = if v6 { "[::]:0" } else { "0.0.0.0:0" }.parse().unwrap();
        let options = ServerOptions {
            udp_lanes: Some(2),
            ..ServerOptions::default()
        };
        let mut server = TestServer::start_at(bind, options).await;
        let port = server.addr.port();
        let mut hosts = vec!["127.0.0.1".to_string(), "127.0.0.2".to_string()];
        if v6 {
            hosts.push("[::1]".to_string());
        }
        for host in hosts {
            let target = format!("{host}:{port}");
            let r = ping(&target, 300).await;
            assert_eq!(r["answered"], 300, "{target}: {r}");
            assert_eq!(r["lost"], 0, "{target}: {r}");
            let s = server.next_session().await;
            assert_eq!(s.report.messages, 300, "{target}: {:?}", s.report);
            let path = &s.report.data_path;
            assert!(path.own_socket, "{target}: {path:?}");
            assert_eq!(path.receive_lane, None, "{target}: {path:?}");
            assert_eq!(path.receive_lanes, 2, "{target}: {path:?}");
        }
    })
    .await;
}

/// A stream received on the lanes while pings come and go, each opening a socket of its own on
/// the same port: every datagram the stream sent is read or counted lost, and all that is lost
/// is what the host's socket dropped (a datagram a ping's socket caught and kept would be lost
/// without a drop). Each ping is answered in full on its own socket, and nothing reaches the
/// server that matched no session.
#[tokio::test]
async fn a_stream_beside_pings_keeps_every_count() {
    within(async {
        let mut server = TestServer::start_with(ServerOptions {
            udp_lanes: Some(2),
            ..ServerOptions::default()
        })
        .await;
        let addr = server.addr.to_string();
        let stream = {
            let addr = addr.clone();
            tokio::spawn(async move {
                crate::cli::wirebench(&[
                    "run",
                    "--no-store",
                    "--json",
                    "--server",
                    &addr,
                    "--proto",
                    "udp",
                    "-l",
                    "1024",
                    "-t",
                    "2",
                    "--rate",
                    "40Mbit",
                ])
                .await
            })
        };
        const PINGS: usize = 8;
        for _ in 0..PINGS {
            let r = ping(&addr, 200).await;
            assert_eq!(r["answered"], 200, "{r}");
        }
        let out = stream.await.expect("the stream's client");
        assert!(out.status.success(), "{}", crate::cli::stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let run = &doc["runs"][0];
        let sent = run["client"]["messages"].as_u64().expect("sent");
        let read = run["server"]["messages"].as_u64().expect("read");
        let lost = run["server"]["lost"].as_u64().expect("lost");
        assert!(sent > 0, "{run}");
        assert_eq!(read + lost, sent, "{run}");
        let by_host = run["server"]["dropped_by_host"].as_u64().unwrap_or(lost);
        assert_eq!(
            lost, by_host,
            "only the host's socket may lose on loopback: {run}"
        );
        let mut pings = 0;
        for _ in 0..=PINGS {
            let s = server.next_session().await;
            if s.params.mechanism == Mechanism::Stream {
                continue;
            }
            pings += 1;
            assert_eq!(s.report.messages, 200, "{:?}", s.report);
            assert!(s.report.data_path.own_socket, "{:?}", s.report);
        }
        assert_eq!(pings, PINGS);
        let notices = server.drain_notices();
        assert!(
            notices
                .iter()
                .all(|n| !n.contains("matched no session") && !n.contains("dropped")),
            "{notices:?}"
        );
    })
    .await;
}
