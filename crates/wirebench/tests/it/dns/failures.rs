//! Failures: bad input refused with one line and exit status 2, a silent TCP resolver timing out
//! every query in flight, Ctrl-C storing the campaign as aborted.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use wirebench::flows::dns::{run_dns, DnsSpec};
use wirebench::store::Store;
use wirebench_core::record::Status;
use wirebench_core::wire::dns::{DnsTransport, Question};

use crate::cli::{stderr, wirebench};
use crate::support::{TempPath, TEST_TIMEOUT};
use wirebench::store::dns::Dns;

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
        let id = store.last_id::<Dns>().unwrap().expect("a campaign");
        let info = store.campaign::<Dns>(id).unwrap().unwrap();
        assert_eq!(info.status, Status::Aborted);
        assert!(info.finished_at_unix_s.is_some());
    })
    .await
    .expect("in time");
}
