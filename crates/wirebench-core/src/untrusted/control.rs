//! Harness for a control connection's bytes: owns decoding them the way the app's control reader
//! does (preamble, then frames) and checking what comes out — every string safe to show, a
//! request through the server's field checks, a report through the client's plausibility
//! check — and naming them as a client names a peer's first answer (`peer_kind`); must not do
//! I/O.

use super::one_line::assert_one_line;
use crate::record::plausibility::{check_report, ClientView};
use crate::vocab::text::is_safe;
use crate::wire::proto::{
    decode_body, encode_frame, frame_len, ConnKind, ControlMessage, Preamble, MAX_CONTROL_FRAME,
    PREAMBLE_LEN, PROTOCOL_VERSION,
};

/// What one control connection's bytes decoded to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ControlSummary {
    /// The first 16 bytes were a valid preamble.
    pub preamble_ok: bool,
    /// Frames that decoded into a message.
    pub messages: usize,
    /// Frames refused (bad length or body).
    pub errors: usize,
}

/// Decodes `data` as a control connection: a preamble, then frames until the bytes run out or a
/// frame header is refused (where the app closes the connection). The frames are decoded whatever
/// the preamble, so both decoders see every input.
///
/// Checks: a decoded preamble re-encodes to the same 16 bytes (the reserved byte aside); an
/// announced length is 1 to [`MAX_CONTROL_FRAME`]; a decoded message re-encodes and decodes to
/// itself; every error message is one line without control characters.
pub fn control_connection(data: &[u8]) -> ControlSummary {
    // The same bytes as a client sees an answer: whatever they are, they are named in one line,
    // and a complete input always gets a name.
    for complete in [false, true] {
        if let Some(kind) = crate::wire::peer_kind::classify(data, complete) {
            assert_one_line(&kind.explain("127.0.0.1:5310"));
        } else {
            assert!(!complete, "complete input left unclassified");
        }
    }
    let mut summary = ControlSummary::default();
    let mut rest = data;
    if let Some((head, tail)) = data.split_first_chunk::<PREAMBLE_LEN>() {
        rest = tail;
        match Preamble::decode(head) {
            Ok(preamble) => {
                let mut expected = *head;
                expected[7] = 0;
                assert_eq!(
                    preamble.encode(),
                    expected,
                    "preamble re-encodes differently"
                );
                assert_eq!(preamble.version, PROTOCOL_VERSION);
                assert_eq!(
                    preamble.kind,
                    ConnKind::from_byte(head[6]).unwrap_or(preamble.kind)
                );
                summary.preamble_ok = true;
            }
            Err(e) => assert_one_line(&e.to_string()),
        }
    }
    while let Some((header, tail)) = rest.split_first_chunk::<4>() {
        let len = match frame_len(*header) {
            Ok(len) => len,
            Err(e) => {
                assert_one_line(&e.to_string());
                summary.errors += 1;
                break;
            }
        };
        assert!(
            (1..=MAX_CONTROL_FRAME).contains(&len),
            "frame_len let {len} through"
        );
        let Some((body, tail)) = tail.split_at_checked(len) else {
            break; // the connection ends inside the frame
        };
        rest = tail;
        match decode_body(body) {
            Ok(msg) => {
                summary.messages += 1;
                check_what_a_peer_sent(&msg);
                let mut out = Vec::new();
                encode_frame(&msg, &mut out);
                let reencoded = &out[4..];
                // Re-encoding may lengthen a body (1 becomes 1.0 for a float field): only a body
                // within the limit must come back.
                if reencoded.len() <= MAX_CONTROL_FRAME {
                    assert_eq!(
                        frame_len([out[0], out[1], out[2], out[3]]),
                        Ok(reencoded.len())
                    );
                    assert_eq!(
                        decode_body(reencoded).as_ref(),
                        Ok(&msg),
                        "round trip changed the message"
                    );
                }
            }
            Err(e) => {
                assert_one_line(&e.to_string());
                summary.errors += 1;
            }
        }
    }
    summary
}

/// What the server and the client do with a decoded message a peer sent: its text is safe to
/// show, a request is checked field by field, a report against what a client may have counted;
/// every refusal is one clean line.
fn check_what_a_peer_sent(msg: &ControlMessage) {
    let texts: Vec<&str> = match msg {
        ControlMessage::Rejected { reason } | ControlMessage::Error { reason } => vec![reason],
        ControlMessage::Report(r) => r.abort_reason.iter().map(String::as_str).collect(),
        ControlMessage::SessionRequest(p) => {
            p.options.congestion.iter().map(String::as_str).collect()
        }
        _ => Vec::new(),
    };
    for text in texts {
        assert!(is_safe(text), "peer text not made safe: {text:?}");
    }
    match msg {
        ControlMessage::SessionRequest(p) => {
            for ipv6 in [false, true] {
                if let Err(e) = p.validate(ipv6) {
                    assert_one_line(&e.0);
                }
            }
        }
        ControlMessage::RrRequest(rr) => {
            for ipv6 in [false, true] {
                if let Err(e) = rr.validate(ipv6) {
                    assert_one_line(&e.0);
                }
            }
        }
        ControlMessage::Report(r) => {
            let (m, b) = (r.messages, r.bytes);
            for view in [
                ClientView::Sent {
                    messages: m,
                    bytes: b,
                },
                ClientView::Received {
                    messages: m,
                    bytes: b,
                },
                ClientView::Requests { sent: m / 2 },
            ] {
                for waited in [0, r.elapsed_ns, u64::MAX] {
                    if let Err(e) = check_report(view, waited, r) {
                        assert_one_line(&e.to_string());
                    }
                }
            }
        }
        _ => {}
    }
}
