//! Chaos and load (issue 7): the real `wirebench server` binary in a child process, hit at once
//! by 500 concurrent sessions, 100 client processes SIGKILLed mid-session, garbage on the TCP and
//! UDP sides of its port and slowloris connections. Afterwards it must still serve a normal run
//! exactly, have printed one JSON summary per session that started (the killed ones aborted),
//! and be back to its starting descriptors and within a stated bound of its starting memory.
//! A child process, not an in-process server, so its /proc figures are its own.

mod garbage;
mod sessions;

use garbage::{silent_sessions, slowloris, tcp_garbage, udp_garbage, udp_rcvbuf_errors};
use sessions::{assert_exact, concurrent_sessions, killed_clients, spec, warm_up};

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use wirebench::flows::client::SessionRequest;
use wirebench_core::vocab::plan::{Mechanism, Protocol};

use crate::support::TEST_TIMEOUT;

/// Concurrent in-process sessions (the bar).
pub(super) const SESSIONS: usize = 500;
/// Client processes killed mid-session.
pub(super) const KILLS: usize = 100;
/// Killed clients alive at once: enough to overlap, few enough for two shared vCPUs.
pub(super) const KILLS_IN_FLIGHT: usize = 10;
/// Killed clients ask for 1 GiB + their index, so their summaries can be told apart.
pub(super) const KILL_TOTAL_BASE: u64 = 1 << 30;
/// Slowloris connections of each kind.
const SLOW_HELLOS: usize = 30;
const SLOW_PREAMBLES: usize = 10;
const SILENT_SESSIONS: usize = 10;
/// Garbage TCP connections and UDP datagrams.
pub(super) const GARBAGE_CONNECTIONS: usize = 300;
pub(super) const GARBAGE_DATAGRAMS: usize = 20_000;
/// How far resident memory may stay above its warmed-up level once the storm is over.
/// glibc keeps freed memory in per-thread arenas (up to 8 per core; hundreds of blocking
/// threads ran TCP sessions at once) and caches the stacks of exited threads (up to 40 MiB),
/// so the level after a storm sits above the warmed-up one without any leak. Measured: +32 to
/// +40 MiB after this test; with five more rounds of 500 sessions it rose by 3, 2, 1 and 2 MiB
/// a round, and with MALLOC_ARENA_MAX=1 it stayed flat at 42-45 MiB, so fragmentation, not a
/// leak. A leak that scales with sessions passes the bound quickly: 620 sessions leaking a
/// 64 KiB receive buffer each is 39 MiB on top of the +40.
const RSS_BOUND_KIB: u64 = 64 * 1024;
/// Descriptors return once QUIC connections stop lingering (up to 5 s after a session),
/// TCP closes drain (up to 1 s) and the setup timeouts of the silent clients have fired.
const FD_SETTLE: Duration = Duration::from_secs(20);

/// The server binary in a child process, its stdout (JSON lines) and stderr (notices) drained
/// by tasks so it never blocks on a full pipe.
struct ServerProcess {
    child: Child,
    pid: u32,
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<Value>>>,
    not_json: Arc<Mutex<Vec<String>>>,
    notices: Arc<AtomicU64>,
    /// The setup timeout this server applies to a connection that opened and sent nothing more.
    hello_timeout: Duration,
}

impl ServerProcess {
    async fn start() -> ServerProcess {
        let bin = env!("CARGO_BIN_EXE_wirebench");
        // The default limits would refuse this load itself: raise them, and shorten the hello
        // timeout so the slowloris phase stays short. The killed clients ask for a little over
        // 1 GiB (they never get that far).
        let hello_timeout = Duration::from_secs(3);
        let args = [
            "server",
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--json",
            "--max-sessions",
            "5000",
            "--max-sessions-per-client",
            "5000",
            "--max-bytes",
            "1TiB",
            "--hello-timeout",
            "3s",
        ];
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start wirebench server");
        let pid = child.id().expect("server pid");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let addr = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = stderr.next_line().await.expect("server stderr") {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let addr = rest.split_whitespace().next().expect("an address");
                    return addr.parse::<SocketAddr>().expect("a socket address");
                }
            }
            panic!("the server exited before it listened");
        })
        .await
        .expect("the server listens within 20 s");
        let notices = Arc::new(AtomicU64::new(0));
        let counted = notices.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                if line.starts_with("notice:") {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let lines = Arc::new(Mutex::new(Vec::new()));
        let not_json = Arc::new(Mutex::new(Vec::new()));
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let (sink, bad) = (lines.clone(), not_json.clone());
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => sink.lock().unwrap().push(v),
                    Err(_) => bad.lock().unwrap().push(line),
                }
            }
        });
        ServerProcess {
            child,
            pid,
            addr,
            lines,
            not_json,
            notices,
            hello_timeout,
        }
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn summaries(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    /// Waits until at least `n` summaries were printed, at most `limit`.
    async fn wait_summaries(&self, n: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.summaries() < n {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in kB")
    }

    fn fd_targets(&self) -> Vec<String> {
        let dir = format!("/proc/{}/fd", self.pid);
        std::fs::read_dir(&dir)
            .expect("the server's fd directory")
            .filter_map(|e| e.ok())
            .map(|e| {
                std::fs::read_link(e.path())
                    .map(|t| t.display().to_string())
                    .unwrap_or_default()
            })
            .collect()
    }

    fn fds(&self) -> usize {
        self.fd_targets().len()
    }

    /// Polls until the descriptor count is at most `target`, at most `limit`; the last count.
    async fn settle_fds(&self, target: usize, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            let n = self.fds();
            if n <= target || Instant::now() > deadline {
                return n;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_server_survives_load_kills_garbage_and_slowloris() {
    // Under CI load this may take longer than the usual bound; it is still bounded.
    tokio::time::timeout(TEST_TIMEOUT + Duration::from_secs(60), chaos())
        .await
        .expect("chaos test finished in time");
}

async fn chaos() {
    let seed: u64 = std::env::var("WIREBENCH_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let started = Instant::now();
    let mut server = ServerProcess::start().await;
    let addr = server.addr;
    let fds_start = server.fds();
    let rss_start = server.rss_kib();

    let warm_ids = warm_up(addr).await;
    // Baseline once the warm-up's connections have closed (QUIC lingers up to 5 s).
    let fds_before = server.settle_fds(fds_start, Duration::from_secs(8)).await;
    assert!(
        server
            .wait_summaries(warm_ids.len(), Duration::from_secs(10))
            .await
    );
    let rss_before = server.rss_kib();
    eprintln!(
        "chaos: server pid {} on {addr}, seed {seed}; fds {fds_start} at start, {fds_before} after warm-up; \
         RSS {rss_start} KiB at start, {rss_before} KiB after warm-up",
        server.pid
    );

    // The slow ones start first and run through everything else.
    let slow = tokio::spawn(slowloris(addr, SLOW_HELLOS, SLOW_PREAMBLES));
    let silent = tokio::spawn(silent_sessions(addr, SILENT_SESSIONS));

    let t = Instant::now();
    let drops = udp_rcvbuf_errors();
    let sessions = concurrent_sessions(addr).await;
    let udp_lost: u64 = sessions.values().map(|o| o.server.lost).sum();
    let drops = udp_rcvbuf_errors().saturating_sub(drops);
    eprintln!(
        "chaos: {} concurrent sessions, all exact, in {:.1} s; UDP streaming lost {udp_lost} messages \
         (host UDP receive-buffer drops meanwhile, all processes: {drops})",
        sessions.len(),
        t.elapsed().as_secs_f64(),
    );
    // Paced, with a generous grace period: only a host that says it dropped datagrams may have
    // cost one — a receive buffer the kernel reports full, or sends it refused (the client's
    // `not_sent`). A failure names each session that lost, so it says where.
    let explained: u64 = sessions
        .values()
        .map(|o| o.client.tally.not_sent + o.server.dropped_by_host.unwrap_or(0))
        .sum();
    let lossy: Vec<String> = sessions
        .values()
        .filter(|o| o.server.lost > 0)
        .map(|o| {
            format!(
                "session {}: {} of {} messages arrived, {} lost (host dropped {:?}), {} out of \
                 order, {} duplicates, {} ms from the first to the last, {} ms quiet after it",
                o.session,
                o.server.messages,
                o.client.tally.messages,
                o.server.lost,
                o.server.dropped_by_host,
                o.server.out_of_order,
                o.server.duplicates,
                o.server.elapsed_ns / 1_000_000,
                o.server.idle_after_last_ns / 1_000_000,
            )
        })
        .collect();
    assert!(
        udp_lost == 0 || drops > 0 || udp_lost <= explained,
        "UDP streaming lost {udp_lost} messages with no receive-buffer drop on the host and \
         {explained} the hosts said they dropped: {}",
        lossy.join("; ")
    );
    let rss_peak = server.rss_kib();

    let t = Instant::now();
    let (killed, tcp_bytes, udp_bytes) = tokio::join!(
        killed_clients(addr, seed),
        tcp_garbage(addr, seed ^ 0x7C9),
        udp_garbage(addr, seed ^ 0x0D9),
    );
    let kills = killed.iter().filter(|k| k.killed_mid_session).count();
    eprintln!(
        "chaos: {} clients killed mid-session ({} finished first), garbage {tcp_bytes} B over {GARBAGE_CONNECTIONS} TCP connections \
         and {udp_bytes} B in {GARBAGE_DATAGRAMS} UDP datagrams, in {:.1} s",
        kills,
        killed.len() - kills,
        t.elapsed().as_secs_f64()
    );

    let slow = slow.await.expect("slowloris");
    let silent_ids = silent.await.expect("silent sessions");
    let timeout = server.hello_timeout;
    for s in &slow {
        assert!(
            s.closed_after >= timeout / 2 && s.closed_after <= timeout + Duration::from_secs(10),
            "a silent connection closed after {:?}, timeout {timeout:?}",
            s.closed_after
        );
    }
    let slowest = slow
        .iter()
        .map(|s| s.closed_after)
        .max()
        .unwrap_or_default();
    eprintln!(
        "chaos: {} slowloris connections closed by the server (timeout {timeout:?}, slowest {:.1} s), \
         {} silent sessions aborted",
        slow.len(),
        slowest.as_secs_f64(),
        silent_ids.len()
    );

    // Still alive, still exact.
    assert!(server.alive(), "the server process is still running");
    let p = spec(Protocol::Tcp, Mechanism::Stream, 1000, 123_457);
    let last = SessionRequest::new(addr, &p)
        .run()
        .await
        .expect("a normal run after the storm");
    assert_exact(&last, &p);

    // One summary for every session that started.
    let expected = warm_ids.len() + SESSIONS + KILLS + SILENT_SESSIONS + 1;
    let complete = server
        .wait_summaries(expected, Duration::from_secs(20))
        .await;
    let lines = server.lines.lock().unwrap().clone();
    assert!(
        complete,
        "expected {expected} summaries, the server printed {}",
        lines.len()
    );
    assert!(
        server.not_json.lock().unwrap().is_empty(),
        "only JSON on stdout"
    );
    let mut by_id: HashMap<u64, &Value> = HashMap::new();
    for l in &lines {
        let id = l["session"].as_u64().expect("a session id");
        assert!(
            by_id.insert(id, l).is_none(),
            "one summary per session: {id}"
        );
    }
    for (id, out) in &sessions {
        let l = by_id
            .get(&u64::from(*id))
            .expect("a summary per concurrent session");
        assert_eq!(l["aborted"], Value::Bool(false));
        assert_eq!(l["bytes"].as_u64(), Some(out.server.bytes));
        assert_eq!(l["messages"].as_u64(), Some(out.server.messages));
    }
    for id in warm_ids.iter().chain([&last.session]) {
        assert_eq!(by_id[&u64::from(*id)]["aborted"], Value::Bool(false));
    }
    for id in &silent_ids {
        let l = by_id
            .get(&u64::from(*id))
            .expect("a summary per silent session");
        assert_eq!(l["aborted"], Value::Bool(true), "{l}");
    }
    let by_total: HashMap<u64, &Value> = lines
        .iter()
        .filter_map(|l| Some((l["total_bytes"].as_u64()?, l)))
        .filter(|(t, _)| *t >= KILL_TOTAL_BASE)
        .collect();
    for k in &killed {
        let l = by_total.get(&k.total).expect("a summary per killed client");
        let what = &k.what;
        if k.killed_mid_session {
            assert_eq!(l["aborted"], Value::Bool(true), "{what}: {l}");
            assert!(l["abort_reason"].is_string(), "{what}: {l}");
        }
        // What an aborted session did read is reported as consistently as a finished one:
        // its complete messages and the time it took.
        let (bytes, messages) = (l["bytes"].as_u64(), l["messages"].as_u64());
        if !k.reverse && bytes > Some(2000) {
            assert_eq!(messages, bytes.map(|b| b / 1000), "{what}: {l}");
            // Over UDP up to 64 KiB can come in one receive (GRO: one batch, one arrival
            // time), so a client killed after its first burst has taken no time to read.
            let one_receive = l["protocol"] == "udp" && bytes <= Some(65_536);
            if !one_receive {
                assert!(l["elapsed_ns"].as_u64() > Some(0), "{what}: {l}");
            }
        }
    }
    let aborted = lines
        .iter()
        .filter(|l| l["aborted"] == Value::Bool(true))
        .count();
    assert_eq!(aborted, kills + SILENT_SESSIONS, "aborted summaries");

    // Back to where it began.
    let fds_after = server.settle_fds(fds_before, FD_SETTLE).await;
    let rss_after = server.rss_kib();
    eprintln!(
        "chaos: {} summaries printed ({aborted} aborted) for {expected} sessions started; \
         {} notices; RSS {rss_before} KiB before, {rss_peak} KiB after the sessions, {rss_after} KiB after \
         (bound +{RSS_BOUND_KIB} KiB); fds {fds_before} before, {fds_after} after; {:.1} s in all",
        lines.len(),
        server.notices.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    // Every refused or timed-out connection was noted on stderr, once.
    let notices = server.notices.load(Ordering::Relaxed);
    let refused = (GARBAGE_CONNECTIONS + SLOW_HELLOS + SLOW_PREAMBLES) as u64;
    assert!(
        notices >= refused,
        "{notices} notices for {refused} refused connections"
    );
    assert_eq!(
        fds_after,
        fds_before,
        "descriptors leaked: {:?}",
        server.fd_targets()
    );
    assert!(
        rss_after <= rss_before + RSS_BOUND_KIB,
        "RSS {rss_after} KiB is more than {RSS_BOUND_KIB} KiB above {rss_before} KiB"
    );
    assert!(server.alive(), "the server process is still running");
    let ids: HashSet<u64> = by_id.keys().copied().collect();
    assert_eq!(ids.len(), expected);
    // Ours to end (by its own handle) and to reap.
    server.child.kill().await.expect("stop the server");
}
