//! What the relay holds at most whatever its clients do: TCP connections beyond its limit are
//! closed at once, and two relays pointed at each other end their loop instead of connecting
//! to each other until the file descriptors run out.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use wirebench::flows::relay::{Relay, RelayConfig, MAX_TCP_CONNECTIONS};
use wirebench_core::machine::impair::Impairments;

use crate::support::TEST_TIMEOUT;

/// File descriptors these tests need: both ends of every connection live in this process.
const FDS_NEEDED: u64 = 4 * MAX_TCP_CONNECTIONS as u64 + 512;

/// Raises this process's descriptor limit to [`FDS_NEEDED`] where the hard limit allows; false
/// (with a message) where it does not.
fn enough_descriptors(test: &str) -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit write/read only the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        eprintln!("SKIP {test}: cannot read the file descriptor limit");
        return false;
    }
    if lim.rlim_cur >= FDS_NEEDED {
        return true;
    }
    if lim.rlim_max < FDS_NEEDED {
        eprintln!(
            "SKIP {test}: needs {FDS_NEEDED} file descriptors, the hard limit is {}",
            lim.rlim_max
        );
        return false;
    }
    lim.rlim_cur = FDS_NEEDED;
    // SAFETY: as above.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 }
}

/// A TCP-only relay from `listen` to `upstream`.
async fn tcp_relay(listen: &str, upstream: std::net::SocketAddr) -> Relay {
    Relay::start(RelayConfig {
        listen: listen.parse().expect("an address"),
        upstream,
        impairments: Impairments::parse_list("").expect("no impairment"),
        seed: 1,
        tcp: true,
        udp: false,
        max_held: wirebench::flows::relay::MAX_HELD_BYTES,
    })
    .await
    .expect("relay starts")
}

/// Reads until the peer closes; true if it did within `limit`.
async fn closed_within(conn: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 64];
    tokio::time::timeout(limit, async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// `MAX_TCP_CONNECTIONS` idle clients are relayed; the next one is closed at once, with a
/// notice that names the limit, and a place comes free when a client leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_connections_past_the_limit_are_closed_at_once() {
    if !enough_descriptors("tcp_connections_past_the_limit_are_closed_at_once") {
        return;
    }
    tokio::time::timeout(TEST_TIMEOUT, async {
        // The server: holds every connection, sending nothing, until its client closes.
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = server.local_addr().unwrap();
        let holding = tokio::spawn(async move {
            while let Ok((mut conn, _)) = server.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
                });
            }
        });
        let mut relay = tcp_relay("127.0.0.1:0", upstream).await;
        let mut notices = relay.notices().expect("notices");
        let mut clients = Vec::with_capacity(MAX_TCP_CONNECTIONS);
        for _ in 0..MAX_TCP_CONNECTIONS {
            clients.push(TcpStream::connect(relay.local_addr()).await.unwrap());
        }
        // Every place taken once the relay has counted them all.
        while relay.counts().tcp_connections < MAX_TCP_CONNECTIONS as u64 {
            tokio::task::yield_now().await;
        }
        let mut over = TcpStream::connect(relay.local_addr()).await.unwrap();
        assert!(
            closed_within(&mut over, Duration::from_secs(10)).await,
            "a connection past the limit is closed"
        );
        let notice = notices.recv().await.expect("a notice");
        assert!(
            notice.contains(&format!("{MAX_TCP_CONNECTIONS} TCP connections")),
            "{notice}"
        );
        assert_eq!(
            relay.counts().tcp_connections,
            MAX_TCP_CONNECTIONS as u64,
            "the refused one is not relayed"
        );
        // A client leaves: its place is free again once the relay has seen it go (a
        // connection tried before that is closed, and counted as refused, not relayed).
        drop(clients.pop());
        let _next = loop {
            let mut conn = TcpStream::connect(relay.local_addr()).await.unwrap();
            if !closed_within(&mut conn, Duration::from_millis(200)).await {
                break conn;
            }
        };
        assert_eq!(
            relay.counts().tcp_connections,
            MAX_TCP_CONNECTIONS as u64 + 1
        );
        holding.abort();
    })
    .await
    .expect("test finished in time");
}

/// Two relays pointed at each other: one client connection makes each relay connect to the
/// other until both hold their most, then the connection past the limit is closed and the
/// whole chain unwinds back to the client, which sees its connection closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_pointed_at_each_other_end_their_loop() {
    if !enough_descriptors("two_relays_pointed_at_each_other_end_their_loop") {
        return;
    }
    tokio::time::timeout(TEST_TIMEOUT, async {
        // B listens on a port chosen by the system; A is started pointing there.
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b_addr = probe.local_addr().unwrap();
        drop(probe);
        let a = tcp_relay("127.0.0.1:0", b_addr).await;
        let b = tcp_relay(&b_addr.to_string(), a.local_addr()).await;
        let mut client = TcpStream::connect(a.local_addr()).await.unwrap();
        assert!(
            closed_within(&mut client, Duration::from_secs(60)).await,
            "the loop ends and the client's connection is closed"
        );
        drop(client);
        // The chain is one connection after another (client, A, B, A, …): each relay took
        // exactly its limit, and A refused the one B made past it.
        let (ca, cb) = (a.counts().tcp_connections, b.counts().tcp_connections);
        assert_eq!(
            (ca, cb),
            (MAX_TCP_CONNECTIONS as u64, MAX_TCP_CONNECTIONS as u64)
        );
    })
    .await
    .expect("test finished in time");
}
