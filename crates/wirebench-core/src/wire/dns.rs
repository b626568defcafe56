//! DNS probe logic (`wirebench dns`): owns the query a probe sends, the check of every response
//! against it (ID, question echoed, QR, RCODE, TC) and the counts of outcomes; must not do I/O or
//! read a clock. Messages are encoded and decoded by `hickory-proto`, never parsed by hand.

use std::fmt;
use std::str::FromStr;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use serde::{Deserialize, Serialize};

/// Largest DNS message over UDP without EDNS (RFC 1035): a longer answer comes back with TC=1.
pub const UDP_PAYLOAD_LIMIT: usize = 512;
/// Largest DNS message over TCP or TLS: the 2-byte length prefix bounds it.
pub const MAX_MESSAGE: usize = 65_535;

/// How a query travels to the resolver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DnsTransport {
    /// One datagram each way (RFC 1035), retried on timeout.
    Udp,
    /// Length-prefixed messages on a TCP connection (RFC 7766), pipelined.
    Tcp,
    /// The TCP framing inside TLS (RFC 7858), port 853 by default.
    Dot,
}

impl DnsTransport {
    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            DnsTransport::Udp => "udp",
            DnsTransport::Tcp => "tcp",
            DnsTransport::Dot => "dot",
        }
    }

    /// The resolver port this transport uses when none is given.
    pub fn default_port(self) -> u16 {
        match self {
            DnsTransport::Udp | DnsTransport::Tcp => 53,
            DnsTransport::Dot => 853,
        }
    }
}

impl fmt::Display for DnsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DnsTransport {
    type Err = DnsError;

    fn from_str(s: &str) -> Result<Self, DnsError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "udp" => Ok(DnsTransport::Udp),
            "tcp" => Ok(DnsTransport::Tcp),
            "dot" | "tls" => Ok(DnsTransport::Dot),
            _ => Err(DnsError::Transport(s.to_string())),
        }
    }
}

/// Why a query could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    /// `--transport` item not known.
    #[error("unknown DNS transport {0:?}: allowed udp, tcp, dot")]
    Transport(String),
    /// `--name` is not a domain name.
    #[error("{name:?} is not a domain name: {why}")]
    Name {
        /// What was given.
        name: String,
        /// hickory's reason.
        why: String,
    },
    /// `--type` is not a record type.
    #[error("unknown record type {0:?}: expected a type such as A, AAAA, MX, TXT, NS, SOA, CNAME")]
    Type(String),
    /// hickory could not encode the query.
    #[error("cannot encode the query: {0}")]
    Encode(String),
}

/// Parses `--transport`: a comma list, order kept, duplicates refused.
pub fn parse_transports(text: &str) -> Result<Vec<DnsTransport>, DnsError> {
    let mut out: Vec<DnsTransport> = Vec::new();
    for item in text.split(',') {
        let t: DnsTransport = item.parse()?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

/// The one question a probe asks, and its encoded query (ID 0) to copy and stamp with an ID.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    name: Name,
    rtype: RecordType,
    template: Vec<u8>,
}

impl Question {
    /// Builds the question `name` / `rtype` (e.g. "example.org", "A"); the name is made fully
    /// qualified. Recursion desired is set, as a stub resolver does.
    pub fn new(name: &str, rtype: &str) -> Result<Self, DnsError> {
        let bad_name = |why: String| DnsError::Name {
            name: name.to_string(),
            why,
        };
        if name.trim().is_empty() {
            return Err(bad_name("it is empty".into()));
        }
        let mut parsed = Name::from_utf8(name).map_err(|e| bad_name(e.to_string()))?;
        parsed.set_fqdn(true);
        let rtype: RecordType = rtype
            .trim()
            .to_ascii_uppercase()
            .parse()
            .map_err(|_| DnsError::Type(rtype.to_string()))?;
        if let RecordType::Unknown(_) = rtype {
            return Err(DnsError::Type(rtype.to_string()));
        }
        let mut msg = Message::new();
        msg.set_id(0)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query)
            .set_recursion_desired(true)
            .add_query(Query::query(parsed.clone(), rtype));
        let template = msg.to_vec().map_err(|e| DnsError::Encode(e.to_string()))?;
        Ok(Question {
            name: parsed,
            rtype,
            template,
        })
    }

    /// The name asked for, fully qualified (`example.org.`).
    pub fn name(&self) -> String {
        self.name.to_string()
    }

    /// The record type asked for (`A`).
    pub fn rtype(&self) -> String {
        self.rtype.to_string()
    }

    /// The query with ID `id`, written into `buf` (cleared first): the same bytes every time but
    /// the ID, so a probe encodes once.
    pub fn encode_into(&self, id: u16, buf: &mut Vec<u8>) {
        buf.clear();
        buf.extend_from_slice(&self.template);
        buf[..2].copy_from_slice(&id.to_be_bytes());
    }

    /// The query with ID `id`, 2-byte length prefix first (TCP and TLS framing).
    pub fn encode_framed_into(&self, id: u16, buf: &mut Vec<u8>) {
        buf.clear();
        // The template of one question is far below 64 KiB.
        let len = u16::try_from(self.template.len()).unwrap_or(u16::MAX);
        buf.extend_from_slice(&len.to_be_bytes());
        buf.extend_from_slice(&self.template);
        buf[2..4].copy_from_slice(&id.to_be_bytes());
    }

    /// Checks a response to this question. The caller matches the ID (see [`response_id`]) to
    /// one of its outstanding queries before trusting the verdict.
    pub fn check(&self, bytes: &[u8]) -> Verdict {
        let Ok(msg) = Message::from_vec(bytes) else {
            return Verdict::Wrong(Wrong::Malformed);
        };
        if msg.message_type() != MessageType::Response || msg.op_code() != OpCode::Query {
            return Verdict::Wrong(Wrong::NotAResponse);
        }
        // A truncated answer may legitimately omit the question; it is retried either way.
        if msg.truncated() {
            return Verdict::Truncated;
        }
        let echoed = msg.queries();
        if echoed.len() != 1
            || echoed[0].name() != &self.name
            || echoed[0].query_type() != self.rtype
        {
            return Verdict::Wrong(Wrong::Question);
        }
        Verdict::Answer {
            rcode: Rcode::from(msg.response_code()),
            records: msg.answers().len(),
        }
    }
}

/// The ID of a message, if it is long enough to hold a DNS header.
pub fn response_id(bytes: &[u8]) -> Option<u16> {
    (bytes.len() >= 12).then(|| u16::from_be_bytes([bytes[0], bytes[1]]))
}

/// The answer section of a response as text, one `name TTL class type data` line per record
/// (empty when it does not decode): what a run shows as the answer it got. A resolver's text
/// (a TXT record, a name with odd bytes) enters here, made safe to show.
pub fn answer_lines(bytes: &[u8]) -> Vec<String> {
    Message::from_vec(bytes)
        .map(|m| {
            m.answers()
                .iter()
                .map(|r| crate::vocab::text::peer_text(&r.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// What a response said, once its ID matched an outstanding query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A well-formed answer to the question (whatever its RCODE).
    Answer {
        /// The response code.
        rcode: Rcode,
        /// Records in the answer section.
        records: usize,
    },
    /// TC=1: the answer did not fit; a resolver asks again over TCP.
    Truncated,
    /// Not an answer to this question: counted, never a sample.
    Wrong(Wrong),
}

/// Why a response was not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrong {
    /// hickory could not decode it.
    Malformed,
    /// QR=0 or another opcode.
    NotAResponse,
    /// The question section differs from the query's.
    Question,
    /// The ID matches no query outstanding or answered (counted by the caller).
    UnknownId,
}

/// The response codes a probe counts apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rcode {
    /// NOERROR.
    NoError,
    /// NXDOMAIN: the name does not exist (a valid answer).
    NxDomain,
    /// SERVFAIL.
    ServFail,
    /// REFUSED.
    Refused,
    /// Any other code.
    Other(u16),
}

impl From<ResponseCode> for Rcode {
    fn from(code: ResponseCode) -> Self {
        match code {
            ResponseCode::NoError => Rcode::NoError,
            ResponseCode::NXDomain => Rcode::NxDomain,
            ResponseCode::ServFail => Rcode::ServFail,
            ResponseCode::Refused => Rcode::Refused,
            other => Rcode::Other(u16::from(other)),
        }
    }
}

/// Maps query numbers 0, 1, 2, … of one flow to 16-bit DNS IDs from a per-flow start, and back:
/// an ID names the newest query that carried it (IDs repeat every 65,536 queries).
#[derive(Debug, Clone, Copy)]
pub struct IdMap {
    base: u16,
}

impl IdMap {
    /// IDs start at `base` (random per flow, so flows and runs do not share IDs).
    pub fn new(base: u16) -> Self {
        IdMap { base }
    }

    /// The ID of query `seq`.
    pub fn id_of(self, seq: u64) -> u16 {
        self.base.wrapping_add(seq as u16)
    }

    /// The newest query number below `issued` that carried `id`; `None` when no query did yet.
    pub fn seq_of(self, id: u16, issued: u64) -> Option<u64> {
        let newest = issued.checked_sub(1)?;
        let back = u64::from(self.id_of(newest).wrapping_sub(id));
        newest.checked_sub(back)
    }
}

/// What a DNS probe counted (one transport, one concurrency, all flows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsCounts {
    /// Distinct queries sent (retries are not new queries).
    pub sent: u64,
    /// Queries answered by a valid response (a response-time sample each).
    pub answered: u64,
    /// Answers with RCODE NOERROR.
    pub noerror: u64,
    /// Answers with RCODE NXDOMAIN.
    pub nxdomain: u64,
    /// Answers with RCODE SERVFAIL.
    pub servfail: u64,
    /// Answers with RCODE REFUSED.
    pub refused: u64,
    /// Answers with any other RCODE.
    pub other_rcode: u64,
    /// Queries never answered: UDP after the last retry's timeout, TCP/TLS when the connection
    /// stayed silent for --timeout or broke with the query outstanding.
    pub timeouts: u64,
    /// TCP/TLS queries whose answer was not trusted (the connection is then closed).
    pub failed: u64,
    /// UDP copies sent again after a timeout.
    pub retries: u64,
    /// UDP answers with TC=1, asked again over TCP.
    pub tc_retries: u64,
    /// Responses not trusted: malformed, not a response, another question, an unknown ID.
    pub wrong: u64,
    /// UDP answers that came after their query was given up.
    pub late: u64,
    /// Further answers to a query already answered (UDP: a retry and its original).
    pub duplicates: u64,
    /// Connections opened (TCP, TLS; UDP's TC fallbacks included).
    pub connections: u64,
    /// Sends the OS refused.
    pub send_errors: u64,
}

impl DnsCounts {
    /// Counts a valid answer's RCODE (the caller counts `answered`).
    pub fn count_rcode(&mut self, rcode: Rcode) {
        match rcode {
            Rcode::NoError => self.noerror += 1,
            Rcode::NxDomain => self.nxdomain += 1,
            Rcode::ServFail => self.servfail += 1,
            Rcode::Refused => self.refused += 1,
            Rcode::Other(_) => self.other_rcode += 1,
        }
    }

    /// Adds another flow's counts.
    pub fn add(&mut self, o: &DnsCounts) {
        self.sent += o.sent;
        self.answered += o.answered;
        self.noerror += o.noerror;
        self.nxdomain += o.nxdomain;
        self.servfail += o.servfail;
        self.refused += o.refused;
        self.other_rcode += o.other_rcode;
        self.timeouts += o.timeouts;
        self.failed += o.failed;
        self.retries += o.retries;
        self.tc_retries += o.tc_retries;
        self.wrong += o.wrong;
        self.late += o.late;
        self.duplicates += o.duplicates;
        self.connections += o.connections;
        self.send_errors += o.send_errors;
    }

    /// Timeouts over queries sent, percent (0 when none were sent): the curve a sweep plots.
    pub fn timeout_pct(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.timeouts as f64 * 100.0 / self.sent as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{RData, Record};

    fn response(q: &Question, id: u16, code: ResponseCode, tc: bool) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(id)
            .set_message_type(MessageType::Response)
            .set_op_code(OpCode::Query)
            .set_response_code(code)
            .set_truncated(tc)
            .add_query(Query::query(q.name.clone(), q.rtype));
        if code == ResponseCode::NoError {
            m.add_answer(Record::from_rdata(
                q.name.clone(),
                300,
                RData::A(A::new(192, 0, 2, 1)),
            ));
        }
        m.to_vec().unwrap()
    }

    #[test]
    fn query_carries_id_question_and_rd() {
        let q = Question::new("www.Example.org", "a").unwrap();
        let mut buf = Vec::new();
        q.encode_into(0xbeef, &mut buf);
        let m = Message::from_vec(&buf).unwrap();
        assert_eq!(m.id(), 0xbeef);
        assert!(m.recursion_desired());
        assert_eq!(m.message_type(), MessageType::Query);
        assert_eq!(m.queries().len(), 1);
        assert_eq!(
            m.queries()[0].name().to_string(),
            "www.example.org.",
            "from_utf8 lowercases"
        );
        assert_eq!(m.queries()[0].query_type(), RecordType::A);
        let mut framed = Vec::new();
        q.encode_framed_into(0xbeef, &mut framed);
        assert_eq!(
            usize::from(u16::from_be_bytes([framed[0], framed[1]])),
            buf.len()
        );
        assert_eq!(&framed[2..], &buf[..]);
    }

    #[test]
    fn bad_names_and_types_are_refused() {
        assert!(matches!(Question::new("", "A"), Err(DnsError::Name { .. })));
        assert!(matches!(
            Question::new(&"a".repeat(64), "A"),
            Err(DnsError::Name { .. })
        ));
        assert!(matches!(
            Question::new("x.org", "BOGUS"),
            Err(DnsError::Type(_))
        ));
        assert!(Question::new("x.org", "txt").is_ok());
    }

    #[test]
    fn verdicts() {
        let q = Question::new("wb.test", "A").unwrap();
        let ok = response(&q, 7, ResponseCode::NoError, false);
        assert_eq!(response_id(&ok), Some(7));
        assert_eq!(
            q.check(&ok),
            Verdict::Answer {
                rcode: Rcode::NoError,
                records: 1
            }
        );
        assert_eq!(
            answer_lines(&ok),
            vec!["wb.test. 300 IN A 192.0.2.1".to_string()]
        );
        let nx = response(&q, 7, ResponseCode::NXDomain, false);
        assert_eq!(
            q.check(&nx),
            Verdict::Answer {
                rcode: Rcode::NxDomain,
                records: 0
            }
        );
        assert_eq!(
            q.check(&response(&q, 7, ResponseCode::NoError, true)),
            Verdict::Truncated
        );
        let other = Question::new("other.test", "A").unwrap();
        assert_eq!(
            q.check(&response(&other, 7, ResponseCode::NoError, false)),
            Verdict::Wrong(Wrong::Question)
        );
        let mut query = Vec::new();
        q.encode_into(7, &mut query);
        assert_eq!(q.check(&query), Verdict::Wrong(Wrong::NotAResponse));
        assert_eq!(
            q.check(&ok[..ok.len() - 3]),
            Verdict::Wrong(Wrong::Malformed)
        );
        assert_eq!(q.check(&[1, 2, 3]), Verdict::Wrong(Wrong::Malformed));
        assert_eq!(response_id(&[1, 2, 3]), None);
    }

    #[test]
    fn ids_map_back_to_the_newest_query() {
        let map = IdMap::new(65_530);
        assert_eq!(map.id_of(0), 65_530);
        assert_eq!(map.id_of(6), 0);
        assert_eq!(map.seq_of(65_530, 0), None);
        assert_eq!(map.seq_of(65_530, 1), Some(0));
        assert_eq!(map.seq_of(0, 7), Some(6));
        assert_eq!(map.seq_of(1, 7), None, "not issued yet");
        assert_eq!(map.seq_of(65_530, 70_000), Some(65_536));
    }

    #[test]
    fn transports_parse_in_order() {
        assert_eq!(
            parse_transports("dot,udp,TCP,udp").unwrap(),
            vec![DnsTransport::Dot, DnsTransport::Udp, DnsTransport::Tcp]
        );
        assert!(parse_transports("quic").is_err());
        assert_eq!(DnsTransport::Dot.default_port(), 853);
    }

    #[test]
    fn counts_add_and_rate() {
        let mut a = DnsCounts {
            sent: 10,
            timeouts: 1,
            ..Default::default()
        };
        a.count_rcode(Rcode::NxDomain);
        a.add(&a.clone());
        assert_eq!((a.sent, a.timeouts, a.nxdomain), (20, 2, 2));
        assert!((a.timeout_pct() - 10.0).abs() < 1e-9);
    }
}
