//! Our QUIC perf client against our QUIC perf server (exact bytes, the certificate verified when
//! given a CA), and the perf and iperf3 flags checked.

use tokio::sync::mpsc;
use wirebench::flows::perf::client::{PerfConfig, Trust};
use wirebench::flows::server::{Server, ServerOptions};
use wirebench::transport::tls::ServerIdentity;

use crate::cli::{stderr, wirebench};
use crate::support::{TempPath, TestServer, TEST_TIMEOUT};

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
