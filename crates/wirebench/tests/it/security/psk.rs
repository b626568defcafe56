//! Pre-shared-key authentication: the right key runs every kind of session, a missing or wrong
//! key and a replayed or transplanted response are refused with their message, an unusable key
//! file is a usage error, QUIC perf clients are refused, and a server that cannot prove the key
//! is refused by the client.

use std::net::SocketAddr;

use tokio::net::TcpStream;
use wirebench::flows::client::SessionRequest;
use wirebench::flows::rr_client::run_rr_auth;
use wirebench::transport::control;
use wirebench_core::security::auth::{self, CLIENT_LABEL, NONCE_LEN, SERVER_LABEL};
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::proto::{ControlMessage, Preamble};

use super::{key, notice_containing, psk_server_options, rr, transfer};
use crate::support::{TestServer, TEST_TIMEOUT};

/// With the server's key every kind of session runs with exact counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psk_right_key_runs_sessions_with_exact_counts() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(psk_server_options()).await;
        let k = key("the server's key, 32 bytes long!");
        for (protocol, mechanism) in [
            (Protocol::Tcp, Mechanism::Stream),
            (Protocol::Udp, Mechanism::StopAndWait),
            (Protocol::Quic, Mechanism::Stream),
        ] {
            let p = transfer(protocol, mechanism, 200_000);
            let out = SessionRequest::new(server.addr, &p)
                .psk(Some(&k))
                .run()
                .await
                .expect("authenticated session runs");
            assert_eq!((out.server.messages, out.server.bytes), (200, 200_000));
            assert!(!out.server.aborted);
            assert_eq!(server.next_session().await.report, out.server);
        }
        let out = run_rr_auth(server.addr, &rr(Protocol::Udp, 32, 2000, 50), Some(&k))
            .await
            .expect("authenticated rr runs");
        assert_eq!(out.counts.answered, 50);
        assert_eq!(out.server.messages, 50);
    })
    .await
    .expect("test finished in time");
}

/// No key: one clear line on both sides. Wrong key: "authentication failed" on both sides.
/// A client with a key refuses a server that never asks for it. No session starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psk_missing_or_wrong_key_is_refused_with_its_message() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(psk_server_options()).await;
        let p = transfer(Protocol::Tcp, Mechanism::Stream, 10_000);

        let err = SessionRequest::new(server.addr, &p)
            .run()
            .await
            .expect_err("no key is refused");
        assert_eq!(
            format!("{err:#}"),
            "this server requires a pre-shared key: pass --psk FILE"
        );
        let n = notice_containing(&mut server, "authentication").await;
        assert_eq!(
            n,
            "authentication refused: the client has no pre-shared key (it must pass --psk FILE)"
        );

        let wrong = key("not the server's key at all....");
        let err = SessionRequest::new(server.addr, &p)
            .psk(Some(&wrong))
            .run()
            .await
            .expect_err("a wrong key is refused");
        assert_eq!(
            format!("{err:#}"),
            "the server refused the session: authentication failed"
        );
        let n = notice_containing(&mut server, "authentication").await;
        assert_eq!(
            n,
            "authentication failed: wrong pre-shared key, or a replayed response"
        );
        let err = run_rr_auth(server.addr, &rr(Protocol::Udp, 8, 8, 1), Some(&wrong))
            .await
            .expect_err("rr with a wrong key is refused");
        assert!(
            format!("{err:#}").ends_with("authentication failed"),
            "{err:#}"
        );

        // An open server proves nothing: a client holding a key will not talk to it.
        let open = TestServer::start().await;
        let err = SessionRequest::new(open.addr, &p)
            .psk(Some(&wrong))
            .run()
            .await
            .expect_err("a client with a key refuses an open server");
        assert!(
            format!("{err:#}").contains("the server did not ask for the pre-shared key"),
            "{err:#}"
        );
        assert!(server
            .drain_notices()
            .iter()
            .all(|n| !n.contains("session")));
        assert!(server.is_running());
    })
    .await
    .expect("test finished in time");
}

/// Opens a control connection and sends `request`; returns the stream and the request's body.
async fn open_control(addr: SocketAddr, request: &ControlMessage) -> (TcpStream, Vec<u8>) {
    let mut ctrl = TcpStream::connect(addr).await.expect("connect");
    control::write_preamble(&mut ctrl, &Preamble::control())
        .await
        .expect("preamble");
    let mut frame = Vec::new();
    wirebench_core::wire::proto::encode_frame(request, &mut frame);
    tokio::io::AsyncWriteExt::write_all(&mut ctrl, &frame)
        .await
        .expect("request");
    (ctrl, frame[4..].to_vec())
}

async fn challenge(ctrl: &mut TcpStream) -> [u8; NONCE_LEN] {
    match control::recv_setup(ctrl).await.expect("a challenge") {
        ControlMessage::AuthChallenge { nonce } => auth::from_hex(&nonce, "nonce").unwrap(),
        other => panic!("expected a challenge, got {other:?}"),
    }
}

/// A response recorded on one connection is refused on the next (fresh server nonce), and a
/// correct response cannot be moved onto another request. The server proves the key too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psk_replayed_or_transplanted_response_fails() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(psk_server_options()).await;
        let k = key("the server's key, 32 bytes long!");
        let request = ControlMessage::RrRequest(rr(Protocol::Tcp, 8, 8, 1).params);

        // A genuine exchange, recorded.
        let (mut ctrl, body) = open_control(server.addr, &request).await;
        let server_nonce = challenge(&mut ctrl).await;
        let client_nonce = [0x5a; NONCE_LEN];
        let mac = k.mac(CLIENT_LABEL, &server_nonce, &client_nonce, &body);
        let recorded = ControlMessage::AuthResponse {
            nonce: auth::to_hex(&client_nonce),
            mac: auth::to_hex(&mac),
        };
        control::send(&mut ctrl, &recorded).await.unwrap();
        match control::recv_setup(&mut ctrl).await.unwrap() {
            ControlMessage::AuthOk { mac } => {
                let mac = auth::from_hex(&mac, "mac").unwrap();
                k.verify(SERVER_LABEL, &server_nonce, &client_nonce, &body, &mac)
                    .expect("the server proves it holds the key");
            }
            other => panic!("expected auth_ok, got {other:?}"),
        }
        assert!(matches!(
            control::recv_setup(&mut ctrl).await.unwrap(),
            ControlMessage::Accepted { .. }
        ));
        drop(ctrl);

        // The same bytes on a new connection: another nonce, so they fail.
        let (mut replay, _) = open_control(server.addr, &request).await;
        let fresh = challenge(&mut replay).await;
        assert_ne!(fresh, server_nonce, "a fresh nonce per connection");
        control::send(&mut replay, &recorded).await.unwrap();
        assert_eq!(
            control::recv_setup(&mut replay).await.unwrap(),
            ControlMessage::Rejected {
                reason: "authentication failed".into()
            }
        );
        notice_containing(&mut server, "authentication failed").await;

        // A MAC made for one request does not authorise another one on the same nonce.
        let other = ControlMessage::RrRequest(rr(Protocol::Tcp, 8, 60_000, 1).params);
        let (mut moved, _) = open_control(server.addr, &other).await;
        let nonce = challenge(&mut moved).await;
        let mac = k.mac(CLIENT_LABEL, &nonce, &client_nonce, &body);
        control::send(
            &mut moved,
            &ControlMessage::AuthResponse {
                nonce: auth::to_hex(&client_nonce),
                mac: auth::to_hex(&mac),
            },
        )
        .await
        .unwrap();
        assert_eq!(
            control::recv_setup(&mut moved).await.unwrap(),
            ControlMessage::Rejected {
                reason: "authentication failed".into()
            }
        );
    })
    .await
    .expect("test finished in time");
}

/// `--psk` with an unusable key file is a usage error naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psk_flag_refuses_a_short_or_missing_key_file() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let dir = std::env::temp_dir().join(format!("wirebench-psk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let short = dir.join("short");
        std::fs::write(&short, "tooshort\n").unwrap();
        let short_arg = short.to_string_lossy().into_owned();
        for args in [
            vec!["server", "--psk", short_arg.as_str()],
            vec!["ping", "--psk", short_arg.as_str()],
            vec!["run", "--psk", "/nonexistent/wirebench-psk"],
            // An endless file is refused at the bound, not read into memory.
            vec!["run", "--psk", "/dev/zero"],
        ] {
            let out = crate::cli::wirebench(&args).await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains("--psk"), "{stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        }
        let out = crate::cli::wirebench(&["run", "--psk", "/dev/zero"]).await;
        assert!(
            crate::cli::stderr(&out).contains("more than 65536 bytes"),
            "{}",
            crate::cli::stderr(&out)
        );
        let out = crate::cli::wirebench(&["server", "--iperf3", "--psk", &short_arg]).await;
        assert_eq!(out.status.code(), Some(2));
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await
    .expect("test finished in time");
}

/// A QUIC perf client cannot present the key: a server with one closes its connection, and
/// says so in a notice, while an open server serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psk_server_refuses_quic_perf_clients() {
    use wirebench::flows::perf::client::{PerfConfig, Trust};
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start_with(psk_server_options()).await;
        let perf = PerfConfig {
            name: server.addr.to_string(),
            server: server.addr,
            upload: None,
            download: Some(1 << 20),
            trust: Trust::Insecure,
            json: false,
        };
        wirebench::flows::perf::client::run(&perf)
            .await
            .expect_err("a perf client is refused");
        notice_containing(&mut server, "QUIC perf client refused").await;
        assert!(server.is_running());
    })
    .await
    .expect("test finished in time");
}

/// A "server" that challenges but cannot prove the key (it answers with a made-up MAC) is
/// refused by a client holding the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psk_client_refuses_a_server_that_cannot_prove_the_key() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let impostor = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = impostor.local_addr().unwrap();
        let serving = tokio::spawn(async move {
            let (mut s, _) = impostor.accept().await.unwrap();
            control::read_preamble(&mut s).await.unwrap();
            control::recv_setup(&mut s).await.unwrap();
            control::send(
                &mut s,
                &ControlMessage::AuthChallenge {
                    nonce: auth::to_hex(&[1; NONCE_LEN]),
                },
            )
            .await
            .unwrap();
            let answer = control::recv_setup(&mut s).await.unwrap();
            assert!(matches!(answer, ControlMessage::AuthResponse { .. }));
            control::send(
                &mut s,
                &ControlMessage::AuthOk {
                    mac: auth::to_hex(&[2; 32]),
                },
            )
            .await
            .unwrap();
            // Held open: the client must not wait for an `accepted` that never comes.
            let _ = control::recv(&mut s).await;
        });
        let k = key("the server's key, 32 bytes long!");
        let p = transfer(Protocol::Tcp, Mechanism::Stream, 1000);
        let err = SessionRequest::new(addr, &p)
            .psk(Some(&k))
            .run()
            .await
            .expect_err("the impostor is refused");
        assert_eq!(
            format!("{err:#}"),
            "authentication failed: the server does not hold the same pre-shared key"
        );
        serving.await.unwrap();
    })
    .await
    .expect("test finished in time");
}
