//! Exact answers over UDP, TCP and DoT: A and AAAA, NXDOMAIN counted as such, TC=1 retried over
//! TCP, a handshake per query, UDP timeouts equal to the relay's drops, wrong answers counted.

use std::sync::Arc;
use std::time::Duration;

use wirebench::flows::dns::{run_dns, DnsSpec};
use wirebench::flows::relay::{Relay, RelayConfig};
use wirebench_core::machine::impair::Impairments;
use wirebench_core::wire::dns::{DnsTransport, Question};

use super::{dns_json, u, Unbound, BIG_RECORDS, HOST_A};
use crate::support::TEST_TIMEOUT;

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
                max_held: wirebench::flows::relay::MAX_HELD_BYTES,
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
