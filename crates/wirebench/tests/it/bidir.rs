//! `run --bidir`: both directions at once against the embedded server, for every protocol.
//! Each direction's counts must agree exactly between the two ends (UDP streaming: received +
//! lost = sent), the JSON must carry both directions and the run's headline must say it adds
//! them up.

use serde_json::Value;

use crate::cli::{assert_matches_schema, stderr, wirebench};
use crate::support::within;

/// Runs `wirebench run --bidir -J --no-store -l 1400 EXTRA...`, checks the document against
/// the schema and returns its only run.
async fn bidir_run(extra: &[&str]) -> Value {
    let mut args = vec!["run", "--bidir", "-J", "--no-store", "-l", "1400"];
    args.extend_from_slice(extra);
    let out = wirebench(&args).await;
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("-J prints one JSON document");
    assert_matches_schema(&doc);
    assert_eq!(doc["parameters"]["bidir"], true, "{doc}");
    assert_eq!(doc["summary"][0]["both_directions"], true, "{doc}");
    assert_eq!(doc["runs"].as_array().map(Vec::len), Some(1), "{doc}");
    doc["runs"][0].clone()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Both directions carried bytes, each end's counts agree, and the headlines are each
/// direction's and their sum.
fn assert_both_directions(run: &Value, label: &str) {
    let (up_c, up_s) = (&run["client"], &run["server"]);
    let back = &run["server_to_client"];
    let (down_c, down_s) = (&back["client"], &back["server"]);
    assert_eq!(run["reverse"], false, "{label}: {run}");
    assert!(
        n(&up_c["bytes"]) > 0,
        "{label}: nothing went client → server"
    );
    assert!(
        n(&down_s["bytes"]) > 0,
        "{label}: nothing went server → client"
    );
    for side in [up_s, down_s] {
        assert_eq!(side["aborted"], false, "{label}: {run}");
    }
    if run["protocol"] == "udp" && run["mechanism"] == "stream" {
        // Client → server: the server counted the loss; server → client: the client did.
        assert_eq!(
            n(&up_s["messages"]) + n(&up_s["lost"]),
            n(&up_c["messages"]),
            "{label}: client → server received + lost = sent"
        );
        assert_eq!(
            n(&down_c["messages"]) + n(&down_c["udp_received"]["lost"]),
            n(&down_s["messages"]),
            "{label}: server → client received + lost = sent"
        );
    } else {
        assert_eq!(
            (n(&up_s["messages"]), n(&up_s["bytes"])),
            (n(&up_c["messages"]), n(&up_c["bytes"])),
            "{label}: client → server counts agree exactly"
        );
        assert_eq!(
            (n(&down_c["messages"]), n(&down_c["bytes"])),
            (n(&down_s["messages"]), n(&down_s["bytes"])),
            "{label}: server → client counts agree exactly"
        );
    }
    let up = &run["directions"]["client_to_server"];
    let down = &run["directions"]["server_to_client"];
    assert_eq!(up["received_bytes"], up_s["bytes"], "{label}");
    assert_eq!(up["sent_bytes"], up_c["bytes"], "{label}");
    assert_eq!(down["received_bytes"], down_c["bytes"], "{label}");
    assert_eq!(down["sent_bytes"], down_s["bytes"], "{label}");
    let h = &run["headline"];
    assert_eq!(h["both_directions"], true, "{label}: {h}");
    assert_eq!(up["both_directions"], false, "{label}");
    assert_eq!(
        n(&h["received_bytes"]),
        n(&up["received_bytes"]) + n(&down["received_bytes"]),
        "{label}: the run's headline adds both directions up"
    );
    assert!(
        up["goodput_bps"].as_f64().is_some_and(|g| g > 0.0),
        "{label}: {up}"
    );
    assert!(
        down["goodput_bps"].as_f64().is_some_and(|g| g > 0.0),
        "{label}: {down}"
    );
}

#[tokio::test]
async fn tcp_bidir_for_two_seconds_carries_both_ways() {
    within(async {
        let run = bidir_run(&["-t", "2", "--proto", "tcp"]).await;
        assert_eq!(run["ended_by"], "time", "{run}");
        assert_both_directions(&run, "tcp --bidir -t 2");
        // Each direction sent for about the time asked (bounded generously: a loaded machine).
        for secs in [
            &run["client"]["seconds"],
            &run["server_to_client"]["client"]["seconds"],
        ] {
            let secs = secs.as_f64().expect("seconds");
            assert!((1.8..=6.0).contains(&secs), "took {secs} s for -t 2");
        }
    })
    .await;
}

#[tokio::test]
async fn udp_bidir_for_two_seconds_carries_both_ways() {
    within(async {
        // Paced, so the loopback drops little.
        let run = bidir_run(&["-t", "2", "--proto", "udp", "-b", "50M"]).await;
        assert_both_directions(&run, "udp --bidir -t 2");
        let down = &run["directions"]["server_to_client"];
        assert!(
            down["delivery"]["lost_pct"].is_number(),
            "UDP loss per direction: {down}"
        );
    })
    .await;
}

#[tokio::test]
async fn quic_bidir_for_two_seconds_carries_both_ways() {
    within(async {
        // Paced: an unpaced QUIC sender on a debug build buffers seconds of data.
        let run = bidir_run(&["-t", "2", "--proto", "quic", "-b", "50M"]).await;
        assert_both_directions(&run, "quic --bidir -t 2");
    })
    .await;
}

#[tokio::test]
async fn stop_and_wait_bidir_carries_both_ways() {
    within(async {
        // Long enough to be timed (1 ms) on a fast machine: each direction's goodput is given.
        let run = bidir_run(&["-n", "2MiB", "--proto", "udp", "--mode", "saw"]).await;
        assert_both_directions(&run, "udp saw --bidir");
    })
    .await;
}

#[tokio::test]
async fn total_is_per_direction_and_parallel_flows_run_each_way() {
    within(async {
        // -n is what each direction sends, split across its -P flows; 48 MiB each way is long
        // enough to be timed (1 ms) on a fast machine, so each direction has its goodput.
        let run = bidir_run(&["-n", "48MiB", "-P", "2", "--proto", "tcp"]).await;
        assert_both_directions(&run, "tcp --bidir -n 48MiB -P 2");
        assert_eq!(n(&run["client"]["bytes"]), 48 << 20, "{run}");
        assert_eq!(
            n(&run["server_to_client"]["server"]["bytes"]),
            48 << 20,
            "{run}"
        );
        let flows = run["flows"].as_array().expect("flows with -P 2");
        let reverse: Vec<bool> = flows
            .iter()
            .map(|f| f["reverse"].as_bool().unwrap_or(false))
            .collect();
        assert_eq!(reverse, [false, false, true, true], "{run}");
        let sum = |reverse: bool, side: &str| -> u64 {
            flows
                .iter()
                .filter(|f| f["reverse"].as_bool().unwrap_or(false) == reverse)
                .map(|f| n(&f[side]["bytes"]))
                .sum()
        };
        assert_eq!(sum(false, "client"), 48 << 20);
        assert_eq!(sum(false, "server"), 48 << 20);
        assert_eq!(sum(true, "client"), 48 << 20);
        assert_eq!(sum(true, "server"), 48 << 20);
        let sessions: std::collections::HashSet<u64> =
            flows.iter().map(|f| n(&f["session"])).collect();
        assert_eq!(sessions.len(), 4, "four sessions: {run}");
    })
    .await;
}

#[tokio::test]
async fn text_shows_each_direction_and_labels_the_sum() {
    within(async {
        let out = wirebench(&[
            "run",
            "--bidir",
            "-n",
            "2MiB",
            "--proto",
            "tcp",
            "--no-store",
        ])
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        for wanted in [
            "goodput, both directions added up: ",
            "  client → server:\n    goodput: ",
            "  server → client:\n    goodput: ",
            // A plan of TCP streams alone moves 128 KiB messages.
            "client: sent 16 messages, 2097152 bytes",
            "client: received 16 messages, 2097152 bytes",
        ] {
            assert!(text.contains(wanted), "{wanted:?} missing:\n{text}");
        }
    })
    .await;
}

#[tokio::test]
async fn contradictions_are_refused_in_one_line() {
    within(async {
        for (args, wanted) in [
            (
                &["run", "--bidir", "-R", "--no-store"][..],
                "--bidir already runs both directions",
            ),
            (
                &["run", "--bidir", "-P", "65", "--no-store"][..],
                "allowed 1 to 64",
            ),
            (
                &[
                    "run",
                    "--bidir",
                    "--proto",
                    "udp",
                    "--rate",
                    "max",
                    "--no-store",
                ][..],
                "drop --bidir and -O/--omit",
            ),
            (
                &["run", "--bidir", "--iperf3", "127.0.0.1:9", "--no-store"][..],
                "not --iperf3",
            ),
        ] {
            let out = wirebench(args).await;
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            let err = stderr(&out);
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains(wanted), "{args:?}: {err}");
        }
    })
    .await;
}
