//! `server --metrics` and `exporter` against real programs: every page passes Debian's
//! `promtool check metrics`, a real Prometheus scrapes `/probe` on loopback and its HTTP API
//! returns the probe's goodput, and the exporter's limits (allow-list, volume, concurrency,
//! time) refuse what they must. The tests that need promtool or prometheus skip with a message
//! when they are not installed (apt-get install prometheus).

mod dashboard;
mod pages;
mod probes;
mod prometheus;

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use wirebench::cli::ExporterArgs;
use wirebench::config::exporter::ExporterConfig;
use wirebench::exporter::Exporter;
use wirebench::flows::server::{Limits, Server, ServerOptions};
use wirebench::transport::tls::ServerIdentity;

pub(super) const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";

/// A wirebench server with its `/metrics` endpoint, both on 127.0.0.1:0; aborted on drop.
pub(super) struct MeteredServer {
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
pub(super) struct TestExporter {
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

pub(super) fn exporter_args() -> ExporterArgs {
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
pub(super) async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    get_with(addr, path, "").await
}

pub(super) async fn get_with(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
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
pub(super) fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// `promtool check metrics` on `page`: `None` when promtool is not installed.
pub(super) fn promtool(page: &str) -> Option<(bool, String)> {
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

/// Checks `page` with promtool (when installed) and says which probe it was on failure.
pub(super) fn lint(what: &str, page: &str) {
    if let Some((ok, said)) = promtool(page) {
        assert!(
            ok,
            "promtool check metrics on the {what} page: {said}\n{page}"
        );
    }
}

/// The value of the first sample of `name` with exactly these labels (`{a="b"}`).
pub(super) fn labelled(page: &str, name_and_labels: &str) -> Option<f64> {
    page.lines().find_map(|l| {
        l.strip_prefix(name_and_labels)?
            .strip_prefix(' ')?
            .parse()
            .ok()
    })
}
