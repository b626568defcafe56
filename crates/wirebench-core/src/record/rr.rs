//! Request-response results (`wirebench ping` and `wirebench rr`): one record per protocol ×
//! concurrency, both sides' figures. Owns the layout of docs/rr-output.schema.json.

use serde::{Deserialize, Serialize};

use super::lifecycle::{CampaignKind, SweepPlan};
use super::run::{RttFigures, TransportRecord};
use crate::vocab::plan::Protocol;

/// QUIC resumed with 0-RTT: a second connection that sends its first request as early data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ResumedFigures {
    /// The client held a session ticket and sent the request as 0-RTT data.
    pub zero_rtt_sent: bool,
    /// The server accepted the early data.
    pub zero_rtt_accepted: bool,
    /// Connection start → first response byte, nanoseconds (the request answered at all).
    pub first_response_ns: Option<u64>,
    /// Connection start → handshake complete, nanoseconds.
    pub handshake_ns: Option<u64>,
}

/// Version of the JSON document below; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole `--json` output of one `ping` or `rr` command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrDocument {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"ping"` or `"rr"`.
    pub command: String,
    /// The server, as named (or `embedded ADDR`).
    pub server: String,
    /// One result per protocol × concurrency, in the order they ran.
    pub results: Vec<RrResult>,
}

/// One protocol × concurrency run, client and server figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrResult {
    /// Transport protocol.
    pub protocol: Protocol,
    /// Request size, bytes.
    pub request_bytes: u32,
    /// Response size, bytes.
    pub response_bytes: u32,
    /// Flows (connections or sockets).
    pub flows: u32,
    /// Requests outstanding per flow.
    pub concurrency: u32,
    /// A fresh connection per request.
    pub new_connection: bool,
    /// Requests per flow asked for (null when run for a duration).
    pub count_per_flow: Option<u64>,
    /// How long new requests were issued, ns (null when run for a count).
    pub duration_ns: Option<u64>,
    /// UDP request timeout, ns.
    pub timeout_ns: u64,
    /// UDP retries allowed per request.
    pub retries_allowed: u32,
    /// Distinct requests sent (retries not counted).
    pub sent: u64,
    /// Requests answered in time, each once.
    pub answered: u64,
    /// UDP requests whose retries were exhausted without an answer.
    pub lost: u64,
    /// UDP answers that arrived after their request was declared lost (never a sample).
    pub late: u64,
    /// UDP copies sent again after a timeout.
    pub retries: u64,
    /// UDP answers to a request already answered (a retry and its original).
    pub duplicates: u64,
    /// Sends the OS refused.
    pub send_errors: u64,
    /// lost / sent (0 when nothing was sent).
    pub loss_ratio: f64,
    /// First request → last answer or loss, ns.
    pub elapsed_ns: u64,
    /// answered / elapsed, requests per second.
    pub requests_per_second: f64,
    /// Response time (request sent → response read), ns.
    pub response: Option<RttFigures>,
    /// TCP connect or QUIC handshake, ns: one sample per connection (null for UDP).
    pub connect: Option<RttFigures>,
    /// QUIC resumed with 0-RTT (ping over QUIC only).
    pub resumed: Option<ResumedFigures>,
    /// Requests outside the measured ones that the server answered (the 0-RTT probe).
    pub setup_requests: u64,
    /// Share of the client's packets sent again or lost, as in `run`: TCP from TCP_INFO
    /// ((total_retrans - dsack_dups) / data_segs_out, summed over connections), QUIC lost /
    /// sent packets, UDP retries / request datagrams; null when unknown.
    pub retrans_rate: Option<f64>,
    /// The client's transport counters, summed over its connections.
    pub transport: Option<TransportRecord>,
    /// The server's view.
    pub server: ServerRr,
    /// The path the requests crossed, as the command was told (`rr --path-note`; the namespace
    /// lab fills it in, e.g. "netns lab: tbf rate 50mbit burst 32kb limit 32kb, MTU 1500");
    /// absent when not given. Stored with each result, so older records read back as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_note: Option<String>,
    /// Each direction's delay (`ping`, against a server that stamps its answers); absent
    /// where not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<crate::record::one_way::OneWayDelay>,
}

/// What the server reported for the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRr {
    /// Requests it answered (UDP: request datagrams answered, retries included).
    pub answered: u64,
    /// Request bytes it read.
    pub request_bytes: u64,
    /// Read calls (TCP/QUIC) or request datagrams received (UDP).
    pub read_calls: u64,
    /// UDP: answered copies marked as retransmissions.
    pub retransmitted_requests: u64,
    /// The session ended abnormally.
    pub aborted: bool,
    /// Why.
    pub abort_reason: Option<String>,
}

/// What is known about a stored `wirebench rr` sweep when it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewRrCampaign {
    /// Start time, seconds since the Unix epoch (UTC).
    pub started_at_unix_s: i64,
    /// The server as named (or `embedded ADDR`).
    pub server: String,
    /// Protocols in run order (`udp,tcp`).
    pub protocols: String,
    /// Requests in flight per flow, in run order (`10,20,40`).
    pub concurrency: String,
    /// Request size, bytes.
    pub request_bytes: u32,
    /// Response size, bytes.
    pub response_bytes: u32,
    /// Flows (the largest of a `--flows` list; each result holds its own).
    pub flows: u32,
    /// Results planned (protocols × `--flows` values × concurrencies).
    pub planned_results: u64,
    /// The host it ran on.
    pub host_name: Option<String>,
    /// The wirebench that ran it.
    pub wirebench_version: String,
}

impl SweepPlan for NewRrCampaign {
    const KIND: CampaignKind = CampaignKind::Rr;
}

impl RrResult {
    /// The figure that says how much the transport had to repair, in percent: UDP's requests
    /// lost (after their retries) over those sent; TCP's and QUIC's retransmission rate.
    /// `None` when unknown.
    pub fn repair_pct(&self) -> Option<f64> {
        match self.protocol {
            Protocol::Udp => Some(self.loss_ratio * 100.0),
            _ => self.retrans_rate.map(|r| r * 100.0),
        }
    }

    /// Throughput of one session (flow), bit/s: the bytes of the requests answered and of
    /// their responses (both directions: a session's request and its answer cross the same
    /// path) over the elapsed time, divided among the flows. `None` when nothing was timed.
    pub fn throughput_per_flow_bps(&self) -> Option<f64> {
        if self.elapsed_ns == 0 || self.flows == 0 {
            return None;
        }
        let bytes =
            self.answered as f64 * (f64::from(self.request_bytes) + f64::from(self.response_bytes));
        Some(bytes * 8.0 / (self.elapsed_ns as f64 / 1e9) / f64::from(self.flows))
    }
}

/// Which kind of path a path note names, by how it starts (as the guide's round-trips page and
/// lab/netns-lab.sh write them): what drops packets there differs by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasuredPath {
    /// "relay …": through `wirebench relay`, which drops UDP datagrams only.
    Relay,
    /// "netns lab …": the namespace lab, whose router's queue drops UDP and TCP alike.
    NetnsLab,
    /// Anything else.
    Other,
}

impl MeasuredPath {
    /// The kind of path `note` names.
    pub fn of(note: &str) -> MeasuredPath {
        let starts = |prefix: &str| {
            note.trim_start()
                .get(..prefix.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(prefix))
        };
        if starts("relay") {
            MeasuredPath::Relay
        } else if starts("netns lab") {
            MeasuredPath::NetnsLab
        } else {
            MeasuredPath::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_note_names_its_kind_by_its_start() {
        assert_eq!(MeasuredPath::of("relay --loss 2%"), MeasuredPath::Relay);
        assert_eq!(MeasuredPath::of(" Relay: loss 1%"), MeasuredPath::Relay);
        assert_eq!(
            MeasuredPath::of("netns lab: tbf rate 50mbit burst 32kb limit 32kb, MTU 1500"),
            MeasuredPath::NetnsLab
        );
        assert_eq!(MeasuredPath::of("the office Wi-Fi"), MeasuredPath::Other);
        assert_eq!(MeasuredPath::of("rel"), MeasuredPath::Other);
    }
}
