//! The no-amplification rule: a UDP source that has not echoed its session's token gets no rr
//! answers and no reversed data, and a lost hello is repaired with the counts still exact.

use std::time::Duration;

use tokio::net::UdpSocket;
use wirebench::flows::client::SessionRequest;
use wirebench::transport::control;
use wirebench_core::security::amplification::encode_hello;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::datagram::{Header, Kind, HEADER_LEN};
use wirebench_core::wire::proto::ControlMessage;

use super::{rr, transfer};
use crate::support::{TestServer, TEST_TIMEOUT};

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
