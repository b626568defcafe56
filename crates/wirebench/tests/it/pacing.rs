//! Flags do what they say or are refused: `--rate` paces TCP (SO_MAX_PACING_RATE) both ways
//! and QUIC; `--rto` without a UDP stop-and-wait run, and `--rate` on UDP stop-and-wait alone,
//! are refused with what to type instead.

use serde_json::Value;

use crate::cli::{stderr, wirebench};
use crate::support::within;

/// The run's goodput (bit/s) and transfer time (s) of a one-run `run --json` with `args`.
async fn paced_run(args: &[&str]) -> (f64, f64) {
    let out = wirebench(&[&["run", "--no-store", "--json"][..], args].concat()).await;
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("run --json");
    let run = &doc["runs"][0];
    (
        run["headline"]["goodput_bps"].as_f64().expect("goodput"),
        run["client"]["seconds"].as_f64().expect("seconds"),
    )
}

/// 8 MiB at 100 Mbit/s takes about 0.67 s; unpaced, loopback moves it in milliseconds. The
/// kernel does not pace the initial window, hence the 20% allowance above the rate.
#[tokio::test]
async fn rate_paces_tcp_both_ways_and_quic() {
    within(async {
        let rate = 100e6;
        for extra in [&[][..], &["-R"][..]] {
            let args = [
                &[
                    "--proto", "tcp", "-l", "64KiB", "-n", "8MiB", "--rate", "100Mbit",
                ][..],
                extra,
            ]
            .concat();
            let (bps, seconds) = paced_run(&args).await;
            assert!(bps <= rate * 1.2, "{args:?}: {bps} bit/s in {seconds} s");
            assert!(seconds >= 0.5, "{args:?}: {bps} bit/s in {seconds} s");
        }
        let (bps, seconds) = paced_run(&[
            "--proto", "quic", "-l", "64KiB", "-n", "8MiB", "--rate", "100Mbit",
        ])
        .await;
        assert!(bps <= rate * 1.2, "quic: {bps} bit/s in {seconds} s");
        assert!(seconds >= 0.5, "quic: {bps} bit/s in {seconds} s");
    })
    .await;
}

#[tokio::test]
async fn flags_no_run_would_use_are_refused_with_the_remedy() {
    within(async {
        let cases: [(&[&str], &str); 3] = [
            (
                &[
                    "run", "--proto", "tcp,udp", "--mode", "stream", "--rto", "1s",
                ],
                "--rto is the retransmission timeout of UDP stop-and-wait",
            ),
            (
                &["run", "--proto", "tcp", "--mode", "saw", "--rto", "1s"],
                "add --proto udp --mode saw, or drop --rto",
            ),
            (
                &["run", "--proto", "udp", "--mode", "saw", "--rate", "1Gbit"],
                "UDP stop-and-wait has one datagram in flight and is never paced",
            ),
        ];
        for (args, expected) in cases {
            let out = wirebench(args).await;
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(expected), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "one line: {err}");
        }
        // Where a run uses them, they are accepted.
        let out = wirebench(&[
            "run",
            "--no-store",
            "--proto",
            "udp",
            "--mode",
            "saw,stream",
            "-n",
            "20000",
            "--rto",
            "200ms",
            "--rate",
            "50Mbit",
        ])
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
    })
    .await;
}
