//! `wirebench ping` and `rr` against real servers on loopback: every request answered exactly
//! once (TCP, QUIC, new connections), UDP losses equal to what a dropping forwarder dropped,
//! ordered percentiles, and clear errors for bad input.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use wirebench::flows::rr_client::{run_rr, RrOutcome, RrSpec};
use wirebench_core::record::RttFigures;
use wirebench_core::vocab::counters::StatsSource;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::proto::RrParams;

use crate::cli::{stderr, wirebench};
use crate::support::{within, Forwarder, TestServer};

fn spec(protocol: Protocol, size: (u32, u32), flows: u32, k: u32, count: u64) -> RrSpec {
    RrSpec {
        params: RrParams {
            protocol,
            request: size.0,
            response: size.1,
            flows,
            concurrency: k,
            new_connection: false,
            stamps: false,
        },
        count: Some(count),
        duration: None,
        interval: None,
        timeout: Duration::from_secs(2),
        retries: 0,
        resumption_probe: false,
        per_probe: false,
    }
}

/// Runs one session and checks the server's printed summary matches its report.
async fn run(server: &mut TestServer, spec: &RrSpec) -> RrOutcome {
    let out = run_rr(server.addr, spec).await.expect("session runs");
    let summary = server.next_session().await;
    assert_eq!(summary.session, out.session);
    assert_eq!(summary.report, out.server);
    assert!(!out.server.aborted, "{:?}", out.server.abort_reason);
    out
}

/// The ladder of `samples` response times (or round trips) taken while at most `in_flight`
/// requests were outstanding at once, all within `elapsed`: ordered, and bounded by the time
/// they were taken in (a figure measured from the wrong start, or in the wrong unit, breaks
/// the bounds). The histogram keeps 3 significant digits: its figures may be 0.1% off.
fn assert_ladder(r: &RttFigures, samples: u64, (in_flight, elapsed): (u64, Duration)) {
    assert_eq!(r.samples, samples);
    let ladder = [r.min_ns, r.p50_ns, r.p90_ns, r.p99_ns, r.p999_ns, r.max_ns];
    assert!(ladder.windows(2).all(|w| w[0] <= w[1]), "ordered: {r:?}");
    assert!(r.min_ns > 0, "{r:?}");
    assert!(
        r.mean_ns >= r.min_ns as f64 && r.mean_ns <= r.max_ns as f64,
        "{r:?}"
    );
    assert!(r.stddev_ns >= 0.0 && r.stddev_ns <= (r.max_ns - r.min_ns) as f64);
    let elapsed_ns = elapsed.as_nanos() as f64 * 1.001;
    assert!(
        r.max_ns as f64 <= elapsed_ns,
        "no request took longer than the run ({elapsed:?}): {r:?}"
    );
    // At most `in_flight` requests were outstanding at any moment of the run.
    assert!(
        r.mean_ns * samples as f64 <= in_flight as f64 * elapsed_ns,
        "{samples} requests, at most {in_flight} at once, fit in {elapsed:?}: {r:?}"
    );
}

/// What bounds an rr or ping run's ladder: its flows × outstanding requests, and its time.
fn bounds(sp: &RrSpec, out: &RrOutcome) -> (u64, Duration) {
    (
        u64::from(sp.params.flows * sp.params.concurrency),
        out.elapsed,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_count_equals_probes_for_every_protocol() {
    within(async {
        let mut server = TestServer::start().await;
        for protocol in [Protocol::Tcp, Protocol::Udp, Protocol::Quic] {
            let mut sp = spec(protocol, (1024, 1024), 1, 1, 300);
            sp.resumption_probe = protocol == Protocol::Quic;
            let out = run(&mut server, &sp).await;
            let bounds = bounds(&sp, &out);
            let c = out.counts;
            assert_eq!(
                (c.sent, c.answered, c.lost, c.late),
                (300, 300, 0, 0),
                "{protocol}"
            );
            assert_ladder(out.response.as_ref().expect("response times"), 300, bounds);
            // Set-up probes are reported apart, and the server counts them too.
            assert_eq!(out.server.messages, 300 + out.setup_requests, "{protocol}");
            assert_eq!(out.server.bytes, (300 + out.setup_requests) * 1024);
            match protocol {
                Protocol::Udp => assert!(out.connect.is_none()),
                _ => assert_eq!(out.connect.expect("connect time").samples, 1),
            }
            if protocol == Protocol::Quic {
                let z = out.resumed.expect("a resumption probe");
                assert!(z.zero_rtt_sent, "the first connection left a ticket: {z:?}");
                assert!(z.zero_rtt_accepted, "{z:?}");
                assert!(z.first_response_ns.is_some(), "{z:?}");
                assert_eq!(out.setup_requests, 1);
            } else {
                assert_eq!(out.setup_requests, 0);
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rr_answers_every_request_exactly_once_over_tcp_and_quic() {
    within(async {
        let mut server = TestServer::start().await;
        for protocol in [Protocol::Tcp, Protocol::Quic] {
            // 3 flows x 400 requests, 8 outstanding on each: 1200 requests.
            let sp = spec(protocol, (64, 512), 3, 8, 400);
            let out = run(&mut server, &sp).await;
            let c = out.counts;
            assert_eq!((c.sent, c.answered, c.lost), (1200, 1200, 0), "{protocol}");
            assert_eq!(out.server.messages, 1200, "server answered each once");
            assert_eq!(
                out.server.bytes,
                1200 * 64,
                "server read every request byte"
            );
            assert_ladder(out.response.as_ref().unwrap(), 1200, bounds(&sp, &out));
            assert_eq!(out.connect.unwrap().samples, 3, "one connection per flow");
            // The transport's own counters, summed over the three connections: every request
            // left in some packet, and a retransmission rate is there to compare.
            let t = out.transport.expect("TCP_INFO / QUIC stats");
            let source = match protocol {
                Protocol::Quic => StatsSource::Quic,
                _ => StatsSource::TcpInfo,
            };
            assert_eq!(t.source, source);
            assert!(t.packets_sent >= 3, "{t:?}");
            assert!(t.retrans_rate().is_some_and(|r| r < 1.0), "{t:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_connection_per_request_answers_every_request() {
    within(async {
        let mut server = TestServer::start().await;
        for (protocol, count) in [(Protocol::Tcp, 60), (Protocol::Quic, 15)] {
            let mut sp = spec(protocol, (100, 200), 2, 3, count);
            sp.params.new_connection = true;
            let out = run(&mut server, &sp).await;
            let total = 2 * count;
            assert_eq!(out.counts.sent, total, "{protocol}");
            assert_eq!(out.counts.answered, total);
            assert_eq!(out.server.messages, total);
            assert_eq!(out.server.bytes, total * 100);
            assert_eq!(
                out.connect.unwrap().samples,
                total,
                "a handshake per request"
            );
            assert_ladder(out.response.as_ref().unwrap(), total, bounds(&sp, &out));
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_losses_equal_what_the_forwarder_dropped() {
    within(async {
        let mut server = TestServer::start().await;
        // One request outstanding (ping) and eight: the same rules.
        for (k, count, seed) in [(1u32, 200u64, 0x5eedu64), (8, 500, 0xfeed)] {
            let fwd = Forwarder::start(server.addr, 0.1, seed, u64::MAX).await;
            let mut sp = spec(Protocol::Udp, (64, 512), 1, k, count);
            // Long enough that a response delayed by a loaded machine (tests/it runs its tests
            // side by side on two vCPUs) is never mistaken for a lost one.
            sp.timeout = Duration::from_millis(400);
            let out = run_rr(fwd.addr, &sp).await.expect("session runs");
            let summary = server.next_session().await;
            assert_eq!(summary.report, out.server);
            let n = &fwd.counts;
            let (c2s_dropped, c2s_fwd) = (
                n.c2s_dropped.load(Ordering::SeqCst),
                n.c2s_forwarded.load(Ordering::SeqCst),
            );
            let (s2c_dropped, s2c_fwd) = (
                n.s2c_dropped.load(Ordering::SeqCst),
                n.s2c_forwarded.load(Ordering::SeqCst),
            );
            let c = out.counts;
            // With --retries 0 every request is one datagram each way: a request dropped on the
            // way in, or its response dropped on the way back, is one lost request; so is one
            // whose response came back after the timeout (a busy machine can hold a datagram
            // 400 ms: seen once in the suite beside a busy loop per CPU), counted late if it
            // came before the end. Nothing else is.
            assert!(
                c2s_dropped + s2c_dropped > 0,
                "the forwarder dropped something"
            );
            assert_eq!(c.sent, count, "K={k}");
            assert_eq!(c2s_dropped + c2s_fwd, count, "one datagram per request");
            let too_slow = s2c_fwd
                .checked_sub(c.answered)
                .expect("no answer without its response forwarded");
            assert_eq!(c.lost, c2s_dropped + s2c_dropped + too_slow, "K={k}");
            assert!(c.late <= too_slow, "K={k}: {} late of {too_slow}", c.late);
            assert_eq!(c.sent, c.answered + c.lost);
            assert_eq!(c.retries, 0);
            assert_eq!(
                out.server.messages, c2s_fwd,
                "the server answered all it got"
            );
            assert_ladder(
                out.response.as_ref().unwrap(),
                c.answered,
                bounds(&sp, &out),
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rr_json_matches_its_schema_and_sweeps_concurrency() {
    within(async {
        let out = wirebench(&[
            "rr",
            "--proto",
            "udp,tcp",
            "--concurrency",
            "1,4",
            "--flows",
            "2",
            "--count",
            "50",
            "--json",
        ])
        .await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        crate::cli::assert_matches_doc_schema(&doc, "rr-output.schema.json");
        assert_eq!(doc["schema_version"], 1);
        assert_eq!(doc["command"], "rr");
        let results = doc["results"].as_array().unwrap();
        let order: Vec<(String, u64)> = results
            .iter()
            .map(|r| {
                (
                    r["protocol"].as_str().unwrap().to_owned(),
                    r["concurrency"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            order,
            [
                ("udp".into(), 1),
                ("udp".into(), 4),
                ("tcp".into(), 1),
                ("tcp".into(), 4)
            ]
        );
        for r in results {
            assert_eq!(r["sent"], 100);
            assert_eq!(r["answered"], 100);
            assert_eq!(r["server"]["answered"], 100);
        }
    })
    .await;
}

#[tokio::test]
async fn ping_text_shows_setup_and_the_ladder() {
    within(async {
        let out = wirebench(&["ping", "--proto", "tcp", "-l", "32", "--count", "20"]).await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("set-up: TCP connect"), "{text}");
        assert!(text.contains("sent 20, answered 20, lost 0"), "{text}");
        assert!(text.contains("p99.9"), "{text}");
        assert!(
            text.contains("server: answered 20 requests (640 B read)"),
            "{text}"
        );
    })
    .await;
}

#[tokio::test]
async fn bad_ping_and_rr_input_gets_one_line_and_exit_status_2() {
    within(async {
        let cases: [(&[&str], &str); 8] = [
            (
                &["rr", "--proto", "udp", "--new-connection"],
                "--new-connection applies to TCP and QUIC, not UDP",
            ),
            (&["ping", "--count", "0"], "--count must be at least 1"),
            (&["ping", "-l", "0"], "allowed 1 to"),
            (&["ping", "--proto", "udp", "-l", "65492"], "65491"),
            (&["rr", "--response", "0"], "--response 0 is out of range"),
            (
                &["rr", "--concurrency", "10,,20"],
                "whole numbers separated by commas",
            ),
            (&["rr", "--concurrency", "0"], "allowed 1 to 10000"),
            (&["ping", "--timeout", "1ns"], "allowed 100us to 60s"),
        ];
        for (args, expect) in cases {
            let out = wirebench(args).await;
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(
                err.trim_end().lines().count(),
                1,
                "{args:?}: one line: {err}"
            );
            assert!(err.contains(expect), "{args:?}: {err}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_and_wait_runs_report_the_same_ladder() {
    use wirebench::flows::client::SessionRequest;
    use wirebench_core::vocab::plan::Mechanism;
    use wirebench_core::wire::proto::SessionParams;
    within(async {
        let mut server = TestServer::start().await;
        // TCP and QUIC: every message is sampled (UDP's retransmitted ones are not, by Karn's rule).
        for protocol in [Protocol::Tcp, Protocol::Quic] {
            let params = SessionParams {
                duration_us: None,
                omit_us: None,
                protocol,
                mechanism: Mechanism::StopAndWait,
                msg_size: 100,
                total_bytes: 20_000,
                rto_us: None,
                rate_bps: None,
                grace_us: 200_000,
                options: Default::default(),
                interval_us: None,
                reverse: false,
            };
            let out = SessionRequest::new(server.addr, &params)
                .run()
                .await
                .expect("runs");
            server.next_session().await;
            // One message in flight, every round trip within the client's transfer time.
            let rtt = out.client.rtt.as_ref().expect("round trips");
            assert_ladder(rtt, 200, (1, out.client.elapsed));
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_samples_never_exceed_the_timeout_and_every_request_ends_once() {
    within(async {
        let mut server = TestServer::start().await;
        // A timeout short enough that a loaded loopback misses it now and then.
        let mut sp = spec(Protocol::Udp, (64, 512), 2, 64, 2000);
        sp.timeout = Duration::from_micros(300);
        sp.retries = 0;
        let out = run(&mut server, &sp).await;
        let c = out.counts;
        assert_eq!(c.sent, 4000);
        assert_eq!(
            c.sent,
            c.answered + c.lost,
            "every request answered or lost, once"
        );
        assert_eq!(c.retries, 0);
        assert!(c.late <= c.lost, "a late answer belongs to a lost request");
        if let Some(r) = &out.response {
            assert_eq!(r.samples, c.answered);
            // Expired deadlines are handled before each response is classified, so a sample
            // never exceeds the timeout (the histogram keeps 3 significant digits).
            assert!(r.max_ns <= 300_000 * 1001 / 1000, "{r:?}");
        }
        // The server answered every datagram it got: at most every copy sent.
        assert!(out.server.messages <= c.sent);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_impossible_sessions_and_keeps_serving() {
    within(async {
        let mut server = TestServer::start().await;
        // Past the client's own checks: the server must say no by itself.
        for (size, expect) in [
            (
                (0, 64),
                "request size 0 is out of range for tcp: allowed 1 to",
            ),
            (
                (64, 65_492),
                "response size 65492 is out of range for udp: allowed 1 to 65491",
            ),
        ] {
            let protocol = if size.1 > 65_491 {
                Protocol::Udp
            } else {
                Protocol::Tcp
            };
            let err = run_rr(server.addr, &spec(protocol, size, 1, 1, 1))
                .await
                .expect_err("refused");
            assert!(format!("{err:#}").contains(expect), "{err:#}");
        }
        let out = run(&mut server, &spec(Protocol::Tcp, (8, 8), 1, 1, 10)).await;
        assert_eq!(out.server.messages, 10, "still serving");
        assert!(server.is_running());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_vanishes_mid_request_aborts_only_its_session() {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;
    use wirebench::transport::control;
    use wirebench_core::wire::proto::{ControlMessage, Preamble};
    within(async {
        let mut server = TestServer::start().await;
        let mut ctrl = TcpStream::connect(server.addr).await.unwrap();
        control::write_preamble(&mut ctrl, &Preamble::control())
            .await
            .unwrap();
        let params = spec(Protocol::Tcp, (100, 100), 1, 1, 1).params;
        control::send(&mut ctrl, &ControlMessage::RrRequest(params))
            .await
            .unwrap();
        let ControlMessage::Accepted { session, token, .. } =
            control::recv_setup(&mut ctrl).await.unwrap()
        else {
            panic!("not accepted");
        };
        let mut data = TcpStream::connect(server.addr).await.unwrap();
        control::write_preamble(&mut data, &Preamble::data(session, token))
            .await
            .unwrap();
        // Half a request, then gone.
        data.write_all(&[0u8; 50]).await.unwrap();
        drop(data);
        drop(ctrl);
        let summary = server.next_session().await;
        assert_eq!(summary.session, session);
        assert!(summary.report.aborted);
        assert_eq!(summary.report.messages, 0, "half a request is not answered");
        assert!(
            summary
                .report
                .abort_reason
                .as_deref()
                .is_some_and(|r| r.contains("closed the control connection")),
            "{:?}",
            summary.report.abort_reason
        );
        // Everyone else is still served.
        let out = run(&mut server, &spec(Protocol::Tcp, (8, 8), 1, 1, 10)).await;
        assert_eq!(out.server.messages, 10);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_retries_account_for_every_datagram_through_a_lossy_forwarder() {
    within(async {
        let mut server = TestServer::start().await;
        for (k, seed) in [(1u32, 0xabcu64), (8, 0xdef)] {
            let fwd = Forwarder::start(server.addr, 0.15, seed, u64::MAX).await;
            let mut sp = spec(Protocol::Udp, (32, 32), 1, k, 150);
            sp.timeout = Duration::from_millis(100);
            sp.retries = 2;
            let out = run_rr(fwd.addr, &sp).await.expect("session runs");
            server.next_session().await;
            let n = &fwd.counts;
            let c2s = n.c2s_dropped.load(Ordering::SeqCst) + n.c2s_forwarded.load(Ordering::SeqCst);
            let s2c_fwd = n.s2c_forwarded.load(Ordering::SeqCst);
            let c = out.counts;
            assert!(c.retries > 0, "K={k}: something was retried");
            assert_eq!(c.sent, 150);
            assert_eq!(c.sent, c.answered + c.lost, "K={k}");
            // Every copy is one datagram in; every response that got through is the first
            // answer, a duplicate (a retry and its original both answered) or late.
            assert_eq!(c2s, c.sent + c.retries, "K={k}");
            assert_eq!(s2c_fwd, c.answered + c.duplicates + c.late, "K={k}");
            assert_eq!(
                out.server.messages,
                n.c2s_forwarded.load(Ordering::SeqCst),
                "K={k}: the server answered every copy it got"
            );
            assert_eq!(c.unknown, 0);
        }
    })
    .await;
}

/// Response times measure the path: through a relay that delays each direction by 5 ms, every
/// UDP and QUIC response takes at least the 10 ms round trip the relay adds (a response time
/// taken from the wrong moment, or in the wrong unit, falls below it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_times_include_the_delay_of_the_path() {
    use wirebench::flows::relay::{Relay, RelayConfig};
    use wirebench_core::machine::impair::Impairments;

    within(async {
        let mut server = TestServer::start().await;
        let relay = Relay::start(RelayConfig {
            listen: "127.0.0.1:0".parse().expect("an address"),
            upstream: server.addr,
            impairments: Impairments::parse_list("delay=5ms").expect("valid impairments"),
            seed: 1,
            tcp: true,
            udp: true,
            max_held: wirebench::flows::relay::MAX_HELD_BYTES,
        })
        .await
        .expect("relay starts");
        for protocol in [Protocol::Udp, Protocol::Quic] {
            let sp = spec(protocol, (64, 64), 1, 1, 20);
            let out = run_rr(relay.local_addr(), &sp).await.expect("session runs");
            assert_eq!(server.next_session().await.report, out.server);
            let r = out.response.as_ref().expect("response times");
            assert_ladder(r, 20, bounds(&sp, &out));
            assert!(r.min_ns >= 10_000_000 * 999 / 1000, "{protocol}: {r:?}");
        }
    })
    .await;
}
