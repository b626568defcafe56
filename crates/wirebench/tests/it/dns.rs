//! `wirebench dns` against a real resolver (Debian's unbound, started by each test on loopback
//! with a static local zone and a generated TLS certificate): exact answers over UDP, TCP and
//! DoT, NXDOMAIN counted as such, TC=1 retried over TCP, wrong answers counted, and UDP
//! timeouts equal to what wirebench's relay dropped. Skips when unbound is not installed.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use wirebench::flows::dns::{run_dns, DnsSpec};
use wirebench::flows::relay::{Relay, RelayConfig};
use wirebench::store::Store;
use wirebench_core::machine::impair::Impairments;
use wirebench_core::record::dns::{DnsResult, NewDnsCampaign};
use wirebench_core::record::Status;
use wirebench_core::wire::dns::{DnsTransport, Question};

use crate::cli::{stderr, wirebench};
use crate::support::{TempPath, TEST_TIMEOUT};

const UNBOUND: &str = "/usr/sbin/unbound";
/// The name the test certificate is issued for (sent as SNI).
const TLS_NAME: &str = "dns.wb.test";
const HOST_A: &str = "host.wb.test. 300 IN A 192.0.2.7";
/// TXT records that do not fit a 512-byte UDP answer (each 60 characters).
const BIG_RECORDS: usize = 12;

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
async fn dns_json(ub: &Unbound, extra: &[&str]) -> Value {
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

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

/// Panics unless `doc` is valid against docs/dns-output.schema.json.
fn assert_matches_dns_schema(doc: &Value) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transport_gets_the_exact_answer() {
    let Some(ub) = Unbound::start() else { return };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let doc = dns_json(
            &ub,
            &[
                "--name",
                "host.wb.test",
                "--transport",
                "udp,tcp,dot",
                "--count",
                "40",
                "--flows",
                "2",
                "--concurrency",
                "1,8",
            ],
        )
        .await;
        assert_eq!(doc["name"], "host.wb.test.");
        assert_eq!(doc["record_type"], "A");
        let results = doc["results"].as_array().unwrap();
        assert_eq!(results.len(), 6, "3 transports x 2 concurrencies");
        for (r, (tr, k)) in results.iter().zip([
            ("udp", 1),
            ("udp", 8),
            ("tcp", 1),
            ("tcp", 8),
            ("dot", 1),
            ("dot", 8),
        ]) {
            assert_eq!(
                (r["transport"].as_str().unwrap(), u(r, "/concurrency")),
                (tr, k)
            );
            let c = &r["counts"];
            for (field, want) in [
                ("sent", 80),
                ("answered", 80),
                ("noerror", 80),
                ("nxdomain", 0),
                ("timeouts", 0),
                ("retries", 0),
                ("tc_retries", 0),
                ("wrong", 0),
                ("failed", 0),
            ] {
                assert_eq!(u(c, &format!("/{field}")), want, "{tr} K={k} {field}: {r}");
            }
            assert_eq!(u(r, "/response/samples"), 80, "{r}");
            assert_eq!(r["answer"], serde_json::json!([HOST_A]), "{tr}");
            match tr {
                "udp" => {
                    assert_eq!(u(c, "/connections"), 0);
                    assert!(r["tcp_connect"].is_null() && r["tls_handshake"].is_null());
                    assert_eq!(u(r, "/transport_stats/packets_sent"), 80);
                }
                _ => {
                    // One connection per flow, each timed; TLS only for DoT.
                    assert_eq!(u(c, "/connections"), 2, "{r}");
                    assert_eq!(u(r, "/tcp_connect/samples"), 2);
                    assert_eq!(r["tls_handshake"].is_null(), tr == "tcp", "{r}");
                    if tr == "dot" {
                        assert_eq!(u(r, "/tls_handshake/samples"), 2);
                    }
                    assert!(r["retrans_rate"].is_number(), "TCP_INFO read: {r}");
                }
            }
        }
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nxdomain_is_counted_as_such_and_aaaa_answered_exactly() {
    let Some(ub) = Unbound::start() else { return };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let doc = dns_json(
            &ub,
            &[
                "--name",
                "nope.wb.test",
                "--transport",
                "udp,tcp,dot",
                "--count",
                "25",
            ],
        )
        .await;
        for r in doc["results"].as_array().unwrap() {
            let c = &r["counts"];
            assert_eq!(
                (
                    u(c, "/sent"),
                    u(c, "/answered"),
                    u(c, "/nxdomain"),
                    u(c, "/noerror")
                ),
                (25, 25, 25, 0),
                "{r}"
            );
            assert_eq!(u(c, "/wrong") + u(c, "/timeouts"), 0);
            assert_eq!(r["answer"], serde_json::json!([]));
        }
        let doc = dns_json(
            &ub,
            &["--name", "HOST.wb.test", "--type", "aaaa", "--count", "5"],
        )
        .await;
        let r = &doc["results"][0];
        assert_eq!(u(r, "/counts/noerror"), 5);
        assert_eq!(
            r["answer"],
            serde_json::json!(["host.wb.test. 300 IN AAAA 2001:db8::7"])
        );
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_udp_answers_are_retried_over_tcp() {
    let Some(ub) = Unbound::start() else { return };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let doc = dns_json(
            &ub,
            &[
                "--name",
                "big.wb.test",
                "--type",
                "TXT",
                "--transport",
                "udp",
                "--count",
                "30",
                "--concurrency",
                "4",
            ],
        )
        .await;
        let r = &doc["results"][0];
        let c = &r["counts"];
        // Every UDP answer comes back with TC=1 and is asked again over TCP, on a connection
        // of its own, and then answered in full.
        assert_eq!(
            (
                u(c, "/sent"),
                u(c, "/tc_retries"),
                u(c, "/connections"),
                u(c, "/answered")
            ),
            (30, 30, 30, 30),
            "{r}"
        );
        assert_eq!(
            (u(c, "/noerror"), u(c, "/wrong"), u(c, "/timeouts")),
            (30, 0, 0)
        );
        assert_eq!(u(r, "/tcp_connect/samples"), 30);
        assert_eq!(r["answer"].as_array().unwrap().len(), BIG_RECORDS, "{r}");
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_per_query_times_every_handshake() {
    let Some(ub) = Unbound::start() else { return };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let doc = dns_json(
            &ub,
            &[
                "--name",
                "host.wb.test",
                "--transport",
                "tcp,dot",
                "--count",
                "15",
                "--flows",
                "2",
                "--concurrency",
                "3",
                "--new-connection",
            ],
        )
        .await;
        for r in doc["results"].as_array().unwrap() {
            let c = &r["counts"];
            assert_eq!(
                (u(c, "/sent"), u(c, "/answered"), u(c, "/connections")),
                (30, 30, 30),
                "{r}"
            );
            assert_eq!(u(r, "/tcp_connect/samples"), 30);
            if r["transport"] == "dot" {
                assert_eq!(u(r, "/tls_handshake/samples"), 30);
            }
            assert_eq!(r["new_connection"], true);
        }
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_timeouts_equal_what_the_relay_dropped() {
    let Some(ub) = Unbound::start() else { return };
    tokio::time::timeout(TEST_TIMEOUT, async {
        // (K, queries, seed): one query outstanding waits out each drop in turn, so fewer.
        for (k, count, seed) in [(1u32, 100u64, 0x5eedu64), (8, 300, 0xfeed)] {
            let relay = Relay::start(RelayConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                upstream: ub.addr(),
                impairments: Impairments::parse_list("loss=10%").unwrap(),
                seed,
                tcp: true,
                udp: true,
            })
            .await
            .expect("relay starts");
            let spec = DnsSpec {
                resolver: relay.local_addr(),
                transport: DnsTransport::Udp,
                question: Arc::new(Question::new("host.wb.test", "A").unwrap()),
                count,
                flows: 1,
                concurrency: k,
                new_connection: false,
                // Long enough that an answer the relay let through is never late on a busy
                // machine (late answers would make timeouts exceed the drops).
                timeout: Duration::from_millis(500),
                retries: 0,
                tls: None,
                tcp_fallback: relay.local_addr(),
            };
            let out = run_dns(&spec).await.expect("run");
            let n = relay.counts();
            let c = out.counts;
            assert!(
                n.udp_up.dropped + n.udp_down.dropped > 0,
                "K={k}: the relay dropped nothing: relay {n:?}, probe {c:?}"
            );
            // With --retries 0 every query is one datagram each way: a query dropped on the way
            // in, or its answer dropped on the way back, is one timeout; nothing else is.
            assert_eq!(n.udp_up.received, count, "K={k}: one datagram per query");
            assert_eq!(c.sent, count);
            assert_eq!(c.timeouts, n.udp_up.dropped + n.udp_down.dropped, "K={k}");
            assert_eq!(c.answered, n.udp_down.forwarded, "K={k}");
            assert_eq!(c.sent, c.answered + c.timeouts);
            assert_eq!((c.late, c.retries, c.wrong), (0, 0, 0));
        }
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_answers_are_counted_not_timed() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        // A fake resolver: for every query, an answer with another ID, one to another question,
        // then the right (empty NOERROR) answer.
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let fake = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            loop {
                let (n, from) = sock.recv_from(&mut buf).await.unwrap();
                let mut answer = buf[..n].to_vec();
                answer[2] |= 0x80; // QR: a response
                let mut other_id = answer.clone();
                other_id[0] ^= 0x55;
                let mut other_question = answer.clone();
                other_question[13] = b'x'; // "host" → "xost"
                for m in [&other_id, &other_question, &answer] {
                    sock.send_to(m, from).await.unwrap();
                }
            }
        });
        let spec = DnsSpec {
            resolver: addr,
            transport: DnsTransport::Udp,
            question: Arc::new(Question::new("host.wb.test", "A").unwrap()),
            count: 50,
            flows: 1,
            concurrency: 1,
            new_connection: false,
            timeout: Duration::from_secs(2),
            retries: 0,
            tls: None,
            tcp_fallback: addr,
        };
        let out = run_dns(&spec).await.expect("run");
        fake.abort();
        let c = out.counts;
        assert_eq!((c.sent, c.answered, c.noerror), (50, 50, 50));
        assert_eq!(c.wrong, 100, "two untrusted messages per query");
        assert_eq!(out.response.map(|r| r.samples), Some(50));
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn bad_input_gets_one_line_and_exit_status_2() {
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "dns",
                "--resolver",
                "127.0.0.1",
                "--name",
                "a.test",
                "--transport",
                "dot",
            ],
            "--dot-ca",
        ),
        (
            &[
                "dns",
                "--resolver",
                "127.0.0.1",
                "--name",
                "a.test",
                "--type",
                "BOGUS",
            ],
            "unknown record type",
        ),
        (
            &["dns", "--resolver", "127.0.0.1:70000", "--name", "a.test"],
            "expected ADDR or ADDR:PORT",
        ),
        (
            &[
                "dns",
                "--resolver",
                "127.0.0.1",
                "--name",
                "a.test",
                "--concurrency",
                "0",
            ],
            "allowed 1 to",
        ),
        (
            &[
                "dns",
                "--resolver",
                "127.0.0.1",
                "--name",
                "a.test",
                "--transport",
                "quic",
            ],
            "allowed udp, tcp, dot",
        ),
        (
            &["dns", "--resolver", "127.0.0.1", "--name", &"a".repeat(70)],
            "not a domain name",
        ),
    ];
    for (args, want) in cases {
        let out = wirebench(args).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// A stored DNS campaign (the results of a real sweep through a lossy relay, kept as a
/// fixture) reads back unchanged, and `report --dns` renders it: the HTML page with the
/// timeouts-against-concurrency chart byte for byte as its snapshot (set
/// WIREBENCH_UPDATE_SNAPSHOTS=1 to rewrite it after an intended change), the JSON against the
/// schema, the text table.
#[tokio::test]
async fn a_stored_campaign_reports_its_timeout_curve_as_a_chart() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{manifest}/tests/fixtures/dns-sweep.json")).unwrap(),
    )
    .unwrap();
    let results: Vec<DnsResult> = serde_json::from_value(fixture["results"].clone()).unwrap();
    assert_eq!(results.len(), 6);
    let db = TempPath::new(".sqlite3");
    let id = {
        let mut store = Store::open(&db.0).unwrap();
        let id = store
            .begin_dns_campaign(&NewDnsCampaign {
                started_at_unix_s: 1_700_000_000,
                resolver: "127.0.0.1:5354".into(),
                name: "host.example.test.".into(),
                record_type: "A".into(),
                transports: "udp,tcp".into(),
                concurrency: "1,10,40".into(),
                planned_results: 6,
                host_name: Some("testhost".into()),
                wirebench_version: "0.1.0".into(),
            })
            .unwrap();
        for (i, r) in results.iter().enumerate() {
            store.add_dns_result(id, i as u64 + 1, r).unwrap();
        }
        store
            .finish_dns_campaign(id, Status::Complete, 1_700_000_060)
            .unwrap();
        let back = store.dns_results(id).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            fixture["results"],
            "stored results read back unchanged"
        );
        assert_eq!(
            store.dns_campaign(id).unwrap().unwrap().status,
            Status::Complete
        );
        id
    };
    let id_arg = id.to_string();
    let html = wirebench(&[
        "report",
        "--dns",
        &id_arg,
        "--format",
        "html",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(html.status.success(), "{}", stderr(&html));
    let page = String::from_utf8(html.stdout).unwrap();
    assert!(page.contains("DNS: UDP loss and TCP retransmissions against queries in flight"));
    assert!(page.contains("<svg") && page.contains("\nUDP\n") && page.contains("\nTCP\n"));
    crate::support::assert_snapshot("dns-report.html", page.as_bytes());
    let json = wirebench(&[
        "report",
        "--dns",
        "--last",
        "--format",
        "json",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(json.status.success(), "{}", stderr(&json));
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_matches_dns_schema(&doc);
    assert_eq!(doc["results"], fixture["results"]);
    let table = wirebench(&["report", "--dns", &id_arg, "--db", db.arg()]).await;
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.starts_with(&format!("DNS campaign {id} (complete")),
        "{text}"
    );
    let udp40 = &results[2];
    assert!(
        text.contains(&format!(
            "udp      40        200        {}        {}",
            udp40.counts.answered, udp40.counts.timeouts
        )),
        "{text}"
    );
    // The history lists it, with every result stored.
    let runs = wirebench(&["runs", "--db", db.arg()]).await;
    let listing = String::from_utf8(runs.stdout).unwrap();
    let row = listing
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{id} ")) && l.contains("over udp"))
        .unwrap_or_else(|| panic!("a DNS row: {listing}"));
    assert!(
        row.contains(&format!(
            "complete     {:>9}",
            format!("{0}/{0}", results.len())
        )),
        "{row}"
    );
    let bad = wirebench(&["report", "--dns", "99", "--db", db.arg()]).await;
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("no DNS campaign 99"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_checks_the_certificate_name_unless_insecure() {
    let Some(ub) = Unbound::start() else { return };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let resolver = ub.addr().to_string();
        let tls_port = ub.tls_port.to_string();
        let ca = ub.ca();
        let base = [
            "dns",
            "--resolver",
            &resolver,
            "--dot-port",
            &tls_port,
            "--name",
            "host.wb.test",
            "--transport",
            "dot",
            "--count",
            "3",
            "--no-store",
            "--dot-name",
            "other.wb.test",
        ];
        // The CA is trusted, but its certificate is for dns.wb.test: the run fails (status 1).
        let mut args = base.to_vec();
        args.extend(["--dot-ca", &ca]);
        let out = wirebench(&args).await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("TLS handshake"), "{}", stderr(&out));
        // Accepting any certificate, the same name gets answers.
        let mut args = base.to_vec();
        args.push("--dot-insecure");
        let out = wirebench(&args).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("sent 3, answered 3 (NOERROR 3"), "{text}");
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_tcp_resolver_times_out_every_query_in_flight() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        // Accepts, reads and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                held.push(tokio::spawn(async move {
                    let mut sink = Vec::new();
                    let _ = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut sink).await;
                }));
            }
        });
        let spec = DnsSpec {
            resolver: addr,
            transport: DnsTransport::Tcp,
            question: Arc::new(Question::new("host.wb.test", "A").unwrap()),
            count: 6,
            flows: 1,
            concurrency: 3,
            new_connection: false,
            timeout: Duration::from_millis(200),
            retries: 0,
            tls: None,
            tcp_fallback: addr,
        };
        let out = run_dns(&spec).await.expect("run");
        silent.abort();
        let c = out.counts;
        // Two connections of three queries each, each silent for the timeout.
        assert_eq!(
            (c.sent, c.timeouts, c.answered, c.connections),
            (6, 6, 0, 2)
        );
        assert!(out.response.is_none());
        assert_eq!(out.connect.map(|r| r.samples), Some(2));
    })
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stores_the_campaign_as_aborted() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        // A resolver that takes queries and never answers: the run waits on its timeout.
        let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let resolver = silent.local_addr().unwrap().to_string();
        let db = TempPath::new(".sqlite3");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .args(["dns", "--resolver", &resolver, "--name", "host.wb.test"])
            .args(["--transport", "udp", "--count", "3", "--timeout", "30s"])
            .args(["--db", db.arg()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // Its first query has arrived: the campaign is stored as running by now.
        let mut buf = [0u8; 512];
        silent.recv_from(&mut buf).await.unwrap();
        let pid = i32::try_from(child.id().unwrap()).unwrap();
        // SAFETY: kill(2) on our own child's PID has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let out = child.wait_with_output().await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "128 + SIGINT: {err}");
        assert!(err.contains("is stored as aborted"), "{err}");
        let store = Store::open(std::path::Path::new(db.arg())).unwrap();
        let id = store.last_dns_campaign_id().unwrap().expect("a campaign");
        let info = store.dns_campaign(id).unwrap().unwrap();
        assert_eq!(info.status, Status::Aborted);
        assert!(info.finished_at_unix_s.is_some());
    })
    .await
    .expect("in time");
}

/// The shell commands of the guide's DoT recipe (docs/guide/dns.md) that make certificates
/// (`openssl`, `printf`), continuation lines joined, with /tmp/ replaced by `dir`.
fn readme_certificate_commands(dir: &str) -> Vec<String> {
    let readme = include_str!("../../../../docs/guide/dns.md");
    let section = readme
        .split("# DNS response time")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the guide's DNS page");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|s| s.split("\n```").next())
        .expect("the DoT recipe block");
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                let command = std::mem::take(&mut current);
                if command.starts_with("openssl ") || command.starts_with("printf ") {
                    commands.push(command.replace("/tmp/", &format!("{dir}/")));
                }
            }
        }
    }
    commands
}

#[tokio::test]
async fn the_readmes_dot_certificates_are_accepted() {
    let openssl = std::process::Command::new("openssl")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !openssl {
        eprintln!("skipped: openssl is not installed");
        return;
    }
    let dir = TempPath::new("-readme-dot");
    std::fs::create_dir_all(&dir.0).unwrap();
    let commands = readme_certificate_commands(dir.arg());
    assert!(commands.len() >= 4, "the recipe's commands: {commands:?}");
    for command in &commands {
        let out = std::process::Command::new("sh")
            .args(["-c", command])
            .stdin(Stdio::null())
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let Some(ub) = Unbound::start_with(Some(&dir.0)) else {
        return;
    };
    // The trust the README names: its CA, its resolver name.
    let (resolver, tls_port, ca) = (ub.addr().to_string(), ub.tls_port.to_string(), ub.ca());
    let out = wirebench(&[
        "dns",
        "--resolver",
        &resolver,
        "--dot-port",
        &tls_port,
        "--dot-ca",
        &ca,
        "--dot-name",
        "resolver.test",
        "--name",
        "host.wb.test",
        "--transport",
        "dot",
        "--count",
        "20",
        "--json",
        "--no-store",
    ])
    .await;
    assert!(
        out.status.success(),
        "DoT with the README's certificates: {}",
        stderr(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(u(&doc, "/results/0/counts/answered"), 20, "{doc}");
}
