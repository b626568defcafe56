//! The rows at the edges of the server: a relay pointed at itself and one flooded past its
//! memory, SIGHUP to the server, the relay and the exporter, forged text in an exporter's
//! query, and a fake server that lies to a real client.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use wirebench::flows::relay::{Relay, RelayConfig, MAX_HELD_BYTES};
use wirebench::store::Store;
use wirebench::transport::control;
use wirebench_core::machine::impair::{Impairment, Impairments};
use wirebench_core::record::Status;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::proto::{ControlMessage, ServerReport};

use super::{has_raw_control, raw_request, request, signal};
use crate::cli::{start_server, wirebench};
use crate::support::{TempPath, TEST_TIMEOUT};
use wirebench::store::run::Run;

/// A port no one listens on right now (TCP and UDP), for a command that must bind it itself.
fn free_port() -> u16 {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.local_addr().unwrap().port()
}

/// Row 6a: `relay --listen P --to P` made 20,000 sockets and 1.4 GB in 2 s. Now refused.
#[tokio::test]
async fn the_relay_refuses_to_forward_to_itself() {
    let port = free_port().to_string();
    for (listen, to) in [
        (format!("127.0.0.1:{port}"), format!("127.0.0.1:{port}")),
        (format!("0.0.0.0:{port}"), format!("127.0.0.1:{port}")),
    ] {
        let out = wirebench(&["relay", "--listen", &listen, "--to", &to]).await;
        let err = crate::cli::stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{listen} → {to}: {err}");
        assert!(err.contains("the relay's own --listen"), "{err}");
    }
}

/// Row 6b: the relay held up to 65,536 datagrams per direction whatever `--queue` said. Now
/// all it holds is bounded in bytes; a flood past it is dropped, counted and told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_holds_a_bounded_number_of_bytes() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let sink = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let slow = Impairment {
            delay: Duration::from_secs(30),
            ..Impairment::default()
        };
        let mut relay = Relay::start(RelayConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: sink.local_addr().unwrap(),
            impairments: Impairments {
                up: slow,
                down: slow,
            },
            seed: 1,
            tcp: false,
            udp: true,
            max_held: wirebench::flows::relay::MAX_HELD_BYTES,
        })
        .await
        .expect("relay starts");
        let mut notices = relay.notices().expect("notices");
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(relay.local_addr()).await.unwrap();
        let datagram = vec![0u8; 60_000];
        let flood = async {
            loop {
                let _ = client.send(&datagram).await;
                assert!(relay.held_bytes() <= MAX_HELD_BYTES);
            }
        };
        let told = tokio::select! {
            n = notices.recv() => n.expect("a notice"),
            () = flood => unreachable!(),
        };
        assert!(told.contains("the relay holds its most"), "{told}");
        assert!(relay.held_bytes() <= MAX_HELD_BYTES);
        let c = relay.counts();
        assert!(c.udp_up.queue_drops >= 1, "{c:?}");
        assert_eq!(c.udp_up.forwarded, 0, "all of it is still delayed");
    })
    .await
    .expect("test within its time limit");
}

/// Row 7: SIGHUP killed `server`, `relay` and `exporter` with status 129 and no reports. Now
/// each ends as on SIGTERM: the server reports its sessions, the relay prints its counts, the
/// exporter logs its own.
#[tokio::test]
async fn sighup_ends_server_relay_and_exporter_as_sigterm_does() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        // The server, with one session running.
        let (mut server, addr, mut lines) =
            start_server(&["--json", "--shutdown-grace", "200ms"]).await;
        let addr: SocketAddr = addr.parse().unwrap();
        let held =
            ControlMessage::SessionRequest(request(Protocol::Udp, Mechanism::Stream, 100, 1000));
        let (mut ctrl, answer) = raw_request(addr, &held).await;
        assert!(
            matches!(answer, ControlMessage::Accepted { .. }),
            "{answer:?}"
        );
        signal(&server, libc::SIGHUP);
        assert!(
            control::read_report(&mut ctrl)
                .await
                .expect("a report")
                .aborted
        );
        assert_eq!(server.wait().await.unwrap().code(), Some(0));
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the session's line");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["aborted"], true);

        // The relay and the exporter.
        let (port, metrics) = (free_port(), free_port());
        for args in [
            vec![
                "relay".to_string(),
                "--listen".into(),
                format!("127.0.0.1:{port}"),
                "--to".into(),
                "127.0.0.1:9".into(),
            ],
            vec![
                "exporter".to_string(),
                "--listen".into(),
                format!("127.0.0.1:{metrics}"),
            ],
        ] {
            let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
                .args(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("starts");
            let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
            let first = err.next_line().await.unwrap().expect("a listening line");
            assert!(first.contains("listening"), "{first}");
            signal(&child, libc::SIGHUP);
            let status = child.wait().await.unwrap();
            let mut out = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .await
                .unwrap();
            let mut rest = String::new();
            while let Ok(Some(l)) = err.next_line().await {
                rest.push_str(&l);
                rest.push('\n');
            }
            assert_eq!(status.code(), Some(0), "{args:?}: {rest}");
            assert!(rest.contains("SIGHUP, stopping"), "{args:?}: {rest}");
            if args[0] == "relay" {
                assert!(out.contains("relay counts (exit"), "{out}");
            } else {
                assert!(rest.contains("stopping after 0 probes"), "{rest}");
            }
        }
    })
    .await
    .expect("test within its time limit");
}

/// One raw HTTP/1.1 GET; the status and the whole answer.
async fn http_get(addr: SocketAddr, target: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).await.unwrap();
    let status = String::from_utf8_lossy(&all)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, all)
}

/// Row 8: a newline in `/probe?target=` forged a line in the exporter's log, and NUL or ESC
/// went raw into the log and the page. Now such a query is refused, its text escaped.
#[tokio::test]
async fn an_exporter_query_cannot_forge_log_lines_or_send_raw_bytes() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .args(["exporter", "--listen", &addr.to_string()])
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("starts");
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        err.next_line().await.unwrap().expect("a listening line");
        for forged in [
            "%0aprobe%20kind=run%20succeeded%20FORGED",
            "%00",
            "%1b%5b2J",
        ] {
            let (status, answer) =
                http_get(addr, &format!("/probe?target=127.0.0.1:5310{forged}")).await;
            assert_eq!(status, 400, "{}", String::from_utf8_lossy(&answer));
            let body = answer
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map_or(&answer[..], |at| &answer[at + 4..]);
            assert!(!has_raw_control(body), "{body:?}");
            assert!(String::from_utf8_lossy(body).contains("holds a control character"));
        }
        signal(&child, libc::SIGTERM);
        assert_eq!(child.wait().await.unwrap().code(), Some(0));
        let mut log = Vec::new();
        while let Ok(Some(l)) = err.next_line().await {
            log.push(l);
        }
        assert_eq!(
            log.iter()
                .filter(|l| l.starts_with("probe refused (400)"))
                .count(),
            3,
            "{log:?}"
        );
        assert!(
            !log.iter()
                .any(|l| l.starts_with("probe kind=run succeeded")),
            "{log:?}"
        );
        assert!(
            !log.iter().any(|l| has_raw_control(l.as_bytes())),
            "{log:?}"
        );
    })
    .await
    .expect("test within its time limit");
}

/// A wirebench server that lies: accepts one TCP session, reads its data, and answers with
/// the report `lie` makes of the truth.
async fn fake_server(lie: fn(ServerReport) -> ServerReport) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut ctrl, _) = listener.accept().await.unwrap();
        control::read_preamble(&mut ctrl).await.unwrap();
        let Some(ControlMessage::SessionRequest(p)) = control::recv(&mut ctrl).await.unwrap()
        else {
            panic!("a session request");
        };
        let accepted = ControlMessage::Accepted {
            session: 7,
            token: 9,
            quic_cert: None,
            clock: None,
        };
        control::send(&mut ctrl, &accepted).await.unwrap();
        let (mut data, _) = listener.accept().await.unwrap();
        control::read_preamble(&mut data).await.unwrap();
        let mut got = vec![0u8; p.total_bytes as usize];
        data.read_exact(&mut got).await.unwrap();
        let truth = ServerReport {
            protocol: p.protocol,
            mechanism: p.mechanism,
            messages: p.total_bytes / u64::from(p.msg_size),
            bytes: p.total_bytes,
            read_calls: 1,
            elapsed_ns: 1_000_000,
            ..ServerReport::default()
        };
        let report = ControlMessage::Report(Box::new(lie(truth)));
        control::send(&mut ctrl, &report).await.unwrap();
        let mut rest = Vec::new();
        let _ = ctrl.read_to_end(&mut rest).await;
    });
    addr
}

/// Row 9: a fake server answering a 1 MiB run with 10 MiB, or with `aborted: true` and an
/// escape sequence, made the client print and store a complete run (exit 0) and print the
/// escape raw. Now the run fails with what it is, stored as aborted with the reason escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_server_is_stored_as_what_it_is() {
    let ten_times: fn(ServerReport) -> ServerReport = |r| ServerReport {
        bytes: 10 * r.bytes,
        ..r
    };
    let aborted: fn(ServerReport) -> ServerReport = |r| ServerReport {
        aborted: true,
        abort_reason: Some("\u{1b}[2Jevil\nline two".into()),
        ..r
    };
    for (lie, said) in [
        (ten_times, "the server's report is inconsistent: it says 10485760 bytes arrived, but 1048576 were sent"),
        (aborted, "the server ended the session: \\u{1b}[2Jevil\\nline two"),
    ] {
        let addr = fake_server(lie).await.to_string();
        let db = TempPath::new(".sqlite3");
        let out = wirebench(&[
            "run", "--server", &addr, "--proto", "tcp", "--mode", "stream", "-n", "1MiB", "-l", "1000", "--db", db.arg(),
        ])
        .await;
        let err = crate::cli::stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(said), "{err}");
        assert!(!has_raw_control(&out.stdout) && !has_raw_control(&out.stderr), "{err}");
        let store = Store::open(&db.0).unwrap();
        let c = store.campaign::<Run>(1).unwrap().expect("the campaign");
        assert_eq!((c.status, c.stored_runs, c.aborted_runs), (Status::Failed, 0, 1));
        let details = store.aborted_details(1).unwrap();
        assert!(details[0].reason.as_deref().unwrap_or_default().contains(said), "{details:?}");
    }
}
