//! Data-path loops that move bytes between sockets and the core machines. Engines never print,
//! never touch the control connection and never decide policy: they send, receive and count.

pub mod alarm;
pub mod demux;
pub mod inflight;
pub mod interval;
pub mod liveness;
pub mod quic;
pub mod rr;
pub mod rr_blocking_udp;
pub mod stream;
pub mod throttle;
pub mod udp;
pub mod wall_clock;

/// What a sender did, counted as it happened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendTally {
    /// Application messages sent, each counted once (retransmissions are not new messages).
    pub messages: u64,
    /// Application payload bytes sent, each counted once.
    pub bytes: u64,
    /// Send system calls (TCP/QUIC writes, UDP `sendmsg` calls; one may carry many datagrams).
    pub send_calls: u64,
    /// UDP: datagrams put on the wire, including retransmissions.
    pub datagrams: u64,
    /// UDP stop-and-wait: datagrams sent again after a timeout.
    pub retransmissions: u64,
    /// UDP stop-and-wait: timer expiries.
    pub timeouts: u64,
    /// Sends the operating system refused (each is counted, then retried or given up on).
    pub send_errors: u64,
    /// UDP streaming: messages numbered (counted in `messages`) that the host refused to send
    /// with `ENOBUFS` (a full device queue): they were not sent again, so they are lost.
    pub not_sent: u64,
}
