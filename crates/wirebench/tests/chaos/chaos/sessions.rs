//! The load: the session mix and its exactness check, the warm-up, the concurrent sessions, and
//! the client processes SIGKILLed mid-session.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use wirebench::flows::client::{SessionOutcome, SessionRequest};
use wirebench_core::vocab::plan::{message_count, Mechanism, Protocol};
use wirebench_core::wire::proto::SessionParams;

use super::{KILLS, KILLS_IN_FLIGHT, KILL_TOTAL_BASE, SESSIONS};

pub(super) fn spec(
    protocol: Protocol,
    mechanism: Mechanism,
    msg_size: u32,
    total: u64,
) -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol,
        mechanism,
        msg_size,
        total_bytes: total,
        rto_us: None,
        rate_bps: None,
        grace_us: 200_000,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

/// Client and server counted every byte and message of a reliable session.
pub(super) fn assert_exact(out: &SessionOutcome, p: &SessionParams) {
    let count = message_count(p.total_bytes, p.msg_size);
    let (c, s) = (&out.client.tally, &out.server);
    let what = format!("{} {:?} reverse={}", p.protocol, p.mechanism, p.reverse);
    assert!(!s.aborted, "{what}: aborted: {:?}", s.abort_reason);
    assert_eq!(c.bytes, p.total_bytes, "{what}: client bytes");
    assert_eq!(c.messages, count, "{what}: client messages");
    if p.protocol == Protocol::Udp && p.mechanism == Mechanism::Stream {
        // Unacknowledged datagrams may be dropped by a receive buffer that hundreds of
        // sessions share: exact here means every message is either counted or lost.
        assert_eq!(s.messages + s.lost, count, "{what}: received + lost");
        assert!(s.bytes <= p.total_bytes, "{what}: server bytes");
        return;
    }
    assert_eq!(s.bytes, p.total_bytes, "{what}: server bytes");
    assert_eq!(s.messages, count, "{what}: server messages");
    assert_eq!(s.lost, 0, "{what}: lost");
}

/// The session mix: every protocol and mechanism, TCP and QUIC also reversed; UDP streaming
/// paced so loopback buffers cannot overflow while hundreds of sessions share them.
fn session_spec(i: usize) -> SessionParams {
    const MIX: [(Protocol, Mechanism, bool); 8] = [
        (Protocol::Tcp, Mechanism::Stream, false),
        (Protocol::Udp, Mechanism::StopAndWait, false),
        (Protocol::Quic, Mechanism::Stream, false),
        (Protocol::Tcp, Mechanism::StopAndWait, false),
        (Protocol::Udp, Mechanism::Stream, false),
        (Protocol::Quic, Mechanism::StopAndWait, false),
        (Protocol::Tcp, Mechanism::Stream, true),
        (Protocol::Quic, Mechanism::Stream, true),
    ];
    let (protocol, mechanism, reverse) = MIX[i % MIX.len()];
    // Different sizes and totals, so a count that leaked between sessions would show.
    let size = 100 + (i as u32 * 37) % 1300;
    let total = 4_000 + i as u64 * 13;
    let mut p = spec(protocol, mechanism, size, total);
    p.reverse = reverse;
    if protocol == Protocol::Udp && mechanism == Mechanism::Stream {
        p.rate_bps = Some(4_000_000);
        // Returns as soon as every message is in; the margin is for a server slowed by load.
        p.grace_us = 2_000_000;
    }
    p
}

/// Phase 1: `SESSIONS` sessions at once from this process; each one exact.
pub(super) async fn concurrent_sessions(addr: SocketAddr) -> HashMap<u32, SessionOutcome> {
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..SESSIONS {
        runs.spawn(async move {
            let p = session_spec(i);
            let out = SessionRequest::new(addr, &p).run().await;
            (p, out)
        });
    }
    let mut done = HashMap::new();
    while let Some(joined) = runs.join_next().await {
        let (p, out) = joined.expect("session task");
        let out = out.unwrap_or_else(|e| panic!("{} {:?}: {e:#}", p.protocol, p.mechanism));
        assert_exact(&out, &p);
        assert!(
            done.insert(out.session, out).is_none(),
            "session ids unique"
        );
    }
    done
}

/// What one killed client was and how it ended.
pub(super) struct Killed {
    pub(super) total: u64,
    /// What it ran, for messages.
    pub(super) what: String,
    /// The server sent (`-R`): its summary counts what it sent, not what arrived.
    pub(super) reverse: bool,
    /// Whether the kill landed before the client finished on its own.
    pub(super) killed_mid_session: bool,
}

/// Phase 2: `KILLS` real client processes, each SIGKILLed at a random point after its data
/// started flowing (its first interval line), `KILLS_IN_FLIGHT` at a time; every one reaped.
pub(super) async fn killed_clients(addr: SocketAddr, seed: u64) -> Vec<Killed> {
    let bin = env!("CARGO_BIN_EXE_wirebench");
    let mut rng = StdRng::seed_from_u64(seed);
    let plans: Vec<(usize, &str, &str, bool, u64)> = (0..KILLS)
        .map(|i| {
            let proto = ["tcp", "udp", "quic"][rng.gen_range(0..3)];
            let mode = ["stream", "saw"][rng.gen_range(0..2)];
            (i, proto, mode, rng.gen_bool(0.3), rng.gen_range(0..600))
        })
        .collect();
    let slots = Arc::new(tokio::sync::Semaphore::new(KILLS_IN_FLIGHT));
    let mut runs = tokio::task::JoinSet::new();
    for (i, proto, mode, reverse, delay_ms) in plans {
        let permit = slots.clone().acquire_owned().await.expect("semaphore");
        runs.spawn(async move {
            let _permit = permit;
            let total = KILL_TOTAL_BASE + i as u64;
            let mut args = vec![
                "run".to_string(),
                "--no-store".into(),
                "-c".into(),
                addr.to_string(),
                "--proto".into(),
                proto.into(),
                "--mode".into(),
                mode.into(),
                "-l".into(),
                "1000".into(),
                "-n".into(),
                total.to_string(),
                "-i".into(),
                "100ms".into(),
            ];
            // Paced UDP streams; UDP stop-and-wait is never paced and refuses --rate.
            if proto == "udp" && mode == "stream" {
                args.extend(["--rate".into(), "20Mbit".into()]);
            }
            if reverse {
                args.push("-R".into());
            }
            let mut child = Command::new(bin)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("start a wirebench client");
            let mut out = BufReader::new(child.stdout.take().expect("stdout")).lines();
            let flowing = tokio::time::timeout(Duration::from_secs(30), async {
                while let Ok(Some(line)) = out.next_line().await {
                    if line.trim_start().starts_with('[') {
                        return true;
                    }
                }
                false
            })
            .await;
            assert_eq!(
                flowing.ok(),
                Some(true),
                "client {i} ({proto} {mode} reverse={reverse}) printed no interval within 30 s: {args:?}"
            );
            // The random point: some time into the transfer.
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let finished_before = matches!(child.try_wait(), Ok(Some(_)));
            let _ = child.start_kill();
            child.wait().await.expect("reap the client");
            Killed {
                total,
                what: format!("{proto} {mode} reverse={reverse}"),
                reverse,
                killed_mid_session: !finished_before,
            }
        });
    }
    let mut killed = Vec::new();
    while let Some(k) = runs.join_next().await {
        killed.push(k.expect("client task"));
    }
    killed
}

/// One session of every kind, so thread pools, caches and lazily opened descriptors exist
/// before the baseline is taken. Returns the session ids.
pub(super) async fn warm_up(addr: SocketAddr) -> Vec<u32> {
    let mut ids = Vec::new();
    for i in 0..8 {
        let p = session_spec(i);
        let out = SessionRequest::new(addr, &p)
            .run()
            .await
            .expect("warm-up session");
        assert_exact(&out, &p);
        ids.push(out.session);
    }
    ids
}
