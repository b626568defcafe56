//! `run --rate max`: the highest loss-free UDP rate, searched against the embedded server and
//! through the in-process impairment relay, real sockets on loopback, the binary as users run it.

use serde_json::Value;

use crate::cli::{assert_matches_schema, stderr, wirebench};

/// The search's figures from a `run --json` document, with the checks every search passes:
/// the schema, the outcome found, the last trial a passing confirmation at the rate found
/// within the allowed loss, and the transfer run at that rate.
fn found(doc: &Value, max_loss_pct: f64) -> (u64, &Value) {
    assert_matches_schema(doc);
    let search = &doc["rate_search"];
    assert_eq!(search["outcome"], "found", "{search:#}");
    let rate = search["rate_bps"].as_u64().expect("a rate");
    let trials = search["trials"].as_array().expect("trials");
    let confirm = trials.last().expect("at least one trial");
    assert_eq!(confirm["kind"], "confirm");
    assert_eq!(confirm["passed"], true);
    assert_eq!(confirm["rate_bps"].as_u64(), Some(rate));
    let lost = confirm["lost_pct"].as_f64().unwrap();
    assert!(lost <= max_loss_pct, "confirmation lost {lost}%");
    // The transfer ran at the rate found, and the document says it was found.
    assert_eq!(doc["parameters"]["rate_bps"].as_u64(), Some(rate));
    assert_eq!(doc["runs"].as_array().map(Vec::len), Some(1));
    (rate, confirm)
}

/// Against the embedded server with 1472-byte datagrams: the search ends well within 30 s, its
/// confirmation lost at most the allowance, and the JSON says the rate was found.
#[tokio::test]
async fn the_search_finds_a_rate_against_the_embedded_server() {
    let out = wirebench(&[
        "run",
        "--json",
        "--no-store",
        "--proto",
        "udp",
        "-l",
        "1472",
        "-n",
        "2MiB",
        "--rate",
        "max",
        "--max-loss",
        "0.5%",
        "--search-high",
        "4Gbit",
    ])
    .await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let (rate, _) = found(&doc, 0.5);
    let search = &doc["rate_search"];
    let seconds = search["elapsed_ns"].as_u64().unwrap() as f64 / 1e9;
    eprintln!(
        "embedded, 1472 B: found {:.1} Mbit/s in {seconds:.1} s, {} trials",
        rate as f64 / 1e6,
        search["trials"].as_array().unwrap().len()
    );
    assert!(seconds < 30.0, "the search took {seconds} s");
    // Each trial is one line beside the document (stderr with --json), and the result too.
    assert_eq!(
        err.matches("  trial ").count(),
        search["trials"].as_array().unwrap().len(),
        "{err}"
    );
    assert!(err.contains("rate found: "), "{err}");
}

/// Through the relay's 200 Mbit/s bottleneck (its default 256 KiB queue), the search finds
/// 200 Mbit/s within 5%, and the confirmation's goodput is that rate within 5%. The relay counts our 16-byte header, so
/// the payload goodput of a full link is 200 × 1472 / 1488 Mbit/s. Trials of 500 ms: a queue
/// of Q bytes hides an overshoot of Q × 8 / trial time (4 Mbit/s, 2%), where 200 ms would
/// hide 10 Mbit/s.
#[tokio::test]
async fn through_a_200_mbit_relay_the_search_finds_200_mbit() {
    let out = wirebench(&[
        "run",
        "--json",
        "--no-store",
        "--proto",
        "udp",
        "-l",
        "1472",
        "-n",
        "2MiB",
        "--impair",
        "rate=200Mbit",
        "--rate",
        "max",
        "--max-loss",
        "0.5%",
        "--search-low",
        "50Mbit",
        "--search-high",
        "400Mbit",
        "--trial",
        "500ms",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let (rate, confirm) = found(&doc, 0.5);
    let goodput = confirm["goodput_bps"].as_f64().expect("timed");
    let truth = 200e6 * 1472.0 / 1488.0;
    eprintln!(
        "relay 200 Mbit/s: found {:.2} Mbit/s offered, confirmation goodput {:.2} Mbit/s (truth {:.2})\n{}",
        rate as f64 / 1e6,
        goodput / 1e6,
        truth / 1e6,
        stderr(&out)
    );
    // The rate found is the bottleneck's, within 5%.
    assert!(
        (rate as f64 - 200e6).abs() / 200e6 < 0.05,
        "found {rate} bit/s, not within 5% of 200 Mbit/s"
    );
    assert!(goodput <= truth * 1.05, "goodput {goodput} above the link");
    // The goodput too, when the sender reached the rate it offered: on a host too busy to keep
    // a debug build's sender on time (it drops the time it lost beyond 5 ms rather than burst),
    // the goodput says what the sender sent, not what the link carries.
    let sent = confirm["sent_bps"].as_f64().expect("timed");
    if sent >= rate as f64 * 0.97 {
        assert!(
            (goodput - truth).abs() / truth < 0.05,
            "goodput {goodput} not within 5% of {truth}"
        );
    } else {
        eprintln!(
            "note: the sender reached {:.1}% of the offered rate; goodput not judged",
            sent * 100.0 / rate as f64
        );
    }
}

/// `--rate max` applies to UDP streaming; anything else is refused in one line before any
/// traffic, as are the search's flags without it.
#[tokio::test]
async fn the_search_is_refused_where_it_does_not_apply() {
    for (args, says) in [
        (
            &["--proto", "tcp", "--rate", "max"][..],
            "TCP is congestion-controlled",
        ),
        (
            &["--proto", "quic", "--rate", "max"][..],
            "QUIC is congestion-controlled",
        ),
        (
            &["--proto", "udp", "--mode", "saw", "--rate", "max"][..],
            "stop-and-wait",
        ),
        (
            &["--proto", "udp", "--max-loss", "1%"][..],
            "add --rate max",
        ),
        (&["--proto", "udp", "--rate", "max", "-R"][..], "drop -R"),
        (
            &[
                "--proto",
                "udp",
                "--rate",
                "max",
                "--search-low",
                "2G",
                "--search-high",
                "1G",
            ][..],
            "low <= high",
        ),
    ] {
        let mut all = vec!["run", "--no-store"];
        all.extend_from_slice(args);
        let out = wirebench(&all).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}
