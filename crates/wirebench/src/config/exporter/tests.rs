//! Unit tests of the exporter's flags and of `/probe` queries: every kind, its limits, the
//! allow-list and the refusals.

use super::*;
use crate::flows::iperf3::client::Limit;

fn limits() -> ProbeLimits {
    ProbeLimits {
        max_total: 1 << 20,
        max_time: Duration::from_secs(5),
        allow: vec![
            allowed("127.0.0.0/8").unwrap(),
            allowed("[::1]:9000").unwrap(),
        ],
    }
}

#[test]
fn a_query_becomes_one_run() {
    let Probe::Run(cfg) = probe_config(
        "target=127.0.0.1:5310&proto=udp&mode=saw&total=64KiB&size=512",
        &limits(),
    )
    .unwrap() else {
        panic!("a run")
    };
    assert_eq!(cfg.total_bytes, 65536);
    assert_eq!(cfg.msg_size, 512);
    assert_eq!(cfg.combinations.len(), 1);
}

#[test]
fn a_ping_query_is_bounded_too() {
    let l = limits();
    let Probe::Ping(cfg) = probe_config(
        "kind=ping&target=127.0.0.1:5310&proto=udp&count=50&size=128",
        &l,
    )
    .unwrap() else {
        panic!("a ping")
    };
    assert_eq!((cfg.count, cfg.request), (Some(50), 128));
    let r = probe_config("kind=ping&target=127.0.0.1:1&count=10000&size=1KiB", &l).unwrap_err();
    assert!(r.reason.contains("--max-total"), "{}", r.reason);
    assert_eq!(
        probe_config("kind=ping&target=10.0.0.1:1", &l)
            .unwrap_err()
            .status,
        403
    );
    assert_eq!(
        probe_config("kind=nope&target=127.0.0.1:1", &l)
            .unwrap_err()
            .status,
        400
    );
    assert_eq!(
        probe_config("kind=ping&target=127.0.0.1:1&total=1", &l)
            .unwrap_err()
            .status,
        400
    );
}

#[test]
fn rr_dns_and_iperf3_queries_are_bounded_by_volume() {
    let l = limits();
    let Probe::Rr(cfg) = probe_config(
        "kind=rr&target=127.0.0.1:5310&proto=tcp&concurrency=8&flows=2&count=10",
        &l,
    )
    .unwrap() else {
        panic!("an rr")
    };
    assert_eq!(
        (cfg.count, cfg.flows.as_slice(), cfg.concurrency.as_slice()),
        (Some(10), &[2][..], &[8][..])
    );
    // 1000 x (64 + 512) B fits in 1 MiB; with two retries per request, 2000 x (3 x 64 +
    // 512) B does not.
    assert!(probe_config("kind=rr&target=127.0.0.1:5310", &l).is_ok());
    let r = probe_config("kind=rr&target=127.0.0.1:5310&count=2000&retries=2", &l).unwrap_err();
    assert!(r.reason.contains("--max-total"), "{}", r.reason);
    let Probe::Dns(cfg) = probe_config(
        "kind=dns&target=127.0.0.1:5353&name=example.org&transport=tcp&count=7",
        &l,
    )
    .unwrap() else {
        panic!("a dns")
    };
    assert_eq!((cfg.count, cfg.resolver.port()), (7, 5353));
    // 1024 queries of 1 KiB fill 1 MiB exactly; one more is refused.
    assert!(probe_config("kind=dns&target=127.0.0.1:53&name=a.test&count=1024", &l).is_ok());
    let r = probe_config("kind=dns&target=127.0.0.1:53&name=a.test&count=1025", &l).unwrap_err();
    assert!(r.reason.contains("--max-total"), "{}", r.reason);
    assert_eq!(
        probe_config("kind=dns&target=10.0.0.1:53&name=a.test", &l)
            .unwrap_err()
            .status,
        403
    );
    let Probe::Iperf3(cfg) = probe_config(
        "kind=iperf3&target=127.0.0.1:5201&proto=udp&total=64KiB&reverse=true&rate=5Mbit",
        &l,
    )
    .unwrap() else {
        panic!("an iperf3")
    };
    assert!(cfg.udp && cfg.reverse);
    assert_eq!(cfg.limit, Limit::Bytes(65536));
    // Without total=, 10 MiB cut to --max-total.
    let Probe::Iperf3(cfg) = probe_config("kind=iperf3&target=127.0.0.1:5201", &l).unwrap() else {
        panic!("an iperf3")
    };
    assert_eq!(cfg.limit, Limit::Bytes(1 << 20));
    // 1 MiB at iperf3's default 1 Mbit/s is 8.4 s, more than the 5 s allowed.
    let r = probe_config("kind=iperf3&target=127.0.0.1:5201&proto=udp", &l).unwrap_err();
    assert!(r.reason.contains("--max-time"), "{}", r.reason);
    let r = probe_config("kind=iperf3&target=127.0.0.1:5201&time=10", &l).unwrap_err();
    assert!(r.reason.contains("unknown parameter"), "{}", r.reason);
}

#[test]
fn probes_are_priced_by_what_they_hold_in_flight() {
    let l = limits();
    // Issue 37: within --max-total by bytes, yet 10,240,000 requests in flight.
    let r = probe_config(
        "kind=rr&target=127.0.0.1:5310&flows=1024&concurrency=10000&count=1",
        &l,
    )
    .unwrap_err();
    assert_eq!(r.status, 400);
    assert!(
        r.reason.contains("flows x concurrency = 10240000"),
        "{}",
        r.reason
    );
    assert!(r.reason.contains("at most 256"), "{}", r.reason);
    // 16 x 16 is the most; one more flow is refused, for DNS too.
    assert!(probe_config(
        "kind=rr&target=127.0.0.1:5310&flows=16&concurrency=16&count=1",
        &l
    )
    .is_ok());
    assert!(probe_config(
        "kind=rr&target=127.0.0.1:5310&flows=17&concurrency=16&count=1",
        &l
    )
    .is_err());
    let r = probe_config(
        "kind=dns&target=127.0.0.1:53&name=a.test&count=1&flows=64&concurrency=8",
        &l,
    )
    .unwrap_err();
    assert!(
        r.reason.contains("flows x concurrency = 512"),
        "{}",
        r.reason
    );
}

#[test]
fn refusals_say_why_with_their_status() {
    let l = limits();
    let r = probe_config("target=127.0.0.1:1&total=2MiB", &l).unwrap_err();
    assert_eq!(r.status, 400);
    assert!(r.reason.contains("--max-total"), "{}", r.reason);
    let r = probe_config("target=10.0.0.1:1&total=1KiB", &l).unwrap_err();
    assert_eq!(r.status, 403);
    assert!(probe_config("target=[::1]:9000&total=1KiB", &l).is_ok());
    assert_eq!(
        probe_config("target=[::1]:9001&total=1KiB", &l)
            .unwrap_err()
            .status,
        403
    );
    let r = probe_config("target=127.0.0.1:1&db=/tmp/x", &l).unwrap_err();
    assert!(r.reason.contains("unknown parameter"), "{}", r.reason);
    let r = probe_config("target=127.0.0.1:1&proto=tcp,udp&total=1KiB", &l).unwrap_err();
    assert!(r.reason.contains("one test"), "{}", r.reason);
    let r = probe_config("target=127.0.0.1:1&size=--db&total=1KiB", &l).unwrap_err();
    assert_eq!(r.status, 400);
    assert!(!r.reason.contains('\n'));
    assert_eq!(probe_config("proto=tcp", &l).unwrap_err().status, 400);
    // Without total=, the default is cut to --max-total (1 MiB here).
    let Probe::Run(cfg) = probe_config("target=127.0.0.1:1", &l).unwrap() else {
        panic!("a run")
    };
    assert_eq!(cfg.total_bytes, 1 << 20);
}
