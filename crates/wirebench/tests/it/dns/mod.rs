//! `wirebench dns` against a real resolver (Debian's unbound, started by each test on loopback
//! with a static local zone and a generated TLS certificate): exact answers over UDP, TCP and
//! DoT, NXDOMAIN counted as such, TC=1 retried over TCP, wrong answers counted, and UDP
//! timeouts equal to what wirebench's relay dropped. Skips when unbound is not installed.

mod answers;
mod failures;
mod report;
mod tls;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use wirebench_core::wire::dns::Question;

use crate::cli::{stderr, wirebench};
use crate::support::TempPath;

const UNBOUND: &str = "/usr/sbin/unbound";
/// The name the test certificate is issued for (sent as SNI).
const TLS_NAME: &str = "dns.wb.test";
pub(super) const HOST_A: &str = "host.wb.test. 300 IN A 192.0.2.7";
/// TXT records that do not fit a 512-byte UDP answer (each 60 characters).
pub(super) const BIG_RECORDS: usize = 12;

/// An unbound process on loopback: UDP/TCP on `port`, DoT on `tls_port`; killed by PID on drop.
pub(crate) struct Unbound {
    child: Child,
    port: u16,
    tls_port: u16,
    dir: TempPath,
}

impl Unbound {
    /// Starts unbound and waits (up to 10 s) until it answers; `None` when it is not installed.
    pub(crate) fn start() -> Option<Unbound> {
        Unbound::start_with(None)
    }

    /// Like [`Unbound::start`], serving DoT with `ca.pem`, `cert.pem` and `key.pem` copied from
    /// `certs` instead of certificates made here.
    pub(crate) fn start_with(certs: Option<&std::path::Path>) -> Option<Unbound> {
        if !std::path::Path::new(UNBOUND).exists() {
            eprintln!("skipped: {UNBOUND} is not installed (apt-get install unbound)");
            return None;
        }
        let dir = TempPath::new("-unbound");
        std::fs::create_dir_all(&dir.0).unwrap();
        match certs {
            Some(from) => {
                for file in ["ca.pem", "cert.pem", "key.pem"] {
                    std::fs::copy(from.join(file), dir.0.join(file)).unwrap();
                }
            }
            None => {
                let (ca_pem, cert_pem, key_pem) = certificates();
                std::fs::write(dir.0.join("ca.pem"), ca_pem).unwrap();
                std::fs::write(dir.0.join("cert.pem"), cert_pem).unwrap();
                std::fs::write(dir.0.join("key.pem"), key_pem).unwrap();
            }
        }
        let (port, tls_port) = (free_port(), free_port());
        let d = dir.arg();
        let mut conf = format!(
            "server:
  interface: 127.0.0.1@{port}
  interface: 127.0.0.1@{tls_port}
  port: {port}
  tls-port: {tls_port}
  tls-service-key: \"{d}/key.pem\"
  tls-service-pem: \"{d}/cert.pem\"
  do-daemonize: no
  chroot: \"\"
  username: \"\"
  pidfile: \"\"
  directory: \"{d}\"
  logfile: \"{d}/unbound.log\"
  use-syslog: no
  verbosity: 0
  num-threads: 1
  do-ip6: no
  so-reuseport: no
  module-config: \"iterator\"
  access-control: 127.0.0.0/8 allow
  incoming-num-tcp: 256
  local-zone: \"wb.test.\" static
  local-data: \"{HOST_A}\"
  local-data: \"host.wb.test. 300 IN AAAA 2001:db8::7\"
"
        );
        for i in 0..BIG_RECORDS {
            conf.push_str(&format!(
                "  local-data: 'big.wb.test. 300 IN TXT \"{:02}{}\"'\n",
                i,
                "x".repeat(58)
            ));
        }
        conf.push_str("remote-control:\n  control-enable: no\n");
        let conf_path = dir.0.join("unbound.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(UNBOUND)
            .arg("-d")
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unbound starts");
        let mut ub = Unbound {
            child,
            port,
            tls_port,
            dir,
        };
        ub.wait_ready();
        Some(ub)
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The DoT port.
    pub(crate) fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// What unbound logged (to its file in the temp directory).
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("unbound.log")).unwrap_or_default()
    }

    fn ca(&self) -> String {
        self.dir.0.join("ca.pem").to_str().unwrap().to_string()
    }

    /// Polls with a UDP query until it is answered (deadline, not a sleep). unbound opens every
    /// listening socket (the TLS one too) before it serves, so an answer means all are up.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let q = Question::new("host.wb.test", "A").unwrap();
        let mut query = Vec::new();
        q.encode_into(1, &mut query);
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut buf = [0u8; 1500];
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("unbound exited at start-up ({status}): {}", self.log());
            }
            if sock.send_to(&query, self.addr()).is_ok() && sock.recv(&mut buf).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "unbound did not answer within 10 s"
            );
        }
    }
}

impl Drop for Unbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free for both TCP and UDP on 127.0.0.1 at the time of asking.
pub(crate) fn free_port() -> u16 {
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A CA and a leaf for [`TLS_NAME`] signed by it: (CA PEM, leaf PEM, leaf key PEM).
fn certificates() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "wirebench test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec![TLS_NAME.to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    (ca.pem(), leaf.pem(), leaf_key.serialize_pem())
}

/// Runs `wirebench dns` against `ub` with `extra` flags and --json; returns the document.
pub(super) async fn dns_json(ub: &Unbound, extra: &[&str]) -> Value {
    let resolver = ub.addr().to_string();
    let tls_port = ub.tls_port.to_string();
    let ca = ub.ca();
    let mut args = vec![
        "dns",
        "--resolver",
        &resolver,
        "--dot-port",
        &tls_port,
        "--dot-ca",
        &ca,
        "--dot-name",
        TLS_NAME,
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = wirebench(&args).await;
    assert!(
        out.status.success(),
        "wirebench dns failed: {}",
        stderr(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_matches_dns_schema(&doc);
    doc
}

pub(super) fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

/// Panics unless `doc` is valid against docs/dns-output.schema.json.
pub(super) fn assert_matches_dns_schema(doc: &Value) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/dns-output.schema.json"
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler
        .add_resource("dns-output.schema.json", schema)
        .unwrap();
    let index = compiler
        .compile("dns-output.schema.json", &mut schemas)
        .expect("the schema compiles");
    if let Err(e) = schemas.validate(doc, index) {
        panic!("output does not match the schema: {e:#}");
    }
}
