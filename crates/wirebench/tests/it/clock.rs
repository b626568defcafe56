//! Goodput's clock is not the report's clock: a run's transfer time ends when the data was
//! delivered, so a server report that arrives late (a busy host, a long path) does not lengthen
//! it. A forwarder between client and server holds back everything the server says on each
//! control connection after its session was accepted (the report, UDP's "done") by a delay
//! much longer than the data takes; every protocol, direction, `-P` and `--bidir` must still
//! time its run within the wall-clock time the run took less that delay. And TCP
//! stop-and-wait's report waits for the client's end rather than racing it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::cli::{stderr, wirebench};
use crate::support::{within, TestServer};

/// How late the forwarder hands the client what its server says after the session began:
/// far longer than a run of [`TOTAL`] takes on loopback, busy or not.
const REPORT_DELAY: Duration = Duration::from_millis(1500);

/// Each direction's total: a few MiB, enough for a run of many round trips.
const TOTAL: &str = "4MiB";

/// A TCP and UDP forwarder on one loopback port in front of a server, relaying everything as
/// is except what the server says on a control connection after its first frame (the
/// session's acceptance), which it hands on [`REPORT_DELAY`] late.
struct LateReports {
    addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for LateReports {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl LateReports {
    async fn start(upstream: SocketAddr) -> LateReports {
        let (listener, front) = crate::support::tcp_and_udp_on_one_port().await;
        let addr = listener.local_addr().expect("addr");
        let front = Arc::new(front);
        let tcp = tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(up) = TcpStream::connect(upstream).await {
                        relay_tcp(down, up).await;
                    }
                });
            }
        });
        let udp = tokio::spawn(relay_udp(front, upstream));
        LateReports {
            addr,
            tasks: vec![tcp, udp],
        }
    }
}

/// One TCP connection: client → server as is; server → client as is on a data connection,
/// and on a control connection (preamble kind 1) as is up to its first frame, then late.
async fn relay_tcp(down: TcpStream, up: TcpStream) {
    let (mut dr, mut dw) = down.into_split();
    let (mut ur, mut uw) = up.into_split();
    let mut preamble = [0u8; 7];
    if dr.read_exact(&mut preamble).await.is_err() || uw.write_all(&preamble).await.is_err() {
        return;
    }
    let control = preamble[6] == 1;
    let c2s = async move {
        let _ = tokio::io::copy(&mut dr, &mut uw).await;
        let _ = uw.shutdown().await;
    };
    let s2c = async move {
        if control {
            // The acceptance passes at once: the session is not timed before its data.
            let mut len = [0u8; 4];
            if ur.read_exact(&mut len).await.is_err() {
                return;
            }
            let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
            if ur.read_exact(&mut body).await.is_err()
                || dw.write_all(&len).await.is_err()
                || dw.write_all(&body).await.is_err()
            {
                return;
            }
            late_copy(&mut ur, &mut dw).await;
        } else {
            let _ = tokio::io::copy(&mut ur, &mut dw).await;
        }
        let _ = dw.shutdown().await;
    };
    tokio::join!(c2s, s2c);
}

/// Copies `from` to `to`, each chunk [`REPORT_DELAY`] after it was read (in order).
async fn late_copy(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reading = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0
                || tx
                    .send((Instant::now() + REPORT_DELAY, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    };
    let writing = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due.into()).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(reading, writing);
}

/// UDP (QUIC, and UDP's data and hellos) both ways as is, a socket toward the server per
/// client address (a `--bidir` QUIC run has two connections).
async fn relay_udp(front: Arc<UdpSocket>, upstream: SocketAddr) {
    let backs: Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>> = Arc::default();
    let mut buf = vec![0u8; 70_000];
    while let Ok((n, client)) = front.recv_from(&mut buf).await {
        let back = {
            let mut backs = backs.lock().await;
            match backs.get(&client) {
                Some(b) => Arc::clone(b),
                None => {
                    let Ok(b) = UdpSocket::bind("127.0.0.1:0").await else {
                        continue;
                    };
                    if b.connect(upstream).await.is_err() {
                        continue;
                    }
                    let b = Arc::new(b);
                    backs.insert(client, Arc::clone(&b));
                    let (b2, front) = (Arc::clone(&b), Arc::clone(&front));
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 70_000];
                        while let Ok(n) = b2.recv(&mut buf).await {
                            let _ = front.send_to(&buf[..n], client).await;
                        }
                    });
                    b
                }
            }
        };
        let _ = back.send(&buf[..n]).await;
    }
}

/// Runs `run --server <late forwarder> -n TOTAL EXTRA...` and checks that its transfer time
/// (each direction's, with `--bidir`) fits in the run's wall-clock time less the delay every
/// report took: the data was timed, not the report's way back.
async fn assert_timed_by_delivery(extra: &[&str]) {
    let mut server = TestServer::start().await;
    let forwarder = LateReports::start(server.addr).await;
    let addr = forwarder.addr.to_string();
    let mut args = vec!["run", "--server", &addr, "-J", "--no-store", "-n", TOTAL];
    if !extra.contains(&"-l") {
        args.extend_from_slice(&["-l", "128KiB"]);
    }
    args.extend_from_slice(extra);
    let began = Instant::now();
    let out = wirebench(&args).await;
    let wall = began.elapsed();
    assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("-J prints one JSON document");
    let run = &doc["runs"][0];
    let mut spans = vec![("the run", &run["headline"])];
    if let Some(each) = run.get("directions") {
        spans.push(("client → server", &each["client_to_server"]));
        spans.push(("server → client", &each["server_to_client"]));
    }
    for (what, headline) in spans {
        let transfer = Duration::from_nanos(headline["transfer_ns"].as_u64().expect("transfer_ns"));
        assert!(
            transfer > Duration::ZERO && transfer + REPORT_DELAY <= wall,
            "{extra:?}, {what}: transfer time {transfer:?}, but the run took {wall:?} of which \
             {REPORT_DELAY:?} waiting for the report: the report's delay was timed ({run})"
        );
        assert!(
            headline["goodput_bps"].as_f64().is_some(),
            "{extra:?}: {headline}"
        );
    }
    // Every session ended normally on the server.
    let flows = if extra.contains(&"-P") { 2 } else { 1 };
    let sessions = if extra.contains(&"--bidir") {
        2 * flows
    } else {
        flows
    };
    for _ in 0..sessions {
        let s = server.next_session().await;
        assert!(!s.report.aborted, "{extra:?}: {:?}", s.report.abort_reason);
    }
}

#[tokio::test]
async fn a_late_report_does_not_lengthen_a_tcp_run() {
    within(async {
        for extra in [
            &["--proto", "tcp"][..],
            &["--proto", "tcp", "-R"],
            &["--proto", "tcp", "-P", "2"],
            &["--proto", "tcp", "--bidir"],
        ] {
            assert_timed_by_delivery(extra).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_late_report_does_not_lengthen_a_quic_run() {
    within(async {
        for extra in [
            &["--proto", "quic"][..],
            &["--proto", "quic", "-R"],
            &["--proto", "quic", "--bidir"],
        ] {
            assert_timed_by_delivery(extra).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_late_report_does_not_lengthen_a_udp_run() {
    within(async {
        for extra in [
            &["--proto", "udp", "-l", "1400", "--rate", "100Mbit"][..],
            &["--proto", "udp", "-R", "-l", "1400", "--rate", "100Mbit"],
        ] {
            assert_timed_by_delivery(extra).await;
        }
    })
    .await;
}

/// TCP stop-and-wait: the server cannot know when the client has read its last
/// acknowledgement, so it reports only once the client closed its side of the data
/// connection, which the client does after its transfer has ended. The report then never
/// overtakes the end (before, it could, and a client thread slower than a 300 ms grace to read
/// that acknowledgement took the report for the server ending the session). A hand-driven
/// client reads every acknowledgement and keeps its side open: no report comes; it closes:
/// the report comes, complete.
#[tokio::test]
async fn a_stop_and_wait_report_waits_for_the_clients_end() {
    use wirebench::transport::{control, net};
    use wirebench_core::vocab::plan::{Mechanism, Protocol};
    use wirebench_core::wire::proto::{ControlMessage, Preamble};

    within(async {
        let mut server = TestServer::start().await;
        let p = crate::sessions::spec(Protocol::Tcp, Mechanism::StopAndWait, 100, 1000);
        let request = ControlMessage::SessionRequest(p.clone());
        let (mut ctrl, granted) = control::request_session_auth(server.addr, &request, None)
            .await
            .expect("session accepted");
        let mut data = net::connect_tcp_data(server.addr, &p.options, p.mechanism, None)
            .await
            .expect("data connection");
        control::write_preamble(&mut data, &Preamble::data(granted.session, granted.token))
            .await
            .expect("preamble");
        for index in 0..10u8 {
            data.write_all(&[0u8; 100]).await.expect("message");
            let mut ack = [0u8; 1];
            data.read_exact(&mut ack).await.expect("acknowledgement");
            assert_eq!(ack[0], index);
        }
        // Every acknowledgement read, our side still open: the session has not ended.
        let early =
            tokio::time::timeout(Duration::from_millis(500), control::read_report(&mut ctrl));
        assert!(
            early.await.is_err(),
            "the server reported before the client closed its side"
        );
        data.shutdown().await.expect("our side closed");
        let report = control::read_report(&mut ctrl).await.expect("the report");
        assert!(!report.aborted, "{:?}", report.abort_reason);
        assert_eq!(
            (report.messages, report.bytes, report.acks_sent),
            (10, 1000, 10)
        );
        let summary = server.next_session().await;
        assert_eq!(summary.report.messages, 10);
    })
    .await;
}
