//! A real Prometheus scraping `/probe` on loopback, its HTTP API returning the probe's goodput.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wirebench::flows::server::Limits;

use super::{exporter_args, MeteredServer, TestExporter, PROMETHEUS};
use crate::support::{TempPath, TEST_TIMEOUT};

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
      total: [16MiB]
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
