//! Where UDP loss went (issue 28): on loopback, where no path can drop, every lost datagram of
//! a lossy run is the receiving host's, exactly, forward (the server's receive lanes) and
//! reversed (the client's socket), in the run's JSON, its export and the store's columns; a
//! relay's impairment is the path's; a sending host's full device queue (a tbf in a namespace)
//! is the sending host's. Loss is made for real: the receiving process is stopped (SIGSTOP)
//! until its socket has dropped, then let go on.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support::{within, TempPath, TestServer};
use wirebench::flows::server::ServerOptions;

/// Datagrams the sockets bound to (or, `remote`, connected to) 127.0.0.1:`port` have dropped
/// so far, from /proc/net/udp (the per-socket `drops` column, buffers not datagrams).
fn socket_drops(port: u16, remote: bool) -> u64 {
    let want = format!("0100007F:{port:04X}");
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let addr = if remote { cols.get(2) } else { cols.get(1) };
            (addr == Some(&want.as_str())).then(|| cols.last()?.parse::<u64>().ok())?
        })
        .sum()
}

/// Sends `signal` to a process this test started.
fn signal(child: &Child, signal: libc::c_int) {
    let pid = child.id().expect("still running") as libc::pid_t;
    // SAFETY: kill(2) with a pid of a child we started and still hold.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill {pid}");
}

/// Waits until the sockets of `port` have dropped something (the receiver is stopped, the
/// sender goes on), polling the kernel's table.
async fn until_dropping(port: u16, remote: bool) {
    let before = socket_drops(port, remote);
    while socket_drops(port, remote) == before {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A `wirebench run` client (text output, `-i` lines as it goes, storing into `db`).
fn client(db: &TempPath, server: &str, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["run", "--db", db.arg(), "--server", server])
        .args(["--proto", "udp", "-l", "1024", "-t", "3", "-i", "50ms"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the client")
}

/// Waits for the client's first interval line: data is flowing.
async fn first_interval(
    client: &mut Child,
) -> tokio::io::Lines<BufReader<tokio::process::ChildStdout>> {
    let mut lines = BufReader::new(client.stdout.take().expect("stdout")).lines();
    while let Some(line) = lines.next_line().await.expect("client output") {
        if line.trim_start().starts_with('[') && line.contains(" s]") {
            return lines;
        }
    }
    panic!("the client printed no interval line");
}

/// Lets the client finish (its output read to the end) and returns the stored campaign's
/// export document.
async fn finished(
    mut client: Child,
    mut rest: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    db: &TempPath,
) -> Value {
    let mut text = Vec::new();
    while let Some(line) = rest.next_line().await.expect("client output") {
        text.push(line);
    }
    let status = client.wait().await.expect("client ran");
    let mut err = String::new();
    if let Some(mut e) = client.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = e.read_to_string(&mut err).await;
    }
    assert!(status.success(), "{err}\n{}", text.join("\n"));
    let goodput = text
        .iter()
        .find(|l| l.contains("goodput:"))
        .expect("run block");
    assert!(
        goodput.contains("dropped by the receiving host"),
        "the run block splits the loss: {goodput}"
    );
    let out = crate::cli::wirebench(&["export", "--db", db.arg(), "1"]).await;
    assert!(out.status.success(), "{}", crate::cli::stderr(&out));
    serde_json::from_slice(&out.stdout).expect("export JSON")
}

/// The store's loss columns of the campaign's one run.
fn stored_loss(db: &TempPath) -> [Option<i64>; 4] {
    let conn = rusqlite::Connection::open(&db.0).expect("open the store");
    conn.query_row(
        "SELECT udp_lost, udp_lost_receiving_host, udp_lost_sending_host, udp_lost_path FROM run",
        [],
        |row| Ok([row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?]),
    )
    .expect("one run stored")
}

/// Asserts that the run's loss is all `(receiving, sending, path)`'s share as given.
fn assert_split(run: &Value, whose: &str) -> u64 {
    let d = &run["headline"]["delivery"];
    let lost = d["lost"].as_u64().expect("lost");
    assert!(
        lost > 0,
        "the receiver was stopped, yet nothing was lost: {d}"
    );
    let split = &d["loss_split"];
    let expected = match whose {
        "receiving" => [lost, 0, 0],
        "sending" => [0, lost, 0],
        _ => [0, 0, lost],
    };
    assert_eq!(
        [
            split["receiving_host"].as_u64(),
            split["sending_host"].as_u64(),
            split["path"].as_u64()
        ],
        expected.map(Some),
        "{d}"
    );
    lost
}

#[tokio::test]
async fn loopback_loss_is_all_the_receiving_servers_and_its_lanes_share_the_flows() {
    within(async {
        let mut server = Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .args([
                "server",
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--udp-lanes",
                "2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the server");
        let (addr, _stderr) = crate::support::listening_address(&mut server).await;
        let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
        let db = TempPath::new(".sqlite3");
        let mut run = client(&db, &addr, &["-P", "2"]);
        let rest = first_interval(&mut run).await;
        signal(&server, libc::SIGSTOP);
        until_dropping(port, false).await;
        signal(&server, libc::SIGCONT);
        let doc = finished(run, rest, &db).await;
        crate::results::schema_check(&doc, "export.schema.json");
        let r = &doc["runs"][0];
        let lost = assert_split(r, "receiving");
        assert_eq!(r["server"]["dropped_by_host"].as_u64(), Some(lost), "{r}");
        // Each flow's session on a lane of its own, and each flow's share its own.
        let mut lanes: Vec<u64> = Vec::new();
        let mut shares = 0;
        for flow in r["flows"].as_array().expect("flows") {
            let s = &flow["server"];
            assert_eq!(s["data_path"]["receive_lanes"], 2, "{s}");
            lanes.push(s["data_path"]["receive_lane"].as_u64().expect("a lane"));
            assert_eq!(s["dropped_by_host"], s["lost"], "{s}");
            shares += s["lost"].as_u64().unwrap();
        }
        lanes.sort();
        assert_eq!(lanes, [0, 1]);
        assert_eq!(shares, lost);
        let l = lost as i64;
        assert_eq!(stored_loss(&db), [Some(l), Some(l), Some(0), Some(0)]);
        server.kill().await.expect("stop our server");
    })
    .await;
}

#[tokio::test]
async fn reversed_loopback_loss_is_all_the_receiving_clients() {
    within(async {
        let server = TestServer::start().await;
        let db = TempPath::new(".sqlite3");
        let addr = server.addr.to_string();
        let mut run = client(&db, &addr, &["-R"]);
        let rest = first_interval(&mut run).await;
        signal(&run, libc::SIGSTOP);
        until_dropping(server.addr.port(), true).await;
        signal(&run, libc::SIGCONT);
        let doc = finished(run, rest, &db).await;
        let r = &doc["runs"][0];
        let lost = assert_split(r, "receiving");
        assert_eq!(
            r["client"]["udp_received"]["dropped_by_host"].as_u64(),
            Some(lost),
            "{r}"
        );
        let l = lost as i64;
        assert_eq!(stored_loss(&db), [Some(l), Some(l), Some(0), Some(0)]);
    })
    .await;
}

/// The relay's impairment drops datagrams between the hosts: the path's share, every one the
/// relay counted (the run is paced far below what loopback carries, so the receiving socket
/// has room; should it ever drop, the split still adds up and says so).
#[tokio::test]
async fn a_relays_drops_are_the_paths() {
    within(async {
        let out = crate::cli::wirebench(&[
            "run",
            "--no-store",
            "--json",
            "--proto",
            "udp",
            "-l",
            "1024",
            "-n",
            "4MiB",
            "--rate",
            "50Mbit",
            "--impair",
            "loss=5%",
        ])
        .await;
        assert!(out.status.success(), "{}", crate::cli::stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        crate::cli::assert_matches_schema(&doc);
        let r = &doc["runs"][0];
        let d = &r["headline"]["delivery"];
        let split = &d["loss_split"];
        let relay_dropped = r["relay"]["udp_up"]["dropped"]
            .as_u64()
            .expect("relay counts");
        assert!(relay_dropped > 0, "{r}");
        let lost = d["lost"].as_u64().unwrap();
        let (host, path) = (
            split["receiving_host"].as_u64().unwrap(),
            split["path"].as_u64().unwrap(),
        );
        assert_eq!(
            (host + path, split["sending_host"].as_u64()),
            (lost, Some(0)),
            "{d}"
        );
        if host == 0 {
            assert_eq!(path, relay_dropped, "{r}");
        }
    })
    .await;
}

/// A sender whose device queue is full (a 50 Mbit/s tbf on its end of a veth, unpaced
/// datagrams into it): its host refuses the batches (ENOBUFS, which IP_RECVERR makes it
/// say), and that loss is the sending host's, every datagram of it.
#[tokio::test]
async fn a_full_device_queue_is_the_sending_hosts() {
    let Some(lab) = crate::udp_lanes::Veth::new("q") else {
        return;
    };
    let tbf = [
        "root", "tbf", "rate", "50mbit", "burst", "128kb", "limit", "256kb",
    ];
    if !lab.qdisc_on_client(&tbf) {
        eprintln!("skipped: tc cannot add a tbf qdisc here");
        return;
    }
    within(async {
        let (mut server, addr) = lab.server().await;
        let out = lab
            .client(&[
                "run",
                "--no-store",
                "--json",
                "--server",
                &addr,
                "--proto",
                "udp",
                "-l",
                "1024",
                "-n",
                "8MiB",
            ])
            .await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        crate::cli::assert_matches_schema(&doc);
        let r = &doc["runs"][0];
        let lost = assert_split(r, "sending");
        assert_eq!(r["client"]["not_sent"].as_u64(), Some(lost), "{r}");
        server.kill().await.expect("stop our server");
    })
    .await;
    drop(lab);
}

/// A server without lanes (`--udp-lanes 0`) receives everything on its one socket as before:
/// nothing says where its loss went, and no lane is named.
#[tokio::test]
async fn without_lanes_the_loss_is_not_split() {
    within(async {
        let server = TestServer::start_with(ServerOptions {
            udp_lanes: Some(0),
            ..ServerOptions::default()
        })
        .await;
        let out = crate::cli::wirebench(&[
            "run",
            "--no-store",
            "--json",
            "--server",
            &server.addr.to_string(),
            "--proto",
            "udp",
            "-l",
            "1024",
            "-n",
            "1MiB",
            "--rate",
            "200Mbit",
        ])
        .await;
        assert!(out.status.success(), "{}", crate::cli::stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let r = &doc["runs"][0];
        assert_eq!(r["headline"]["delivery"].get("loss_split"), None, "{r}");
        assert_eq!(r["server"]["data_path"].get("receive_lane"), None, "{r}");
        assert_eq!(r["server"].get("dropped_by_host"), None, "{r}");
    })
    .await;
}

/// The loss columns (schema version 10) are written alike by both backends: a UDP run stored in
/// SQLite and in PostgreSQL holds the loss and its three shares its JSON reports, and they add
/// up. (Skipped for PostgreSQL where it is not installed.)
#[tokio::test]
async fn both_backends_store_a_udp_runs_loss_and_its_shares() {
    within(async {
        let server = TestServer::start().await;
        for db in crate::postgres::backends() {
            let out = crate::cli::wirebench(&[
                "run",
                "--db",
                db.arg(),
                "--json",
                "--server",
                &server.addr.to_string(),
                "--proto",
                "udp",
                "-l",
                "1024",
                "-n",
                "1MiB",
                "--rate",
                "200Mbit",
            ])
            .await;
            assert!(out.status.success(), "{}", crate::cli::stderr(&out));
            let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            let d = &doc["runs"][0]["headline"]["delivery"];
            let s = &d["loss_split"];
            let reported = [
                d["lost"].as_i64(),
                s["receiving_host"].as_i64(),
                s["sending_host"].as_i64(),
                s["path"].as_i64(),
            ];
            assert!(reported.iter().all(Option::is_some), "{d}");
            let column = |name: &str| -> Option<i64> {
                let sql = format!("SELECT {name} FROM run");
                match &db {
                    crate::postgres::TestDb::Sqlite(p) => rusqlite::Connection::open(&p.0)
                        .expect("open the store")
                        .query_row(&sql, [], |row| row.get(0))
                        .expect("one run stored"),
                    crate::postgres::TestDb::Postgres(..) => {
                        let (name, cluster) = db.pg().expect("a PostgreSQL store");
                        // -1 stands for NULL (ints reads integers only).
                        let sql = sql
                            .replace("SELECT ", "SELECT COALESCE(")
                            .replace(" FROM", ", -1) FROM");
                        let v = cluster.ints(name, &sql);
                        assert_eq!(v.len(), 1, "one run stored in {}", db.name());
                        (v[0] >= 0).then_some(v[0])
                    }
                }
            };
            let stored = [
                "udp_lost",
                "udp_lost_receiving_host",
                "udp_lost_sending_host",
                "udp_lost_path",
            ]
            .map(column);
            assert_eq!(stored, reported, "{}: {d}", db.name());
            let [lost, r, snd, p] = stored.map(|v| v.unwrap_or(-1));
            assert_eq!(r + snd + p, lost, "{}", db.name());
        }
    })
    .await;
}
