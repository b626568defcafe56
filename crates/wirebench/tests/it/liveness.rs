//! Every stop is noticed and recorded: a client whose server was killed (SIGKILL, by pid) stops
//! within 3 s on every data path and stores the run as aborted with why; SIGTERM and SIGHUP
//! stop `run` as SIGINT does, with the run in flight stored; the server notices a vanished
//! client on every protocol, mechanism and direction, and reports it ABORTED with the real
//! counts and times. Real binaries, real sockets on loopback.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use wirebench::store::Store;
use wirebench_core::record::Status;

use crate::cli::start_server;
use crate::support::{TempPath, TEST_TIMEOUT};
use wirebench::store::run::Run;

/// How long a client may take to notice its server is gone (the bound).
const NOTICE_LIMIT: Duration = Duration::from_secs(3);

/// Starts `wirebench run` with `args`, storing in `db`, its stdout piped (interval lines).
fn start_client(args: &[&str], db: &TempPath, data_home: &TempPath) -> Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .arg("run")
        .args(["--db", db.arg(), "-i", "50ms"])
        .args(args)
        .env("XDG_DATA_HOME", &data_home.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("wirebench run starts")
}

/// Reads the client's interval lines until one shows data moving ("sent N B" with N > 0).
async fn wait_for_data(lines: &mut Lines<BufReader<ChildStdout>>) {
    tokio::time::timeout(TEST_TIMEOUT, async {
        loop {
            let line = lines
                .next_line()
                .await
                .expect("stdout readable")
                .expect("interval lines before the client ends");
            let moved = line
                .split_once("] sent ")
                .or_else(|| line.split_once("] received "))
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok());
            if moved.is_some_and(|n| n > 0) {
                return;
            }
        }
    })
    .await
    .expect("data flows in time");
}

/// Sends `signal` to our own child `child`, by its pid.
fn signal(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id().expect("still running")).unwrap();
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill {pid}");
}

/// Kills the server mid-run and checks the client: exits non-zero within [`NOTICE_LIMIT`],
/// says the server is gone, and stores the run as aborted with the reason and figures so far.
async fn client_notices_a_killed_server(args: &[&str]) {
    let (mut server, addr, _server_lines) = start_server(&[]).await;
    let db = TempPath::new(".sqlite3");
    let data_home = TempPath::new("-data");
    let mut client = start_client(&[&["--server", &addr][..], args].concat(), &db, &data_home);
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    wait_for_data(&mut lines).await;
    signal(&server, libc::SIGKILL);
    let killed_at = Instant::now();
    let status = tokio::time::timeout(TEST_TIMEOUT, client.wait())
        .await
        .expect("the client ends")
        .expect("wait");
    let took = killed_at.elapsed();
    let _ = server.wait().await;
    let mut err = String::new();
    if let Some(mut e) = client.stderr.take() {
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut e, &mut err).await;
    }
    assert!(took <= NOTICE_LIMIT, "noticed after {took:?}: {err}");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("the server is gone"), "{err}");
    assert!(err.contains("stored as aborted"), "{err}");
    let store = Store::open(&db.0).unwrap();
    let c = store.campaign::<Run>(1).unwrap().expect("the campaign");
    assert_eq!(
        (c.status, c.stored_runs, c.aborted_runs),
        (Status::Failed, 0, 1)
    );
    let details = store.aborted_details(1).unwrap();
    assert_eq!(details.len(), 1, "{details:?}");
    let d = &details[0];
    assert_eq!(d.position, 1);
    let reason = d.reason.clone().unwrap_or_default();
    assert!(reason.contains("the server is gone"), "{reason}");
    let so_far = d.so_far.expect("the client's figures so far");
    assert!(so_far.bytes > 0 && so_far.bytes < 10 << 30, "{so_far:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_client_notices_a_killed_server() {
    client_notices_a_killed_server(&[
        "--proto", "tcp", "--mode", "stream", "-l", "64KiB", "-n", "10GiB",
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udp_streaming_client_notices_a_killed_server() {
    // Paced, so the loopback receiver keeps up and the test does not hog the CPU.
    client_notices_a_killed_server(&[
        "--proto", "udp", "--mode", "stream", "-l", "1KiB", "-n", "10GiB", "--rate", "200Mbit",
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udp_stop_and_wait_client_notices_a_killed_server() {
    client_notices_a_killed_server(&[
        "--proto", "udp", "--mode", "saw", "-l", "1KiB", "-n", "10GiB",
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_polling_udp_stop_and_wait_client_notices_a_killed_server() {
    client_notices_a_killed_server(&[
        "--proto",
        "udp",
        "--mode",
        "saw",
        "-l",
        "1KiB",
        "-n",
        "10GiB",
        "--busy-poll",
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_client_notices_a_killed_server() {
    client_notices_a_killed_server(&[
        "--proto", "quic", "--mode", "stream", "-l", "16KiB", "-n", "10GiB",
    ])
    .await;
}

/// QUIC stop-and-wait runs on a thread of its own, driven inline on quinn-proto: the watch of
/// the control connection stops it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_stop_and_wait_client_notices_a_killed_server() {
    client_notices_a_killed_server(&[
        "--proto", "quic", "--mode", "saw", "-l", "1KiB", "-n", "10GiB",
    ])
    .await;
}

/// Through the in-process impairment relay (`--impair`) no ICMP reaches the client: the
/// control connection, relayed, still says the server is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_behind_the_impairment_relay_notices_a_killed_server() {
    client_notices_a_killed_server(&[
        "--proto",
        "udp",
        "--mode",
        "stream",
        "-l",
        "1KiB",
        "-n",
        "10GiB",
        "--rate",
        "200Mbit",
        "--impair",
        "delay=1ms",
    ])
    .await;
}

/// Reversed (the server sends, the client receives): the client notices the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiving_client_notices_a_killed_server() {
    for args in [
        &["--proto", "tcp", "-R", "-l", "64KiB", "-n", "10GiB"][..],
        &["--proto", "quic", "-R", "-l", "16KiB", "-n", "10GiB"][..],
        &[
            "--proto", "udp", "-R", "-l", "1KiB", "-n", "10GiB", "--rate", "200Mbit",
        ][..],
    ] {
        client_notices_a_killed_server(args).await;
    }
}

/// SIGTERM (what `timeout` sends) and SIGHUP stop `run` as SIGINT does: the campaign is
/// stored as aborted with the run in flight and its figures so far, and the exit status is
/// 128 + the signal number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_sighup_store_the_run_in_flight_and_abort_the_campaign() {
    for (sig, name, code) in [
        (libc::SIGTERM, "SIGTERM", 143),
        (libc::SIGHUP, "SIGHUP", 129),
    ] {
        let db = TempPath::new(".sqlite3");
        let data_home = TempPath::new("-data");
        let mut client = start_client(
            &["--proto", "tcp", "-l", "64KiB", "-n", "10GiB"],
            &db,
            &data_home,
        );
        let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
        wait_for_data(&mut lines).await;
        signal(&client, sig);
        let out = tokio::time::timeout(TEST_TIMEOUT, client.wait_with_output())
            .await
            .expect("the client ends after the signal")
            .expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{name}: {err}");
        assert!(err.contains(&format!("interrupted ({name})")), "{err}");
        let store = Store::open(&db.0).unwrap();
        let c = store.campaign::<Run>(1).unwrap().expect("the campaign");
        assert_eq!(
            (c.status, c.stored_runs, c.aborted_runs),
            (Status::Aborted, 0, 1),
            "{name}"
        );
        assert_eq!(c.error.as_deref(), Some(&*format!("interrupted ({name})")));
        let d = &store.aborted_details(1).unwrap()[0];
        assert_eq!(d.position, 1);
        assert_eq!(d.reason.as_deref(), Some(&*format!("interrupted ({name})")));
        let so_far = d.so_far.expect("the figures so far");
        assert!(so_far.bytes > 0 && so_far.bytes < 10 << 30, "{so_far:?}");
        assert!(so_far.elapsed > Duration::ZERO);
    }
}

/// A UDP port nobody listens on, on loopback: bound, then closed.
async fn closed_udp_port() -> std::net::SocketAddr {
    let s = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    s.local_addr().unwrap()
}

/// ICMP port unreachable (ECONNREFUSED on the client's connected socket) ends a UDP sender at
/// once, streaming or stop-and-wait, instead of sending on blind or retrying 20 timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_udp_port_stops_the_sender_at_once() {
    use std::sync::atomic::AtomicU64;
    use wirebench::engine::udp::saw::{self as udp_saw, BlockingPort};
    use wirebench::engine::udp::UdpClient;
    use wirebench_core::machine::rto::{
        RtoEstimator, DEFAULT_INITIAL_RTO, DEFAULT_MAX_RTO, DEFAULT_MIN_RTO,
    };
    use wirebench_core::machine::saw::RtoPolicy;

    let to = closed_udp_port().await;
    let started = Instant::now();
    let client = UdpClient::connect(to, None).await.unwrap();
    let progress = AtomicU64::new(0);
    let plan = wirebench_core::vocab::plan::Messages {
        total_bytes: 10 << 30,
        msg_size: 1024,
    };
    let e = tokio::time::timeout(
        NOTICE_LIMIT,
        client.send_stream(1, (plan, None), None, &progress),
    )
    .await
    .expect("stops in time")
    .expect_err("the port is closed");
    assert!(format!("{e:#}").contains("UDP port is closed"), "{e:#}");

    let client = UdpClient::connect(to, None).await.unwrap();
    let mut rtt = wirebench::engine::stream::rtt_histogram().unwrap();
    let policy = RtoPolicy::Adaptive(RtoEstimator::new(
        DEFAULT_INITIAL_RTO,
        DEFAULT_MIN_RTO,
        DEFAULT_MAX_RTO,
    ));
    let mut port = BlockingPort::new(client.into_std().unwrap()).unwrap();
    // On a thread of its own, as the client runs it.
    let sender = tokio::task::spawn_blocking(move || {
        wirebench::engine::stream::blocking::block_on(udp_saw::send_stop_and_wait(
            &mut port,
            1,
            (plan, None),
            policy,
            &mut rtt,
            &progress,
        ))
    });
    let e = tokio::time::timeout(NOTICE_LIMIT, sender)
        .await
        .expect("stops in time")
        .expect("the sender thread ends")
        .expect_err("the port is closed");
    assert!(format!("{e:#}").contains("UDP port is closed"), "{e:#}");
    assert!(started.elapsed() < NOTICE_LIMIT);
}

/// The server notices a vanished client (SIGKILL, by pid) on each protocol: the session ends,
/// reported as aborted with a reason, and the server serves on. (TCP: robustness.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_notices_a_killed_client_on_udp_and_quic() {
    let mut server = crate::support::TestServer::start().await;
    let addr = server.addr.to_string();
    let cases: [&[&str]; 3] = [
        &[
            "--proto", "udp", "--mode", "stream", "-l", "1KiB", "--rate", "200Mbit",
        ],
        &["--proto", "udp", "--mode", "saw", "-l", "1KiB"],
        &["--proto", "quic", "--mode", "stream", "-l", "16KiB"],
    ];
    for args in cases {
        let db = TempPath::new(".sqlite3");
        let data_home = TempPath::new("-data");
        let mut client = start_client(
            &[&["--server", &addr, "-n", "10GiB"][..], args].concat(),
            &db,
            &data_home,
        );
        let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
        wait_for_data(&mut lines).await;
        signal(&client, libc::SIGKILL);
        let _ = client.wait().await;
        let killed_at = Instant::now();
        let summary = server.next_session().await;
        assert!(summary.report.aborted, "{args:?}: marked aborted");
        assert!(summary.report.abort_reason.is_some(), "{args:?}");
        assert!(
            killed_at.elapsed() <= Duration::from_secs(10),
            "{args:?}: noticed after {:?}",
            killed_at.elapsed()
        );
    }
    assert!(server.is_running());
}

/// Reads the client's interval lines until one ends at `at` seconds or later.
async fn wait_for_time(lines: &mut Lines<BufReader<ChildStdout>>, at: f64) {
    tokio::time::timeout(TEST_TIMEOUT, async {
        loop {
            let line = lines
                .next_line()
                .await
                .expect("stdout readable")
                .expect("interval lines before the client ends");
            // "  [   1.15-   1.20 s] sent 123 B (...)"
            let end = line
                .split_once('-')
                .and_then(|(_, rest)| rest.split_once(" s]"))
                .and_then(|(end, _)| end.trim().parse::<f64>().ok());
            if end.is_some_and(|end| end >= at) {
                return;
            }
        }
    })
    .await
    .expect("the run reaches its time");
}

/// Issue 25 item 3: a client SIGKILLed mid-session (by pid) is ABORTED in the server's line
/// with the real counts and times, for every protocol, mechanism and direction of a timed run
/// (`-t 5`, killed at 1.2 s), and four times over for TCP stop-and-wait (2 of 4 were reported
/// as normal finishes) and a reversed TCP stream (reported as 0 messages in 0 s, 0 send calls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_client_is_aborted_with_real_counts_on_every_path() {
    let mut server = crate::support::TestServer::start().await;
    let addr = server.addr.to_string();
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for proto in ["tcp", "udp", "quic"] {
        for mode in ["stream", "saw"] {
            for reverse in [false, true] {
                let mut args = vec!["--proto", proto, "--mode", mode, "-l", "1KiB"];
                if mode == "stream" {
                    // Paced: twelve sessions in a row stay light on a busy machine.
                    args.extend(["--rate", "100Mbit"]);
                }
                if reverse {
                    args.push("-R");
                }
                cases.push(args);
            }
        }
    }
    for _ in 0..3 {
        cases.push(vec!["--proto", "tcp", "--mode", "saw", "-l", "1KiB"]);
        cases.push(vec![
            "--proto", "tcp", "--mode", "stream", "-l", "64KiB", "--rate", "400Mbit", "-R",
        ]);
    }
    for args in &cases {
        let db = TempPath::new(".sqlite3");
        let data_home = TempPath::new("-data");
        let mut client = start_client(
            &[&["--server", &addr, "-t", "5"][..], args].concat(),
            &db,
            &data_home,
        );
        let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
        wait_for_data(&mut lines).await;
        wait_for_time(&mut lines, 1.2).await;
        signal(&client, libc::SIGKILL);
        let _ = client.wait().await;
        let killed_at = Instant::now();
        let s = server.next_session().await;
        assert!(
            killed_at.elapsed() <= Duration::from_secs(10),
            "{args:?}: noticed after {:?}",
            killed_at.elapsed()
        );
        let r = &s.report;
        let what = format!("{args:?}: {r:?}");
        assert!(r.aborted && r.abort_reason.is_some(), "{what}");
        assert!(r.bytes > 0 && r.messages > 0 && r.read_calls > 0, "{what}");
        // Whole messages of 1 KiB (the stream's last may be cut), and a real time: more than
        // nothing, at most the time the client ran. Bounded from above only: the server's span
        // runs from its first data to its last, and a busy host can start it well after the
        // client's clock (0.924 s was read for a client killed at 1.2 s).
        assert!(
            r.messages <= r.bytes.div_ceil(u64::from(s.params.msg_size)),
            "{what}"
        );
        assert!((1..=5_000_000_000).contains(&r.elapsed_ns), "{what}");
    }
    let c = server.metrics.snapshot();
    assert_eq!(c.sessions_started, cases.len() as u64);
    assert_eq!(
        (c.sessions_finished, c.sessions_aborted),
        (0, cases.len() as u64)
    );
}
