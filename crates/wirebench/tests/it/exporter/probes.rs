//! Probes of each kind: rr counting requests, dns against unbound checking the rcode, iperf3
//! against a real iperf3 server, and stored probes listed by `runs`.

use std::time::{Duration, Instant};

use wirebench::cli::ExporterArgs;
use wirebench::flows::server::Limits;

use super::{exporter_args, get, labelled, lint, sample, MeteredServer, TestExporter};
use crate::cli::wirebench;
use crate::dns::Unbound;
use crate::interop::{have_iperf3, RealServer};
use crate::support::{TempPath, TEST_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rr_probes_count_requests_and_pass_promtool() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = MeteredServer::start(Limits::default()).await;
        let exporter = TestExporter::start(exporter_args()).await;
        let t = server.addr;
        for proto in ["udp", "tcp"] {
            let (status, page) = get(
                exporter.addr,
                &format!("/probe?kind=rr&target={t}&proto={proto}&concurrency=4&flows=2&count=50&request=100&response=200"),
            )
            .await;
            assert_eq!(status, 200, "{page}");
            assert_eq!(sample(&page, "wirebench_probe_success"), Some(1.0), "{page}");
            // Exactly count x flows requests, every one answered on loopback.
            assert_eq!(sample(&page, "wirebench_probe_rr_sent"), Some(100.0), "{page}");
            assert_eq!(sample(&page, "wirebench_probe_rr_answered"), Some(100.0), "{page}");
            assert_eq!(sample(&page, "wirebench_probe_rr_lost"), Some(0.0), "{page}");
            assert_eq!(sample(&page, "wirebench_probe_rr_concurrency"), Some(4.0), "{page}");
            assert_eq!(sample(&page, "wirebench_probe_rtt_seconds_count"), Some(100.0), "{page}");
            assert!(sample(&page, "wirebench_probe_requests_per_second").is_some_and(|r| r > 0.0), "{page}");
            assert!(
                page.contains(&format!("wirebench_probe_info{{kind=\"rr\",proto=\"{proto}\",mode=\"rr\"}} 1\n")),
                "{page}"
            );
            if proto == "tcp" {
                // TCP_INFO over loopback: a ratio is there (zero or more).
                assert!(sample(&page, "wirebench_probe_retransmission_ratio").is_some(), "{page}");
            }
            lint(&format!("rr {proto} probe"), &page);
        }
        // The volume limit counts both directions: 1000 x 1 x (64 + 512) B is 576000 B.
        let small = TestExporter::start(ExporterArgs {
            max_total: "500KB".into(),
            ..exporter_args()
        })
        .await;
        let (status, body) = get(small.addr, &format!("/probe?kind=rr&target={t}")).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("--max-total"), "{body}");
        let (status, body) = get(small.addr, &format!("/probe?kind=rr&target={t}&time=10s")).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("unknown parameter \"time\""), "{body}");
        let (status, body) = get(small.addr, &format!("/probe?kind=rr&target={t}&concurrency=1,2&count=10")).await;
        assert_eq!(status, 400, "{body}");
        let (status, _) = get(small.addr, "/probe?kind=rr&target=10.1.2.3:5310&count=10").await;
        assert_eq!(status, 403);
    })
    .await
    .expect("within the test timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_probes_against_unbound_check_the_rcode() {
    let Some(unbound) = Unbound::start() else {
        return;
    };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let exporter = TestExporter::start(exporter_args()).await;
        let r = unbound.addr();
        for transport in ["udp", "tcp"] {
            let (status, page) = get(
                exporter.addr,
                &format!("/probe?kind=dns&target={r}&transport={transport}&name=host.wb.test&count=40&concurrency=4"),
            )
            .await;
            assert_eq!(status, 200, "{page}");
            assert_eq!(sample(&page, "wirebench_probe_success"), Some(1.0), "{page}");
            assert_eq!(sample(&page, "wirebench_probe_dns_sent"), Some(40.0), "{page}");
            assert_eq!(sample(&page, "wirebench_probe_dns_answered"), Some(40.0), "{page}");
            assert_eq!(labelled(&page, "wirebench_probe_dns_answers{rcode=\"NOERROR\"}"), Some(40.0), "{page}");
            assert_eq!(sample(&page, "wirebench_probe_dns_timeout_ratio"), Some(0.0), "{page}");
            assert_eq!(sample(&page, "wirebench_probe_rtt_seconds_count"), Some(40.0), "{page}");
            lint(&format!("dns {transport} probe"), &page);
        }
        // A name the zone does not have: answered, NXDOMAIN, so the probe fails with a reason.
        let (status, page) = get(
            exporter.addr,
            &format!("/probe?kind=dns&target={r}&name=nothing.wb.test&count=5"),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(sample(&page, "wirebench_probe_success"), Some(0.0), "{page}");
        assert_eq!(labelled(&page, "wirebench_probe_failure_info{reason=\"rcode\"}"), Some(1.0), "{page}");
        assert_eq!(labelled(&page, "wirebench_probe_dns_answers{rcode=\"NXDOMAIN\"}"), Some(5.0), "{page}");
        lint("dns NXDOMAIN probe", &page);
        // A resolver that never answers: every query times out, success 0, reason unanswered.
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = silent.local_addr().unwrap();
        let (status, page) = get(
            exporter.addr,
            &format!("/probe?kind=dns&target={s}&name=host.wb.test&count=3&timeout=200ms"),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(sample(&page, "wirebench_probe_success"), Some(0.0), "{page}");
        assert_eq!(sample(&page, "wirebench_probe_dns_timeouts"), Some(3.0), "{page}");
        assert_eq!(labelled(&page, "wirebench_probe_failure_info{reason=\"unanswered\"}"), Some(1.0), "{page}");
        lint("dns silent probe", &page);
        for (query, says) in [
            ("kind=dns&target=127.0.0.1:53", "name= is required"),
            ("kind=dns&target=127.0.0.1:53&name=a.test&transport=dot", "transport=dot"),
            ("kind=dns&target=127.0.0.1:53&name=a.test&count=100000&flows=10", "--max-total"),
        ] {
            let (status, body) = get(exporter.addr, &format!("/probe?{query}")).await;
            assert_eq!(status, 400, "{query}: {body}");
            assert!(body.contains(says), "{query}: {body}");
        }
        drop(silent);
    })
    .await
    .expect("within the test timeout");
    drop(unbound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iperf3_probes_measure_a_real_iperf3_server() {
    if !have_iperf3("iperf3_probes_measure_a_real_iperf3_server") {
        return;
    }
    tokio::time::timeout(TEST_TIMEOUT, async {
        let iperf3 = RealServer::start().await;
        let exporter = TestExporter::start(exporter_args()).await;
        let t = iperf3.addr;
        let (status, page) = get(exporter.addr, &format!("/probe?kind=iperf3&target={t}&proto=tcp&total=2MiB")).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(sample(&page, "wirebench_probe_success"), Some(1.0), "{page}");
        // What we sent, exact; the iperf3 server's own count of what it received, which stops
        // at TEST_END (as with iperf3's own client), and the goodput taken from that count.
        assert_eq!(sample(&page, "wirebench_probe_sent_bytes"), Some(2_097_152.0), "{page}");
        let received = sample(&page, "wirebench_probe_received_bytes").unwrap_or(-1.0);
        assert!((0.0..=2_097_152.0).contains(&received), "{page}");
        // The goodput is taken from that count over our span, and given only for a span long
        // enough to time (1 ms).
        let seconds = sample(&page, "wirebench_probe_transfer_seconds").unwrap_or(0.0);
        match sample(&page, "wirebench_probe_goodput_bytes_per_second") {
            Some(goodput) => assert!(
                seconds >= 0.001 && (goodput - received / seconds).abs() <= 1e-6 * goodput.max(1.0),
                "{page}"
            ),
            None => assert!(seconds < 0.001, "{page}"),
        }
        assert!(page.contains("wirebench_probe_info{kind=\"iperf3\",proto=\"tcp\",mode=\"stream\"} 1\n"), "{page}");
        lint("iperf3 tcp probe", &page);
        let (status, page) = get(
            exporter.addr,
            &format!("/probe?kind=iperf3&target={t}&proto=udp&total=256KiB&size=1200&rate=20Mbit&reverse=true"),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(sample(&page, "wirebench_probe_success"), Some(1.0), "{page}");
        assert!(sample(&page, "wirebench_probe_udp_lost_ratio").is_some(), "{page}");
        lint("iperf3 udp probe", &page);
        // Nobody listens: success 0 with the reason, not an HTTP error.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (status, page) = get(exporter.addr, &format!("/probe?kind=iperf3&target={closed}&total=1KiB")).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(sample(&page, "wirebench_probe_success"), Some(0.0), "{page}");
        assert_eq!(labelled(&page, "wirebench_probe_failure_info{reason=\"error\"}"), Some(1.0), "{page}");
        lint("failed iperf3 probe", &page);
        let (status, body) = get(exporter.addr, &format!("/probe?kind=iperf3&target={t}&total=1GiB")).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("--max-total"), "{body}");
        let (status, body) = get(exporter.addr, &format!("/probe?kind=iperf3&target={t}&proto=quic&total=1KiB")).await;
        assert_eq!(status, 400, "{body}");
        let (_, own) = get(exporter.addr, "/metrics").await;
        assert_eq!(sample(&own, "wirebench_exporter_probes_total"), Some(3.0), "{own}");
        assert_eq!(sample(&own, "wirebench_exporter_probes_failed_total"), Some(1.0), "{own}");
    })
    .await
    .expect("within the test timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_probes_are_listed_by_runs() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let db = TempPath::new(".sqlite3");
        let server = MeteredServer::start(Limits::default()).await;
        let exporter = TestExporter::start(ExporterArgs {
            db: Some(db.0.clone()),
            ..exporter_args()
        })
        .await;
        let t = server.addr;
        for query in [
            format!("target={t}&proto=tcp&total=1MiB"),
            format!("kind=rr&target={t}&proto=udp&count=30&concurrency=3"),
        ] {
            let (status, page) = get(exporter.addr, &format!("/probe?{query}")).await;
            assert_eq!(status, 200, "{page}");
            assert_eq!(
                sample(&page, "wirebench_probe_success"),
                Some(1.0),
                "{page}"
            );
        }
        // The store's thread commits after the answer: poll `runs` until both are there.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = wirebench(&["runs", "--db", db.arg()]).await;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let run_listed = text.lines().any(|l| {
                l.contains("complete           1/1  tcp × stream") && l.contains("1048576 B")
            });
            let rr_listed =
                text.contains(&format!("to {t} over udp, 1 flow, requests in flight 3"));
            if out.status.success() && run_listed && rr_listed {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the probes are not listed by `wirebench runs` within 20 s:\n{text}{}",
                crate::cli::stderr(&out)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("within the test timeout");
}
