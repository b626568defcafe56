//! `wirebench run --iperf3` against a real `iperf3 -s` (Debian's, or `WIREBENCH_IPERF3`): the
//! counts of both views agree exactly, the stored run does not contradict itself, and the
//! `--json` document matches docs/iperf3-output.schema.json. Skips without iperf3.

use serde_json::Value;

use crate::cli::{stderr, wirebench};
use crate::interop::{have_iperf3, RealServer};
use crate::support::TempPath;

/// Panics unless `doc` is valid against the JSON Schema `docs/{file}` (the other schemas in
/// docs/ are known by their `$id`, so references between them resolve).
pub(crate) fn assert_schema(doc: &Value, file: &str) {
    let dir = format!("{}/../../docs", env!("CARGO_MANIFEST_DIR"));
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    let mut target = None;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".schema.json") {
            continue;
        }
        let schema: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.path()).unwrap()).unwrap();
        let id = schema["$id"].as_str().unwrap_or(&name).to_string();
        if name == file {
            target = Some(id.clone());
        }
        compiler.add_resource(&id, schema).unwrap();
    }
    let target = target.unwrap_or_else(|| panic!("no docs/{file}"));
    let index = compiler
        .compile(&target, &mut schemas)
        .expect("the schema compiles");
    if let Err(e) = schemas.validate(doc, index) {
        panic!("output does not match docs/{file}: {e:#}");
    }
}

/// `run --iperf3 TARGET ARGS --json` with a store; returns the document and the stored run.
async fn run_stored(target: &str, args: &[&str]) -> (Value, Value, String) {
    let db = TempPath::new(".sqlite3");
    let mut all = vec!["run", "--iperf3", target, "--json", "--db", db.arg()];
    all.extend_from_slice(args);
    let out = wirebench(&all).await;
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_schema(&doc, "iperf3-output.schema.json");
    let export = wirebench(&["export", "1", "--db", db.arg()]).await;
    assert!(export.status.success(), "{}", stderr(&export));
    let stored: Value = serde_json::from_slice(&export.stdout).expect("export is JSON");
    (doc, stored["runs"][0].clone(), stderr(&out))
}

#[tokio::test]
async fn a_udp_total_that_is_not_whole_datagrams_is_sent_as_whole_ones() {
    if !have_iperf3("a_udp_total_that_is_not_whole_datagrams_is_sent_as_whole_ones") {
        return;
    }
    let server = RealServer::start().await;
    let target = server.addr.to_string();
    // 14500 B is 10 datagrams of 1400 B and 500 B: an iperf3 3.21 server does not count a
    // 500 B datagram, so 11 whole ones go.
    let (doc, run, said) = run_stored(
        &target,
        &[
            "--proto", "udp", "-n", "14500", "-l", "1400", "--rate", "10Mbit",
        ],
    )
    .await;
    assert!(
        said.contains("sending 11 whole datagrams, 15400 B"),
        "{said}"
    );
    assert_eq!(doc["limit_bytes"], 15400);
    assert_eq!(doc["wirebench"]["bytes"], 15400);
    assert_eq!(doc["wirebench"]["packets"], 11);
    // The server's view: every datagram up to its highest count was read or lost. It stops
    // counting at TEST_END, which goes right after our last datagram (as iperf3's client
    // sends it), so the last may not be among them.
    let server = &doc["iperf3_server"];
    let lost = server["lost"].as_u64().unwrap();
    let seen = server["packets"].as_u64().unwrap();
    assert!((1..=11).contains(&seen), "{server}");
    assert_eq!(server["bytes"].as_u64().unwrap() + 1400 * lost, 1400 * seen);
    // The stored run says the same, in messages and bytes.
    assert_eq!(run["client"]["messages"], 11);
    assert_eq!(run["client"]["bytes"], 15400);
    let arrived = run["server"]["messages"].as_u64().unwrap();
    assert_eq!(arrived + run["server"]["lost"].as_u64().unwrap(), seen);
    assert_eq!(run["server"]["bytes"].as_u64().unwrap(), 1400 * arrived);
}

#[tokio::test]
async fn a_timed_reverse_tcp_test_counts_what_the_server_sent() {
    if !have_iperf3("a_timed_reverse_tcp_test_counts_what_the_server_sent") {
        return;
    }
    let server = RealServer::start().await;
    let target = server.addr.to_string();
    let (doc, _, _) = run_stored(&target, &["-t", "1", "-R", "-P", "2"]).await;
    assert_eq!(doc["reverse"], true);
    let ours = &doc["wirebench"];
    let theirs = &doc["iperf3_server"];
    assert_eq!(ours["role"], "receiver");
    assert!(ours["bytes"].as_u64().unwrap() > 0);
    // Everything the server counted as sent arrived, stream by stream: what was still on
    // its way when the test ended is read too. (An iperf3 3.17+ server stops its sending
    // thread mid-write: the bytes of that write arrive but are not in its count.)
    for (a, b) in ours["streams"]
        .as_array()
        .unwrap()
        .iter()
        .zip(theirs["streams"].as_array().unwrap())
    {
        assert_eq!(a["id"], b["id"]);
        let (got, sent) = (a["bytes"].as_u64().unwrap(), b["bytes"].as_u64().unwrap());
        assert!(got >= sent && got - sent < 128 * 1024, "{got} of {sent}");
    }
}

/// Without `-l`, an iperf3 test writes iperf3's own blocks (128 KiB over TCP), not a
/// wirebench run's 1 KiB: 1 MiB is 8 writes, and the stored run counts 8 messages.
#[tokio::test]
async fn a_tcp_test_without_l_writes_iperf3_blocks() {
    if !have_iperf3("a_tcp_test_without_l_writes_iperf3_blocks") {
        return;
    }
    let server = RealServer::start().await;
    let target = server.addr.to_string();
    let (doc, run, _) = run_stored(&target, &["-n", "1MiB"]).await;
    assert_eq!(doc["block_len"], 128 * 1024);
    assert_eq!(doc["wirebench"]["bytes"], 1 << 20);
    assert_eq!(run["client"]["messages"], 8, "{run}");
}

/// A change made to the results an iperf3 server sends.
type Tamper = fn(&mut Value);

/// A man in the middle in front of a real iperf3 server: relays every TCP connection as it is,
/// but on the first (the control connection) hands the results the server sends to `tamper`
/// before passing them on. The states the server sends before them are single bytes; the
/// results follow `EXCHANGE_RESULTS` (13) as a 4-byte length and JSON.
async fn tampering_proxy(server: std::net::SocketAddr, tamper: Tamper) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((client, _)) = listener.accept().await {
            let Ok(upstream) = tokio::net::TcpStream::connect(server).await else {
                return;
            };
            let control = std::mem::take(&mut first);
            tokio::spawn(async move {
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = upstream.into_split();
                let up = tokio::spawn(async move { tokio::io::copy(&mut cr, &mut sw).await });
                if control {
                    let mut state = [0u8; 1];
                    while sr.read_exact(&mut state).await.is_ok() {
                        cw.write_all(&state).await.ok();
                        if state[0] == 13 {
                            break;
                        }
                    }
                    let mut len = [0u8; 4];
                    if sr.read_exact(&mut len).await.is_ok() {
                        let mut text = vec![0u8; u32::from_be_bytes(len) as usize];
                        sr.read_exact(&mut text).await.ok();
                        let mut results: Value = serde_json::from_slice(&text).unwrap();
                        tamper(&mut results);
                        let text = serde_json::to_vec(&results).unwrap();
                        cw.write_all(&(text.len() as u32).to_be_bytes()).await.ok();
                        cw.write_all(&text).await.ok();
                    }
                }
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
                let _ = up.await;
            });
        }
    });
    addr
}

/// Issue 37: an iperf3 server whose results cannot be true — streams the test never had, ten
/// times the bytes sent, a test of 1 ns, an end 10^12 s after its start — is not believed:
/// nothing of its figures is printed as a result, the command fails with the reason, and the
/// store holds a failed campaign whose one run is aborted with that reason (before, each was
/// stored complete: "goodput 135.91 Tbit/s", "8.39 Pbit/s", or a spool file no store took).
#[tokio::test]
async fn an_iperf3_server_whose_results_cannot_be_true_is_not_believed() {
    if !have_iperf3("an_iperf3_server_whose_results_cannot_be_true_is_not_believed") {
        return;
    }
    let lies: [(&str, Tamper); 4] = [
        ("five streams added", |r| {
            let first = r["streams"][0].clone();
            let streams = r["streams"].as_array_mut().unwrap();
            for id in 100..105 {
                let mut s = first.clone();
                s["id"] = id.into();
                streams.push(s);
            }
        }),
        ("ten times the bytes", |r| {
            for s in r["streams"].as_array_mut().unwrap() {
                s["bytes"] = (s["bytes"].as_u64().unwrap() * 10).into();
            }
        }),
        ("a test of 1 ns", |r| {
            for s in r["streams"].as_array_mut().unwrap() {
                s["start_time"] = 0.0.into();
                s["end_time"] = 1e-9.into();
            }
        }),
        ("an end 10^12 s after the start", |r| {
            for s in r["streams"].as_array_mut().unwrap() {
                s["end_time"] = 1e12.into();
            }
        }),
    ];
    let server = RealServer::start().await;
    for (what, tamper) in lies {
        let proxy = tampering_proxy(server.addr, tamper).await;
        let db = TempPath::new(".sqlite3");
        let out = wirebench(&[
            "run",
            "--iperf3",
            &proxy,
            "-n",
            "20M",
            "-l",
            "128K",
            "--db",
            db.arg(),
        ])
        .await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.contains("results are inconsistent") || err.contains("report is inconsistent"),
            "{what}: {err}"
        );
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            !printed.contains("bit/s"),
            "{what}: printed as a result: {printed}"
        );
        let export = wirebench(&["export", "1", "--db", db.arg()]).await;
        let doc: Value = serde_json::from_slice(&export.stdout).expect("export is JSON");
        assert_eq!(doc["campaign"]["status"], "failed", "{what}: {doc:#}");
        assert_eq!(
            doc["runs"].as_array().map(Vec::len),
            Some(0),
            "{what}: {doc:#}"
        );
        assert!(doc.to_string().contains("inconsistent"), "{what}: {doc:#}");
    }
}
