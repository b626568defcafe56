//! Interoperability with the real world: wirebench's iperf3 client against Debian's `iperf3 -s`,
//! the real `iperf3 -c` against wirebench's iperf3 listener, and our QUIC perf client against
//! our QUIC perf server. The iperf3 tests skip with a message where `iperf3` is not installed
//! (CI installs it).

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use wirebench::flows::iperf3::client::{self, ClientConfig, ClientOutcome, Limit};
use wirebench::flows::iperf3::server::Iperf3Server;
use wirebench::flows::perf::client::{PerfConfig, Trust};
use wirebench::flows::server::{Server, ServerEvent, ServerOptions, SessionSummary};
use wirebench::transport::tls::ServerIdentity;

use crate::cli::{stderr, wirebench};
use crate::support::{TempPath, TestServer, TEST_TIMEOUT};

/// Whether Debian's iperf3 is on PATH; says why a test skips when it is not.
pub(crate) fn have_iperf3(test: &str) -> bool {
    let ok = std::process::Command::new("iperf3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIP {test}: `iperf3` is not installed (apt-get install iperf3)");
    }
    ok
}

/// A real `iperf3 -s` on a free loopback port, killed (by its PID) when dropped.
pub(crate) struct RealServer {
    pub(crate) addr: SocketAddr,
    child: Child,
}

impl RealServer {
    pub(crate) async fn start() -> RealServer {
        for _ in 0..10 {
            // Find a free port, then let iperf3 take it; retry if someone else did first.
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut child = Command::new("iperf3")
                .args([
                    "-s",
                    "-B",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "--forceflush",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("iperf3 starts");
            let stdout = child.stdout.take().expect("piped stdout");
            let mut lines = BufReader::new(stdout).lines();
            let ready = tokio::time::timeout(Duration::from_secs(10), async {
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.contains("Server listening on") {
                        return true;
                    }
                }
                false
            })
            .await
            .unwrap_or(false);
            // Keep draining its output so it never blocks on a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            if ready {
                return RealServer {
                    addr: SocketAddr::from(([127, 0, 0, 1], port)),
                    child,
                };
            }
            let _ = child.start_kill();
        }
        panic!("iperf3 -s did not start on any of 10 ports");
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        // Kills exactly the child this test started.
        let _ = self.child.start_kill();
    }
}

fn cfg(
    server: SocketAddr,
    udp: bool,
    reverse: bool,
    parallel: u32,
    len: u32,
    limit: Limit,
) -> ClientConfig {
    ClientConfig {
        name: server.to_string(),
        server,
        udp,
        reverse,
        parallel,
        len,
        limit,
        rate_bps: if udp { 10_000_000 } else { 0 },
        json: false,
        notes: Vec::new(),
        options: Default::default(),
        fq_rate_bps: 0,
        server_output: false,
        server_cpu: None,
    }
}

async fn against_real_server(c: ClientConfig) -> ClientOutcome {
    tokio::time::timeout(TEST_TIMEOUT, client::run(&c))
        .await
        .expect("iperf3 test finished in time")
        .expect("iperf3 test succeeded")
}

#[tokio::test]
async fn tcp_forward_byte_count_is_exact_on_both_ends() {
    if !have_iperf3("tcp_forward_byte_count_is_exact_on_both_ends") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(
        server.addr,
        false,
        false,
        1,
        100_000,
        Limit::Bytes(1_000_000),
    ))
    .await;
    assert_eq!(o.our_bytes(), 1_000_000);
    assert_eq!(o.server.total_bytes(), 1_000_000);
    assert_eq!(o.server.streams.len(), 1);
    assert_eq!(o.server.streams[0].id, 1);
}

#[tokio::test]
async fn tcp_parallel_streams_match_stream_by_stream() {
    if !have_iperf3("tcp_parallel_streams_match_stream_by_stream") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(
        server.addr,
        false,
        false,
        2,
        128 * 1024,
        Limit::Bytes(4 << 20),
    ))
    .await;
    assert_eq!(o.our_bytes(), 4 << 20);
    assert_eq!(o.server.total_bytes(), 4 << 20);
    let ids: Vec<u32> = o.server.streams.iter().map(|s| s.id).collect();
    assert_eq!(ids, [1, 3]);
    for (ours, theirs) in o.ours.iter().zip(&o.server.streams) {
        assert_eq!((ours.id, ours.bytes), (theirs.id, theirs.bytes));
    }
}

#[tokio::test]
async fn tcp_reverse_receives_exactly_what_the_server_sent() {
    if !have_iperf3("tcp_reverse_receives_exactly_what_the_server_sent") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(
        server.addr,
        false,
        true,
        2,
        64 * 1024,
        Limit::Bytes(2 << 20),
    ))
    .await;
    // The server sends whole blocks until the total is reached: 2 MiB is 32 blocks exactly.
    assert_eq!(o.server.total_bytes(), 2 << 20);
    assert_eq!(o.our_bytes(), 2 << 20);
}

#[tokio::test]
async fn udp_forward_counts_every_datagram() {
    if !have_iperf3("udp_forward_counts_every_datagram") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(server.addr, true, false, 1, 1000, Limit::Bytes(30_000))).await;
    assert_eq!(o.our_bytes(), 30_000);
    assert_eq!(o.ours[0].datagrams, 30);
    // The server's receiver view: the highest datagram count seen, and what was lost.
    assert_eq!(o.server.total_packets(), 30);
    assert_eq!(
        o.server.total_bytes() + 1000 * o.server.total_errors(),
        30_000
    );
}

#[tokio::test]
async fn udp_reverse_parallel_receives_what_the_server_sent() {
    if !have_iperf3("udp_reverse_parallel_receives_what_the_server_sent") {
        return;
    }
    let server = RealServer::start().await;
    let o = against_real_server(cfg(server.addr, true, true, 2, 1000, Limit::Bytes(30_000))).await;
    // iperf3's UDP sender stops when it reads TEST_END, a datagram or so after the limit.
    assert!(o.server.total_bytes() >= 30_000, "{:?}", o.server);
    let lost: u64 = o
        .ours
        .iter()
        .map(|s| s.udp.as_ref().map_or(0, |u| u.lost))
        .sum();
    assert_eq!(o.our_bytes() + 1000 * lost, o.server.total_bytes());
    assert_eq!(o.server.streams.len(), 2);
}

#[tokio::test]
async fn time_limited_test_ends_on_time() {
    if !have_iperf3("time_limited_test_ends_on_time") {
        return;
    }
    let server = RealServer::start().await;
    let started = std::time::Instant::now();
    let o = against_real_server(cfg(
        server.addr,
        false,
        false,
        1,
        128 * 1024,
        Limit::Time(Duration::from_secs(1)),
    ))
    .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(o.our_bytes() > 0);
    assert_eq!(o.server.total_bytes(), o.our_bytes());
}

#[tokio::test]
async fn run_iperf3_prints_both_views_as_json() {
    if !have_iperf3("run_iperf3_prints_both_views_as_json") {
        return;
    }
    let server = RealServer::start().await;
    let target = server.addr.to_string();
    let db = TempPath::new(".sqlite3");
    let out = wirebench(&[
        "run",
        "--iperf3",
        &target,
        "-n",
        "1MiB",
        "-l",
        "64KiB",
        "-R",
        "-P",
        "2",
        "--json",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    crate::iperf3_client::assert_schema(&doc, "iperf3-output.schema.json");
    assert_eq!(doc["kind"], "iperf3");
    assert_eq!(doc["wirebench"]["role"], "receiver");
    assert_eq!(doc["wirebench"]["bytes"], 1 << 20);
    assert_eq!(doc["iperf3_server"]["role"], "sender");
    assert_eq!(doc["iperf3_server"]["bytes"], 1 << 20);
    assert_eq!(
        doc["iperf3_server"]["streams"].as_array().map(Vec::len),
        Some(2)
    );
    // Stored as a one-run campaign: sender (the iperf3 server) as the client view.
    let export = wirebench(&["export", "1", "--db", db.arg()]).await;
    assert!(export.status.success(), "{}", stderr(&export));
    let stored: Value = serde_json::from_slice(&export.stdout).expect("export is JSON");
    assert_eq!(stored["parameters"]["server"], format!("iperf3://{target}"));
    assert_eq!(stored["runs"][0]["client"]["bytes"], 1 << 20);
    assert_eq!(stored["runs"][0]["server"]["bytes"], 1 << 20);
}

/// Our iperf3 listener on a free loopback port, serving until dropped.
pub(crate) struct OurIperf3 {
    pub(crate) addr: SocketAddr,
    events: mpsc::UnboundedReceiver<ServerEvent>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl OurIperf3 {
    pub(crate) async fn start() -> OurIperf3 {
        let server = Iperf3Server::bind("127.0.0.1:0".parse().unwrap())
            .await
            .expect("bind the iperf3 listener");
        let addr = server.local_addr();
        let (tx, events) = mpsc::unbounded_channel();
        let gate = wirebench::flows::server::gate::Gate::new(&Default::default());
        gate.set_events(tx);
        let task = tokio::spawn(server.run(gate));
        OurIperf3 { addr, events, task }
    }

    pub(crate) async fn next_session(&mut self) -> SessionSummary {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), self.events.recv())
                .await
                .expect("a session within 30 s")
                .expect("listener running");
            if let ServerEvent::Session(s) = ev {
                return *s;
            }
        }
    }
}

impl OurIperf3 {
    async fn next_notice(&mut self) -> String {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), self.events.recv())
                .await
                .expect("a notice within 30 s")
                .expect("listener running");
            if let ServerEvent::Notice(n) = ev {
                return n.message;
            }
        }
    }
}

impl Drop for OurIperf3 {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs the real iperf3 client with `args` against `addr`; returns its JSON document.
pub(crate) async fn real_client(addr: SocketAddr, args: &[&str]) -> Value {
    let port = addr.port().to_string();
    let out = tokio::time::timeout(
        TEST_TIMEOUT,
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "--json"])
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("iperf3 -c finished in time")
    .expect("iperf3 -c ran");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("iperf3 printed JSON");
    assert!(
        out.status.success(),
        "iperf3 -c {args:?} failed: {}",
        doc["error"]
    );
    doc
}

#[tokio::test]
async fn real_client_tcp_forward_and_parallel() {
    if !have_iperf3("real_client_tcp_forward_and_parallel") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    let doc = real_client(ours.addr, &["-n", "8M", "-l", "128K", "-P", "3"]).await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    assert_eq!(doc["end"]["sum_sent"]["bytes"], 8 << 20);
    assert_eq!(doc["end"]["sum_received"]["bytes"], s.report.bytes);
    // Data the client had not yet delivered when it sent TEST_END is still counted.
    assert_eq!(s.report.bytes, 8 << 20);
    assert_eq!(doc["end"]["streams"].as_array().map(Vec::len), Some(3));
    assert_eq!(s.params.msg_size, 128 * 1024);
}

#[tokio::test]
async fn real_client_tcp_reverse() {
    if !have_iperf3("real_client_tcp_reverse") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    let doc = real_client(ours.addr, &["-n", "1M", "-R"]).await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    // We sent exactly the bytes asked for; the client read them all.
    assert_eq!(doc["end"]["sum_sent"]["bytes"], 1 << 20);
    assert_eq!(doc["end"]["sum_received"]["bytes"], 1 << 20);
    assert_eq!(s.report.bytes, 1 << 20);
}

#[tokio::test]
async fn real_client_udp_forward_and_reverse() {
    if !have_iperf3("real_client_udp_forward_and_reverse") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    let doc = real_client(ours.addr, &["-u", "-n", "30000", "-l", "1000", "-b", "10M"]).await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    assert_eq!(doc["end"]["sum_received"]["bytes"], s.report.bytes);
    assert_eq!(doc["end"]["sum_received"]["packets"], 30);
    assert_eq!(s.report.bytes + 1000 * s.report.lost, 30_000);
    assert_eq!(s.report.read_calls, 30 - s.report.lost);

    let doc = real_client(
        ours.addr,
        &[
            "-u", "-R", "-P", "2", "-n", "30000", "-l", "1000", "-b", "10M",
        ],
    )
    .await;
    let s = ours.next_session().await;
    assert!(!s.report.aborted, "{:?}", s.report.abort_reason);
    // As iperf3's own, our UDP sender goes on until TEST_END: the client counts to -n, and
    // waits for more after a datagram lost on the way. The line shows what we sent.
    assert!(s.params.reverse);
    assert_eq!(doc["end"]["sum_sent"]["bytes"], s.report.bytes);
    let received = doc["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert!(
        received >= 30_000 && received <= s.report.bytes,
        "{received}"
    );

    // 64-bit datagram counters, both directions.
    let doc = real_client(
        ours.addr,
        &[
            "-u",
            "--udp-counters-64bit",
            "-n",
            "20000",
            "-l",
            "1000",
            "-b",
            "10M",
        ],
    )
    .await;
    let s = ours.next_session().await;
    assert_eq!(doc["end"]["sum_received"]["packets"], 20);
    assert_eq!(doc["end"]["sum_received"]["bytes"], s.report.bytes);
    let doc = real_client(
        ours.addr,
        &[
            "-u",
            "-R",
            "--udp-counters-64bit",
            "-n",
            "20000",
            "-l",
            "1000",
            "-b",
            "10M",
        ],
    )
    .await;
    let s = ours.next_session().await;
    assert_eq!(doc["end"]["sum_sent"]["bytes"], s.report.bytes);
    assert!(doc["end"]["sum_received"]["bytes"].as_u64().unwrap() >= 20_000);
}

#[tokio::test]
async fn iperf3_listener_refuses_what_it_does_not_serve_and_keeps_serving() {
    if !have_iperf3("iperf3_listener_refuses_what_it_does_not_serve_and_keeps_serving") {
        return;
    }
    let mut ours = OurIperf3::start().await;
    // SCTP is not served: the client gets iperf3's own error, the listener a refused test.
    let port = ours.addr.port().to_string();
    let out = tokio::time::timeout(
        TEST_TIMEOUT,
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "--sctp", "-n", "1M"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("in time")
    .expect("ran");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    // A client built without SCTP refuses the flag itself, before it reaches us.
    if !said.contains("unrecognized option") {
        assert!(said.contains("SCTP support available"), "{said}");
        let refused = ours.next_notice().await;
        assert!(refused.contains("SCTP"), "{refused}");
    }
    // Garbage instead of a cookie costs one notice, nothing more.
    let mut junk = tokio::net::TcpStream::connect(ours.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut junk, &[0xff; 37])
        .await
        .unwrap();
    drop(junk);
    let doc = real_client(ours.addr, &["-n", "128K"]).await;
    assert_eq!(doc["end"]["sum_received"]["bytes"], 128 * 1024);
}

#[tokio::test]
async fn quic_perf_client_against_our_perf_server_moves_exact_bytes() {
    let server = TestServer::start().await;
    let perf = PerfConfig {
        name: server.addr.to_string(),
        server: server.addr,
        upload: Some(3 << 20),
        download: Some(5 << 20),
        trust: Trust::Insecure,
        json: false,
    };
    let doc = tokio::time::timeout(TEST_TIMEOUT, wirebench::flows::perf::client::run(&perf))
        .await
        .expect("in time")
        .expect("perf run succeeded");
    let moved: Vec<(&str, u64)> = doc
        .transfers
        .iter()
        .map(|t| (t.direction, t.bytes))
        .collect();
    assert_eq!(moved, [("upload", 3 << 20), ("download", 5 << 20)]);
    assert!(server.is_running());
}

#[tokio::test]
async fn quic_perf_verifies_the_certificate_when_given_a_ca() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let pem = TempPath::new(".pem");
    std::fs::write(&pem.0, certified.cert.pem()).unwrap();
    let identity = ServerIdentity {
        chain: vec![certified.cert.der().clone()],
        key: quinn::rustls::pki_types::PrivateKeyDer::Pkcs8(
            certified.key_pair.serialize_der().into(),
        ),
    };
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        identity,
        ServerOptions::default(),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let (tx, _events) = mpsc::unbounded_channel();
    let task = tokio::spawn(server.run(tx));
    let trusted = |name: &str| PerfConfig {
        name: addr.to_string(),
        server: addr,
        upload: None,
        download: Some(1 << 20),
        trust: Trust::Ca {
            file: pem.0.clone(),
            server_name: name.to_string(),
        },
        json: false,
    };
    let ok = tokio::time::timeout(
        TEST_TIMEOUT,
        wirebench::flows::perf::client::run(&trusted("localhost")),
    )
    .await
    .expect("in time")
    .expect("a certificate for localhost verifies");
    assert_eq!(ok.transfers[0].bytes, 1 << 20);
    let err = tokio::time::timeout(
        TEST_TIMEOUT,
        wirebench::flows::perf::client::run(&trusted("example.org")),
    )
    .await
    .expect("in time")
    .expect_err("a certificate for another name is refused");
    assert!(format!("{err:#}").contains("handshake"), "{err:#}");
    task.abort();
}

#[tokio::test]
async fn perf_and_iperf3_flags_are_checked() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["run", "--proto", "quic", "--perf-server", "127.0.0.1:1"],
            "--perf-insecure",
        ),
        (
            &["run", "--perf-server", "127.0.0.1:1", "--perf-insecure"],
            "--proto quic",
        ),
        (
            &[
                "run",
                "--perf-server",
                "127.0.0.1:1",
                "--proto",
                "quic",
                "-t",
                "2",
            ],
            "-t/--time does not apply to --perf-server",
        ),
        (
            &["run", "--iperf3", "127.0.0.1", "--proto", "quic"],
            "tcp or --proto udp",
        ),
        (
            &["run", "--iperf3", "127.0.0.1", "--proto", "udp", "-l", "11"],
            "allowed 12 to 65507",
        ),
    ];
    for (args, expect) in cases {
        let out = wirebench(args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{args:?}: {}",
            stderr(&out)
        );
    }
}
