//! Server limits and shutdown: each limit refuses (or aborts) with a reason that names its
//! flag, a session within the limits still counts exactly, and a shutting-down server lets
//! running sessions finish, aborts the rest with a report, and exits 0.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch};
use wirebench::flows::client::{SessionOutcome, SessionRequest};
use wirebench::flows::server::{Limits, Server, ServerEvent, ServerOptions, StopRequest};
use wirebench::transport::control;
use wirebench::transport::tls::ServerIdentity;
use wirebench_core::record::transfer_span_ns;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{ControlMessage, DataPathOptions, Preamble, SessionParams};

use crate::sessions::spec;
use crate::support::{TestServer, TEST_TIMEOUT};

fn with_limits(limits: Limits) -> ServerOptions {
    ServerOptions {
        limits,
        ..ServerOptions::default()
    }
}

/// Opens a control connection from `from`, sends `request` and returns the server's answer.
async fn raw_request(
    server: SocketAddr,
    from: IpAddr,
    request: &ControlMessage,
) -> (TcpStream, ControlMessage) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let mut stream = socket.connect(server).await.unwrap();
    control::write_preamble(&mut stream, &Preamble::control())
        .await
        .unwrap();
    control::send(&mut stream, request).await.unwrap();
    let answer = control::recv_setup(&mut stream).await.unwrap();
    (stream, answer)
}

/// A UDP streaming session that stays open until its client says it is done: it holds a place.
fn held_session() -> ControlMessage {
    ControlMessage::SessionRequest(spec(Protocol::Udp, Mechanism::Stream, 100, 1000))
}

fn refusal(answer: &ControlMessage) -> &str {
    match answer {
        ControlMessage::Rejected { reason } | ControlMessage::Error { reason } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_limited_in_all_and_per_client() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(with_limits(Limits {
            max_sessions: 2,
            max_sessions_per_client: 1,
            ..Limits::default()
        }))
        .await;
        let one: IpAddr = "127.0.0.1".parse().unwrap();
        let (held_one, answer) = raw_request(server.addr, one, &held_session()).await;
        assert!(
            matches!(answer, ControlMessage::Accepted { .. }),
            "{answer:?}"
        );

        // The same client again: over its own limit.
        let sp = spec(Protocol::Tcp, Mechanism::Stream, 1000, 10_000);
        let err = SessionRequest::new(server.addr, &sp)
            .run()
            .await
            .expect_err("refused");
        assert!(
            format!("{err:#}").contains("allows 1 per client (--max-sessions-per-client)"),
            "{err:#}"
        );

        // Another client is welcome; a third finds the server full.
        let two: IpAddr = "127.0.0.2".parse().unwrap();
        let (_held_two, answer) = raw_request(server.addr, two, &held_session()).await;
        assert!(
            matches!(answer, ControlMessage::Accepted { .. }),
            "{answer:?}"
        );
        let three: IpAddr = "127.0.0.3".parse().unwrap();
        let (_, answer) = raw_request(server.addr, three, &held_session()).await;
        assert!(
            refusal(&answer).contains("2 sessions are running, its limit is 2 (--max-sessions)"),
            "{answer:?}"
        );

        // The first client leaves: its session is reported aborted and its place is free
        // (once its report is sent, just after the summary).
        drop(held_one);
        let summary = server.next_session().await;
        assert!(summary.report.aborted);
        assert_eq!(summary.peer.ip(), one);
        server.metrics.sessions_running_at_most(1).await;
        let out = SessionRequest::new(server.addr, &sp)
            .run()
            .await
            .expect("admitted again");
        assert_eq!((out.server.bytes, out.server.messages), (10_000, 10));
    })
    .await
    .expect("test within its time limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_past_its_duration_is_aborted_and_reported() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(with_limits(Limits {
            max_duration: Duration::from_millis(300),
            ..Limits::default()
        }))
        .await;
        let (mut ctrl, answer) =
            raw_request(server.addr, "127.0.0.1".parse().unwrap(), &held_session()).await;
        assert!(
            matches!(answer, ControlMessage::Accepted { .. }),
            "{answer:?}"
        );
        // The client never says it is done: the server ends the session and still reports.
        let report = control::read_report(&mut ctrl).await.expect("a report");
        assert!(report.aborted);
        let reason = report.abort_reason.clone().unwrap_or_default();
        assert_eq!(
            reason,
            "the session ran into the server's limit of 300ms (--max-duration)"
        );
        let summary = server.next_session().await;
        assert_eq!(summary.report, report, "the summary is the report sent");
    })
    .await
    .expect("test within its time limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totals_above_the_byte_limit_are_refused() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(with_limits(Limits {
            max_bytes: 100_000,
            ..Limits::default()
        }))
        .await;
        for protocol in [Protocol::Tcp, Protocol::Udp, Protocol::Quic] {
            let over = spec(protocol, Mechanism::Stream, 1000, 100_001);
            let err = SessionRequest::new(server.addr, &over)
                .run()
                .await
                .expect_err("refused");
            assert!(
                format!("{err:#}").contains("at most 100000 bytes (--max-bytes)"),
                "{err:#}"
            );
            let at = spec(protocol, Mechanism::Stream, 1000, 100_000);
            let out = SessionRequest::new(server.addr, &at)
                .run()
                .await
                .expect("within the limit");
            assert_eq!((out.server.bytes, out.server.messages), (100_000, 100));
            assert_eq!(server.next_session().await.session, out.session);
        }
    })
    .await
    .expect("test within its time limit");
}

/// A streaming session's goodput in bit/s: `bytes` over its transfer time, the one definition
/// (the longer of the two ends' spans: a busy host that woke one end late for its first byte
/// shortens that end's span, never the other's too).
fn session_goodput(bytes: u64, out: &SessionOutcome) -> f64 {
    let transfer_ns = transfer_span_ns(
        Mechanism::Stream,
        duration_ns(out.client.elapsed),
        out.server.elapsed_ns,
    );
    bytes as f64 * 8.0 / (transfer_ns as f64 / 1e9)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_holds_both_ways_and_refuses_unpaced_udp() {
    const RATE: u64 = 40_000_000;
    const TOTAL: u64 = 3_000_000;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = TestServer::start_with(with_limits(Limits {
            max_rate_bps: Some(RATE),
            ..Limits::default()
        }))
        .await;
        // Unlimited, loopback moves these in milliseconds; the cap makes each take 0.6 s.
        for protocol in [Protocol::Tcp, Protocol::Quic] {
            let sp = spec(protocol, Mechanism::Stream, 16 * 1024, TOTAL);
            let out = SessionRequest::new(server.addr, &sp)
                .run()
                .await
                .expect("forward");
            assert_eq!(out.server.bytes, TOTAL);
            let goodput = session_goodput(out.server.bytes, &out);
            assert!(
                goodput <= RATE as f64 * 1.05,
                "{protocol} forward read at {goodput:.0} bit/s, cap {RATE}"
            );
            let reverse = SessionParams {
                reverse: true,
                ..sp.clone()
            };
            let out = SessionRequest::new(server.addr, &reverse)
                .run()
                .await
                .expect("reverse");
            assert_eq!(out.client.tally.bytes, TOTAL);
            let received = session_goodput(TOTAL, &out);
            assert!(
                received <= RATE as f64 * 1.05,
                "{protocol} reverse received at {received:.0} bit/s, cap {RATE}"
            );
        }
        // UDP towards the server must be paced by its sender within the cap.
        let unpaced = spec(Protocol::Udp, Mechanism::Stream, 1000, TOTAL);
        let err = SessionRequest::new(server.addr, &unpaced)
            .run()
            .await
            .expect_err("refused");
        assert!(
            format!("{err:#}").contains("pass --rate 40000000 or lower"),
            "{err:#}"
        );
        // Reversed, the server paces itself down to the cap.
        let reverse = SessionParams {
            reverse: true,
            grace_us: 500_000,
            ..unpaced
        };
        let out = SessionRequest::new(server.addr, &reverse)
            .run()
            .await
            .expect("reverse");
        let received = session_goodput(out.client.tally.bytes, &out);
        assert!(
            received <= RATE as f64 * 1.05,
            "udp reverse received at {received:.0} bit/s, cap {RATE}"
        );
    })
    .await
    .expect("test within its time limit");
}

/// A lab's `--mode stream,saw --rate R` paces its streams to R; its UDP stop-and-wait, clocked
/// by the acknowledgements and never paced, runs far above R on loopback and must finish, not be
/// aborted for "sending far above the rate it declared" (issue 37: `-l 32767 --rate 2Gbit`
/// killed at 9.98 Gbit/s). A second of it at 32767 B per message, declared at 10 Mbit/s.
#[tokio::test]
async fn udp_stop_and_wait_under_a_declared_rate_is_not_aborted() {
    let out = crate::cli::wirebench(&[
        "run",
        "--no-store",
        "--json",
        "--proto",
        "udp",
        "--mode",
        "stream,saw",
        "-l",
        "32767",
        "-t",
        "1",
        "--rate",
        "10Mbit",
    ])
    .await;
    let err = crate::cli::stderr(&out);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let run = &doc["runs"][1];
    assert_eq!(run["mechanism"], "saw", "{run:#}");
    assert_eq!(run["server"]["aborted"], false, "{run:#}");
    // Far above the declared rate: more than the 1 MiB burst plus twice the rate a check allows.
    let bytes = run["server"]["bytes"].as_u64().expect("server bytes");
    assert!(
        bytes > 4 << 20,
        "{bytes} bytes in a second of stop-and-wait"
    );
    assert_eq!(run["client"]["bytes"], run["server"]["bytes"], "{run:#}");
}

/// Issue 37: an rr session admits the data connections it declared (one flow) and no more.
/// Fifty connections presenting its id and token: the first is answered, the rest are closed
/// at once instead of being held until the session ends (4,000 held 4,027 descriptors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rr_session_admits_only_the_connections_it_declared() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use wirebench_core::wire::proto::RrParams;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let request = ControlMessage::RrRequest(RrParams {
            protocol: Protocol::Tcp,
            request: 8,
            response: 8,
            concurrency: 1,
            flows: 1,
            new_connection: false,
            stamps: false,
        });
        let (mut ctrl, granted) = control::request_session(server.addr, &request)
            .await
            .expect("granted");
        let preamble = Preamble::data(granted.session, granted.token);
        let mut connections = Vec::new();
        for _ in 0..50 {
            let mut c = TcpStream::connect(server.addr).await.unwrap();
            control::write_preamble(&mut c, &preamble).await.unwrap();
            connections.push(c);
        }
        // The first one is answered: one request, one response of 8 bytes.
        connections[0].write_all(&[7u8; 8]).await.unwrap();
        let mut answer = [0u8; 8];
        connections[0]
            .read_exact(&mut answer)
            .await
            .expect("an answer");
        // The session declared one flow, and a TCP one has no resumption probe: of the other
        // 49, at most one more is held, and every other sees its connection closed.
        let mut closed = 0;
        for c in &mut connections[1..] {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_secs(5), c.read(&mut byte)).await;
            if matches!(read, Ok(Ok(0)) | Ok(Err(_))) {
                closed += 1;
            }
        }
        assert!(closed >= 48, "{closed} of 49 extra connections closed");
        control::send(
            &mut ctrl,
            &ControlMessage::SenderDone {
                messages_sent: 1,
                bytes_sent: 8,
            },
        )
        .await
        .unwrap();
        let report = control::read_report(&mut ctrl).await.expect("a report");
        assert_eq!(report.messages, 1, "{report:?}");
    })
    .await
    .expect("test finished in time");
}

/// Issue 37: an admitted UDP session (a stream, or request-response) whose client then sends
/// no datagram is ended after the set-up timeout (10 s, as a TCP or QUIC session that opens no
/// data connection), with the reason, instead of holding its place until `--max-duration`;
/// the places are free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udp_session_that_sends_nothing_is_ended_after_the_setup_timeout() {
    use wirebench_core::wire::proto::RrParams;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = TestServer::start_with(with_limits(Limits {
            max_sessions: 2,
            ..Limits::default()
        }))
        .await;
        let rr = ControlMessage::RrRequest(RrParams {
            protocol: Protocol::Udp,
            request: 8,
            response: 8,
            concurrency: 1,
            flows: 1,
            new_connection: false,
            stamps: false,
        });
        let silent = |request: ControlMessage| async move {
            let (mut ctrl, answer) =
                raw_request(server.addr, "127.0.0.1".parse().unwrap(), &request).await;
            assert!(
                matches!(answer, ControlMessage::Accepted { .. }),
                "{answer:?}"
            );
            let report = control::read_report(&mut ctrl).await.expect("a report");
            assert!(report.aborted, "{report:?}");
            let reason = report.abort_reason.unwrap_or_default();
            assert!(reason.contains("sent no datagram within 10s"), "{reason}");
        };
        tokio::join!(silent(held_session()), silent(rr));
        // Both places are free: two more sessions are admitted.
        let (_a, first) =
            raw_request(server.addr, "127.0.0.1".parse().unwrap(), &held_session()).await;
        let (_b, second) =
            raw_request(server.addr, "127.0.0.1".parse().unwrap(), &held_session()).await;
        assert!(
            matches!(first, ControlMessage::Accepted { .. }),
            "{first:?}"
        );
        assert!(
            matches!(second, ControlMessage::Accepted { .. }),
            "{second:?}"
        );
    })
    .await
    .expect("test finished in time");
}

/// Issue 37: a UDP rr run whose server ends the session at `--max-bytes` is shown as the
/// server's abort and fails (it printed "lost 9018 (45 %)", exited 0 and stored a complete
/// sweep); what was measured is still printed and stored, in a failed sweep. The server's
/// answers are charged before they leave: it sent no byte past the limit (131 MB went out under
/// 10 MiB before its watch looked), and the client stops at the abort instead of sending on
/// until its `-t` (it went on for 7 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rr_run_the_server_ends_at_its_byte_limit_fails_with_the_reason() {
    const MAX_BYTES: u64 = 1 << 20;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(with_limits(Limits {
            max_bytes: MAX_BYTES,
            ..Limits::default()
        }))
        .await;
        let db = crate::support::TempPath::new(".sqlite3");
        let addr = server.addr.to_string();
        // A run of 120 s: it must end at the server's abort, well within the test's bound.
        let out = crate::cli::wirebench(&[
            "rr",
            "-c",
            &addr,
            "--proto",
            "udp",
            "--request",
            "1",
            "--response",
            "60000",
            "-t",
            "120",
            "--db",
            db.arg(),
        ])
        .await;
        let err = crate::cli::stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("the server ended the session"), "{err}");
        assert!(err.contains("--max-bytes"), "{err}");
        let session = server.next_session().await;
        let r = &session.report;
        // Every answer was charged before it left: requests read and answers sent together
        // stay within the limit, and the answer that would have passed it was not sent.
        let moved = r.messages * (1 + 60000);
        assert!(r.messages > 0, "{r:?}");
        assert!(
            moved <= MAX_BYTES,
            "{moved} bytes moved under --max-bytes {MAX_BYTES}: {r:?}"
        );
        assert!(
            moved + 60001 > MAX_BYTES,
            "stopped {moved} bytes short of the limit: {r:?}"
        );
        let runs = crate::cli::wirebench(&["runs", "--db", db.arg()]).await;
        let listed = String::from_utf8_lossy(&runs.stdout);
        assert!(listed.contains("failed"), "{listed}");
    })
    .await
    .expect("the client stopped at the server's abort, not at its -t 120");
}

/// Issue 37: UDP rr answers leave from the shared socket's thread, which cannot pace them, so
/// each is charged to `--max-rate` first: a client asking for 60 KB answers as fast as it can
/// gets no more than the gate's allowance (twice the rate on average, plus one burst of
/// 1 MiB) before the session is ended with the reason (it got ≈ 50 Gbit/s for 100 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_rr_answers_are_held_to_the_rate_limit_as_they_leave() {
    const RATE: u64 = 10_000_000;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(with_limits(Limits {
            max_rate_bps: Some(RATE),
            ..Limits::default()
        }))
        .await;
        let addr = server.addr.to_string();
        let out = crate::cli::wirebench(&[
            "rr",
            "-c",
            &addr,
            "--proto",
            "udp",
            "--request",
            "1",
            "--response",
            "60000",
            "-t",
            "120",
        ])
        .await;
        let err = crate::cli::stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("--max-rate"), "{err}");
        let session = server.next_session().await;
        let r = &session.report;
        let sent = r.messages * 60000;
        let secs = r.elapsed_ns as f64 / 1e9;
        // The allowance over the whole session (its span is at least the answers' span).
        let allowed = 2.0 * RATE as f64 / 8.0 * secs + (1u64 << 20) as f64;
        assert!(r.messages > 0, "{r:?}");
        assert!(
            sent as f64 <= allowed,
            "{sent} bytes answered in {secs:.3} s under --max-rate {RATE}: {r:?}"
        );
    })
    .await
    .expect("the client stopped at the server's abort");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_control_messages_and_silent_clients_are_cut_off() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(with_limits(Limits {
            max_control_size: 1024,
            hello_timeout: Duration::from_millis(300),
            ..Limits::default()
        }))
        .await;
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        // A request padded past 1024 bytes (a long congestion-control name).
        let mut big = spec(Protocol::Tcp, Mechanism::Stream, 1000, 10_000);
        big.options = DataPathOptions {
            congestion: Some("x".repeat(1100)),
            ..DataPathOptions::default()
        };
        let (_, answer) =
            raw_request(server.addr, local, &ControlMessage::SessionRequest(big)).await;
        assert!(
            refusal(&answer).contains("at most 1024 bytes (--max-control-size)"),
            "{answer:?}"
        );

        // Connects and says nothing.
        let mut silent = TcpStream::connect(server.addr).await.unwrap();
        let answer = control::recv_setup(&mut silent)
            .await
            .expect("an error frame");
        assert!(
            refusal(&answer).contains("no preamble within 300ms (the server's --hello-timeout)"),
            "{answer:?}"
        );
        // Sends its preamble, then nothing.
        let mut slow = TcpStream::connect(server.addr).await.unwrap();
        control::write_preamble(&mut slow, &Preamble::control())
            .await
            .unwrap();
        let answer = control::recv_setup(&mut slow)
            .await
            .expect("an error frame");
        assert!(
            refusal(&answer)
                .contains("no session request within 300ms (the server's --hello-timeout)"),
            "{answer:?}"
        );
        // The server still serves a normal session.
        let out = SessionRequest::new(
            server.addr,
            &spec(Protocol::Tcp, Mechanism::Stream, 1000, 10_000),
        )
        .run()
        .await
        .expect("session runs");
        assert_eq!(out.server.bytes, 10_000);
        assert_eq!(server.next_session().await.session, out.session);
    })
    .await
    .expect("test within its time limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_sessions_finish_then_aborts_the_rest() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let limits = Limits {
            shutdown_grace: Duration::from_millis(500),
            ..Limits::default()
        };
        let server = Server::bind(
            "127.0.0.1:0".parse().unwrap(),
            ServerIdentity::self_signed().unwrap(),
            with_limits(limits),
        )
        .await
        .unwrap();
        let addr = server.local_addr();
        let (tx, mut events) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(StopRequest::Serve);
        let serving = tokio::spawn(server.run_until(tx, stop_rx));
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let (mut finishing, answer) = raw_request(addr, local, &held_session()).await;
        let ControlMessage::Accepted {
            session: finishing_id,
            ..
        } = answer
        else {
            panic!("{answer:?}")
        };
        let (mut stuck, answer) = raw_request(addr, local, &held_session()).await;
        let ControlMessage::Accepted {
            session: stuck_id, ..
        } = answer
        else {
            panic!("{answer:?}")
        };

        stop.send_replace(StopRequest::Drain);
        // Wait for the server to start draining (its notice), then knock.
        loop {
            match events.recv().await.expect("server events") {
                ServerEvent::Notice(n) if n.message.starts_with("shutting down") => break,
                _ => {}
            }
        }
        let (_, answer) = raw_request(addr, local, &held_session()).await;
        assert_eq!(refusal(&answer), "the server is shutting down");

        // One client finishes within the grace period (it sent nothing: 0 of 0 lost).
        control::send(
            &mut finishing,
            &ControlMessage::SenderDone {
                messages_sent: 0,
                bytes_sent: 0,
            },
        )
        .await
        .unwrap();
        let report = control::read_report(&mut finishing).await.expect("report");
        assert!(!report.aborted, "{:?}", report.abort_reason);
        // The other is aborted when the grace period ends, and still gets its report.
        let report = control::read_report(&mut stuck).await.expect("report");
        assert!(report.aborted);
        assert_eq!(
            report.abort_reason.as_deref(),
            Some("the server shut down before the session ended")
        );
        serving.await.unwrap().expect("the server stops cleanly");
        let mut summaries = Vec::new();
        while let Ok(ev) = events.try_recv() {
            if let ServerEvent::Session(s) = ev {
                summaries.push((s.session, s.report.aborted));
            }
        }
        summaries.sort();
        let mut expected = vec![(finishing_id, false), (stuck_id, true)];
        expected.sort();
        assert_eq!(summaries, expected, "one summary per session");
    })
    .await
    .expect("test within its time limit");
}

#[tokio::test]
async fn server_command_exits_0_on_sigterm_after_reporting_every_session() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (mut server, addr, mut lines) =
            crate::cli::start_server(&["--json", "--shutdown-grace", "200ms"]).await;
        let addr: SocketAddr = addr.parse().unwrap();
        let (mut ctrl, answer) =
            raw_request(addr, "127.0.0.1".parse().unwrap(), &held_session()).await;
        assert!(
            matches!(answer, ControlMessage::Accepted { .. }),
            "{answer:?}"
        );
        let pid = i32::try_from(server.id().expect("running")).unwrap();
        // SAFETY: kill(2) on our own child's PID has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let report = control::read_report(&mut ctrl).await.expect("report");
        assert!(report.aborted);
        let status = server.wait().await.unwrap();
        assert_eq!(status.code(), Some(0));
        let line = lines.next_line().await.unwrap().expect("one session line");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["aborted"], true);
        assert_eq!(
            v["abort_reason"],
            "the server shut down before the session ended"
        );
        assert!(lines.next_line().await.unwrap().is_none(), "nothing more");
    })
    .await
    .expect("test within its time limit");
}

#[tokio::test]
async fn bad_limit_flags_get_one_line_and_exit_status_2() {
    let cases: [(&[&str], &str); 9] = [
        (&["--max-sessions", "0"], "allowed 1 to 100000"),
        (
            &["--max-sessions", "4", "--max-sessions-per-client", "5"],
            "allowed 1 to --max-sessions (4)",
        ),
        (
            &["--max-duration", "10ms"],
            "--max-duration 10ms is out of range",
        ),
        (&["--max-bytes", "0"], "at least 1 byte"),
        (&["--max-rate", "fast"], "--max-rate"),
        (&["--server-bitrate-limit", "10M/5"], "give --max-rate 10M"),
        (
            &["--server-max-duration", "0.01"],
            "--max-duration 0.01s is out of range",
        ),
        (
            &["--max-control-size", "100"],
            "allowed 1024 to 65536 bytes",
        ),
        (
            &["--hello-timeout", "2m"],
            "--hello-timeout 2m is out of range",
        ),
    ];
    for (flags, expect) in cases {
        let mut args = vec!["server", "--bind", "127.0.0.1", "--port", "0"];
        args.extend_from_slice(flags);
        let out = crate::cli::wirebench(&args).await;
        let err = crate::cli::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{flags:?}: {err}");
        assert!(err.contains(expect), "{flags:?}: {err}");
    }
}
