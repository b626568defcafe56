//! `run -O/--omit`: both ends mark what they had moved when the omit span ended, and the
//! headline leaves that out: received bytes after the receiver's mark, over the time after the
//! client's. Checked with the counts both ends report, exactly.

use serde_json::Value;
use wirebench_core::record::transfer_span_ns;
use wirebench_core::vocab::plan::Mechanism;

use crate::cli::{assert_matches_schema, stderr, wirebench};
use crate::support::within;

/// Runs `wirebench run -J --no-store -l 1400 ARGS...` and returns its document (schema-checked).
async fn run_doc(args: &[&str]) -> Value {
    let mut all = vec!["run", "-J", "--no-store", "-l", "1400"];
    all.extend_from_slice(args);
    let out = wirebench(&all).await;
    assert!(out.status.success(), "{all:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("-J prints one JSON document");
    assert_matches_schema(&doc);
    doc
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// One direction's headline against its ends' counts: what each end moved after its mark,
/// over the client's time after its mark. `reverse` when the server sent; `flows` are the
/// direction's flows when it has several (`-P`), whose marks it sums.
fn assert_omitted(
    h: &Value,
    (client, server): (&Value, &Value),
    reverse: bool,
    flows: &[&Value],
    label: &str,
) {
    let (sender, receiver) = if reverse {
        (server, client)
    } else {
        (client, server)
    };
    for (side, end) in [("client", client), ("server", server)] {
        let before = n(&end["omitted"]["bytes"]);
        assert!(
            0 < before && before < n(&end["bytes"]),
            "{label}: the mark falls inside the run: {end}"
        );
        let messages = n(&end["omitted"]["messages"]);
        if flows.is_empty() {
            assert_eq!(messages, before / 1400, "{label}: {side}");
            continue;
        }
        // A summed mark counts each flow's whole messages: a message a flow was part-way
        // through at its mark is no message, so the sum may be up to one per flow short of
        // the summed bytes / 1400 (it was, in about half of all runs).
        let mut flow_bytes = 0;
        let mut flow_messages = 0;
        for f in flows {
            let (bytes, whole) = (
                n(&f[side]["omitted"]["bytes"]),
                n(&f[side]["omitted"]["messages"]),
            );
            assert_eq!(whole, bytes / 1400, "{label}: a {side} flow's mark: {f}");
            flow_bytes += bytes;
            flow_messages += whole;
        }
        assert_eq!(
            (before, messages),
            (flow_bytes, flow_messages),
            "{label}: the {side}'s mark is its flows' marks summed"
        );
    }
    // The marks are taken on each end's own clock; what arrived after them is never shown as
    // more than what was sent after them.
    assert_eq!(
        n(&h["received_bytes"]),
        (n(&receiver["bytes"]) - n(&receiver["omitted"]["bytes"]))
            .min(n(&sender["bytes"]) - n(&sender["omitted"]["bytes"])),
        "{label}: goodput counts the receiver's bytes after its mark, at most those sent after"
    );
    assert_eq!(
        n(&h["sent_bytes"]),
        n(&sender["bytes"]) - n(&sender["omitted"]["bytes"]),
        "{label}: the sender's bytes after its mark"
    );
    let omitted_ns = n(&h["omitted_ns"]);
    assert_eq!(omitted_ns, n(&client["omitted"]["elapsed_ns"]), "{label}");
    // The mark falls 1 s after the client's transfer began (set-up included); its time is
    // counted from the client's first byte (received, with -R), which a loaded machine delays.
    assert!(
        (0.5e9..=2.0e9).contains(&(omitted_ns as f64)),
        "{label}: the mark about 1 s in, at {omitted_ns} ns"
    );
    // The run's transfer time (streaming: the longer of the two ends' spans) after the mark.
    let transfer_ns = n(&h["transfer_ns"]);
    let span_ns = transfer_span_ns(
        Mechanism::Stream,
        n(&client["elapsed_ns"]),
        n(&server["elapsed_ns"]),
    );
    assert_eq!(transfer_ns, span_ns - omitted_ns, "{label}");
    assert!(
        (0.5e9..=4.0e9).contains(&(transfer_ns as f64)),
        "{label}: about 1 s measured of -t 2, got {transfer_ns} ns"
    );
    let goodput = h["goodput_bps"].as_f64().expect("goodput");
    let expected = n(&h["received_bytes"]) as f64 * 8.0 / (transfer_ns as f64 / 1e9);
    assert!(
        (goodput - expected).abs() <= expected * 1e-9,
        "{label}: {h}"
    );
}

#[tokio::test]
async fn tcp_omits_the_first_second_on_both_ends() {
    within(async {
        let doc = run_doc(&["-t", "2", "-O", "1", "--proto", "tcp"]).await;
        assert_eq!(doc["parameters"]["omit_us"], 1_000_000, "{doc}");
        let run = &doc["runs"][0];
        // The whole run's counts stay exact; only the headline leaves the span out.
        assert_eq!(run["client"]["bytes"], run["server"]["bytes"], "{run}");
        assert_omitted(
            &run["headline"],
            (&run["client"], &run["server"]),
            false,
            &[],
            "tcp -O 1",
        );
    })
    .await;
}

#[tokio::test]
async fn reversed_udp_and_quic_omit_too() {
    within(async {
        let doc = run_doc(&["-t", "2", "-O", "1", "--proto", "tcp", "-R"]).await;
        let run = &doc["runs"][0];
        assert_omitted(
            &run["headline"],
            (&run["client"], &run["server"]),
            true,
            &[],
            "tcp -R -O 1",
        );

        let doc = run_doc(&["-t", "2", "-O", "1", "--proto", "udp", "-b", "50M"]).await;
        let run = &doc["runs"][0];
        assert_omitted(
            &run["headline"],
            (&run["client"], &run["server"]),
            false,
            &[],
            "udp -O 1",
        );

        let doc = run_doc(&["-t", "2", "-O", "1000ms", "--proto", "quic", "-b", "50M"]).await;
        let run = &doc["runs"][0];
        assert_eq!(run["client"]["bytes"], run["server"]["bytes"], "{run}");
        assert_omitted(
            &run["headline"],
            (&run["client"], &run["server"]),
            false,
            &[],
            "quic -O 1",
        );
    })
    .await;
}

#[tokio::test]
async fn bidir_and_parallel_runs_omit_in_each_direction() {
    within(async {
        let doc = run_doc(&["-t", "2", "-O", "1", "--proto", "tcp", "--bidir", "-P", "2"]).await;
        let run = &doc["runs"][0];
        let back = &run["server_to_client"];
        let d = &run["directions"];
        let flows = run["flows"].as_array().expect("flows");
        let (down, up): (Vec<&Value>, Vec<&Value>) = flows
            .iter()
            .partition(|f| f["reverse"].as_bool() == Some(true));
        assert_eq!((up.len(), down.len()), (2, 2), "{run}");
        assert_omitted(
            &d["client_to_server"],
            (&run["client"], &run["server"]),
            false,
            &up,
            "up",
        );
        assert_omitted(
            &d["server_to_client"],
            (&back["client"], &back["server"]),
            true,
            &down,
            "down",
        );
    })
    .await;
}

#[tokio::test]
async fn a_run_over_before_its_mark_is_all_omitted() {
    within(async {
        let doc = run_doc(&["-n", "1MiB", "-O", "30", "--proto", "tcp"]).await;
        let run = &doc["runs"][0];
        assert_eq!(
            run["client"]["omitted"]["bytes"], run["client"]["bytes"],
            "{run}"
        );
        assert_eq!(
            run["server"]["omitted"]["bytes"], run["server"]["bytes"],
            "{run}"
        );
        assert_eq!(run["headline"]["received_bytes"], 0, "{run}");
        assert!(run["headline"]["goodput_bps"].is_null(), "{run}");
    })
    .await;
}

#[tokio::test]
async fn text_marks_the_omitted_span_and_its_intervals() {
    within(async {
        let out = wirebench(&[
            "run",
            "-t",
            "2",
            "-O",
            "1",
            "-i",
            "500ms",
            "--proto",
            "tcp",
            "--no-store",
        ])
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("  omitted: the first "), "{text}");
        let interval_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("  [")).collect();
        assert!(interval_lines.len() >= 4, "{text}");
        assert!(interval_lines[0].ends_with("(omitted)"), "{text}");
        assert!(interval_lines[1].ends_with("(omitted)"), "{text}");
        assert!(!interval_lines[2].ends_with("(omitted)"), "{text}");
    })
    .await;
}

#[tokio::test]
async fn bad_omit_spans_are_refused_in_one_line() {
    within(async {
        for (args, wanted) in [
            (
                &["run", "-O", "abc", "--no-store"][..],
                "a bare number is seconds",
            ),
            (
                &["run", "-O", "0", "--no-store"][..],
                "-O/--omit 0 is out of range",
            ),
            (
                &["run", "-t", "1", "-O", "1500ms", "--no-store"][..],
                "leaves nothing of -t/--time",
            ),
            (
                &[
                    "run",
                    "-O",
                    "1",
                    "--proto",
                    "udp",
                    "--rate",
                    "max",
                    "--no-store",
                ][..],
                "drop --bidir and -O/--omit",
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

/// A client may ask a server for any omit span: one past the server's --max-duration is
/// refused with the reason, and the server goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refuses_an_omit_span_past_its_duration_limit() {
    use wirebench::flows::client::SessionRequest;
    use wirebench_core::vocab::plan::{Mechanism, Protocol};

    use crate::sessions::spec;
    use crate::support::TestServer;

    within(async {
        let mut server = TestServer::start().await;
        let mut sp = spec(Protocol::Tcp, Mechanism::Stream, 1024, 1 << 20);
        sp.omit_us = Some(u64::MAX);
        let err = SessionRequest::new(server.addr, &sp)
            .run()
            .await
            .expect_err("refused");
        let msg = format!("{err:#}");
        assert!(
            msg.contains("an omit span (-O)") && msg.contains("--max-duration"),
            "{msg}"
        );
        // Asked within the limit, the session runs and both ends report their marks.
        sp.omit_us = Some(1);
        let out = SessionRequest::new(server.addr, &sp)
            .run()
            .await
            .expect("session runs");
        let summary = server.next_session().await;
        assert_eq!(summary.report, out.server);
        assert!(out.server.omitted.is_some() && out.client.omitted.is_some());
        assert_eq!(out.server.bytes, 1 << 20);
    })
    .await;
}
