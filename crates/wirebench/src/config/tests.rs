//! Tests of the flag validation: sizes, times, addresses, server limits and the interop targets.

use std::net::SocketAddr;
use std::time::Duration;

use wirebench_core::vocab::plan::Protocol;

use crate::cli::{RunArgs, ServerArgs, DEFAULT_PORT};
use crate::runner::{RunConfig, Target};

use super::address::*;
use super::run::*;
use super::server::*;
use super::*;

#[test]
fn udp_size_limit_names_the_largest_allowed() {
    let err = parse_msg_size("65492", &[Protocol::Udp], false).unwrap_err();
    assert!(err.0.contains("65491"), "{}", err.0);
    assert_eq!(
        parse_msg_size("65491", &[Protocol::Udp], false).unwrap(),
        65491
    );
    assert_eq!(
        parse_msg_size("65511", &[Protocol::Udp], true).unwrap(),
        65511
    );
}

#[test]
fn stream_protocols_allow_large_messages() {
    assert_eq!(
        parse_msg_size("16MiB", &[Protocol::Tcp, Protocol::Quic], false).unwrap(),
        16 * 1024 * 1024
    );
    assert!(parse_msg_size("100000", &[Protocol::Tcp, Protocol::Udp], false).is_err());
    assert!(parse_msg_size("0", &[Protocol::Tcp], false).is_err());
}

fn run_args(l: &str, n: &str, json: bool) -> RunArgs {
    use clap::Parser;
    let mut argv = vec!["wirebench", "run", "--proto", "tcp,udp", "-l", l, "-n", n];
    if json {
        argv.push("--json");
    }
    match crate::cli::Cli::parse_from(argv).command {
        crate::cli::Command::Run(args) => *args,
        other => panic!("not run: {other:?}"),
    }
}

#[test]
fn sweeps_expand_sizes_outer_totals_inner() {
    let cfg = RunConfig::from_args(&run_args("100..400:x2", "1KiB,2KiB", false)).unwrap();
    let points: Vec<(u32, u64)> = cfg
        .points
        .iter()
        .map(|p| (p.msg_size, p.total_bytes))
        .collect();
    assert_eq!(
        points,
        [
            (100, 1024),
            (100, 2048),
            (200, 1024),
            (200, 2048),
            (400, 1024),
            (400, 2048)
        ]
    );
    assert_eq!((cfg.msg_size, cfg.total_bytes), (100, 1024));
    // Every size is checked against every protocol: UDP's limit applies to the whole list.
    let err = RunConfig::from_args(&run_args("1000,65492", "1MiB", false)).unwrap_err();
    assert!(err.0.contains("65491"), "{}", err.0);
    let err = RunConfig::from_args(&run_args("100,200", "1MiB", true)).unwrap_err();
    assert!(err.0.contains("wirebench export"), "{}", err.0);
    assert!(RunConfig::from_args(&run_args("100", "1MiB", true)).is_ok());
    let err = RunConfig::from_args(&run_args("100", "0,1", false)).unwrap_err();
    assert!(err.0.contains("at least 1 byte"), "{}", err.0);
}

#[test]
fn server_names_get_the_default_port() {
    let t = resolve_server("127.0.0.1").unwrap();
    assert_eq!(
        t,
        Target::Remote {
            name: "127.0.0.1".into(),
            addr: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT))
        }
    );
    let t = resolve_server("::1").unwrap();
    assert!(t.is_ipv6());
    let t = resolve_server("[::1]:9000").unwrap();
    assert!(matches!(t, Target::Remote { addr, .. } if addr.port() == 9000));
}

fn parse_run(argv: &[&str]) -> RunArgs {
    use clap::Parser;
    let mut all = vec!["wirebench", "run"];
    all.extend_from_slice(argv);
    match crate::cli::Cli::parse_from(all).command {
        crate::cli::Command::Run(args) => *args,
        other => panic!("not run: {other:?}"),
    }
}

fn parse_server(argv: &[&str]) -> ServerArgs {
    use clap::Parser;
    let mut all = vec!["wirebench", "server"];
    all.extend_from_slice(argv);
    match crate::cli::Cli::parse_from(all).command {
        crate::cli::Command::Server(args) => args,
        other => panic!("not server: {other:?}"),
    }
}

#[test]
fn per_client_limit_follows_a_lower_session_limit() {
    let limits = |argv: &[&str]| server_limits(&parse_server(argv)).unwrap();
    assert_eq!(limits(&[]).max_sessions_per_client, 128);
    // Lowering --max-sessions alone lowers the per-client default with it.
    let l = limits(&["--max-sessions", "64"]);
    assert_eq!((l.max_sessions, l.max_sessions_per_client), (64, 64));
    let l = limits(&["--max-sessions", "64", "--max-sessions-per-client", "4"]);
    assert_eq!(l.max_sessions_per_client, 4);
}

#[test]
fn iperf3_tests_take_iperf3_defaults() {
    use crate::flows::iperf3::client::Limit;
    let c = iperf3_client(&parse_run(&["--iperf3", "127.0.0.1", "--proto", "udp"]))
        .unwrap()
        .unwrap();
    assert_eq!(c.server, SocketAddr::from(([127, 0, 0, 1], 5201)));
    assert!(c.udp && !c.reverse);
    assert_eq!((c.parallel, c.len, c.rate_bps), (1, 1460, 1_000_000));
    // Neither -n, -k nor -t: iperf3's 10 seconds.
    assert_eq!(c.limit, Limit::Time(Duration::from_secs(10)));
    // -n is rounded up to whole datagrams (iperf3 servers count no short one).
    let c = iperf3_client(&parse_run(&[
        "--iperf3",
        "127.0.0.1",
        "--proto",
        "udp",
        "-n",
        "100MiB",
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(c.limit, Limit::Bytes((100u64 << 20).div_ceil(1460) * 1460));
    // TCP: iperf3's 128 KiB blocks, as a wirebench plan of TCP streams alone.
    let c = iperf3_client(&parse_run(&["--iperf3", "127.0.0.1"]))
        .unwrap()
        .unwrap();
    assert_eq!((c.udp, c.len), (false, 128 * 1024));
    assert_eq!(c.limit, Limit::Time(Duration::from_secs(10)));
    // A wirebench run's own defaults: 100 MiB, in 128 KiB messages for TCP streams alone, in
    // 1 KiB messages for a plan with UDP or stop-and-wait in it.
    let cfg = RunConfig::from_args(&parse_run(&["--proto", "tcp"])).unwrap();
    assert_eq!(
        (cfg.points[0].msg_size, cfg.points[0].total_bytes),
        (128 * 1024, 100 << 20)
    );
    let cfg = RunConfig::from_args(&parse_run(&["--proto", "tcp,udp"])).unwrap();
    assert_eq!(
        (cfg.points[0].msg_size, cfg.points[0].total_bytes),
        (1024, 100 << 20)
    );
    let c = iperf3_client(&parse_run(&[
        "--iperf3",
        "[::1]:5202",
        "-t",
        "1500ms",
        "-P",
        "3",
        "-R",
        "-l",
        "128KiB",
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(c.server.port(), 5202);
    assert!(!c.udp && c.reverse);
    assert_eq!((c.parallel, c.len, c.rate_bps), (3, 128 * 1024, 0));
    assert_eq!(c.limit, Limit::Time(Duration::from_millis(1500)));
    assert!(iperf3_client(&parse_run(&[])).unwrap().is_none());
    let err = iperf3_client(&parse_run(&["--iperf3", "h", "--rate", "1Mbit"])).unwrap_err();
    assert!(err.0.contains("paces UDP"), "{}", err.0);
    let err = iperf3_client(&parse_run(&["--iperf3", "h", "-P", "0"])).unwrap_err();
    assert!(err.0.contains("allowed 1 to 128"), "{}", err.0);
}

#[test]
fn totals_past_the_largest_are_refused_in_config() {
    // iperf3 UDP rounds -n up to whole datagrams: near u64::MAX that would wrap.
    let err = iperf3_client(&parse_run(&[
        "--iperf3",
        "h",
        "-u",
        "-l",
        "1000",
        "-n",
        "18446744073709551615",
    ]))
    .unwrap_err();
    assert!(
        err.0.contains("-n/--total") && err.0.contains("too large"),
        "{}",
        err.0
    );
    // -k times -l: an overflow, and a product past the largest total the server takes.
    for k in ["18446744073709551615", "9223372036854775807"] {
        let err = RunConfig::from_args(&parse_run(&["-k", k, "-l", "2"])).unwrap_err();
        assert!(err.0.contains("-k/--blockcount"), "{}", err.0);
    }
    let err = RunConfig::from_args(&parse_run(&["-n", "9223372036854775808"])).unwrap_err();
    assert!(
        err.0.contains("allowed 1 to 9223372036854775807"),
        "{}",
        err.0
    );
    let c = RunConfig::from_args(&parse_run(&["-k", "3", "-l", "100,200"])).unwrap();
    let totals: Vec<u64> = c.points.iter().map(|p| p.total_bytes).collect();
    assert_eq!(totals, [300, 600]);
}

#[test]
fn perf_tests_need_a_trust_choice_and_default_to_both_directions() {
    use crate::flows::perf::client::Trust;
    let c = perf_client(&parse_run(&[
        "--proto",
        "quic",
        "--perf-server",
        "localhost:4433",
        "--perf-ca",
        "ca.pem",
    ]))
    .unwrap()
    .unwrap();
    assert_eq!((c.upload, c.download), (Some(10 << 20), Some(10 << 20)));
    assert_eq!(
        c.trust,
        Trust::Ca {
            file: "ca.pem".into(),
            server_name: "localhost".into()
        }
    );
    let c = perf_client(&parse_run(&[
        "--proto",
        "quic",
        "--perf-server",
        "127.0.0.1:4433",
        "--perf-insecure",
        "--download",
        "1MiB",
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(
        (c.upload, c.download, c.trust),
        (None, Some(1 << 20), Trust::Insecure)
    );
    assert_eq!(host_part("[::1]:4433"), "::1");
    assert_eq!(host_part("example.org:4433"), "example.org");
    assert_eq!(host_part("::1"), "::1");
}

/// Parses `argv` after `wirebench` and validates it as the binary would, as Debug text (the
/// configs hold no PartialEq; their Debug shows every field).
fn validated(argv: &[&str]) -> String {
    use clap::Parser;
    let mut all = vec!["wirebench"];
    all.extend_from_slice(argv);
    match crate::cli::Cli::parse_from(all).command {
        crate::cli::Command::Run(args) => match iperf3_client(&args).unwrap() {
            Some(c) => format!("{c:?}"),
            None => format!("{:?}", RunConfig::from_args(&args).unwrap()),
        },
        crate::cli::Command::Ping(args) => {
            format!("{:?}", rr::RrConfig::from_ping(&args).unwrap())
        }
        crate::cli::Command::Rr(args) => format!("{:?}", rr::RrConfig::from_rr(&args).unwrap()),
        crate::cli::Command::Dns(args) => {
            format!("{:?}", dns::DnsConfig::from_args(&args).unwrap())
        }
        other => panic!("not run, ping, rr or dns: {other:?}"),
    }
}

#[test]
fn iperf3_style_aliases_mean_what_their_long_forms_mean() {
    let same: &[(&[&str], &[&str])] = &[
        (&["run", "-u"], &["run", "--proto", "udp"]),
        (&["run", "--udp"], &["run", "--proto", "udp"]),
        (
            &["run", "-u", "-b", "100M"],
            &["run", "--proto", "udp", "--rate", "100M"],
        ),
        (&["run", "-J"], &["run", "--json"]),
        (
            &["run", "-c", "127.0.0.1", "-p", "5201"],
            &["run", "-c", "127.0.0.1:5201"],
        ),
        (
            &["run", "-c", "::1", "-p", "5201"],
            &["run", "-c", "[::1]:5201"],
        ),
        (
            &["run", "-4", "-c", "127.0.0.1"],
            &["run", "-c", "127.0.0.1"],
        ),
        (
            &["run", "--version6", "-c", "::1"],
            &["run", "--ipv6", "-c", "::1"],
        ),
        (
            &[
                "run",
                "--iperf3",
                "127.0.0.1",
                "-p",
                "5202",
                "-u",
                "-b",
                "5M",
                "-J",
            ],
            &[
                "run",
                "--iperf3",
                "127.0.0.1:5202",
                "--proto",
                "udp",
                "--rate",
                "5M",
                "--json",
            ],
        ),
        (
            &["ping", "-u", "-J", "127.0.0.1", "-p", "7000"],
            &[
                "ping",
                "--proto",
                "udp",
                "--json",
                "--server",
                "127.0.0.1:7000",
            ],
        ),
        // ping(8)'s -c is the count; run's and rr's -c the server, as iperf3's.
        (&["ping", "-c", "5"], &["ping", "--count", "5"]),
        (&["rr", "-c", "127.0.0.1"], &["rr", "--server", "127.0.0.1"]),
        (
            &["ping", "-t", "2s", "--gap", "1ms"],
            &["ping", "--duration", "2s", "--interval", "1ms"],
        ),
        (&["ping", "-l", "100"], &["ping", "--size", "100"]),
        (
            &["rr", "-u", "-6", "--count", "5"],
            &["rr", "--proto", "udp", "--ipv6", "--count", "5"],
        ),
        (
            &[
                "dns",
                "--resolver",
                "127.0.0.1",
                "--name",
                "a.example",
                "-J",
            ],
            &[
                "dns",
                "--resolver",
                "127.0.0.1",
                "--name",
                "a.example",
                "--json",
            ],
        ),
    ];
    for (alias, long) in same {
        assert_eq!(validated(alias), validated(long), "{alias:?} vs {long:?}");
    }
    // What the aliases change, against the defaults.
    assert_ne!(validated(&["run", "-u"]), validated(&["run"]));
    let six = validated(&["run", "-6"]);
    assert!(six.contains("Embedded(::1)"), "{six}");
    assert!(validated(&["ping", "-6"]).contains("Embedded(::1)"));
    let c = RunConfig::from_args(&parse_run(&["-f", "m"])).unwrap();
    assert_eq!(c.rate_unit, Some("m".parse().unwrap()));
    assert_eq!(
        RunConfig::from_args(&parse_run(&[])).unwrap().rate_unit,
        None
    );
    // -p needs a server and a name without a port; -4 refuses an IPv6 address.
    let err = RunConfig::from_args(&parse_run(&["-p", "5201"])).unwrap_err();
    assert!(err.0.contains("add --server HOST"), "{}", err.0);
    let err = RunConfig::from_args(&parse_run(&["-c", "127.0.0.1:1", "-p", "2"])).unwrap_err();
    assert!(err.0.contains("already names a port"), "{}", err.0);
    let err = RunConfig::from_args(&parse_run(&["-4", "-c", "::1"])).unwrap_err();
    assert!(err.0.contains("no IPv4 address"), "{}", err.0);
    let err = RunConfig::from_args(&parse_run(&["-f", "q"])).unwrap_err();
    assert!(err.0.contains("-f/--rate-unit"), "{}", err.0);
}

#[test]
fn quic_mtu_is_checked_and_reaches_the_session_options() {
    let quic = [Protocol::Quic];
    let opts = parse_options(&parse_run(&["--quic-mtu", "1452"]), &quic).unwrap();
    assert_eq!(opts.quic_mtu, Some(1452));
    let err = parse_options(&parse_run(&["--quic-mtu", "1100"]), &quic).unwrap_err();
    assert!(err.0.contains("1200..65527"), "{}", err.0);
    let err = parse_options(&parse_run(&["--quic-mtu", "1452"]), &[Protocol::Tcp]).unwrap_err();
    assert!(err.0.contains("QUIC only"), "{}", err.0);
    assert_eq!(
        parse_options(&parse_run(&[]), &quic).unwrap().quic_mtu,
        None
    );
}

#[test]
fn relay_max_held_is_a_size_within_its_range() {
    use clap::Parser;
    let relay = |extra: &[&str]| {
        let mut argv = vec![
            "wirebench",
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--to",
            "127.0.0.1:5310",
        ];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::parse_from(argv).command {
            crate::cli::Command::Relay(args) => super::relay_config(&args),
            other => panic!("not relay: {other:?}"),
        }
    };
    assert_eq!(
        relay(&[]).unwrap().max_held,
        crate::flows::relay::MAX_HELD_BYTES
    );
    assert_eq!(relay(&["--max-held", "1GiB"]).unwrap().max_held, 1 << 30);
    for bad in ["1KiB", "65GiB"] {
        let e = relay(&["--max-held", bad]).unwrap_err();
        assert!(
            e.0.contains("--max-held") && e.0.contains("64KiB"),
            "{}",
            e.0
        );
    }
    let e = relay(&["--max-held", "lots"]).unwrap_err();
    assert!(e.0.starts_with("--max-held: "), "{}", e.0);
}
