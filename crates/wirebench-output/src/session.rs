//! The server's per-session line and the pieces every run's text shares: rates (or "too
//! short to time"), interval lines, the UDP receiver's counts, aborted sessions. Formats only;
//! the caller decides where it goes.

use std::fmt::Write as _;

use wirebench_core::record::{bits_per_second, MIN_TIMED_NS};
use wirebench_core::vocab::counters::IntervalSample;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::units::{format_bitrate, format_byterate_iec, RateUnit};
use wirebench_core::wire::proto::{ServerReport, SessionParams};

/// A bit rate for `bytes` over `seconds`, or "too short to time" when the span is under
/// [`MIN_TIMED_NS`] (a single small message arrives within one clock reading).
pub(super) fn rate_text(bytes: u64, seconds: f64, unit: Option<RateUnit>) -> String {
    if seconds * 1e9 >= MIN_TIMED_NS as f64 {
        bitrate_text(bits_per_second(bytes, seconds), unit)
    } else {
        "too short to time".to_string()
    }
}

/// A bit rate in `unit` (`-f`), or in the unit that reads best when none was asked for.
pub(super) fn bitrate_text(bits_per_second: f64, unit: Option<RateUnit>) -> String {
    match unit {
        Some(u) => u.format(bits_per_second),
        None => format_bitrate(bits_per_second),
    }
}

/// The server's one-line summary of a session, as `wirebench server` prints it.
pub fn session_line(session: u32, peer: &str, params: &SessionParams, r: &ServerReport) -> String {
    session_line_in(session, peer, params, r, None)
}

/// [`session_line`] with its rate in `unit` (`run -f`) when one is given.
pub fn session_line_in(
    session: u32,
    peer: &str,
    params: &SessionParams,
    r: &ServerReport,
    unit: Option<RateUnit>,
) -> String {
    let secs = r.elapsed_ns as f64 / 1e9;
    // Reversed (-R), the server is the sender: what it reports is what it sent.
    let (verb, calls) = match (params.reverse, r.protocol) {
        (true, _) => ("sent", "send calls"),
        (false, Protocol::Udp) => ("read", "datagrams"),
        (false, _) => ("read", "read calls"),
    };
    let mut line = format!(
        "session {session} {} {}{} from {peer}: {verb} {} messages, {} bytes in {secs:.4} s ({}), {} {calls}",
        r.protocol,
        r.mechanism,
        if params.reverse { " reverse" } else { "" },
        r.messages,
        r.bytes,
        rate_text(r.bytes, secs, unit),
        r.read_calls,
    );
    // The receiver's view of UDP; reversed, the client has it.
    if r.protocol == Protocol::Udp && !params.reverse {
        line.push_str(&udp_receipt_text(
            (r.lost, r.dropped_by_host),
            r.duplicates,
            r.out_of_order,
            r.jitter_us,
        ));
    }
    if r.mechanism == Mechanism::StopAndWait && !params.reverse {
        let _ = write!(line, ", acks sent {}", r.acks_sent);
    }
    match params.duration_us {
        Some(us) => {
            let _ = write!(
                line,
                " [msg {} B, timed {} s, at most {} B]",
                params.msg_size,
                us as f64 / 1e6,
                params.total_bytes
            );
        }
        None => {
            let _ = write!(
                line,
                " [msg {} B, total {} B]",
                params.msg_size, params.total_bytes
            );
        }
    }
    line.push_str(&aborted_text(r.aborted, r.abort_reason.as_deref()));
    line
}

/// One interval line: `[  1.00-  2.00 s] sent 119.21 MiB (1.00 Gbit/s)`, with the UDP loss
/// in the interval where the receiver counted it.
pub fn interval_line(verb: &str, s: &IntervalSample) -> String {
    interval_line_in(verb, s, None)
}

/// [`interval_line`] with its rate in `unit` (`run -f`) alone when one is given.
pub fn interval_line_in(verb: &str, s: &IntervalSample, unit: Option<RateUnit>) -> String {
    let rates = match unit {
        Some(u) => u.format(s.bits_per_second()),
        None => format!(
            "{}, {}",
            format_bitrate(s.bits_per_second()),
            format_byterate_iec(s.bits_per_second() / 8.0)
        ),
    };
    let mut line = format!(
        "[{:>7.2}-{:>7.2} s] {verb} {} B ({rates})",
        s.start_ns as f64 / 1e9,
        s.end_ns as f64 / 1e9,
        s.bytes,
    );
    if let Some(retransmitted) = s.retransmitted {
        let _ = write!(line, ", retransmitted {retransmitted}");
    }
    if let Some(lost) = s.lost {
        let _ = write!(line, ", lost {lost}");
    }
    line
}

/// " ABORTED: why" for a session that ended early; nothing otherwise.
pub(super) fn aborted_text(aborted: bool, reason: Option<&str>) -> String {
    if aborted {
        format!(" ABORTED: {}", reason.unwrap_or("unknown reason"))
    } else {
        String::new()
    }
}

/// What a UDP receiver counted beyond messages and bytes; of the lost, those its own host
/// dropped, when its socket said and there were any.
pub(super) fn udp_receipt_text(
    (lost, dropped_here): (u64, Option<u64>),
    duplicates: u64,
    out_of_order: u64,
    jitter_us: Option<f64>,
) -> String {
    let mut s = format!(", lost {lost}");
    if let Some(dropped) = dropped_here.filter(|_| lost > 0) {
        let _ = write!(s, " ({dropped} dropped by this host's socket buffer)");
    }
    let _ = write!(s, ", duplicates {duplicates}, out of order {out_of_order}");
    if let Some(jitter) = jitter_us {
        let _ = write!(s, ", jitter {jitter:.1} µs");
    }
    s
}
