//! Exact counts for every protocol × mechanism, edge message sizes, lossy stop-and-wait.

use wirebench::flows::client::{SessionOutcome, SessionRequest};
use wirebench_core::vocab::plan::{message_count, Mechanism, Protocol};
use wirebench_core::wire::datagram;
use wirebench_core::wire::proto::SessionParams;

use crate::support::{Forwarder, TestServer, TEST_TIMEOUT};

pub(crate) fn spec(
    protocol: Protocol,
    mechanism: Mechanism,
    msg_size: u32,
    total_bytes: u64,
) -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol,
        mechanism,
        msg_size,
        total_bytes,
        rto_us: None,
        rate_bps: None,
        grace_us: 200_000,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

/// Runs one session and checks the server's summary matches what the client got back.
async fn run(server: &mut TestServer, spec: &SessionParams) -> SessionOutcome {
    let out = SessionRequest::new(server.addr, spec)
        .run()
        .await
        .expect("session runs");
    let summary = server.next_session().await;
    assert_eq!(summary.session, out.session);
    assert_eq!(
        summary.report, out.server,
        "printed summary equals the report sent"
    );
    out
}

/// Reliable paths: bytes and messages agree exactly on both sides.
fn assert_exact(out: &SessionOutcome, msg_size: u32, total: u64) {
    let count = message_count(total, msg_size);
    let (c, s) = (&out.client.tally, &out.server);
    assert!(!s.aborted, "aborted: {:?}", s.abort_reason);
    assert_eq!(c.bytes, total, "client bytes");
    assert_eq!(s.bytes, total, "server bytes");
    assert_eq!(c.messages, count, "client messages");
    assert_eq!(s.messages, count, "server messages");
    assert_eq!(s.lost, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_six_combinations_count_exactly_with_a_remainder() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        // 1_000_003 is not a multiple of 1024: the last message carries 643 bytes.
        let (size, total) = (1024, 1_000_003);
        for protocol in [Protocol::Tcp, Protocol::Udp, Protocol::Quic] {
            for mechanism in [Mechanism::Stream, Mechanism::StopAndWait] {
                let mut sp = spec(protocol, mechanism, size, total);
                // Pace UDP streaming so loopback receive buffers cannot overflow: exact here too.
                if protocol == Protocol::Udp && mechanism == Mechanism::Stream {
                    sp.rate_bps = Some(200_000_000);
                }
                let out = run(&mut server, &sp).await;
                assert_eq!(out.server.protocol, protocol);
                assert_eq!(out.server.mechanism, mechanism);
                if protocol == Protocol::Udp && mechanism == Mechanism::Stream {
                    let s = &out.server;
                    assert_eq!(
                        s.messages + s.lost,
                        message_count(total, size),
                        "received + lost = sent"
                    );
                    assert_eq!(out.client.tally.messages, message_count(total, size));
                    assert_eq!(out.client.tally.bytes, total);
                } else {
                    assert_exact(&out, size, total);
                }
                if mechanism == Mechanism::StopAndWait {
                    let rtt = out.client.rtt.expect("stop-and-wait measures round trips");
                    assert!(
                        rtt.min_ns <= rtt.p50_ns
                            && rtt.p50_ns <= rtt.p99_ns
                            && rtt.p99_ns <= rtt.max_ns
                    );
                    assert!(out.server.acks_sent >= message_count(total, size));
                } else {
                    assert!(out.client.rtt.is_none());
                }
            }
        }
    })
    .await
    .expect("test finished in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_and_quic_carry_one_byte_and_65535_byte_messages() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        for protocol in [Protocol::Tcp, Protocol::Quic] {
            for mechanism in [Mechanism::Stream, Mechanism::StopAndWait] {
                let out = run(&mut server, &spec(protocol, mechanism, 1, 3000)).await;
                assert_exact(&out, 1, 3000);
                let total = 65535 * 20 + 7;
                let out = run(&mut server, &spec(protocol, mechanism, 65535, total)).await;
                assert_exact(&out, 65535, total);
            }
        }
    })
    .await
    .expect("test finished in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_carries_the_largest_datagram() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let largest = datagram::max_message_size(false);
        assert_eq!(largest, 65507 - 16);
        let total = u64::from(largest) * 10 + 1;
        let out = run(
            &mut server,
            &spec(Protocol::Udp, Mechanism::StopAndWait, largest, total),
        )
        .await;
        assert_exact(&out, largest, total);
        let mut sp = spec(Protocol::Udp, Mechanism::Stream, largest, total);
        sp.rate_bps = Some(100_000_000);
        let out = run(&mut server, &sp).await;
        assert_eq!(out.server.messages + out.server.lost, 11);
        assert!(out.server.bytes <= total);
        assert_eq!(out.client.tally.bytes, total);
    })
    .await
    .expect("test finished in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_refuses_a_udp_message_one_byte_too_big() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let too_big = datagram::max_message_size(false) + 1;
        let err = SessionRequest::new(
            server.addr,
            &spec(Protocol::Udp, Mechanism::Stream, too_big, 1_000_000),
        )
        .run()
        .await
        .expect_err("refused");
        let msg = format!("{err:#}");
        assert!(msg.contains("refused") && msg.contains("65491"), "{msg}");
    })
    .await
    .expect("test finished in time");
}

/// Stop-and-wait through a forwarder dropping 10% of datagrams each way: every message is
/// delivered exactly once, and every extra datagram is explained by a drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_stop_and_wait_survives_loss_in_both_directions() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let fwd = Forwarder::start(server.addr, 0.10, 42, u64::MAX).await;
        let (size, total) = (512u32, 300 * 512 + 100);
        let count = message_count(total, size);
        let mut sp = spec(Protocol::Udp, Mechanism::StopAndWait, size, total);
        // A fixed, generous timeout keeps spurious retransmissions out of the arithmetic.
        sp.rto_us = Some(20_000);
        let out = SessionRequest::new(fwd.addr, &sp)
            .run()
            .await
            .expect("session runs");
        let summary = server.next_session().await;
        assert_eq!(summary.report, out.server);
        assert_exact(&out, size, total);

        let c = &out.client.tally;
        let s = &out.server;
        let f = &fwd.counts;
        use std::sync::atomic::Ordering::SeqCst;
        let (c2s_drop, s2c_drop) = (f.c2s_dropped.load(SeqCst), f.s2c_dropped.load(SeqCst));
        assert!(
            c2s_drop > 0 && s2c_drop > 0,
            "the forwarder dropped both ways"
        );
        // Every datagram sent is a first copy or a retransmission.
        assert_eq!(c.datagrams, count + c.retransmissions);
        // What the server received is exactly what the forwarder let through.
        assert_eq!(s.read_calls, c.datagrams - c2s_drop);
        assert_eq!(s.read_calls, f.c2s_forwarded.load(SeqCst));
        // Copies beyond the first are duplicates, each acknowledged again.
        assert_eq!(s.duplicates, s.read_calls - count);
        assert_eq!(s.acks_sent, s.read_calls);
        // Each drop (data or ack) costs one timeout, and each timeout one retransmission.
        assert!(
            c.retransmissions >= c2s_drop + s2c_drop,
            "{} < {} + {}",
            c.retransmissions,
            c2s_drop,
            s2c_drop
        );
        assert_eq!(c.timeouts, c.retransmissions);
    })
    .await
    .expect("test finished in time");
}

/// `-w`, `-C`, `--nodelay` and `--busy-poll` reach both ends, and the counts stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_path_options_apply_on_both_ends() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let cc = wirebench::transport::net::available_congestion_controls()
            .and_then(|list| list.into_iter().find(|c| c == "reno" || c == "cubic"));
        for mechanism in [Mechanism::Stream, Mechanism::StopAndWait] {
            let mut sp = spec(Protocol::Tcp, mechanism, 1000, 200_001);
            sp.options.window = Some(256 * 1024);
            sp.options.congestion = cc.clone();
            sp.options.nodelay = true;
            sp.options.busy_poll = mechanism == Mechanism::StopAndWait;
            let out = run(&mut server, &sp).await;
            assert_exact(&out, 1000, 200_001);
            for (side, p) in [
                ("client", &out.client.data_path),
                ("server", &out.server.data_path),
            ] {
                // Linux reports twice the size asked for (it reserves room for bookkeeping).
                assert!(
                    p.recv_buffer >= 256 * 1024 && p.send_buffer >= 256 * 1024,
                    "{side}: {p:?}"
                );
                assert!(p.nodelay, "{side}");
                assert_eq!(p.busy_poll, mechanism == Mechanism::StopAndWait, "{side}");
                if cc.is_some() {
                    assert_eq!(p.congestion, cc, "{side}");
                }
            }
        }
        // UDP stop-and-wait, busy-polling client: still every message exactly once.
        let mut sp = spec(Protocol::Udp, Mechanism::StopAndWait, 512, 100_000);
        sp.options.busy_poll = true;
        let out = run(&mut server, &sp).await;
        assert_exact(&out, 512, 100_000);
        assert!(out.client.data_path.busy_poll);
        assert!(out.client.data_path.gso_segments >= 1);
    })
    .await
    .expect("test finished in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_refuses_an_unknown_congestion_control() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        if wirebench::transport::net::available_congestion_controls().is_none() {
            eprintln!("skipped: this kernel does not list its congestion controls");
            return;
        }
        let server = TestServer::start().await;
        let mut sp = spec(Protocol::Tcp, Mechanism::Stream, 1000, 10_000);
        sp.options.congestion = Some("warpdrive".into());
        let err = SessionRequest::new(server.addr, &sp)
            .run()
            .await
            .expect_err("refused");
        let msg = format!("{err:#}");
        assert!(
            msg.contains("warpdrive is not available on the server: allowed"),
            "{msg}"
        );
    })
    .await
    .expect("test finished in time");
}

/// Many sessions at once, every protocol and mechanism: each one's counts stay its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_keep_their_own_exact_counts() {
    const SESSIONS: usize = 32;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let mut runs = tokio::task::JoinSet::new();
        let mut expected = std::collections::HashMap::new();
        for (i, (protocol, mechanism)) in [
            (Protocol::Tcp, Mechanism::Stream),
            (Protocol::Tcp, Mechanism::StopAndWait),
            (Protocol::Udp, Mechanism::StopAndWait),
            (Protocol::Quic, Mechanism::Stream),
            (Protocol::Quic, Mechanism::StopAndWait),
            (Protocol::Tcp, Mechanism::Stream),
            (Protocol::Udp, Mechanism::StopAndWait),
            (Protocol::Quic, Mechanism::Stream),
        ]
        .into_iter()
        .cycle()
        // The bar: at least 32 clients at once, each counted exactly.
        .take(SESSIONS)
        .enumerate()
        {
            // Different sizes and totals, so a count that leaked between sessions would show.
            let (size, total) = (100 + 37 * i as u32, 50_000 + 1_001 * i as u64);
            let addr = server.addr;
            runs.spawn(async move {
                let out = SessionRequest::new(addr, &spec(protocol, mechanism, size, total))
                    .run()
                    .await;
                (out, size, total)
            });
        }
        while let Some(joined) = runs.join_next().await {
            let (out, size, total) = joined.expect("task");
            let out = out.expect("session runs");
            assert_exact(&out, size, total);
            expected.insert(out.session, out.server.clone());
        }
        for _ in 0..SESSIONS {
            let summary = server.next_session().await;
            assert_eq!(expected.remove(&summary.session), Some(summary.report));
        }
        assert!(expected.is_empty());
    })
    .await
    .expect("test finished in time");
}

/// The sender's path MTU that a QUIC session reports.
fn quic_mtu(t: Option<&wirebench_core::vocab::counters::TransportStats>) -> u64 {
    t.and_then(|t| t.path_mtu)
        .expect("QUIC reports its path MTU")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quic_discovers_loopbacks_mtu_up_to_quic_mtu() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let (size, total) = (65536, 8 << 20);
        // By default discovery goes past Ethernet's 1452 up to the largest size with
        // segmentation offload, 6550, both directions; --quic-mtu 1452 holds it to quinn's.
        for (bound, reverse) in [(None, false), (None, true), (Some(1452), false)] {
            let mut sp = spec(Protocol::Quic, Mechanism::Stream, size, total);
            sp.reverse = reverse;
            sp.options.quic_mtu = bound;
            let out = run(&mut server, &sp).await;
            assert_exact(&out, size, total);
            let sender = if reverse {
                out.server.transport.as_ref()
            } else {
                out.client.transport.as_ref()
            };
            let mtu = quic_mtu(sender);
            let allowed = match bound {
                None => 1453..=6550,
                Some(b) => 1200..=u64::from(b),
            };
            assert!(
                allowed.contains(&mtu),
                "bound {bound:?} reverse {reverse}: MTU {mtu}"
            );
        }
        // Loopback carries 64 KiB datagrams: with a high bound, discovery goes past 6550 at
        // once (its first probe is half-way up).
        let mut sp = spec(Protocol::Quic, Mechanism::Stream, size, total);
        sp.options.quic_mtu = Some(65527);
        let out = run(&mut server, &sp).await;
        assert_exact(&out, size, total);
        let mtu = quic_mtu(out.client.transport.as_ref());
        assert!((6551..=65527).contains(&mtu), "client MTU {mtu}");
    })
    .await
    .expect("test finished in time");
}

/// A streaming QUIC sender, either end, holds 512 messages in flight on loopback, within
/// 64 KiB..4 MiB: quinn's per-frame walk over unacknowledged writes stays short, and a path
/// whose round trip is tens of microseconds never needs more. The receiving end and
/// stop-and-wait report no send window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quic_senders_size_their_window_by_message_on_loopback() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        for (size, window) in [(100, 64 << 10), (1024, 512 << 10), (65536, 4 << 20)] {
            for reverse in [false, true] {
                let total = 4 << 20;
                let mut sp = spec(Protocol::Quic, Mechanism::Stream, size, total);
                sp.reverse = reverse;
                let out = run(&mut server, &sp).await;
                assert_exact(&out, size, total);
                let (sender, receiver) = if reverse {
                    (&out.server.transport, &out.client.transport)
                } else {
                    (&out.client.transport, &out.server.transport)
                };
                // The window starts at the size's (512 messages, 64 KiB to 4 MiB) and may only
                // double from there: on a quiet loopback it stays, but a busy host's scheduling
                // raises the minimum RTT the sender measures, and doubling is then the rule
                // working (its growth is tested on a virtual clock in core's send_window).
                let sent_with = sender.as_ref().and_then(|t| t.send_window_bytes);
                let doubled_from_start = sent_with.is_some_and(|w: u64| {
                    w >= window && w <= 16 << 20 && w % window == 0 && (w / window).is_power_of_two()
                });
                assert!(
                    doubled_from_start,
                    "{size} B reverse {reverse}: window {sent_with:?}, want {window} doubled 0 or more times"
                );
                let received = receiver.as_ref().and_then(|t| t.send_window_bytes);
                assert_eq!(received, None, "the receiving end sends no stream data");
            }
        }
        let sp = spec(Protocol::Quic, Mechanism::StopAndWait, 1024, 64 << 10);
        let out = run(&mut server, &sp).await;
        let window = out
            .client
            .transport
            .as_ref()
            .and_then(|t| t.send_window_bytes);
        assert_eq!(window, None, "stop-and-wait has one message in flight");
    })
    .await
    .expect("test finished in time");
}
