//! The fuzz targets: one per family of untrusted input, each with its name (its cargo-fuzz
//! binary and corpus directory) and the harness that takes its input.

use std::time::Instant;

use super::control::control_connection;
use super::datagram::{data_datagrams, seq_tracker};
use super::dns::dns_response;
use super::impair::impairer;
use super::iperf3::{iperf3_control, iperf3_udp};
use super::perf::perf_requests;

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
