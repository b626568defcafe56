//! Address validation for the server's UDP sessions, so the server cannot be used as a
//! reflector: owns the token-bearing hello datagram's layout, the set of source addresses
//! of a session that proved they hold its token, and the byte budget towards addresses that
//! have not; must not do I/O or decide what a session counts.
//!
//! The rule (docs/protocol.md, "Address validation"): the server never sends more UDP bytes
//! towards an address than it received from it until that address has sent a hello carrying
//! the session's token (handed out only on the control connection, whose peer completed a TCP
//! handshake from the same IP). wirebench's server is stricter than the budget allows: it
//! answers nothing but a valid hello before validation. [`Budget`] states the rule itself and
//! guards the one reply that precedes validation (the hello's echo).

use std::collections::HashSet;
use std::net::SocketAddr;

use crate::wire::datagram::{Header, Kind, HEADER_LEN};

/// Length of a client's hello: the 16-byte header (kind 5) and the session's 4-byte token.
pub const HELLO_LEN: usize = HEADER_LEN + 4;
/// Length of the server's echo of a hello: the header alone (never more than the hello).
pub const HELLO_ECHO_LEN: usize = HEADER_LEN;
/// Most source addresses one session validates (a client has at most 1024 flows); a hello
/// from one more is dropped and counted.
pub const MAX_VALIDATED: usize = 4096;

/// The hello a client sends from each of its UDP sockets before anything else: header kind 5
/// with the session id and `seq` = the attempt number, then the token, big endian.
pub fn encode_hello(session: u32, token: u32, attempt: u64) -> [u8; HELLO_LEN] {
    let mut out = [0u8; HELLO_LEN];
    let mut head = [0u8; HEADER_LEN];
    Header {
        kind: Kind::Hello,
        retransmit: attempt > 0,
        session,
        seq: attempt,
    }
    .encode(&mut head);
    out[..HEADER_LEN].copy_from_slice(&head);
    out[HEADER_LEN..].copy_from_slice(&token.to_be_bytes());
    out
}

/// The server's answer to a valid hello: the hello's header (same session and `seq`), no
/// token, no payload.
pub fn encode_echo(hello: &Header) -> [u8; HELLO_ECHO_LEN] {
    let mut out = [0u8; HELLO_ECHO_LEN];
    hello.encode(&mut out);
    out
}

/// The token a hello datagram carries; None when it is not exactly [`HELLO_LEN`] bytes.
pub fn hello_token(datagram: &[u8]) -> Option<u32> {
    let raw: [u8; 4] = datagram
        .get(HEADER_LEN..)
        .filter(|rest| rest.len() == 4)?
        .try_into()
        .ok()?;
    Some(u32::from_be_bytes(raw))
}

/// Whether `datagram` is a wirebench hello or the server's echo of one, exactly: the length of
/// either, kind 5, no flag but the retransmission bit, and the reserved field zero. A
/// middlebox (the relay) passes these as set-up, unimpaired and uncounted; its first byte alone
/// would also pass one DNS query in 256 (an ID whose high byte is 5) or a QUIC packet whose
/// fixed bit was greased away.
pub fn is_hello_or_echo(datagram: &[u8]) -> bool {
    matches!(datagram.len(), HELLO_LEN | HELLO_ECHO_LEN)
        && datagram[0] == Kind::Hello.to_byte()
        && datagram[1] & !crate::wire::datagram::FLAG_RETRANSMIT == 0
        && datagram[2..4] == [0, 0]
}

/// Bytes received from and sent to one address: the server may send `n` more bytes only
/// while `sent + n <= received`, until the address is validated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    /// Bytes received from the address (UDP payload).
    pub received: u64,
    /// Bytes sent to it.
    pub sent: u64,
}

impl Budget {
    /// Whether `n` more bytes stay within what was received.
    pub fn allows(&self, n: u64) -> bool {
        self.sent.saturating_add(n) <= self.received
    }
}

/// What a session's address validation made of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A hello with the right token: its source is validated; answer it with the echo.
    Hello,
    /// Any datagram from a validated source: route it to the session.
    Pass,
    /// A hello without the right token (or not [`HELLO_LEN`] long): drop it, never answer.
    BadToken,
    /// Anything else from a source that has not presented the token: drop it, never answer.
    Unvalidated,
    /// A valid hello from one address too many: drop it.
    TooMany,
}

/// Counts of what address validation dropped for one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Hellos with a wrong or missing token.
    pub bad_token: u64,
    /// Other datagrams from sources that had not presented the token.
    pub unvalidated: u64,
    /// Valid hellos beyond [`MAX_VALIDATED`] addresses.
    pub too_many: u64,
}

impl Dropped {
    /// All dropped datagrams.
    pub fn total(&self) -> u64 {
        self.bad_token + self.unvalidated + self.too_many
    }
}

/// One session's validated source addresses and what it dropped.
#[derive(Debug, Clone)]
pub struct AddressValidation {
    token: u32,
    /// Looked up for every received batch: a set, as a session may have 1024 flows.
    validated: HashSet<SocketAddr>,
    dropped: Dropped,
}

impl AddressValidation {
    /// A session whose clients must present `token`.
    pub fn new(token: u32) -> AddressValidation {
        AddressValidation {
            token,
            validated: HashSet::new(),
            dropped: Dropped::default(),
        }
    }

    /// Decides on one datagram (`header` already decoded from `datagram`) from `from`.
    pub fn on_datagram(&mut self, header: &Header, datagram: &[u8], from: SocketAddr) -> Verdict {
        let known = self.validated.contains(&from);
        let verdict = match header.kind {
            Kind::Hello => match hello_token(datagram) {
                Some(token) if token == self.token => {
                    if known {
                        Verdict::Hello
                    } else if self.validated.len() >= MAX_VALIDATED {
                        Verdict::TooMany
                    } else {
                        self.validated.insert(from);
                        Verdict::Hello
                    }
                }
                _ => Verdict::BadToken,
            },
            _ if known => Verdict::Pass,
            _ => Verdict::Unvalidated,
        };
        match verdict {
            Verdict::BadToken => self.dropped.bad_token += 1,
            Verdict::Unvalidated => self.dropped.unvalidated += 1,
            Verdict::TooMany => self.dropped.too_many += 1,
            Verdict::Hello | Verdict::Pass => {}
        }
        verdict
    }

    /// Whether `from` has presented the token.
    pub fn is_validated(&self, from: SocketAddr) -> bool {
        self.validated.contains(&from)
    }

    /// What was dropped so far.
    pub fn dropped(&self) -> Dropped {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn data(session: u32) -> [u8; 20] {
        let mut d = [0u8; 20];
        Header::data(session, 0).write_to(&mut d).unwrap();
        d
    }

    #[test]
    fn hello_exact_bytes() {
        assert_eq!(
            encode_hello(0x0102_0304, 0xA0B0_C0D0, 0),
            [5, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0xA0, 0xB0, 0xC0, 0xD0]
        );
        let again = encode_hello(1, 2, 3);
        assert_eq!(
            again[1], 1,
            "a repeated hello carries the retransmission flag"
        );
        assert_eq!(again[15], 3);
        let h = Header::decode(&again).unwrap();
        assert_eq!(encode_echo(&h), again[..16]);
        assert_eq!(hello_token(&again), Some(2));
        assert_eq!(hello_token(&again[..16]), None);
        assert_eq!(hello_token(&[again.as_slice(), &[0]].concat()), None);
    }

    #[test]
    fn only_a_whole_hello_or_echo_is_taken_for_one() {
        let hello = encode_hello(7, 9, 0);
        let repeated = encode_hello(7, 9, 4);
        let echo = encode_echo(&Header::decode(&hello).unwrap());
        for ours in [&hello[..], &repeated[..], &echo[..]] {
            assert!(is_hello_or_echo(ours), "{ours:?}");
        }
        // A DNS query for host.wb.test whose ID starts with byte 5 (RD set: flags 0x0100).
        let mut dns = vec![0x05, 0x2a, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        dns.extend_from_slice(b"\x04host\x02wb\x04test\x00\x00\x01\x00\x01");
        // The same first 16 bytes as a hello, one byte too long or short; flags or reserved set.
        let long = [hello.as_slice(), &[0]].concat();
        let mut flagged = hello;
        flagged[1] = 0x80;
        let mut reserved = hello;
        reserved[3] = 1;
        for theirs in [
            &dns[..],
            &long[..],
            &hello[..19],
            &flagged[..],
            &reserved[..],
            &[5][..],
            &[][..],
        ] {
            assert!(!is_hello_or_echo(theirs), "{theirs:?}");
        }
    }

    #[test]
    fn only_the_token_validates_and_only_its_address() {
        let mut v = AddressValidation::new(77);
        let d = data(9);
        let dh = Header::decode(&d).unwrap();
        assert_eq!(v.on_datagram(&dh, &d, addr(1)), Verdict::Unvalidated);
        let wrong = encode_hello(9, 78, 0);
        let wh = Header::decode(&wrong).unwrap();
        assert_eq!(v.on_datagram(&wh, &wrong, addr(1)), Verdict::BadToken);
        assert_eq!(v.on_datagram(&wh, &wrong[..16], addr(1)), Verdict::BadToken);
        assert!(!v.is_validated(addr(1)));
        let right = encode_hello(9, 77, 0);
        let rh = Header::decode(&right).unwrap();
        assert_eq!(v.on_datagram(&rh, &right, addr(1)), Verdict::Hello);
        assert_eq!(
            v.on_datagram(&rh, &right, addr(1)),
            Verdict::Hello,
            "repeats are echoed"
        );
        assert_eq!(v.on_datagram(&dh, &d, addr(1)), Verdict::Pass);
        // Another port of the same IP has proven nothing.
        assert_eq!(v.on_datagram(&dh, &d, addr(2)), Verdict::Unvalidated);
        assert_eq!(
            v.dropped(),
            Dropped {
                bad_token: 2,
                unvalidated: 2,
                too_many: 0
            }
        );
        assert_eq!(v.dropped().total(), 4);
    }

    #[test]
    fn validated_addresses_are_bounded() {
        let mut v = AddressValidation::new(1);
        let hello = encode_hello(5, 1, 0);
        let h = Header::decode(&hello).unwrap();
        for port in 0..MAX_VALIDATED as u16 {
            assert_eq!(v.on_datagram(&h, &hello, addr(port)), Verdict::Hello);
        }
        assert_eq!(
            v.on_datagram(&h, &hello, addr(MAX_VALIDATED as u16)),
            Verdict::TooMany
        );
        assert_eq!(v.dropped().too_many, 1);
    }

    #[test]
    fn budget_is_what_was_received() {
        let b = Budget {
            received: 20,
            sent: 0,
        };
        assert!(b.allows(HELLO_ECHO_LEN as u64));
        assert!(b.allows(20));
        assert!(!b.allows(21));
        let spent = Budget {
            received: 20,
            sent: 16,
        };
        assert!(!spent.allows(16));
    }
}
