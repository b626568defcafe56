//! How the relay's counts are shown: text lines and the JSON object of `wirebench relay
//! --json`; formatting only, never printing.

use std::fmt::Write as _;

use serde::Serialize;
use wirebench_core::machine::impair::Counts;

use wirebench_core::record::{count_of, RelayCounts};

/// Version of the relay's JSON line; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// One JSON line of `wirebench relay --json`.
#[derive(Debug, Serialize)]
pub struct RelayLine<'a> {
    /// Layout version.
    pub schema_version: u32,
    /// Why it was printed: `signal` (SIGUSR1) or `exit`.
    pub reason: &'a str,
    /// Where the relay listens.
    pub listen: String,
    /// Where it forwards to.
    pub upstream: String,
    /// The seed of its decisions.
    pub seed: u64,
    /// Counts per transport and direction (`up` = client → server).
    pub counts: RelayCounts,
}

/// One direction's counts in one line (`what` names the unit: datagrams or chunks).
fn direction(c: &Counts, what: &str) -> String {
    format!(
        "received {}, forwarded {} ({} B), dropped {} (queue {}), duplicated {}, reordered {}, delayed {} {what}",
        c.received,
        c.forwarded,
        c.bytes_forwarded,
        c.dropped,
        c.queue_drops,
        c.duplicated,
        c.reordered,
        c.delayed
    )
}

/// The counts as an indented block, one line per transport and direction.
pub fn counts_block(c: &RelayCounts) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  udp up   (client → server): {}",
        direction(&c.udp_up, "datagrams")
    );
    let _ = writeln!(
        out,
        "  udp down (server → client): {}",
        direction(&c.udp_down, "datagrams")
    );
    let _ = writeln!(
        out,
        "  tcp up   (client → server): {}",
        direction(&c.tcp_up, "chunks")
    );
    let _ = writeln!(
        out,
        "  tcp down (server → client): {}",
        direction(&c.tcp_down, "chunks")
    );
    let _ = writeln!(
        out,
        "  {}, {}",
        count_of(c.udp_flows as usize, "UDP client", "UDP clients"),
        count_of(
            c.tcp_connections as usize,
            "TCP connection",
            "TCP connections"
        )
    );
    out
}

/// The UDP counts of one run in one line, as `run --impair` prints them under the run.
pub fn run_line(c: &RelayCounts) -> String {
    let short = |c: &Counts| {
        format!(
            "{} in, {} out, {} dropped ({} queue), {} duplicated, {} reordered, {} delayed",
            c.received, c.forwarded, c.dropped, c.queue_drops, c.duplicated, c.reordered, c.delayed
        )
    };
    format!(
        "relay: udp up {}; udp down {}; tcp {} B up, {} B down",
        short(&c.udp_up),
        short(&c.udp_down),
        c.tcp_up.bytes_forwarded,
        c.tcp_down.bytes_forwarded
    )
}
