//! The rows against the server: rr responses, perf downloads, the `interval_us` attack, a UDP
//! sender far above its declared rate, a zero rate, and peer text in what the server prints.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UdpSocket};
use wirebench::flows::perf::client::{PerfConfig, Trust};
use wirebench::flows::rr_client::{run_rr, RrSpec};
use wirebench::flows::server::{Limits, ServerEvent};
use wirebench::transport::control;
use wirebench_core::security::amplification::encode_hello;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::datagram::{Header, HEADER_LEN};
use wirebench_core::wire::proto::{ControlMessage, DataPathOptions, Preamble, RrParams};

use super::{issue_limits, options, raw_request, refusal, request};
use crate::support::{TestServer, TEST_TIMEOUT};

const MIB: u64 = 1 << 20;

fn rr_spec(response: u32) -> RrSpec {
    RrSpec {
        params: RrParams {
            protocol: Protocol::Tcp,
            request: 1,
            response,
            flows: 1,
            concurrency: 4,
            new_connection: false,
            stamps: false,
        },
        count: Some(20),
        duration: None,
        interval: None,
        timeout: Duration::from_secs(10),
        retries: 0,
        resumption_probe: false,
        per_probe: false,
    }
}

/// Row 1: `rr --response 16MiB --count 20 --concurrency 4` sent 320 MiB in 0.14 s, counted
/// as 20 bytes. Responses now count against --max-bytes and are paced to --max-rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rr_responses_count_against_max_bytes_and_are_paced() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        // The issue's server: paced to 10 Mbit/s until --max-duration stops it.
        let mut server = TestServer::start_with(options(issue_limits())).await;
        let _ = run_rr(server.addr, &rr_spec(16 << 20)).await;
        let s = server.next_session().await;
        let why = s.report.abort_reason.clone().unwrap_or_default();
        assert!(
            s.report.aborted && why.contains("(--max-duration)"),
            "{why}"
        );
        let sent = server.metrics.snapshot().bytes[0].sent;
        let secs = s.report.elapsed_ns as f64 / 1e9;
        // 10 Mbit/s over the session, plus one 64 KiB batch per connection.
        let most = 10e6 / 8.0 * secs + 4.0 * 65536.0;
        assert!(
            sent > 0 && (sent as f64) <= most,
            "sent {sent} B in {secs:.2} s"
        );
        // Unpaced, the bytes limit stops it: what left is within --max-bytes.
        let mut server = TestServer::start_with(options(Limits {
            max_bytes: MIB,
            ..Limits::default()
        }))
        .await;
        let _ = run_rr(server.addr, &rr_spec(16 << 20)).await;
        let s = server.next_session().await;
        let why = s.report.abort_reason.clone().unwrap_or_default();
        assert!(s.report.aborted && why.contains("(--max-bytes)"), "{why}");
        let sent = server.metrics.snapshot().bytes[0].sent;
        assert!(sent <= MIB + 4 * 65536, "sent {sent} B past a 1 MiB limit");
    })
    .await
    .expect("test within its time limit");
}

fn perf(server: std::net::SocketAddr, download: u64) -> PerfConfig {
    PerfConfig {
        name: server.to_string(),
        server,
        upload: None,
        download: Some(download),
        trust: Trust::Insecure,
        json: false,
    }
}

/// Row 2: perf downloads passed no limit and printed nothing. Now each connection is a
/// session: limited, paced, counted per client, with its line and its /metrics counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perf_connections_pass_the_gate() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(options(Limits {
            max_sessions_per_client: 1,
            max_duration: Duration::from_secs(30),
            ..issue_limits()
        }))
        .await;
        let addr = server.addr;
        let run = wirebench::flows::perf::client::run;
        run(&perf(addr, 1 << 30))
            .await
            .expect_err("1 GiB is refused");
        let s = server.next_session().await;
        let why = s.report.abort_reason.clone().unwrap_or_default();
        assert!(s.report.aborted && why.contains("(--max-bytes)"), "{why}");
        // Within the limits: paced to 10 Mbit/s and reported.
        let started = Instant::now();
        run(&perf(addr, MIB)).await.expect("1 MiB is served");
        assert!(started.elapsed() >= Duration::from_millis(700), "paced");
        let s = server.next_session().await;
        assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
        assert_eq!((s.report.bytes, s.params.reverse), (MIB, true));
        // A second connection while one runs is over the per-client limit.
        let first = tokio::spawn(async move { run(&perf(addr, 2 * MIB)).await });
        server.metrics.sessions_running_at_least(1).await;
        run(&perf(addr, MIB))
            .await
            .expect_err("over the per-client limit");
        first.await.unwrap().expect("the first one is served");
        let c = server.metrics.snapshot();
        assert_eq!((c.sessions_started, c.sessions_finished), (3, 2));
        assert_eq!(c.sessions_aborted, 1);
        assert!(c
            .sessions_refused
            .contains(&("max-sessions-per-client".to_string(), 1)));
        assert!(c.bytes[2].sent >= 3 * MIB, "{:?}", c.bytes);
    })
    .await
    .expect("test within its time limit");
}

/// Row 3: `"interval_us": 1` grew the report by 55 MB/s before authentication. Now the field
/// is refused by name, and the shortest period allowed keeps a bounded series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_us_is_refused_and_the_series_bounded() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let limits = Limits {
            max_duration: Duration::from_secs(2),
            ..Limits::default()
        };
        let mut server = TestServer::start_with(options(limits)).await;
        let mut p = request(Protocol::Tcp, Mechanism::Stream, 1000, MIB);
        p.interval_us = Some(1);
        let (_, answer) =
            raw_request(server.addr, &ControlMessage::SessionRequest(p.clone())).await;
        assert!(
            refusal(&answer).starts_with("interval_us 1 is out of range: allowed 10000 (10 ms)"),
            "{answer:?}"
        );
        // 10 ms, trickled: stopped at --max-duration with at most 2 s / 10 ms samples.
        p.interval_us = Some(10_000);
        let (mut ctrl, answer) = raw_request(server.addr, &ControlMessage::SessionRequest(p)).await;
        let ControlMessage::Accepted { session, token, .. } = answer else {
            panic!("accepted, got {answer:?}");
        };
        let mut data = TcpStream::connect(server.addr).await.unwrap();
        control::write_preamble(&mut data, &Preamble::data(session, token))
            .await
            .unwrap();
        let trickle = async {
            let mut ticks = tokio::time::interval(Duration::from_millis(50));
            loop {
                ticks.tick().await;
                if data.write_all(&[0u8; 100]).await.is_err() {
                    return std::future::pending().await;
                }
            }
        };
        let report = tokio::select! {
            r = control::read_report(&mut ctrl) => r.expect("a report"),
            () = trickle => unreachable!(),
        };
        let why = report.abort_reason.clone().unwrap_or_default();
        assert!(report.aborted && why.contains("(--max-duration)"), "{why}");
        assert!(
            (1..=201).contains(&report.intervals.len()),
            "{} samples",
            report.intervals.len()
        );
        assert_eq!(server.next_session().await.report, report);
    })
    .await
    .expect("test within its time limit");
}

/// Row 4: a UDP session declared at 1 Mbit/s, then sent as fast as possible, was read at
/// 2.99 Gbit/s. Now it is aborted with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udp_sender_far_above_its_declared_rate_is_aborted() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let mut p = request(Protocol::Udp, Mechanism::Stream, 1000, 100_000_000);
        p.rate_bps = Some(1_000_000);
        let (mut ctrl, answer) = raw_request(server.addr, &ControlMessage::SessionRequest(p)).await;
        let ControlMessage::Accepted { session, token, .. } = answer else {
            panic!("accepted, got {answer:?}");
        };
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        udp.connect(server.addr).await.unwrap();
        // Present the token until the server echoes it (the no-amplification rule).
        let mut echo = [0u8; 64];
        for attempt in 0.. {
            udp.send(&encode_hello(session, token, attempt))
                .await
                .unwrap();
            if tokio::time::timeout(Duration::from_millis(200), udp.recv(&mut echo))
                .await
                .is_ok()
            {
                break;
            }
            assert!(attempt < 20, "no echo");
        }
        let blast = async {
            let mut datagram = vec![0u8; HEADER_LEN + 1000];
            for seq in 0.. {
                Header::data(session, seq).write_to(&mut datagram).unwrap();
                let _ = udp.send(&datagram).await;
                if seq % 64 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        };
        let report = tokio::select! {
            r = control::read_report(&mut ctrl) => r.expect("a report"),
            () = blast => unreachable!(),
        };
        let why = report.abort_reason.clone().unwrap_or_default();
        assert!(report.aborted, "{report:?}");
        assert!(
            why.contains("far above the 1000000 bit/s it may send (the rate it declared)"),
            "{why}"
        );
        assert!(server.next_session().await.report.aborted);
    })
    .await
    .expect("test within its time limit");
}

/// Row 5: a reverse UDP request with `rate_bps` 0 panicked the session task, which was never
/// reported. Now it is refused by name, and every session started is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_rate_is_refused_and_every_started_session_reported() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let mut p = request(Protocol::Udp, Mechanism::Stream, 1000, 100_000);
        p.reverse = true;
        p.rate_bps = Some(0);
        let (_, answer) = raw_request(server.addr, &ControlMessage::SessionRequest(p)).await;
        assert!(
            refusal(&answer).starts_with("rate_bps 0 is out of range"),
            "{answer:?}"
        );
        let ok = request(Protocol::Tcp, Mechanism::Stream, 1000, 100_000);
        wirebench::flows::client::SessionRequest::new(server.addr, &ok)
            .run()
            .await
            .expect("the server serves on");
        server.next_session().await;
        let c = server.metrics.snapshot();
        assert_eq!(c.sessions_started, c.sessions_finished + c.sessions_aborted);
        assert_eq!((c.sessions_started, c.sessions_finished), (1, 1));
        assert_eq!(c.sessions_refused, [("invalid-request".to_string(), 1)]);
    })
    .await
    .expect("test within its time limit");
}

/// Peer text in what the server prints: a control byte a client sends (here in a congestion
/// control name) reaches its refusal and the server's log escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_text_reaches_the_log_escaped() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let mut p = request(Protocol::Tcp, Mechanism::Stream, 1000, 1000);
        p.options = DataPathOptions {
            congestion: Some("x\u{1b}[2J\nsession 1 FORGED".into()),
            ..DataPathOptions::default()
        };
        let (_, answer) = raw_request(server.addr, &ControlMessage::SessionRequest(p)).await;
        let why = refusal(&answer);
        assert!(!why.chars().any(char::is_control), "{why:?}");
        assert!(why.contains("\\u{1b}[2J\\nsession 1 FORGED"), "{why}");
        let notice = loop {
            match server.events.recv().await.expect("running") {
                ServerEvent::Notice(n) if n.message.contains("refused") => break n.message,
                _ => {}
            }
        };
        assert!(!notice.chars().any(char::is_control), "{notice:?}");
    })
    .await
    .expect("test within its time limit");
}

/// Issue 37: a listener out of file descriptors fails every accept until one is freed; the
/// failure is said the 1st, 2nd, 4th, 8th… time, not every 10 ms (1,665 lines in 16 s). A
/// `wirebench server --iperf3` under `ulimit -n 128` is held out of descriptors by
/// connections that send no cookie (each is held for the 10 s set-up timeout).
#[tokio::test]
async fn a_listener_out_of_descriptors_says_so_rarely() {
    let mut server = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 128 && exec "$0" server --bind 127.0.0.1 --port 0 --udp-lanes 1 --iperf3 --iperf3-port 0"#)
        .arg(env!("CARGO_BIN_EXE_wirebench"))
        .env("TOKIO_WORKER_THREADS", "1")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start wirebench server under ulimit -n 128");
    let (_, mut lines) = crate::support::listening_address(&mut server).await;
    let iperf3_line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the iperf3 listener in time")
        .expect("stderr readable")
        .expect("an iperf3 listener line");
    let iperf3 = iperf3_line
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {iperf3_line}"))
        .to_string();
    // More connections than the server has descriptors: those past them wait in the backlog,
    // and every accept of theirs fails.
    let mut held = Vec::new();
    for _ in 0..250 {
        if let Ok(c) = TcpStream::connect(&iperf3).await {
            held.push(c);
        }
    }
    // Two seconds of failing accepts (about 200 at one per 10 ms) as the server's log has them.
    let mut said = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    while let Ok(Ok(Some(line))) = tokio::time::timeout_at(until, lines.next_line()).await {
        said += usize::from(line.contains("accept failed"));
    }
    assert!(held.len() > 128, "only {} connections", held.len());
    assert!(
        (1..=12).contains(&said),
        "{said} lines for the failing accepts"
    );
}
