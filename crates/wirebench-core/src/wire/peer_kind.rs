//! Names what answered a connection from the first bytes it sent (a wirebench server, iperf3,
//! SSH, HTTP, TLS, a `220` banner, other text or binary), so a client pointed at the wrong
//! listener can say so in one line; pure: it reads a byte slice, never a socket or a clock.
//!
//! A wirebench server answers a session request with a control frame: a `u32` big-endian length
//! of at most [`MAX_CONTROL_FRAME`] (so the first two bytes are 0) and a JSON object (`{`).
//! Anything else is a foreign peer, and most of them tell what they are in their first bytes.

use std::fmt;

use crate::wire::proto::MAX_CONTROL_FRAME;

/// Bytes of a wirebench answer needed to call it one: the 4-byte frame header and the `{` that
/// opens its JSON body. A caller reads at most this many before it knows whether the rest
/// belongs to the control protocol.
pub const WIREBENCH_HEAD_LEN: usize = 5;

/// Most characters of a banner or status line quoted in a message.
const MAX_QUOTE: usize = 60;

/// What answered, as far as its first bytes tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerKind {
    /// A wirebench control frame: the rest of the exchange is the control protocol's.
    Wirebench,
    /// An iperf3 server: it took the first 37 bytes we sent for its cookie and answered with a
    /// state byte (9 = send your parameters, -1 = busy with another test, -2 = error).
    Iperf3 {
        /// The state byte it sent.
        state: u8,
    },
    /// An SSH server's identification line (`SSH-2.0-...`).
    Ssh {
        /// The line, control characters escaped, at most 60 characters.
        banner: String,
    },
    /// An HTTP server's status line (`HTTP/1.1 400 Bad Request`).
    Http {
        /// The line, control characters escaped, at most 60 characters.
        status: String,
    },
    /// A TLS record: an alert (0x15) or a handshake (0x16) with a 3.x version.
    Tls,
    /// A `220 ` or `220-` greeting, as SMTP and FTP servers send on connect.
    Greeting220 {
        /// The line, control characters escaped, at most 60 characters.
        banner: String,
    },
    /// Some other line of text (POP3's `+OK`, Redis's `-ERR`, ...).
    Text {
        /// The line, control characters escaped, at most 60 characters.
        line: String,
    },
    /// Binary bytes of no protocol we know.
    Binary {
        /// Up to the first 8 bytes, as hex.
        hex: String,
    },
    /// The peer closed (or reset) the connection without sending a byte.
    Closed,
}

impl PeerKind {
    /// Whether this is a wirebench server (the control protocol goes on).
    pub fn is_wirebench(&self) -> bool {
        matches!(self, PeerKind::Wirebench)
    }

    /// One line for the user saying what `server` (as typed, or its address) is and what to
    /// do instead. Not meaningful for [`PeerKind::Wirebench`].
    pub fn explain(&self, server: &str) -> String {
        match self {
            PeerKind::Wirebench => format!("{server} is a wirebench server"),
            PeerKind::Iperf3 { state } => {
                let busy = match *state as i8 {
                    -1 => " (busy with another test)",
                    -2 => " (it reported an error)",
                    _ => "",
                };
                format!(
                    "{server} is an iperf3 server{busy}, not a wirebench server: \
                     use `wirebench run --iperf3 {server}`"
                )
            }
            PeerKind::Ssh { banner } => format!(
                "{server} answered with an SSH banner ({banner}): not a wirebench server"
            ),
            PeerKind::Http { status } => format!(
                "{server} is an HTTP server (it answered {status:?}): not a wirebench server"
            ),
            PeerKind::Tls => format!(
                "{server} answered with a TLS record: a TLS server, not a wirebench server"
            ),
            PeerKind::Greeting220 { banner } => format!(
                "{server} greeted us with {banner:?} (an SMTP or FTP server): not a wirebench server"
            ),
            PeerKind::Text { line } => format!(
                "{server} answered with text ({line:?}): not a wirebench server"
            ),
            PeerKind::Binary { hex } => format!(
                "{server} answered with bytes {hex} that are not a wirebench control message: \
                 not a wirebench server (or an incompatible one)"
            ),
            PeerKind::Closed => format!(
                "{server} closed the connection without answering our session request: \
                 not a wirebench server (HTTP and TLS servers close on bytes they do not understand)"
            ),
        }
    }
}

impl fmt::Display for PeerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            PeerKind::Wirebench => "a wirebench server",
            PeerKind::Iperf3 { .. } => "an iperf3 server",
            PeerKind::Ssh { .. } => "an SSH server",
            PeerKind::Http { .. } => "an HTTP server",
            PeerKind::Tls => "a TLS server",
            PeerKind::Greeting220 { .. } => "an SMTP or FTP server",
            PeerKind::Text { .. } => "a text protocol",
            PeerKind::Binary { .. } => "an unknown binary protocol",
            PeerKind::Closed => "a peer that closed without answering",
        };
        f.write_str(name)
    }
}

/// Text prefixes that name a protocol; a shorter prefix of one of them needs more bytes.
const SIGNATURES: [&[u8]; 4] = [b"SSH-", b"HTTP/", b"220 ", b"220-"];

/// Classifies the first bytes a peer sent. `complete` says no more bytes will be considered
/// (the peer closed, or the caller's deadline passed); otherwise `None` means "too few bytes to
/// tell, read more". Never panics, whatever the input.
pub fn classify(first: &[u8], complete: bool) -> Option<PeerKind> {
    let Some(&b0) = first.first() else {
        return complete.then_some(PeerKind::Closed);
    };
    // A wirebench frame header: length 1..=MAX_CONTROL_FRAME, so it starts with 0x00.
    if b0 == 0 {
        if first.len() < WIREBENCH_HEAD_LEN {
            // The smallest length these bytes can still begin.
            let mut header = [0u8; 4];
            header[..first.len()].copy_from_slice(first);
            let least = usize::try_from(u32::from_be_bytes(header)).unwrap_or(usize::MAX);
            if !complete && least <= MAX_CONTROL_FRAME {
                return None;
            }
            return Some(binary(first));
        }
        let len = u32::from_be_bytes([first[0], first[1], first[2], first[3]]);
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if (1..=MAX_CONTROL_FRAME).contains(&len) && first[4] == b'{' {
            return Some(PeerKind::Wirebench);
        }
        return Some(binary(first));
    }
    // iperf3's state bytes after the cookie. 9 is alone on the wire (the server then waits for
    // our parameters) and starts no text protocol. -1 (busy) is sent just before the server
    // closes; telnet's IAC is 0xFF too, but telnet follows it with a command byte.
    match b0 as i8 {
        9 => return Some(PeerKind::Iperf3 { state: b0 }),
        -1 if first.len() == 1 => {
            return complete.then_some(PeerKind::Iperf3 { state: b0 });
        }
        // SERVER_ERROR is followed by two 4-byte error codes (small, non-negative).
        -2 if first.len() < 9 && !complete => return None,
        -2 if first.len() == 1 || (first.len() >= 9 && first[1] == 0 && first[5] == 0) => {
            return Some(PeerKind::Iperf3 { state: b0 });
        }
        _ => {}
    }
    // TLS record: type (alert 0x15, handshake 0x16), then version 3.x.
    if b0 == 0x15 || b0 == 0x16 {
        match first.get(1) {
            Some(3) => return Some(PeerKind::Tls),
            None if !complete => return None,
            None => return Some(PeerKind::Tls),
            Some(_) => return Some(binary(first)),
        }
    }
    if !complete
        && first.len() < 5
        && SIGNATURES
            .iter()
            .any(|sig| sig.len() > first.len() && sig.starts_with(first))
    {
        return None;
    }
    if first.starts_with(b"SSH-") {
        return Some(PeerKind::Ssh {
            banner: first_line(first),
        });
    }
    if first.starts_with(b"HTTP/") {
        return Some(PeerKind::Http {
            status: first_line(first),
        });
    }
    if first.starts_with(b"220 ") || first.starts_with(b"220-") {
        return Some(PeerKind::Greeting220 {
            banner: first_line(first),
        });
    }
    let line_end = first
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(first.len());
    let is_text = first[..line_end]
        .iter()
        .all(|&b| b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b));
    if is_text {
        return Some(PeerKind::Text {
            line: first_line(first),
        });
    }
    Some(binary(first))
}

// first_line's quote, escaped, never reaches peer_text's own cut (see there).
const _: () = assert!(MAX_QUOTE * 6 <= crate::vocab::text::MAX_PEER_TEXT);

/// The first line of `bytes` (up to `\r` or `\n`), lossy UTF-8, control characters escaped,
/// cut to [`MAX_QUOTE`] characters.
fn first_line(bytes: &[u8]) -> String {
    let end = bytes
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(bytes.len());
    let text = String::from_utf8_lossy(&bytes[..end]);
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(MAX_QUOTE).collect();
    // A control character escapes to at most 6 characters (`\u{9f}`): MAX_QUOTE of them stay
    // within peer_text's own cut, so only the cut here applies.
    let mut out = crate::vocab::text::peer_text(&head);
    if chars.next().is_some() {
        out.push_str("...");
    }
    out
}

fn binary(bytes: &[u8]) -> PeerKind {
    let hex = bytes
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ");
    PeerKind::Binary { hex }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::proto::{encode_frame, ControlMessage};

    #[test]
    fn a_wirebench_frame_is_recognised_from_five_bytes() {
        let mut frame = Vec::new();
        encode_frame(
            &ControlMessage::Rejected {
                reason: "busy".into(),
            },
            &mut frame,
        );
        for n in 0..WIREBENCH_HEAD_LEN {
            assert_eq!(classify(&frame[..n], false), None, "{n} bytes");
        }
        assert_eq!(
            classify(&frame[..WIREBENCH_HEAD_LEN], false),
            Some(PeerKind::Wirebench)
        );
        assert_eq!(classify(&frame, true), Some(PeerKind::Wirebench));
        // Cut short, or oversized, it is not one.
        assert!(matches!(
            classify(&frame[..3], true),
            Some(PeerKind::Binary { .. })
        ));
        assert!(matches!(
            classify(&[0, 1, 0, 1, b'{'], false),
            Some(PeerKind::Binary { .. })
        ));
        assert!(matches!(
            classify(&[0, 0, 0, 0, b'{'], false),
            Some(PeerKind::Binary { .. })
        ));
        // A length over the limit is refused at the second byte already.
        assert!(matches!(
            classify(&[0, 2], false),
            Some(PeerKind::Binary { .. })
        ));
    }

    #[test]
    fn iperf3_state_bytes() {
        assert_eq!(classify(&[9], false), Some(PeerKind::Iperf3 { state: 9 }));
        // Busy: one byte, then the close.
        assert_eq!(classify(&[0xff], false), None);
        assert_eq!(
            classify(&[0xff], true),
            Some(PeerKind::Iperf3 { state: 0xff })
        );
        // Telnet's IAC DO is not iperf3.
        assert!(matches!(
            classify(&[0xff, 0xfd, 0x18], true),
            Some(PeerKind::Binary { .. })
        ));
        let msg = classify(&[9], true).unwrap().explain("127.0.0.1:5201");
        assert_eq!(
            msg,
            "127.0.0.1:5201 is an iperf3 server, not a wirebench server: \
             use `wirebench run --iperf3 127.0.0.1:5201`"
        );
    }

    #[test]
    fn banners_and_status_lines_are_named_and_quoted() {
        let ssh = classify(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", false).unwrap();
        assert_eq!(
            ssh,
            PeerKind::Ssh {
                banner: "SSH-2.0-OpenSSH_9.2p1 Debian-2".into()
            }
        );
        assert!(ssh.explain("h:22").contains("SSH banner (SSH-2.0-OpenSSH"));
        assert_eq!(classify(b"SS", false), None);
        assert!(matches!(classify(b"SS", true), Some(PeerKind::Text { .. })));
        assert!(matches!(
            classify(b"HTTP/1.1 400 Bad Request\r\n\r\n", false),
            Some(PeerKind::Http { status }) if status == "HTTP/1.1 400 Bad Request"
        ));
        assert!(matches!(
            classify(b"220 mail.example ESMTP\r\n", false),
            Some(PeerKind::Greeting220 { .. })
        ));
        assert!(matches!(
            classify(b"+OK POP3 ready\r\n", false),
            Some(PeerKind::Text { .. })
        ));
        assert_eq!(
            classify(&[0x15, 3, 3, 0, 2, 2, 50], false),
            Some(PeerKind::Tls)
        );
        assert_eq!(classify(&[0x16], false), None);
        assert_eq!(classify(&[], false), None);
        assert_eq!(classify(&[], true), Some(PeerKind::Closed));
        // Control characters never reach the terminal; long lines are cut.
        let evil = classify(b"SSH-2.0-\x1b[31mred\x07\n", false).unwrap();
        assert!(!evil.explain("h").contains('\x1b'));
        let long = [b'a'; 500];
        let PeerKind::Text { line } = classify(&long, false).unwrap() else {
            panic!("text");
        };
        assert_eq!(line.len(), MAX_QUOTE + 3);
    }

    #[test]
    fn every_short_input_classifies_without_panicking() {
        // Exhaustive over 1 and 2 bytes, and a deterministic spread of longer inputs.
        for a in 0..=255u8 {
            for complete in [false, true] {
                let _ = classify(&[a], complete);
                for b in 0..=255u8 {
                    let _ = classify(&[a, b], complete);
                }
            }
        }
        let mut x: u32 = 1;
        for len in 0..64 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (x >> 24) as u8
                })
                .collect();
            let kind = classify(&bytes, true);
            assert!(kind.is_some(), "complete input always classifies");
        }
    }
}
