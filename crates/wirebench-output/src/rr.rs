//! Output of `wirebench ping` and `wirebench rr`: the text lines of each result. Formats the
//! core records it is given; never measures or opens files.

use std::fmt::Write as _;

use wirebench_core::record::rr::{ResumedFigures, RrResult, ServerRr};
use wirebench_core::vocab::plan::Protocol;

use super::one_way::one_way_text;
use super::run_block::{micros, rtt_text};

/// The text block of one ping run.
pub fn ping_block(r: &RrResult) -> String {
    let mut s = String::new();
    if let Some(c) = &r.connect {
        let what = match r.protocol {
            Protocol::Quic => "QUIC handshake",
            _ => "TCP connect",
        };
        let _ = write!(s, "  set-up: {what} {}", micros(c.mean_ns));
        if let Some(z) = &r.resumed {
            let _ = write!(s, "; resumed: {}", resumed_text(z));
        }
        s.push('\n');
    }
    let _ = writeln!(s, "  probes: {}", counts_text(r));
    match &r.response {
        Some(rtt) => {
            let _ = writeln!(s, "  rtt:    {}", rtt_text(rtt));
        }
        None => s.push_str("  rtt:    no probe answered\n"),
    }
    if let Some(w) = &r.one_way {
        let _ = writeln!(s, "  one-way: {}", one_way_text(w));
    }
    if let Some(t) = &r.transport {
        let _ = writeln!(
            s,
            "  transport: {} of {} packets sent again or lost (retrans_rate {})",
            t.stats.packets_retransmitted,
            t.stats.packets_sent,
            t.retrans_rate
                .map_or("n/a".into(), |r| format!("{:.4}%", r * 100.0))
        );
    }
    let _ = writeln!(s, "  server: {}", server_text(&r.server));
    s
}

/// One line of an rr run (one K; with `flows`, "T=… K=…" for a sweep of flows), and with
/// `detail` the full response-time ladder and, with a new connection per request, the
/// handshake ladder.
pub fn rr_block(r: &RrResult, detail: bool, flows: bool) -> String {
    let mut s = if flows {
        format!("  T={:<4} ", r.flows)
    } else {
        String::from("  ")
    };
    let _ = write!(
        s,
        "K={:<5} {:.0} req/s, {}",
        r.concurrency,
        r.requests_per_second,
        counts_text(r)
    );
    if let Some(rtt) = &r.response {
        let _ = write!(
            s,
            "; p50 {}, p90 {}, p99 {}, p99.9 {}, max {}",
            micros(rtt.p50_ns as f64),
            micros(rtt.p90_ns as f64),
            micros(rtt.p99_ns as f64),
            micros(rtt.p999_ns as f64),
            micros(rtt.max_ns as f64)
        );
    }
    if let Some(rate) = r.retrans_rate {
        let _ = write!(s, "; retrans_rate {:.4}%", rate * 100.0);
    }
    let _ = writeln!(s, "; server answered {}", r.server.answered);
    if detail {
        if let Some(rtt) = &r.response {
            let _ = writeln!(s, "    response:  {}", rtt_text(rtt));
        }
        if r.new_connection {
            if let Some(c) = &r.connect {
                let _ = writeln!(s, "    handshake: {}", rtt_text(c));
            }
        }
    }
    s
}

fn counts_text(r: &RrResult) -> String {
    let mut s = format!(
        "sent {}, answered {}, lost {} ({:.3}%), late {}, retries {}",
        r.sent,
        r.answered,
        r.lost,
        r.loss_ratio * 100.0,
        r.late,
        r.retries
    );
    if r.send_errors > 0 {
        let _ = write!(s, ", send errors {}", r.send_errors);
    }
    s
}

fn server_text(s: &ServerRr) -> String {
    let mut t = format!(
        "answered {} requests ({} B read)",
        s.answered, s.request_bytes
    );
    if s.aborted {
        let _ = write!(
            t,
            ", ABORTED: {}",
            s.abort_reason.as_deref().unwrap_or("no reason given")
        );
    }
    t
}

fn resumed_text(z: &ResumedFigures) -> String {
    if !z.zero_rtt_sent {
        return "no session ticket, so no 0-RTT".into();
    }
    let verdict = if z.zero_rtt_accepted {
        "0-RTT accepted"
    } else {
        "0-RTT refused"
    };
    match z.first_response_ns {
        Some(ns) => format!(
            "{verdict}, first response {} after connect",
            micros(ns as f64)
        ),
        None => format!("{verdict}, the early request was not answered"),
    }
}
