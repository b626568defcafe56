//! Every command the guide shows runs (docs/guide/*.md, one test per page, each page's commands
//! in order in a temp directory with a store of its own, so `report --last` reads what the
//! page's `run` stored). Sizes and times are scaled down so a page takes seconds (totals to a
//! thousandth, at least 64 KiB; `-t` to 300 ms; at most 2 repeats, 20 requests or queries, 5
//! pings; rpm's load and latency's phases to 1 s); fixed ports become free ones; `HOST` is a server the test starts
//! (an iperf3 server for `--iperf3 HOST`); a resolver is a local unbound serving the page's
//! zone with the page's own certificates; `/tmp/` is the temp directory. Servers, relays and
//! exporters shown with `&` run in the background until the page ends and are killed by
//! handle. Shell lines (openssl, printf, head, iperf3 -c, curl) run with `sh` under the same
//! substitutions; `sudo lab/netns-lab.sh … wirebench|rr|latency ARGS` runs `wirebench run|rr|latency ARGS` on
//! loopback (the lab itself is tests/it/netns.rs's). Not run, and counted: `cargo build`,
//! `kill`, `export`, the lab's iperf3 mode. Every command must succeed, and a lab page's
//! reports must draw the lab report's charts (lab_charts.rs).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use wirebench_core::vocab::units::ByteSize;

use crate::dns::{free_port, Unbound};
use crate::readme::{guide_pages, sh_lines, words};
use crate::support::{TempPath, TestServer};

/// The longest one command of a page may take, scaled down.
const COMMAND_LIMIT: Duration = Duration::from_secs(120);

/// Scales a `--total` value: a thousandth, at least 64 KiB and at least `floor`, never more
/// than given. Totals that were distinct stay distinct (one raised past the one before it by
/// half the floor, a message), so a sweep keeps its points and its charts their shape.
fn scaled_total(text: &str, floor: u64) -> String {
    let mut last = 0;
    text.split(',')
        .map(|v| match v.trim().parse::<ByteSize>() {
            Ok(ByteSize(b)) => {
                let mut t = (b / 1000).max(64 * 1024).max(floor).min(b);
                if t <= last && b > last {
                    t = (last + (floor / 2).max(1)).min(b);
                }
                last = t;
                t.to_string()
            }
            Err(_) => v.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The largest message of a `-l` value (a list or a range), bytes.
fn largest_size(text: &str) -> u64 {
    text.split([',', '.', ':'])
        .filter_map(|v| v.trim().parse::<ByteSize>().ok())
        .map(|b| b.0)
        .max()
        .unwrap_or(1024)
}

/// A wirebench command line scaled to run in seconds (see the module comment).
fn scale(argv: &[String]) -> Vec<String> {
    let sub = argv.get(1).map(String::as_str).unwrap_or("");
    let value = |flag: &[&str]| {
        argv.windows(2)
            .find(|w| flag.contains(&w[0].as_str()))
            .map(|w| w[1].clone())
    };
    let msg = value(&["-l", "--msg-size"]).map_or(1024, |v| largest_size(&v));
    let flows: u64 = value(&["-P", "--parallel"])
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let omit = value(&["-O", "--omit"]).is_some();
    // iperf3 counts whole seconds.
    let short = if argv.iter().any(|a| a == "--iperf3") {
        "1s"
    } else if omit {
        "500ms"
    } else {
        "300ms"
    };
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let flag = argv[i].as_str();
        let next = argv.get(i + 1).cloned();
        let replaced = match (flag, next.as_deref()) {
            ("-n" | "--total", Some(v)) => Some(scaled_total(v, msg * flows * 2)),
            // latency's phases last at least 1 s each.
            ("-t" | "--time", Some(_)) if sub == "latency" => Some("1s".into()),
            ("-t" | "--time", Some(_)) => Some(short.into()),
            ("-O" | "--omit", Some(_)) => Some("100ms".into()),
            ("--repeat", Some(v)) => {
                Some(v.parse::<u64>().map_or(v.into(), |n| n.min(2).to_string()))
            }
            ("--warmup", Some(v)) => {
                Some(v.parse::<u64>().map_or(v.into(), |n| n.min(1).to_string()))
            }
            ("--count", Some(v)) => {
                Some(v.parse::<u64>().map_or(v.into(), |n| n.min(20).to_string()))
            }
            ("-c", Some(v)) if sub == "ping" => {
                Some(v.parse::<u64>().map_or(v.into(), |n| n.min(5).to_string()))
            }
            ("--upload" | "--download", Some(_)) => Some("256KiB".into()),
            _ => None,
        };
        out.push(argv[i].clone());
        if let Some(v) = replaced {
            out.push(v);
            i += 2;
        } else {
            i += 1;
        }
    }
    let given = |flags: &[&str]| argv.iter().any(|a| flags.contains(&a.as_str()));
    // rr runs 5 s per result unless told otherwise.
    if sub == "rr" && !given(&["-t", "--time", "--count"]) {
        out.extend(["-t", "300ms"].map(String::from));
    }
    // latency's phases last at least 1 s each.
    if sub == "latency" && !given(&["-t", "--time"]) {
        out.extend(["-t", "1s"].map(String::from));
    }
    if sub == "rpm" && !argv.iter().any(|a| a == "--max-load") {
        out.extend(["--max-load", "1s", "--ramp-interval", "250ms"].map(String::from));
    }
    out
}

/// What a page needs from the test: a server for `HOST`, an iperf3 server, a resolver.
struct Peers {
    server: Option<TestServer>,
    iperf3: Option<(tokio::process::Child, u16)>,
    unbound: Option<Unbound>,
}

/// Replaces every fixed port of `line` (after `127.0.0.1:` or `0.0.0.0:`, or after a port
/// flag) with the page's free port for it.
fn remap_ports(line: &str, ports: &mut BTreeMap<u16, u16>) -> String {
    let mut port_of = |n: u16| *ports.entry(n).or_insert_with(free_port);
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = ["127.0.0.1:", "0.0.0.0:"]
        .iter()
        .filter_map(|p| rest.find(p).map(|i| (i, p.len())))
        .min()
    {
        let (i, len) = at;
        out.push_str(&rest[..i + len]);
        rest = &rest[i + len..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        match rest[..digits].parse::<u16>() {
            Ok(n) => out.push_str(&port_of(n).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    let words: Vec<&str> = out.split(' ').collect();
    let mut mapped: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let after_flag = i > 0
            && matches!(
                words[i - 1],
                "--port" | "-p" | "--iperf3-port" | "--dot-port"
            );
        match w.parse::<u16>() {
            Ok(n) if after_flag => mapped.push(port_of(n).to_string()),
            _ => mapped.push((*w).to_string()),
        }
    }
    mapped.join(" ")
}

/// The port a background command listens on (its `--port` or `--listen`), to wait for.
fn listening_port(argv: &[String]) -> Option<u16> {
    argv.windows(2).find_map(|w| match w[0].as_str() {
        "--port" | "-p" => w[1].parse().ok(),
        "--listen" => w[1].rsplit(':').next()?.parse().ok(),
        _ => None,
    })
}

/// Waits (up to 20 s) until `port` on loopback accepts a TCP connection.
async fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "{what}: nothing listens on {port} after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `program args` in `dir` with the page's store, bounded by [`COMMAND_LIMIT`].
async fn run(program: &str, args: &[String], dir: &Path) -> std::process::Output {
    let child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("WIREBENCH_DB", dir.join("results.sqlite3"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(COMMAND_LIMIT, child)
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} still running after {COMMAND_LIMIT:?}"))
        .expect("the command starts")
}

/// Runs every command of the guide page `name` (see the module comment); returns how many
/// commands ran and which were left out.
async fn run_page(name: &str) -> (usize, Vec<String>) {
    let (_, text) = guide_pages()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("docs/guide/{name}"));
    let dir = TempPath::new("-guide");
    std::fs::create_dir_all(dir.0.join("data")).expect("the page's directory");
    let tmp = format!("{}/", dir.arg());
    let mut peers = Peers {
        server: None,
        iperf3: None,
        unbound: None,
    };
    if text.contains("HOST") {
        peers.server = Some(TestServer::start().await);
    }
    if text.contains("--iperf3 HOST") && Path::new("/usr/bin/iperf3").exists() {
        let port = free_port();
        let child = tokio::process::Command::new("/usr/bin/iperf3")
            .args(["-s", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("iperf3 -s starts");
        wait_listening(port, "iperf3 -s").await;
        peers.iperf3 = Some((child, port));
    }
    let mut ports: BTreeMap<u16, u16> = BTreeMap::new();
    let start_unbound = |certs: Option<&Path>, ports: &mut BTreeMap<u16, u16>| {
        let ub = Unbound::start_with(certs)?;
        ports.insert(5353, ub.addr().port());
        ports.insert(8853, ub.tls_port());
        Some(ub)
    };
    if text.contains("--resolver") && !text.contains("\nunbound -c") {
        peers.unbound = start_unbound(None, &mut ports);
        if peers.unbound.is_none() {
            return (0, vec!["the whole page: unbound is not installed".into()]);
        }
    }
    let mut background = Vec::new();
    let mut ran = 0;
    let mut left_out = Vec::new();
    for original in sh_lines(&text) {
        let mut line = original.replace("/tmp/", &tmp);
        line = line.replace("host.example.test", "host.wb.test");
        if line.starts_with("unbound -c") {
            peers.unbound = start_unbound(Some(&dir.0), &mut ports);
            assert!(peers.unbound.is_some(), "{name}: unbound is not installed");
            ran += 1;
            continue;
        }
        // After the ports are remapped: the peers' ports are free ones already.
        line = remap_ports(&line, &mut ports);
        if let Some(server) = &peers.server {
            let host = match (&peers.iperf3, line.contains("--iperf3 HOST")) {
                (Some((_, port)), true) => format!("127.0.0.1:{port}"),
                _ => server.addr.to_string(),
            };
            line = line.replace("HOST", &host);
        }
        // The lab's wirebench modes, on loopback.
        if let Some(rest) = line.strip_prefix("sudo lab/netns-lab.sh ") {
            let lab = rest
                .split(' ')
                .position(|w| matches!(w, "wirebench" | "rr" | "latency" | "iperf3"));
            match lab.map(|i| (rest.split(' ').nth(i), rest.split(' ').skip(i + 1))) {
                Some((Some("wirebench"), args)) => {
                    line = format!("wirebench run {}", args.collect::<Vec<_>>().join(" "))
                }
                Some((Some(mode @ ("rr" | "latency")), args)) => {
                    line = format!("wirebench {mode} {}", args.collect::<Vec<_>>().join(" "))
                }
                _ => {
                    left_out.push(original);
                    continue;
                }
            }
        }
        if ["cargo build", "kill ", "export "]
            .iter()
            .any(|p| line.starts_with(p))
        {
            left_out.push(original);
            continue;
        }
        let (command, redirect) = match line.split_once(" > ") {
            Some((c, file)) if line.starts_with("wirebench ") => {
                (c.to_string(), Some(file.trim().to_string()))
            }
            _ => (line.clone(), None),
        };
        if let Some(rest) = command.strip_prefix("wirebench ") {
            let is_background = rest.ends_with(" &");
            let argv = words(&format!("wirebench {}", rest.trim_end_matches(" &")))
                .unwrap_or_else(|| panic!("{name}: cannot split {original:?}"));
            let argv = scale(&argv);
            let args = &argv[1..];
            if is_background {
                let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
                    .args(args)
                    .current_dir(&dir.0)
                    .env("WIREBENCH_DB", dir.0.join("results.sqlite3"))
                    .env("XDG_DATA_HOME", dir.0.join("data"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .expect("wirebench starts");
                let port = listening_port(&argv)
                    .unwrap_or_else(|| panic!("{name}: {original:?} names no port to wait for"));
                wait_listening(port, &original).await;
                background.push(child);
            } else {
                let out = run(env!("CARGO_BIN_EXE_wirebench"), args, &dir.0).await;
                let may_flag = args.iter().any(|a| a == "--fail-on-regression");
                let ok = out.status.success() || (may_flag && out.status.code() == Some(1));
                assert!(
                    ok,
                    "{name}: {original}\n  ran as {argv:?}: {}\n{}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                if let Some(file) = redirect {
                    std::fs::write(dir.0.join(file), &out.stdout).expect("the redirected output");
                }
            }
        } else {
            let out = run("sh", &["-c".to_string(), line.clone()], &dir.0).await;
            assert!(
                out.status.success(),
                "{name}: {original}\n  ran as {line:?}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        ran += 1;
    }
    drop(background);
    crate::lab_charts::check_page(name, &dir.0);
    (ran, left_out)
}

/// One test per page; every page of docs/guide is one of them.
macro_rules! pages {
    ($($test:ident: $page:literal,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let (ran, left_out) = run_page($page).await;
                eprintln!("{}: {ran} commands ran; left out: {left_out:?}", $page);
                assert!(ran > 0 || $page == "README.md", "{}: no command", $page);
                // Only what cannot run here is left out: builds, job control, the lab's iperf3.
                for line in &left_out {
                    assert!(
                        ["cargo build", "kill ", "export ", "sudo lab/netns-lab.sh", "the whole page"]
                            .iter()
                            .any(|p| line.starts_with(p)),
                        "{}: {line} was not run",
                        $page
                    );
                }
            }
        )*
        const PAGES: &[&str] = &[$($page),*];
    };
}

pages! {
    guide_index: "README.md",
    guide_lab_protocols: "lab-protocols.md",
    guide_lab_totals: "lab-totals.md",
    guide_lab_sessions: "lab-sessions.md",
    guide_lab_dns: "lab-dns.md",
    guide_lab_message_sizes: "lab-message-sizes.md",
    guide_throughput: "throughput.md",
    guide_round_trips: "round-trips.md",
    guide_dns: "dns.md",
    guide_impairment: "impairment.md",
    guide_iperf3: "iperf3.md",
    guide_history_and_reports: "history-and-reports.md",
    guide_fleet: "fleet.md",
    guide_one_way_delay: "one-way-delay.md",
}

#[test]
fn every_page_of_the_guide_is_run() {
    let pages: Vec<String> = guide_pages().into_iter().map(|(n, _)| n).collect();
    assert_eq!(pages, {
        let mut p: Vec<String> = PAGES.iter().map(|s| s.to_string()).collect();
        p.sort();
        p
    });
}

#[test]
fn scaling_keeps_the_command_and_bounds_its_size() {
    let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    assert_eq!(
        scale(&argv(
            "wirebench run -l 1024 -n 500MiB,1GiB --repeat 5 -t 10"
        )),
        argv("wirebench run -l 1024 -n 524288,1073741 --repeat 2 -t 300ms")
    );
    assert_eq!(
        scale(&argv("wirebench ping -c 100 --proto tcp")),
        argv("wirebench ping -c 5 --proto tcp")
    );
    // Enough messages for every flow.
    assert_eq!(
        scale(&argv("wirebench run -l 128KiB -n 1GiB -P 4")),
        argv("wirebench run -l 128KiB -n 1073741 -P 4")
    );
    assert_eq!(
        scale(&argv("wirebench run -l 65535 -n 1MB")),
        argv("wirebench run -l 65535 -n 131070")
    );
    // The lab's five totals stay five points.
    assert_eq!(
        scale(&argv("wirebench run -l 65535 -n 1MiB,50MiB,100MiB,1GiB")),
        argv("wirebench run -l 65535 -n 131070,196605,262140,1073741")
    );
    let mut ports = BTreeMap::from([(5310, 40001)]);
    assert_eq!(
        remap_ports(
            "wirebench run -c 127.0.0.1:5310 --port 5310 -n 5310",
            &mut ports
        ),
        "wirebench run -c 127.0.0.1:40001 --port 40001 -n 5310"
    );
    assert_eq!(
        listening_port(&argv("wirebench exporter --listen 127.0.0.1:9311")),
        Some(9311)
    );
}
