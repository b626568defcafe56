//! Transport counters, CPU time, parallel flows and interval series, checked against what is
//! known on loopback: exact sums, no retransmissions on an idle link, series that add up.

use serde_json::Value;
use wirebench::flows::client::SessionRequest;
use wirebench::flows::parallel::{self, RunFlows};
use wirebench_core::vocab::counters::StatsSource;
use wirebench_core::vocab::plan::{message_count, split_flows, Mechanism, Protocol};
use wirebench_core::wire::proto::SessionParams;

use crate::cli::{assert_matches_schema, stderr, wirebench};
use crate::support::{within, TestServer};

fn spec(protocol: Protocol, mechanism: Mechanism, msg_size: u32, total: u64) -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol,
        mechanism,
        msg_size,
        total_bytes: total,
        rto_us: None,
        rate_bps: (protocol == Protocol::Udp).then_some(200_000_000),
        grace_us: 200_000,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_loopback_tcp_retransmits_nothing_and_every_end_reports_counters_and_cpu() {
    within(async {
        let server = TestServer::start().await;
        let total = 8 << 20;
        // Loopback loses nothing when idle, but this binary runs its tests in parallel: a
        // burst of another test can overflow the loopback backlog, or starve an ACK past the
        // tail-loss probe. So up to three sessions; one of them must retransmit nothing.
        let mut seen = Vec::new();
        let out = loop {
            let out = SessionRequest::new(
                server.addr,
                &spec(Protocol::Tcp, Mechanism::Stream, 1024, total),
            )
            .run()
            .await
            .expect("session runs");
            let t = out.client.transport.clone().expect("TCP_INFO on Linux");
            assert_eq!(t.source, StatsSource::TcpInfo);
            // 8 MiB cannot leave in fewer segments than 64 KiB GSO super-segments carry.
            assert!(t.packets_sent >= total / 65536, "{t:?}");
            if t.packets_retransmitted == 0 {
                assert_eq!(t.retrans_rate(), Some(0.0));
                break out;
            }
            seen.push(t);
            assert!(seen.len() < 3, "no quiet session in three: {seen:?}");
        };
        let t = out.client.transport.clone().expect("TCP_INFO on Linux");
        assert!(
            out.server.transport.is_some(),
            "the receiver reads TCP_INFO too"
        );
        let cpu = out.client.cpu.expect("getrusage");
        assert!(
            cpu.user_us + cpu.system_us > 0,
            "moving 8 MiB costs CPU: {t:?}"
        );
        assert!(out.server.cpu.is_some());

        let quic = SessionRequest::new(
            server.addr,
            &spec(Protocol::Quic, Mechanism::Stream, 1024, 4 << 20),
        )
        .run()
        .await
        .expect("session runs");
        let q = quic.client.transport.expect("quinn's stats");
        assert_eq!(q.source, StatsSource::Quic);
        // At least one packet per path MTU of payload (discovery reaches 6550 on loopback).
        let mtu = q.path_mtu.expect("QUIC reports its path MTU");
        assert!(q.packets_sent >= (4 << 20) / mtu, "{q:?}");
        assert!(q.srtt_us.is_some() && q.cwnd_bytes.is_some());

        let udp = SessionRequest::new(
            server.addr,
            &spec(Protocol::Udp, Mechanism::StopAndWait, 1024, 100_000),
        )
        .run()
        .await
        .expect("session runs");
        let u = udp.client.transport.expect("UDP tallies");
        assert_eq!(u.source, StatsSource::Udp);
        assert_eq!(u.packets_sent, udp.client.tally.datagrams);
        assert_eq!(u.packets_retransmitted, udp.client.tally.retransmissions);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_flows_add_up_to_the_exact_total_for_every_protocol() {
    within(async {
        let mut server = TestServer::start().await;
        // 1_000_003 B in 1000 B messages: 1001 messages, the last one 3 B.
        let (size, total) = (1000, 1_000_003);
        for (protocol, mechanism) in [
            (Protocol::Tcp, Mechanism::Stream),
            (Protocol::Quic, Mechanism::Stream),
            (Protocol::Udp, Mechanism::StopAndWait),
            (Protocol::Tcp, Mechanism::StopAndWait),
        ] {
            // The runner's split: whole messages, so the flows add up to the total exactly.
            let params = spec(protocol, mechanism, size, total);
            let flows = split_flows(total, size, 3)
                .expect("1001 messages split three ways")
                .into_iter()
                .map(|total_bytes| {
                    let p = SessionParams {
                        total_bytes,
                        ..params.clone()
                    };
                    SessionRequest::new(server.addr, &p)
                })
                .collect();
            let run = parallel::run(RunFlows {
                flows,
                back: Vec::new(),
            })
            .await
            .expect("flows run");
            assert!(run.back.is_none());
            let (sum, flows) = run.forward;
            let what = format!("{protocol} {mechanism}");
            assert_eq!(flows.len(), 3, "{what}");
            assert_eq!(sum.client.tally.bytes, total, "{what}");
            assert_eq!(sum.server.bytes, total, "{what}");
            assert_eq!(sum.client.tally.messages, message_count(total, size));
            assert_eq!(sum.server.messages, message_count(total, size));
            // 1001 messages over 3 flows: 334, 334, 333 (the last carries the 3-byte tail).
            let per_flow: Vec<u64> = flows.iter().map(|f| f.server.bytes).collect();
            assert_eq!(per_flow, vec![334_000, 334_000, 332_003], "{what}");
            for f in &flows {
                assert_eq!(f.client.tally.bytes, f.server.bytes, "{what}");
                assert!(!f.server.aborted, "{what}: {:?}", f.server.abort_reason);
            }
            // The server saw three sessions, one per flow.
            let mut sessions: Vec<u32> = Vec::new();
            for _ in 0..3 {
                sessions.push(server.next_session().await.session);
            }
            sessions.sort_unstable();
            let mut expected: Vec<u32> = flows.iter().map(|f| f.session).collect();
            expected.sort_unstable();
            assert_eq!(sessions, expected, "{what}");
            if mechanism == Mechanism::StopAndWait {
                let rtt = sum.client.rtt.expect("merged round trips");
                let flow_samples: u64 = flows
                    .iter()
                    .map(|f| f.client.rtt.map_or(0, |r| r.samples))
                    .sum();
                assert_eq!(
                    rtt.samples, flow_samples,
                    "{what}: every flow's samples merged"
                );
                if protocol == Protocol::Tcp {
                    // Reliable stream: one round trip per message (UDP drops retransmitted
                    // messages' samples, Karn's rule).
                    assert_eq!(rtt.samples, message_count(total, size), "{what}");
                }
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_series_add_up_to_the_run_and_match_the_schema() {
    within(async {
        let total: u64 = 24 << 20;
        let out = wirebench(&[
            "run",
            "--json",
            "--no-store",
            "--proto",
            "tcp,udp",
            "--rate",
            "400Mbit",
            "-l",
            "1024",
            "-n",
            &total.to_string(),
            "-P",
            "2",
            "-i",
            "10ms",
        ])
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_matches_schema(&doc);
        assert_eq!(doc["parameters"]["parallel"], 2);
        let runs = doc["runs"].as_array().expect("runs");
        let protocols: Vec<&str> = runs.iter().filter_map(|r| r["protocol"].as_str()).collect();
        assert_eq!(protocols, ["tcp", "udp"], "one run per protocol");
        for run in runs {
            let proto = &run["protocol"];
            let sum = |side: &str| -> u64 {
                let intervals = run[side]["intervals"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{proto}: {side} intervals"));
                assert!(intervals.len() >= 2, "{proto}: {side}: {intervals:?}");
                intervals.iter().map(|i| count(&i["bytes"])).sum()
            };
            // The client's series covers every byte it sent, the server's every byte it read
            // before the client said it was done (all of them on a lossless loopback).
            assert_eq!(sum("client"), total, "{proto}");
            let server_bytes = count(&run["server"]["bytes"]);
            assert_eq!(sum("server"), server_bytes, "{proto}");
            let flows = run["flows"].as_array().expect("two flows");
            assert_eq!(flows.len(), 2);
            let flow_bytes: u64 = flows.iter().map(|f| count(&f["server"]["bytes"])).sum();
            assert_eq!(flow_bytes, server_bytes, "{proto}");
            assert!(run["client"]["retrans_rate"].is_number(), "{proto}");
            assert!(run["client"]["cpu"]["shared_process"].as_bool() == Some(true));
        }
    })
    .await;
}

/// A count in a JSON document; anything else fails the test.
fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The receiver's jitter is RFC 3550's estimate over the senders' stamps. The test plays the
/// sender: 400 datagrams sent back to back, stamped alternately 0 and 1 s, so each transit
/// differs from the last by 1 s (give or take the µs between arrivals) and the estimate
/// converges to 1 s; a receiver that ignored the stamps would see microseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_reports_rfc_3550_jitter_when_messages_carry_a_timestamp() {
    use wirebench::engine::udp::{hello as udp_hello, UdpClient};
    use wirebench::transport::control;
    use wirebench_core::wire::datagram::{self, Header, Kind, HEADER_LEN};
    use wirebench_core::wire::proto::ControlMessage;

    within(async {
        let server = TestServer::start().await;
        let (messages, size) = (400u64, 64u32);
        let params = spec(Protocol::Udp, Mechanism::Stream, size, messages * 64);
        let request = ControlMessage::SessionRequest(params);
        let (mut ctrl, granted) = control::request_session(server.addr, &request)
            .await
            .expect("session granted");
        let udp = UdpClient::connect(server.addr, None).await.expect("socket");
        udp_hello::validate(udp.socket(), granted.session, granted.token)
            .await
            .expect("address validated");
        let mut datagram = vec![0u8; HEADER_LEN + size as usize];
        for seq in 0..messages {
            Header {
                kind: Kind::Data,
                retransmit: false,
                session: granted.session,
                seq,
            }
            .write_to(&mut datagram)
            .expect("room for the header");
            let stamp_us = if seq % 2 == 0 { 0 } else { 1_000_000 };
            datagram::write_timestamp(&mut datagram[HEADER_LEN..], stamp_us);
            udp.socket().send(&datagram).await.expect("sent");
        }
        let done = ControlMessage::SenderDone {
            messages_sent: messages,
            bytes_sent: messages * u64::from(size),
        };
        control::send(&mut ctrl, &done).await.expect("done sent");
        let report = control::read_report(&mut ctrl).await.expect("a report");
        assert_eq!((report.messages, report.lost), (messages, 0), "{report:?}");
        let jitter = report.jitter_us.expect("stamped datagrams");
        // 1% is 10 ms: room for a sender the machine stalls now and then.
        assert!((jitter - 1e6).abs() <= 1e4, "{jitter} µs");

        // Three-byte messages have no room for the four-byte stamp: no estimate, not a zero.
        let unstamped = SessionRequest::new(
            server.addr,
            &spec(Protocol::Udp, Mechanism::Stream, 3, 3000),
        )
        .run()
        .await
        .expect("session runs");
        assert_eq!(unstamped.server.messages + unstamped.server.lost, 1000);
        assert_eq!(unstamped.server.jitter_us, None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverse_delivers_the_exact_total_from_server_to_client() {
    within(async {
        let mut server = TestServer::start().await;
        let (size, total) = (1000, 1_000_003);
        for protocol in [Protocol::Tcp, Protocol::Quic, Protocol::Udp] {
            for mechanism in [Mechanism::Stream, Mechanism::StopAndWait] {
                // UDP streaming is paced (spec) so loopback buffers cannot overflow: exact too.
                let params = SessionParams {
                    reverse: true,
                    ..spec(protocol, mechanism, size, total)
                };
                let out = SessionRequest::new(server.addr, &params)
                    .run()
                    .await
                    .expect("session runs");
                let what = format!("{protocol} {mechanism} reverse");
                let summary = server.next_session().await;
                assert_eq!(summary.report, out.server, "{what}: printed = reported");
                assert!(!out.server.aborted, "{what}: {:?}", out.server.abort_reason);
                // The client received, the server sent: both exact.
                assert_eq!(out.client.tally.bytes, total, "{what}: client received");
                assert_eq!(
                    out.client.tally.messages,
                    message_count(total, size),
                    "{what}"
                );
                assert_eq!(out.server.bytes, total, "{what}: server sent");
                assert_eq!(out.server.messages, message_count(total, size), "{what}");
                assert!(out.client.elapsed > std::time::Duration::ZERO, "{what}");
                if protocol == Protocol::Udp {
                    // The client is the receiver: it counts what the server's datagrams did.
                    let receipt = out.client.udp_received.expect("receiver counts");
                    assert_eq!(receipt.lost, 0, "{what}");
                    let resent = out
                        .server
                        .transport
                        .as_ref()
                        .map_or(0, |t| t.packets_retransmitted);
                    // Every extra copy the client saw is a retransmission the server made.
                    assert_eq!(receipt.duplicates, resent, "{what}");
                }
            }
        }
    })
    .await;
}
