//! `server --metrics` and `exporter` against real programs: every page passes Debian's
//! `promtool check metrics`, a real Prometheus scrapes `/probe` on loopback and its HTTP API
//! returns the probe's goodput, and the exporter's limits (allow-list, volume, concurrency,
//! time) refuse what they must. The tests that need promtool or prometheus skip with a message
//! when they are not installed (apt-get install prometheus).

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use wirebench::cli::ExporterArgs;
use wirebench::config::exporter::ExporterConfig;
use wirebench::exporter::Exporter;
use wirebench::flows::server::{Limits, Server, ServerOptions};
use wirebench::transport::tls::ServerIdentity;

use crate::cli::wirebench;
use crate::dns::Unbound;
use crate::interop::{have_iperf3, RealServer};
use crate::support::{TempPath, TEST_TIMEOUT};

const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";

/// A wirebench server with its `/metrics` endpoint, both on 127.0.0.1:0; aborted on drop.
struct MeteredServer {
    addr: SocketAddr,
    metrics: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl MeteredServer {
    async fn start(limits: Limits) -> MeteredServer {
        let identity = ServerIdentity::self_signed().expect("self-signed certificate");
        let options = ServerOptions {
            limits,
            ..ServerOptions::default()
        };
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), identity, options)
            .await
            .expect("bind test server");
        let addr = server.local_addr();
        let handle = server.metrics();
        let listener = wirebench::transport::http::bind("127.0.0.1:0".parse().unwrap())
            .await
            .expect("bind metrics");
        let metrics = listener.local_addr().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let serving = tokio::spawn(async move {
            let _ = server.run(tx).await;
        });
        let draining = tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let http = tokio::spawn(wirebench::transport::http::serve(listener, move |req| {
            let handle = handle.clone();
            async move { wirebench::commands::server::metrics_page(&req, &handle) }
        }));
        MeteredServer {
            addr,
            metrics,
            tasks: vec![serving, draining, http],
        }
    }
}

impl Drop for MeteredServer {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// An exporter on 127.0.0.1:0 with these flags; aborted on drop.
struct TestExporter {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl TestExporter {
    async fn start(args: ExporterArgs) -> TestExporter {
        let cfg = ExporterConfig::from_args(&args).expect("valid exporter flags");
        let listener = wirebench::transport::http::bind("127.0.0.1:0".parse().unwrap())
            .await
            .expect("bind exporter");
        let addr = listener.local_addr().unwrap();
        // As the command does: the store's thread first, when --store or --db is given.
        let sink = cfg
            .store
            .as_ref()
            .map(|path| wirebench::commands::exporter::start_store(path).expect("the store opens"));
        let exporter = Exporter::storing(cfg, wirebench::commands::exporter::PAGES, sink);
        let task = tokio::spawn(exporter.serve(listener));
        TestExporter { addr, task }
    }
}

impl Drop for TestExporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn exporter_args() -> ExporterArgs {
    ExporterArgs {
        listen: "127.0.0.1:0".into(),
        allow: Vec::new(),
        max_total: "16MiB".into(),
        max_time: "10s".into(),
        max_concurrent: 2,
        store: false,
        db: None,
    }
}

/// GET `path` from `addr` (HTTP/1.1, one request per connection): status and body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    get_with(addr, path, "").await
}

async fn get_with(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.expect("read response");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("headers and body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    (status, body.to_string())
}

/// The value of the first sample of `name` (without labels) on a page.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// `promtool check metrics` on `page`: `None` when promtool is not installed.
fn promtool(page: &str) -> Option<(bool, String)> {
    if !std::path::Path::new(PROMTOOL).exists() {
        eprintln!("skipped: {PROMTOOL} is not installed (apt-get install prometheus)");
        return None;
    }
    let mut child = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), said))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_passes_promtool() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = MeteredServer::start(Limits::default()).await;
        let exporter = TestExporter::start(exporter_args()).await;
        let target = server.addr;
        let tcp = get(exporter.addr, &format!("/probe?target={target}&proto=tcp&mode=stream&total=4MiB")).await;
        let udp = get(exporter.addr, &format!("/probe?target={target}&proto=udp&mode=saw&total=64KiB&size=512")).await;
        assert_eq!(tcp.0, 200, "{}", tcp.1);
        assert_eq!(udp.0, 200, "{}", udp.1);
        assert_eq!(sample(&tcp.1, "wirebench_probe_success"), Some(1.0), "{}", tcp.1);
        assert!(sample(&tcp.1, "wirebench_probe_goodput_bytes_per_second").is_some_and(|g| g > 0.0));
        assert_eq!(sample(&tcp.1, "wirebench_probe_received_bytes"), Some(4194304.0));
        assert!(udp.1.contains("wirebench_probe_rtt_seconds{quantile=\"0.99\"}"), "{}", udp.1);
        assert_eq!(sample(&udp.1, "wirebench_probe_udp_lost_messages"), Some(0.0));
        let ping = get(exporter.addr, &format!("/probe?kind=ping&target={target}&proto=udp&count=20&size=64")).await;
        assert_eq!(ping.0, 200, "{}", ping.1);
        assert_eq!(sample(&ping.1, "wirebench_probe_success"), Some(1.0), "{}", ping.1);
        assert_eq!(sample(&ping.1, "wirebench_probe_ping_answered"), Some(20.0), "{}", ping.1);
        assert_eq!(sample(&ping.1, "wirebench_probe_rtt_seconds_count"), Some(20.0), "{}", ping.1);
        let (status, server_page) = get(server.metrics, "/metrics").await;
        assert_eq!(status, 200);
        assert_eq!(sample(&server_page, "wirebench_server_sessions_finished_total"), Some(3.0), "{server_page}");
        assert!(server_page.contains("wirebench_server_bytes_read_total{proto=\"tcp\"} 4194304\n"), "{server_page}");
        let (_, exporter_page) = get(exporter.addr, "/metrics").await;
        assert_eq!(sample(&exporter_page, "wirebench_exporter_probes_total"), Some(3.0), "{exporter_page}");
        for (what, page) in [("tcp probe", &tcp.1), ("udp probe", &udp.1), ("ping probe", &ping.1), ("server", &server_page), ("exporter", &exporter_page)] {
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

/// A Prometheus started by a test; killed by its PID on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: TempPath,
}

impl Prometheus {
    /// Starts Prometheus with `scrape_configs` (YAML, indented as a list under the key);
    /// `None` when it is not installed.
    fn start(scrape_configs: &str) -> Option<Prometheus> {
        if !std::path::Path::new(PROMETHEUS).exists() {
            eprintln!("skipped: {PROMETHEUS} is not installed (apt-get install prometheus)");
            return None;
        }
        let dir = TempPath::new("-prometheus");
        std::fs::create_dir_all(dir.0.join("data")).unwrap();
        let config = dir.0.join("prometheus.yml");
        std::fs::write(
            &config,
            format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{scrape_configs}"),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.0.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.0.join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus starts");
        Some(Prometheus {
            child,
            addr,
            _dir: dir,
        })
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.0.join("prometheus.log")).unwrap_or_default()
    }

    /// The value of an instant query's first sample, once there is one.
    async fn query(&mut self, query: &str) -> Option<f64> {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("prometheus exited ({status}): {}", self.log());
        }
        let Ok(mut s) = TcpStream::connect(self.addr).await else {
            return None;
        };
        let path = format!("/api/v1/query?query={query}");
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.ok()?;
        let text = String::from_utf8(raw).ok()?;
        let body = text.split_once("\r\n\r\n")?.1;
        let doc: serde_json::Value = serde_json::from_str(body).ok()?;
        let value = doc["data"]["result"].get(0)?["value"]
            .get(1)?
            .as_str()?
            .to_string();
        value.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_a_probe() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = MeteredServer::start(Limits::default()).await;
        let exporter = TestExporter::start(exporter_args()).await;
        let scrape = format!(
            "  - job_name: wirebench_probe
    metrics_path: /probe
    params:
      target: ['{target}']
      proto: [tcp]
      mode: [stream]
      total: [1MiB]
    static_configs:
      - targets: ['{exporter}']
  - job_name: wirebench_server
    static_configs:
      - targets: ['{metrics}']
",
            target = server.addr,
            exporter = exporter.addr,
            metrics = server.metrics,
        );
        let Some(mut prometheus) = Prometheus::start(&scrape) else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut answers = [None, None, None];
        let queries = [
            "wirebench_probe_goodput_bytes_per_second",
            "wirebench_probe_success",
            "wirebench_server_sessions_finished_total",
        ];
        while answers.iter().any(Option::is_none) {
            assert!(
                Instant::now() < deadline,
                "no samples in Prometheus within 60 s ({answers:?}): {}",
                prometheus.log()
            );
            for (i, (q, a)) in queries.iter().zip(answers.iter_mut()).enumerate() {
                if a.is_none() {
                    *a = prometheus.query(q).await;
                }
                // The server may be scraped before the first probe's session ended: wait for
                // the counter to move.
                if i == 2 && a.is_some_and(|finished| finished < 1.0) {
                    *a = None;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let [goodput, success, finished] = answers.map(Option::unwrap);
        assert!(goodput > 0.0, "goodput {goodput}");
        assert_eq!(success, 1.0);
        assert!(finished >= 1.0, "finished {finished}");
        drop(prometheus);
    })
    .await
    .expect("within the test timeout");
}

/// Checks `page` with promtool (when installed) and says which probe it was on failure.
fn lint(what: &str, page: &str) {
    if let Some((ok, said)) = promtool(page) {
        assert!(
            ok,
            "promtool check metrics on the {what} page: {said}\n{page}"
        );
    }
}

/// The value of the first sample of `name` with exactly these labels (`{a="b"}`).
fn labelled(page: &str, name_and_labels: &str) -> Option<f64> {
    page.lines().find_map(|l| {
        l.strip_prefix(name_and_labels)?
            .strip_prefix(' ')?
            .parse()
            .ok()
    })
}

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
        // The iperf3 server's own count of what it received, exact.
        assert_eq!(sample(&page, "wirebench_probe_received_bytes"), Some(2_097_152.0), "{page}");
        assert!(sample(&page, "wirebench_probe_goodput_bytes_per_second").is_some_and(|g| g > 0.0), "{page}");
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
