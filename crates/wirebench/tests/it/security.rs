//! Pre-shared-key authentication and the no-amplification rule, against real servers on
//! loopback: the right key works, a missing or wrong key and a replayed response are refused
//! with their message, and a UDP source that has not echoed its session's token gets nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpStream, UdpSocket};
use wirebench::flows::client::SessionRequest;
use wirebench::flows::rr_client::{run_rr_auth, RrSpec};
use wirebench::flows::server::ServerOptions;
use wirebench::transport::control;
use wirebench_core::security::amplification::encode_hello;
use wirebench_core::security::auth::{self, Psk, CLIENT_LABEL, NONCE_LEN, SERVER_LABEL};
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::datagram::{Header, Kind, HEADER_LEN};
use wirebench_core::wire::proto::{ControlMessage, Preamble, RrParams, SessionParams};

use crate::support::{TestServer, TEST_TIMEOUT};

fn key(text: &str) -> Arc<Psk> {
    Arc::new(Psk::from_file_contents(text.as_bytes()).expect("a valid key"))
}

fn psk_server_options() -> ServerOptions {
    ServerOptions::default().with_psk(Some(key("the server's key, 32 bytes long!")))
}

fn transfer(protocol: Protocol, mechanism: Mechanism, total_bytes: u64) -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol,
        mechanism,
        msg_size: 1000,
        total_bytes,
        rto_us: None,
        rate_bps: None,
        grace_us: 200_000,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

fn rr(protocol: Protocol, request: u32, response: u32, count: u64) -> RrSpec {
    RrSpec {
        params: RrParams {
            protocol,
            request,
            response,
            flows: 1,
            concurrency: 1,
            new_connection: false,
        },
        count: Some(count),
        duration: None,
        interval: None,
        timeout: Duration::from_secs(2),
        retries: 0,
        resumption_probe: false,
    }
}

/// Waits for a notice containing `needle`; returns it.
async fn notice_containing(server: &mut TestServer, needle: &str) -> String {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), server.events.recv())
            .await
            .unwrap_or_else(|_| panic!("a notice containing {needle:?} within 10 s"))
            .expect("server running");
        if let wirebench::flows::server::ServerEvent::Notice(n) = ev {
            if n.message.contains(needle) {
                return n.message;
            }
        }
    }
}

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

/// The notices up to the next session summary, and the summary.
async fn notices_and_session(
    server: &mut TestServer,
) -> (Vec<String>, wirebench::flows::server::SessionSummary) {
    let mut notices = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(30), server.events.recv())
            .await
            .expect("a session summary within 30 s")
            .expect("server running");
        match ev {
            wirebench::flows::server::ServerEvent::Notice(n) => notices.push(n.message),
            wirebench::flows::server::ServerEvent::Session(s) => return (notices, *s),
        }
    }
}

fn find<'a>(notices: &'a [String], needle: &str) -> &'a str {
    notices
        .iter()
        .find(|n| n.contains(needle))
        .unwrap_or_else(|| panic!("a notice containing {needle:?} in {notices:?}"))
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

/// Bytes waiting on `socket` now, without waiting.
fn pending_bytes(socket: &UdpSocket) -> u64 {
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0;
    while let Ok(n) = socket.try_recv(&mut buf) {
        total += n as u64;
    }
    total
}

fn request_datagram(session: u32, seq: u64, request: u32) -> Vec<u8> {
    let mut d = vec![0u8; HEADER_LEN + request as usize];
    Header {
        kind: Kind::Request,
        retransmit: false,
        session,
        seq,
    }
    .write_to(&mut d)
    .unwrap();
    d
}

async fn recv_timeout(socket: &UdpSocket, buf: &mut [u8]) -> usize {
    tokio::time::timeout(Duration::from_secs(5), socket.recv(buf))
        .await
        .expect("an answer within 5 s")
        .expect("recv")
}

/// rr over UDP with responses 1000× the request: a source on the client's IP that knows the
/// session id but not the token (no hello, or a hello with a wrong token), and a source on
/// another IP that knows both, get nothing. With the token the counts are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_rr_answers_no_source_that_has_not_echoed_the_token() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let (request, response) = (16u32, 16_000u32);
        let ask = ControlMessage::RrRequest(rr(Protocol::Udp, request, response, 1).params);
        let (mut ctrl, granted) = control::request_session(server.addr, &ask)
            .await
            .expect("accepted");
        let (session, token) = (granted.session, granted.token);

        let attacker = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        attacker.connect(server.addr).await.unwrap();
        let elsewhere = UdpSocket::bind("127.0.0.2:0").await.unwrap();
        elsewhere.connect(server.addr).await.unwrap();
        let mut sent_by_attacker = 0u64;
        for seq in 0..20 {
            let d = request_datagram(session, seq, request);
            sent_by_attacker += attacker.send(&d).await.unwrap() as u64;
        }
        let bad_hello = encode_hello(session, token ^ 1, 0);
        sent_by_attacker += attacker.send(&bad_hello).await.unwrap() as u64;
        sent_by_attacker += attacker.send(&bad_hello[..HEADER_LEN]).await.unwrap() as u64;
        // Another IP with the right token (as if it had sniffed it): still nothing.
        elsewhere
            .send(&encode_hello(session, token, 0))
            .await
            .unwrap();
        elsewhere
            .send(&request_datagram(session, 0, request))
            .await
            .unwrap();

        // The genuine client: the hello with the token is echoed (16 bytes for 20), then every
        // request is answered. Its answers come after the server handled everything above.
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(server.addr).await.unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let hello = encode_hello(session, token, 0);
        client.send(&hello).await.unwrap();
        let n = recv_timeout(&client, &mut buf).await;
        assert_eq!(n, HEADER_LEN, "the echo is no larger than the hello");
        assert_eq!(Header::decode(&buf[..n]).unwrap().kind, Kind::Hello);
        for seq in 0..10 {
            client
                .send(&request_datagram(session, seq, request))
                .await
                .unwrap();
            let n = recv_timeout(&client, &mut buf).await;
            assert_eq!(n, HEADER_LEN + response as usize);
            let h = Header::decode(&buf[..n]).unwrap();
            assert_eq!((h.kind, h.seq), (Kind::Response, seq));
        }
        let got_by_attacker = pending_bytes(&attacker);
        assert!(got_by_attacker <= sent_by_attacker);
        assert_eq!(got_by_attacker, 0, "nothing is answered before validation");
        assert_eq!(pending_bytes(&elsewhere), 0);

        control::send(
            &mut ctrl,
            &ControlMessage::SenderDone {
                messages_sent: 10,
                bytes_sent: 10 * u64::from(request),
            },
        )
        .await
        .unwrap();
        let report = control::read_report(&mut ctrl).await.expect("report");
        assert_eq!(
            report.messages, 10,
            "only the genuine requests were answered"
        );
        assert_eq!(
            report.read_calls, 10,
            "dropped datagrams are not the session's"
        );
        let (notices, summary) = notices_and_session(&mut server).await;
        assert_eq!(summary.report, report);
        let dropped = find(&notices, "never answered, from addresses");
        assert!(
            dropped.contains("dropped 22 UDP datagrams")
                && dropped.contains("(2 hellos with a wrong token, 20 other datagrams"),
            "{dropped}"
        );
        find(&notices, "matched no session");
    })
    .await
    .expect("test finished in time");
}

/// A reversed UDP session sends its data only to a source that echoed the token: hellos
/// without it, from the client's own IP, get no data at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_reverse_sends_nothing_to_a_source_without_the_token() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let mut p = transfer(Protocol::Udp, Mechanism::Stream, 100_000);
        p.reverse = true;
        let (mut ctrl, granted) =
            control::request_session(server.addr, &ControlMessage::SessionRequest(p))
                .await
                .expect("accepted");
        let (session, token) = (granted.session, granted.token);
        let attacker = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        attacker.connect(server.addr).await.unwrap();
        let mut sent_by_attacker = 0u64;
        // The hello of before this rule (no token), and one with a wrong token.
        let hello = encode_hello(session, token.wrapping_add(1), 0);
        sent_by_attacker += attacker.send(&hello[..HEADER_LEN]).await.unwrap() as u64;
        sent_by_attacker += attacker.send(&hello).await.unwrap() as u64;

        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(server.addr).await.unwrap();
        client.send(&encode_hello(session, token, 0)).await.unwrap();
        let done = control::recv(&mut ctrl).await.expect("done message");
        let Some(ControlMessage::SenderDone {
            messages_sent,
            bytes_sent,
        }) = done
        else {
            panic!("expected sender_done, got {done:?}");
        };
        assert_eq!((messages_sent, bytes_sent), (100, 100_000));
        // Every datagram went to the genuine client (loopback, small and unpaced: none lost
        // unless the socket buffer overflowed, so count at most what was sent).
        let got = pending_bytes(&client);
        assert!(got > 0 && got <= 100 * (HEADER_LEN as u64 + 1000), "{got}");
        let got_by_attacker = pending_bytes(&attacker);
        assert!(got_by_attacker <= sent_by_attacker);
        assert_eq!(got_by_attacker, 0);
        let report = control::read_report(&mut ctrl).await.expect("report");
        assert_eq!(report.messages, 100);
        let (notices, _) = notices_and_session(&mut server).await;
        let dropped = find(&notices, "never answered, from addresses");
        assert!(
            dropped.contains("(2 hellos with a wrong token"),
            "{dropped}"
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
        ] {
            let out = crate::cli::wirebench(&args).await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains("--psk"), "{stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        }
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

/// The client copes with the loss of its hello (or of the echo) by repeating it, and the
/// session's counts stay exact: 50% loss each way, a seed whose first hello is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_hello_loss_is_repaired_and_counts_stay_exact() {
    use crate::support::Forwarder;
    use std::sync::atomic::Ordering::SeqCst;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let fwd = Forwarder::start(server.addr, 0.5, 1, u64::MAX).await;
        let mut p = transfer(Protocol::Udp, Mechanism::StopAndWait, 5_000);
        p.rto_us = Some(20_000);
        let out = SessionRequest::new(fwd.addr, &p)
            .run()
            .await
            .expect("session runs through 50% loss");
        assert_eq!((out.server.messages, out.server.bytes), (5, 5_000));
        assert_eq!(server.next_session().await.report, out.server);
        let f = &fwd.counts;
        let (hellos, lost) = (
            f.hellos_forwarded.load(SeqCst),
            f.hellos_dropped.load(SeqCst),
        );
        assert!(lost >= 1, "the seed drops the first hello");
        assert!(hellos >= 1, "a repeated hello got through");
        assert!(f.echoes_forwarded.load(SeqCst) >= 1);
        // Data datagrams are exactly what the server counted (hellos are not data).
        assert_eq!(out.server.read_calls, f.c2s_forwarded.load(SeqCst));
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
