//! The binary as users run it: usage errors, the embedded server, text and JSON output
//! (checked against the JSON Schema in docs/).

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::support::{TempPath, TEST_TIMEOUT};

/// Runs the binary with its data directory (the default results store) in a temp directory
/// that is removed afterwards, so tests never write to the user's store.
pub async fn wirebench(args: &[&str]) -> Output {
    let data_home = TempPath::new("-data");
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(args)
        .env("XDG_DATA_HOME", &data_home.0)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(TEST_TIMEOUT, child)
        .await
        .expect("wirebench finished in time")
        .expect("wirebench ran")
}

/// Panics unless `doc` is valid against docs/run-output.schema.json.
pub fn assert_matches_schema(doc: &Value) {
    assert_matches_doc_schema(doc, "run-output.schema.json");
}

/// Panics unless `doc` is valid against `docs/NAME` (a JSON schema of an output document).
pub fn assert_matches_doc_schema(doc: &Value, name: &str) {
    let path = format!("{}/../../docs/{name}", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource(name, schema).unwrap();
    let index = compiler
        .compile(name, &mut schemas)
        .expect("the schema compiles");
    if let Err(e) = schemas.validate(doc, index) {
        panic!("output does not match {name}: {e:#}");
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[tokio::test]
async fn bad_input_gets_one_line_and_exit_status_2() {
    let cases: [(&[&str], &str); 17] = [
        (
            &["run", "--proto", "udp", "-R", "--busy-poll"],
            "reversed UDP client does not spin",
        ),
        (&["run", "-P", "0"], "allowed 1 to 128"),
        (
            &["run", "-P", "4", "-l", "1000", "-n", "3000"],
            "at least one message per flow",
        ),
        (&["run", "-i", "1ms"], "allowed 10ms or more"),
        (&["run", "-C", "warpdrive"], "not available here: allowed"),
        (
            &["run", "--proto", "quic", "--busy-poll"],
            "run QUIC without it",
        ),
        (&["run", "-w", "1k"], "allowed 4096 to"),
        (&["run", "--proto", "udp", "-l", "65492"], "65491"),
        (&["run", "--proto", "sctp"], "tcp, udp, quic"),
        (&["run", "--mode", "fast"], "stop-and-wait"),
        (&["run", "-n", "12XB"], "KiB"),
        (&["run", "--repeat", "0"], "at least 1"),
        (&["run", "-l", "0"], "allowed 1"),
        // Negative numbers: our own line, naming the flag and an example, not clap's
        // "unexpected argument '-5'".
        (
            &["run", "-n", "-5"],
            "-n/--total: negative values are not allowed (got -5); give a size such as 100MiB",
        ),
        (&["run", "-P", "-2"], "-P/--parallel: negative values"),
        (&["ping", "--count", "-1"], "--count: negative values"),
        (
            &["rr", "--concurrency", "-10,20"],
            "--concurrency: negative values",
        ),
    ];
    for (args, expect) in cases {
        let out = wirebench(args).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line: {err}"
        );
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

#[tokio::test]
async fn embedded_run_prints_both_views_and_the_repeat_summary() {
    let out = wirebench(&[
        "run",
        "--proto",
        "tcp,quic",
        "--mode",
        "stream,saw",
        "-l",
        "1000",
        "-n",
        "100001",
        "--repeat",
        "3",
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{}", text, stderr(&out));
    assert!(text.contains("12 runs"), "{text}");
    // Every run block shows the embedded server's own session line.
    assert_eq!(text.matches("  server: session ").count(), 12, "{text}");
    for title in [
        "Client TCP Streaming",
        "Server TCP Streaming",
        "Client QUIC Stop and Wait",
        "Server QUIC Stop and Wait",
    ] {
        assert!(
            text.contains(&format!("Statistics for {title}")),
            "{title}: {text}"
        );
    }
    assert_eq!(
        text.matches("Messages: Min = 101, Avg = 101, Median = 101, Max = 101, Stddev = 0")
            .count(),
        8,
        "{text}"
    );
    assert_eq!(
        text.matches(
            "Bytes: Min = 100001, Avg = 100001, Median = 100001, Max = 100001, Stddev = 0"
        )
        .count(),
        8,
        "{text}"
    );
}

/// A plan with TCP streams beside stop-and-wait runs takes the small default, and says once,
/// under its figures, what that costs a TCP stream and what to type instead; a run that asked
/// for its size hears nothing of it, and a plan of TCP streams alone moves 128 KiB messages.
#[tokio::test]
async fn a_stream_at_the_default_size_says_what_it_measures_once() {
    let mixed = [
        "run",
        "--mode",
        "stream,saw",
        "-n",
        "1MiB",
        "--repeat",
        "2",
        "--no-store",
    ];
    let out = wirebench(&mixed).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("(the default -l when").count(), 1, "{err}");
    assert!(err.contains("add -l 128KiB"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    // 1 MiB in 1 KiB messages, both mechanisms, both repeats.
    assert!(text.contains("1024-byte messages"), "{text}");
    assert_eq!(
        text.matches("sent 1024 messages, 1048576 bytes").count(),
        4,
        "{text}"
    );
    let asked = [
        "run",
        "--mode",
        "stream,saw",
        "-n",
        "1MiB",
        "-l",
        "1024",
        "--no-store",
    ];
    let asked = wirebench(&asked).await;
    assert!(asked.status.success(), "{}", stderr(&asked));
    assert!(
        !stderr(&asked).contains("the default -l"),
        "{}",
        stderr(&asked)
    );
    let bulk = wirebench(&["run", "-n", "1MiB", "--no-store"]).await;
    let (err, text) = (stderr(&bulk), String::from_utf8_lossy(&bulk.stdout));
    assert!(bulk.status.success(), "{err}");
    assert!(!err.contains("the default -l"), "{err}");
    assert!(text.contains("131072-byte messages"), "{text}");
    assert!(text.contains("sent 8 messages, 1048576 bytes"), "{text}");
}

#[tokio::test]
async fn json_output_matches_the_schema_and_the_counts() {
    let out = wirebench(&[
        "run",
        "--json",
        "--proto",
        "tcp,udp,quic",
        "--mode",
        "saw,stream",
        "-l",
        "777",
        "-n",
        "50000",
        "--repeat",
        "2",
        "--rate",
        "100Mbit",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");

    assert_matches_schema(&doc);

    assert_eq!(doc["schema_version"], 2);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 12);
    // Documented order: protocols as given, then mechanisms as given, repeats innermost.
    let order: Vec<(String, String, u64)> = runs
        .iter()
        .map(|r| {
            (
                r["protocol"].as_str().unwrap().into(),
                r["mechanism"].as_str().unwrap().into(),
                r["repeat_index"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut expected = Vec::new();
    for p in ["tcp", "udp", "quic"] {
        for m in ["saw", "stream"] {
            for i in 0..2 {
                expected.push((p.to_string(), m.to_string(), i));
            }
        }
    }
    assert_eq!(order, expected);
    let count = 50000u64.div_ceil(777);
    for r in runs {
        assert_eq!(r["client"]["messages"], count);
        assert_eq!(r["client"]["bytes"], 50000);
        assert!(r["client"]["seconds"].as_f64().unwrap() > 0.0);
        assert_eq!(r["server"]["protocol"], r["protocol"]);
        let lossy = r["protocol"] == "udp" && r["mechanism"] == "stream";
        let (m, b, lost) = (
            r["server"]["messages"].as_u64().unwrap(),
            r["server"]["bytes"].as_u64().unwrap(),
            r["server"]["lost"].as_u64().unwrap(),
        );
        if lossy {
            assert_eq!(m + lost, count);
        } else {
            assert_eq!((m, b, lost), (count, 50000, 0), "{r}");
        }
    }
    let summary = doc["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 6);
    let tcp_saw = &summary[0];
    assert_eq!(tcp_saw["runs"], 2);
    for key in ["min", "mean", "median", "max"] {
        assert_eq!(
            tcp_saw["client"]["messages"][key].as_f64(),
            Some(count as f64)
        );
        assert_eq!(tcp_saw["server"]["bytes"][key].as_f64(), Some(50000.0));
    }
    assert_eq!(tcp_saw["client"]["messages"]["stddev"].as_f64(), Some(0.0));
}

#[tokio::test]
async fn server_subcommand_serves_a_remote_run() {
    let (mut server, addr, mut lines) = start_server(&["--json"]).await;
    let out = wirebench(&[
        "run", "--server", &addr, "--proto", "udp", "--mode", "saw", "-l", "100", "-n", "10001",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a session line")
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_str(&line).expect("a JSON line per session");
    assert_eq!(v["protocol"], "udp");
    assert_eq!(v["mechanism"], "saw");
    assert_eq!(v["messages"], 101);
    assert_eq!(v["bytes"], 10001);
    assert_eq!(v["aborted"], false);
    server.kill().await.unwrap();
}

#[tokio::test]
async fn server_uses_a_given_certificate_for_quic_and_refuses_a_bad_one() {
    let dir = std::env::temp_dir().join(format!("wirebench-cert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["wirebench".into()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.key_pair.serialize_pem()).unwrap();

    // A key file that is not PEM: a clear error, exit status 1.
    let out = wirebench(&[
        "server",
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        cert.to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a PEM private key"),
        "{}",
        stderr(&out)
    );

    let (mut server, addr, mut lines) = start_server(&[
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ])
    .await;
    let out = wirebench(&[
        "run",
        "--server",
        &addr,
        "--proto",
        "quic",
        "--mode",
        "stream,saw",
        "-l",
        "300",
        "-n",
        "30001",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    for mode in ["stream", "saw"] {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(
            line.contains(&format!("quic {mode} from 127.0.0.1")),
            "{line}"
        );
        assert!(line.contains("read 101 messages, 30001 bytes"), "{line}");
    }
    server.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `wirebench server` on 127.0.0.1 with an OS-chosen port (read back from its
/// "listening" line, so there is no race for a free port) and `extra` flags. Returns the child
/// (killed when dropped), its address, and its stdout lines.
pub(crate) async fn start_server(
    extra: &[&str],
) -> (
    tokio::process::Child,
    String,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["server", "--bind", "127.0.0.1", "--port", "0"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start wirebench server");
    let (addr, _stderr) = crate::support::listening_address(&mut server).await;
    let lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    (server, addr, lines)
}

/// Every subcommand's name, from the clap definitions the binary parses with.
fn subcommand_names() -> Vec<String> {
    wirebench::config::args::command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect()
}

#[tokio::test]
async fn completion_scripts_complete_every_subcommand() {
    let names = subcommand_names();
    assert!(names.len() >= 13, "{names:?}");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = wirebench(&["completions", shell]).await;
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = String::from_utf8(out.stdout).expect("UTF-8 script");
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell}: no {name}");
        }
    }
    let out = wirebench(&["completions", "bash"]).await;
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("complete -F _wirebench"), "{script}");
    assert!(script.contains("--msg-size"), "flags too");
    let out = wirebench(&["completions", "tcsh"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[tokio::test]
async fn the_man_page_is_roff_and_names_every_subcommand() {
    let out = wirebench(&["man"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let page = String::from_utf8(out.stdout).expect("UTF-8 roff");
    // The first request after clap_mangen's quote-string set-up (.ie/.el) is the title.
    let first = page
        .lines()
        .find(|l| !l.starts_with(".ie") && !l.starts_with(".el"))
        .unwrap_or_default();
    assert!(first.starts_with(".TH wirebench 1"), "{first}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "{section}");
    }
    for name in subcommand_names() {
        // roff escapes the hyphen in "wirebench-run(1)".
        assert!(
            page.contains(&format!("wirebench\\-{}(1)", name.replace('-', "\\-"))),
            "no {name}"
        );
    }
    // Where groff is installed, it must read the page without a warning.
    let groff = std::process::Command::new("groff")
        .args(["-man", "-ww", "-z"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    match groff {
        Err(_) => eprintln!("groff not installed: roff syntax checked by hand only"),
        Ok(mut child) => {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(page.as_bytes())
                .expect("groff reads the page");
            let done = child.wait_with_output().expect("groff ran");
            assert!(done.status.success());
            assert_eq!(String::from_utf8_lossy(&done.stderr), "", "groff warnings");
        }
    }
    // --dir writes one page per subcommand.
    let dir = TempPath::new("-man");
    let out = wirebench(&["man", "--dir", dir.0.to_str().expect("UTF-8 path")]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    for name in subcommand_names() {
        assert!(
            dir.0.join(format!("wirebench-{name}.1")).is_file(),
            "{name}"
        );
    }
    assert!(dir.0.join("wirebench.1").is_file());
}

#[tokio::test]
async fn iperf3_style_flags_run_against_the_embedded_server() {
    // `wirebench run -u -b 100M -J` as an iperf3 user types it (with -n, as -t is not ours yet).
    let out = wirebench(&[
        "run",
        "-u",
        "-b",
        "100M",
        "-J",
        "-n",
        "200KiB",
        "-l",
        "1000",
        "--no-store",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("-J prints one JSON document");
    assert_matches_schema(&doc);
    let run = &doc["runs"][0];
    assert_eq!(run["protocol"], "udp");
    assert_eq!(run["client"]["bytes"], 200 * 1024);
}

/// Short flags that deliberately mean two things, each after the tool its subcommand's users
/// come from: `-c` is iperf3's server on `run` and `rr`, and ping(8)'s count on `ping`.
const TWO_TRADITIONS: &[(char, &[&str])] = &[('c', &["count", "server"])];

/// Long flags whose value differs by role: `server --iperf3` also serves iperf3 clients (a
/// switch), `run --iperf3 HOST` tests against an iperf3 server. One idea, speaking iperf3.
const ROLE_FLAGS: &[&str] = &["iperf3"];

#[test]
fn every_subcommand_speaks_one_vocabulary() {
    use std::collections::{BTreeMap, BTreeSet};
    let cmd = wirebench::config::args::command();
    // long name -> (subcommand, short, value name, takes a value)
    type Use = (String, Option<char>, String, bool);
    let mut longs: BTreeMap<String, Vec<Use>> = BTreeMap::new();
    // short -> long names it stands for
    let mut shorts: BTreeMap<char, BTreeSet<String>> = BTreeMap::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else {
                continue;
            };
            if arg.is_hide_set() || long == "help" {
                continue;
            }
            let takes = arg.get_action().takes_values();
            // The relay's per-direction syntax wraps the same value.
            let value_name = arg
                .get_value_names()
                .and_then(|n| n.first())
                .map(|n| n.as_str().trim_start_matches("[up:|down:]").to_string())
                .unwrap_or_default();
            longs.entry(long.to_string()).or_default().push((
                sub.get_name().to_string(),
                arg.get_short(),
                value_name,
                takes,
            ));
            if let Some(short) = arg.get_short() {
                shorts.entry(short).or_default().insert(long.to_string());
            }
        }
    }
    let mut problems = Vec::new();
    for (short, names) in &shorts {
        let allowed = TWO_TRADITIONS
            .iter()
            .any(|(s, set)| s == short && names.iter().all(|n| set.contains(&n.as_str())));
        if names.len() > 1 && !allowed {
            problems.push(format!("-{short} stands for {names:?}"));
        }
    }
    for (long, uses) in &longs {
        let shorts: BTreeSet<char> = uses.iter().filter_map(|u| u.1).collect();
        if shorts.len() > 1 {
            problems.push(format!("--{long} has shorts {shorts:?}: {uses:?}"));
        }
        let kinds: BTreeSet<(&str, bool)> = uses.iter().map(|u| (u.2.as_str(), u.3)).collect();
        if kinds.len() > 1 && !ROLE_FLAGS.contains(&long.as_str()) {
            problems.push(format!("--{long} takes different values: {uses:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test]
async fn ping_takes_its_target_and_count_as_ping8_does() {
    // `-c 5` is a count: the embedded server answers 5 probes (it used to dial 0.0.0.5).
    let out = wirebench(&["ping", "-c", "5"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("ping tcp to embedded"), "{text}");
    assert!(text.contains("sent 5, answered 5"), "{text}");
    // The server is the argument; the old `-c HOST` says where it goes now.
    let (mut server, addr, _lines) = start_server(&[]).await;
    let out = wirebench(&["ping", "-c", "3", &addr, "-J"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["results"][0]["sent"], 3, "{doc}");
    assert_eq!(doc["server"], addr.as_str());
    let out = wirebench(&["ping", "-c", &addr]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!(
            "give the server as the argument: wirebench ping {addr}"
        )),
        "{}",
        stderr(&out)
    );
    // The renamed flags still work under their old names for one release.
    let out = wirebench(&[
        "ping",
        &addr,
        "--size",
        "32",
        "--duration",
        "200ms",
        "--interval",
        "5ms",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    server.kill().await.unwrap();
}
