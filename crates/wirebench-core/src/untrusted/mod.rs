//! Entry points for untrusted bytes: owns the harness functions that feed arbitrary input to every
//! decoder and state machine a peer can reach (control messages with the server's field checks
//! and the client's report check, UDP data datagrams and the receiver's sequence accounting, the
//! relay's impairment machine, iperf3's control and UDP formats, DNS responses, QUIC perf
//! requests) and check that the results are sane; must not do I/O or read clocks (a caller that
//! needs an origin for time passes it in).
//!
//! The cargo-fuzz targets in `fuzz/` and the stable replay test `tests/decoders.rs` both call
//! [`Target::run`], so what is fuzzed and what CI replays cannot drift apart. A harness panics
//! only when a decoder panics or an invariant it states is broken: that is the finding.

mod control;
mod cursor;
mod datagram;
mod dns;
mod impair;
mod iperf3;
mod perf;
mod seeds;

use std::time::Instant;

pub use control::control_connection;
pub use datagram::{data_datagrams, seq_tracker};
pub use dns::dns_response;
pub use impair::impairer;
pub use iperf3::{iperf3_control, iperf3_udp};
pub use perf::perf_requests;
pub use seeds::seeds;

/// One fuzz target: a family of untrusted input and the harness that takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A control connection's bytes: the 16-byte preamble, then length-prefixed control frames.
    Control,
    /// The UDP data datagrams of one session (parameters first), through the receiver's checks,
    /// sequence tracker, stop-and-wait receiver and jitter estimate.
    Datagram,
    /// Arbitrary sequence numbers (huge jumps included) into the receiver's sequence tracker,
    /// checked against a reference model.
    SeqTracker,
    /// An impairment setting (structured or as `--impair` text) and a series of packets,
    /// byte-stream chunks and clock moves through the relay's impairment machine.
    Impair,
    /// An iperf3 control connection's bytes: state bytes, a cookie or a length-prefixed JSON
    /// document (test parameters and results).
    Iperf3Control,
    /// iperf3 UDP datagrams through the header decoder and the receiver's loss/jitter accounting.
    Iperf3Udp,
    /// A DNS resolver's response through the question's checks and the answer lines shown.
    Dns,
    /// The 8-byte request of a QUIC perf stream, in arbitrary pieces.
    Perf,
}

impl Target {
    /// Every target, in the order `fuzz/run.sh` runs them.
    pub const ALL: [Target; 8] = [
        Target::Control,
        Target::Datagram,
        Target::SeqTracker,
        Target::Impair,
        Target::Iperf3Control,
        Target::Iperf3Udp,
        Target::Dns,
        Target::Perf,
    ];

    /// The target's name: its cargo-fuzz binary and its corpus directory `fuzz/corpus/<name>`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Control => "control",
            Target::Datagram => "datagram",
            Target::SeqTracker => "seq_tracker",
            Target::Impair => "impair",
            Target::Iperf3Control => "iperf3_control",
            Target::Iperf3Udp => "iperf3_udp",
            Target::Dns => "dns",
            Target::Perf => "perf",
        }
    }

    /// Feeds one input to the target's harness; `origin` is the instant the impairment machine's
    /// virtual clock starts at (any instant: only offsets from it matter).
    pub fn run(self, data: &[u8], origin: Instant) {
        match self {
            Target::Control => {
                control_connection(data);
            }
            Target::Datagram => {
                data_datagrams(data);
            }
            Target::SeqTracker => {
                seq_tracker(data);
            }
            Target::Impair => {
                impairer(data, origin);
            }
            Target::Iperf3Control => {
                iperf3_control(data);
            }
            Target::Iperf3Udp => {
                iperf3_udp(data);
            }
            Target::Dns => dns_response(data),
            Target::Perf => perf_requests(data),
        }
    }
}

/// Panics unless an error message meant for users is one line without control characters: a
/// peer must not be able to inject line breaks or terminal escapes into what we print.
fn assert_one_line(message: &str) {
    assert!(!message.is_empty(), "empty error message");
    assert!(
        !message.chars().any(char::is_control),
        "error message with a control character: {message:?}"
    );
}
