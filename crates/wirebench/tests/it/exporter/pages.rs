//! The pages and the limits: every `/metrics` and `/probe` page passes promtool, and the
//! exporter's limits (allow-list, volume, concurrency, time) refuse with a reason.

use std::time::{Duration, Instant};

use wirebench::cli::ExporterArgs;
use wirebench::flows::server::Limits;

use super::{exporter_args, get, get_with, promtool, sample, MeteredServer, TestExporter};
use crate::support::TEST_TIMEOUT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_passes_promtool() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = MeteredServer::start(Limits::default()).await;
        let exporter = TestExporter::start(exporter_args()).await;
        let target = server.addr;
        let tcp = get(exporter.addr, &format!("/probe?target={target}&proto=tcp&mode=stream&total=16MiB")).await;
        let udp = get(exporter.addr, &format!("/probe?target={target}&proto=udp&mode=saw&total=64KiB&size=512")).await;
        assert_eq!(tcp.0, 200, "{}", tcp.1);
        assert_eq!(udp.0, 200, "{}", udp.1);
        assert_eq!(sample(&tcp.1, "wirebench_probe_success"), Some(1.0), "{}", tcp.1);
        assert!(sample(&tcp.1, "wirebench_probe_goodput_bytes_per_second").is_some_and(|g| g > 0.0));
        assert_eq!(sample(&tcp.1, "wirebench_probe_received_bytes"), Some(16777216.0));
        assert!(udp.1.contains("wirebench_probe_rtt_seconds{quantile=\"0.99\"}"), "{}", udp.1);
        assert_eq!(sample(&udp.1, "wirebench_probe_udp_lost_messages"), Some(0.0));
        // A UDP stream's loss, split by where it went (issue 28): the shares add up to it.
        let stream = get(exporter.addr, &format!("/probe?target={target}&proto=udp&mode=stream&total=1MiB&size=1024")).await;
        assert_eq!(stream.0, 200, "{}", stream.1);
        let shares: Vec<f64> = ["receiving_host", "sending_host", "path"]
            .iter()
            .map(|s| sample(&stream.1, &format!("wirebench_probe_udp_lost_{s}_messages")).expect("each share"))
            .collect();
        assert_eq!(Some(shares.iter().sum()), sample(&stream.1, "wirebench_probe_udp_lost_messages"), "{}", stream.1);
        let ping = get(exporter.addr, &format!("/probe?kind=ping&target={target}&proto=udp&count=20&size=64")).await;
        assert_eq!(ping.0, 200, "{}", ping.1);
        assert_eq!(sample(&ping.1, "wirebench_probe_success"), Some(1.0), "{}", ping.1);
        assert_eq!(sample(&ping.1, "wirebench_probe_ping_answered"), Some(20.0), "{}", ping.1);
        assert_eq!(sample(&ping.1, "wirebench_probe_rtt_seconds_count"), Some(20.0), "{}", ping.1);
        // Each direction's delay, with the bound the clock offset allows (one host: tiny).
        for direction in ["up", "down"] {
            let line = format!("wirebench_probe_one_way_delay_p50_seconds{{direction=\"{direction}\"}}");
            assert!(ping.1.contains(&line), "{line} missing: {}", ping.1);
        }
        assert!(sample(&ping.1, "wirebench_probe_one_way_bound_seconds").is_some_and(|b| b < 1e-3), "{}", ping.1);
        assert_eq!(sample(&ping.1, "wirebench_probe_one_way_outside_bound"), Some(0.0), "{}", ping.1);
        let (status, server_page) = get(server.metrics, "/metrics").await;
        assert_eq!(status, 200);
        assert_eq!(sample(&server_page, "wirebench_server_sessions_finished_total"), Some(4.0), "{server_page}");
        assert!(server_page.contains("wirebench_server_bytes_read_total{proto=\"tcp\"} 16777216\n"), "{server_page}");
        let (_, exporter_page) = get(exporter.addr, "/metrics").await;
        assert_eq!(sample(&exporter_page, "wirebench_exporter_probes_total"), Some(4.0), "{exporter_page}");
        for (what, page) in [("tcp probe", &tcp.1), ("udp probe", &udp.1), ("udp stream probe", &stream.1), ("ping probe", &ping.1), ("server", &server_page), ("exporter", &exporter_page)] {
            let Some((ok, said)) = promtool(page) else { return };
            assert!(ok, "promtool check metrics on the {what} page: {said}\n{page}");
        }
    })
    .await
    .expect("within the test timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_refuse_with_a_reason() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        // A target that accepts connections and never answers: a probe of it runs until its
        // time is up, holding the exporter's only slot meanwhile.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_addr = silent.local_addr().unwrap();
        let server = MeteredServer::start(Limits {
            max_bytes: 1 << 20,
            ..Limits::default()
        })
        .await;
        // Only 127.0.0.1 is allowed, so another loopback address is refused (and never dialled).
        let exporter = TestExporter::start(ExporterArgs {
            max_concurrent: 1,
            max_time: "3s".into(),
            allow: vec!["127.0.0.1".into()],
            ..exporter_args()
        })
        .await;
        let e = exporter.addr;
        let (status, body) = get(e, "/probe?target=127.0.0.2:5310&total=1KiB").await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("--allow"), "{body}");
        let (status, body) = get(e, &format!("/probe?target={}&total=1GiB", server.addr)).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body.lines().count(), 1, "{body}");
        assert!(body.contains("--max-total"), "{body}");
        let (status, body) = get(
            e,
            &format!("/probe?target={}&total=1KiB&db=/tmp/x", server.addr),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        // The server's own limit: the probe runs, the server refuses, success is 0.
        let (status, body) = get(e, &format!("/probe?target={}&total=2MiB", server.addr)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            sample(&body, "wirebench_probe_success"),
            Some(0.0),
            "{body}"
        );
        let (_, page) = get(server.metrics, "/metrics").await;
        assert!(
            page.contains("wirebench_server_sessions_refused_total{reason=\"max-bytes\"} 1\n"),
            "{page}"
        );
        assert!(
            page.contains("wirebench_server_limit_hits_total{limit=\"max-bytes\"} 1\n"),
            "{page}"
        );

        // Concurrency: one probe in flight (against the silent target), the next is refused.
        let started = Instant::now();
        let stuck = tokio::spawn(async move {
            get(e, &format!("/probe?target={silent_addr}&total=1KiB")).await
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (_, own) = get(e, "/metrics").await;
            if sample(&own, "wirebench_exporter_probes_in_flight") == Some(1.0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the probe never went in flight: {own}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, body) = get(e, &format!("/probe?target={}&total=1KiB", server.addr)).await;
        assert_eq!(status, 429, "{body}");
        assert!(body.contains("--max-concurrent"), "{body}");
        // The stuck probe ends at its time limit (the scrape timeout header's 2s less 0.5s
        // would be shorter, but this request sent none): success 0, answered with 200.
        let (status, body) = stuck.await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            sample(&body, "wirebench_probe_success"),
            Some(0.0),
            "{body}"
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(3) && took < Duration::from_secs(8),
            "{took:?}"
        );
        // A scrape timeout shorter than --max-time bounds the probe: 1.5s - 0.5s.
        let started = Instant::now();
        let (_, body) = get_with(
            e,
            &format!("/probe?target={silent_addr}&total=1KiB"),
            "X-Prometheus-Scrape-Timeout-Seconds: 1.5\r\n",
        )
        .await;
        assert_eq!(
            sample(&body, "wirebench_probe_success"),
            Some(0.0),
            "{body}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(2500),
            "{:?}",
            started.elapsed()
        );
        let (_, own) = get(e, "/metrics").await;
        for line in [
            "wirebench_exporter_probes_refused_total{reason=\"not-allowed\"} 1",
            "wirebench_exporter_probes_refused_total{reason=\"bad-request\"} 2",
            "wirebench_exporter_probes_refused_total{reason=\"too-many\"} 1",
            "wirebench_exporter_probes_failed_total 3",
        ] {
            assert!(own.contains(line), "{line} missing from\n{own}");
        }
        drop(silent);
    })
    .await
    .expect("within the test timeout");
}

/// Lines the exporter of [`the_log_holds_no_query_whole_or_raw`] logged.
static LOGGED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn capture(line: &str) {
    LOGGED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(line.to_string());
}

/// Issue 37: what a scraper sends reaches the log inside refusal reasons; every line is
/// escaped and cut to 512 characters (a 5,000-character value holding U+202E went whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_holds_no_query_whole_or_raw() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let cfg = wirebench::config::exporter::ExporterConfig::from_args(&exporter_args())
            .expect("valid exporter flags");
        let listener = wirebench::transport::http::bind("127.0.0.1:0".parse().unwrap())
            .await
            .expect("bind exporter");
        let addr = listener.local_addr().unwrap();
        let pages = wirebench::exporter::Pages {
            log: capture,
            ..wirebench::commands::exporter::PAGES
        };
        let exporter = wirebench::exporter::Exporter::storing(cfg, pages, None);
        let task = tokio::spawn(exporter.serve(listener));
        // A value the refusal quotes: a protocol of 5,000 characters and a bidi override.
        let value = format!("{}%E2%80%AEpct", "q".repeat(5000));
        let (status, body) =
            get(addr, &format!("/probe?target=127.0.0.1:5310&proto={value}")).await;
        assert_eq!(status, 400, "{body}");
        task.abort();
        let logged = LOGGED.lock().unwrap().clone();
        assert!(!logged.is_empty(), "the refusal is logged");
        for line in &logged {
            assert!(
                line.chars().count() <= 513,
                "{} characters logged",
                line.chars().count()
            );
            assert!(!line.contains('\u{202e}'), "a raw bidi override in the log");
        }
    })
    .await
    .expect("within the test timeout");
}
