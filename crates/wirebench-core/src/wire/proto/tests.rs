//! Exact bytes and JSON shapes of the control protocol, and its limits.

use super::*;

fn params() -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol: Protocol::Udp,
        mechanism: Mechanism::StopAndWait,
        msg_size: 1200,
        total_bytes: 1_000_000,
        rto_us: Some(5_000),
        rate_bps: None,
        grace_us: 250_000,
        options: DataPathOptions::default(),
        interval_us: None,
        reverse: false,
    }
}

fn round_trip(msg: &ControlMessage) -> ControlMessage {
    let mut out = Vec::new();
    encode_frame(msg, &mut out);
    let len = frame_len([out[0], out[1], out[2], out[3]]).unwrap();
    assert_eq!(len, out.len() - 4);
    decode_body(&out[4..]).unwrap()
}

#[test]
fn preamble_exact_bytes() {
    assert_eq!(
        Preamble::control().encode(),
        [b'W', b'B', b'N', b'C', 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        Preamble::data(0x0102_0304, 0xA0B0_C0D0).encode(),
        [b'W', b'B', b'N', b'C', 0, 2, 2, 0, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0]
    );
}

#[test]
fn preamble_round_trip() {
    for preamble in [
        Preamble::control(),
        Preamble::data(7, 99),
        Preamble::data(u32::MAX, u32::MAX),
    ] {
        assert_eq!(Preamble::decode(&preamble.encode()), Ok(preamble));
    }
}

#[test]
fn preamble_errors() {
    let http = *b"GET / HTTP/1.1\r\n";
    assert_eq!(
        Preamble::decode(&http),
        Err(ProtoError::BadMagic { found: *b"GET " })
    );
    assert_eq!(
        Preamble::decode(&http).unwrap_err().to_string(),
        "peer is not a wirebench endpoint (bad magic \"GET \")"
    );
    assert_eq!(
        ProtoError::BadMagic {
            found: [0, 0xFF, b'a', b'"']
        }
        .to_string(),
        "peer is not a wirebench endpoint (bad magic \"\\x00\\xffa\\\"\")"
    );

    let mut future = Preamble::control().encode();
    future[5] = 7;
    assert_eq!(
        Preamble::decode(&future),
        Err(ProtoError::UnsupportedVersion {
            found: 7,
            supported: 2
        })
    );
    assert_eq!(
        Preamble::decode(&future).unwrap_err().to_string(),
        "peer speaks protocol version 7, this wirebench speaks 2"
    );

    let mut odd = Preamble::control().encode();
    odd[6] = 3;
    assert_eq!(Preamble::decode(&odd), Err(ProtoError::BadKind(3)));
}

#[test]
fn frame_exact_bytes() {
    let mut out = vec![0xFF];
    encode_frame(
        &ControlMessage::Accepted {
            session: 3,
            token: 4,
            quic_cert: None,
            clock: None,
        },
        &mut out,
    );
    let body = br#"{"type":"accepted","session":3,"token":4}"#;
    assert_eq!(out[0], 0xFF, "existing bytes are kept");
    assert_eq!(out[1..5], [0, 0, 0, body.len() as u8]);
    assert_eq!(&out[5..], body);
}

#[test]
fn messages_round_trip() {
    let report = ServerReport {
        protocol: Protocol::Quic,
        messages: 10,
        bytes: 12_000,
        aborted: true,
        abort_reason: Some("client went away".into()),
        ..ServerReport::default()
    };
    for msg in [
        ControlMessage::SessionRequest(params()),
        ControlMessage::Accepted {
            session: 1,
            token: 0xDEAD_BEEF,
            quic_cert: None,
            clock: None,
        },
        ControlMessage::Accepted {
            session: 2,
            token: 5,
            quic_cert: Some(vec![0x30, 0x82, 0, 255]),
            clock: None,
        },
        ControlMessage::Rejected {
            reason: "busy".into(),
        },
        ControlMessage::SenderDone {
            messages_sent: 834,
            bytes_sent: 1_000_000,
        },
        ControlMessage::Report(Box::new(report)),
        ControlMessage::Error {
            reason: "unexpected message".into(),
        },
        ControlMessage::RrRequest(RrParams {
            protocol: Protocol::Udp,
            request: 64,
            response: 512,
            flows: 2,
            concurrency: 10,
            new_connection: false,
            stamps: false,
        }),
    ] {
        assert_eq!(round_trip(&msg), msg);
    }
}

#[test]
fn session_request_json_shape() {
    let json = serde_json::to_string(&ControlMessage::SessionRequest(params())).unwrap();
    assert_eq!(
        json,
        r#"{"type":"session_request","protocol":"udp","mechanism":"saw","msg_size":1200,"total_bytes":1000000,"rto_us":5000,"rate_bps":null,"grace_us":250000,"options":{"window":null,"congestion":null,"nodelay":false,"busy_poll":false}}"#
    );
    // A request from before the options existed still decodes, with default options.
    let old = br#"{"type":"session_request","protocol":"udp","mechanism":"saw","msg_size":1200,"total_bytes":1000000,"rto_us":5000,"rate_bps":null,"grace_us":250000}"#;
    assert_eq!(
        decode_body(old).unwrap(),
        ControlMessage::SessionRequest(params())
    );
}

#[test]
fn receipts_are_asked_for_in_the_options_and_sent_as_one_small_frame() {
    let mut p = params();
    p.options.receipt_us = Some(20_000);
    let json = serde_json::to_string(&ControlMessage::SessionRequest(p.clone())).unwrap();
    assert!(
        json.contains(r#""busy_poll":false,"receipt_us":20000}"#),
        "{json}"
    );
    assert_eq!(
        round_trip(&ControlMessage::SessionRequest(p)),
        ControlMessage::SessionRequest({
            let mut q = params();
            q.options.receipt_us = Some(20_000);
            q
        })
    );
    let receipt = ControlMessage::Receipt {
        messages: 9_990,
        bytes: 14_705_280,
        next_seq: 10_000,
    };
    assert_eq!(
        serde_json::to_string(&receipt).unwrap(),
        r#"{"type":"receipt","messages":9990,"bytes":14705280,"next_seq":10000}"#
    );
    assert_eq!(round_trip(&receipt), receipt);
}

#[test]
fn accepted_json_shape() {
    let with_cert = ControlMessage::Accepted {
        session: 2,
        token: 5,
        quic_cert: Some(vec![48, 130]),
        clock: None,
    };
    assert_eq!(
        serde_json::to_string(&with_cert).unwrap(),
        r#"{"type":"accepted","session":2,"token":5,"quic_cert":[48,130]}"#
    );
    // An absent certificate is omitted, and a peer that omits it means None.
    assert_eq!(
        decode_body(br#"{"type":"accepted","session":2,"token":5}"#),
        Ok(ControlMessage::Accepted {
            session: 2,
            token: 5,
            quic_cert: None,
            clock: None,
        })
    );
}

#[test]
fn rr_request_json_shape() {
    let msg = ControlMessage::RrRequest(RrParams {
        protocol: Protocol::Tcp,
        request: 1,
        response: 2,
        flows: 3,
        concurrency: 4,
        new_connection: true,
        stamps: false,
    });
    assert_eq!(
        serde_json::to_string(&msg).unwrap(),
        r#"{"type":"rr_request","protocol":"tcp","request":1,"response":2,"flows":3,"concurrency":4,"new_connection":true}"#
    );
    // new_connection may be left out.
    assert_eq!(
        decode_body(br#"{"type":"rr_request","protocol":"tcp","request":1,"response":2,"flows":3,"concurrency":4}"#),
        Ok(ControlMessage::RrRequest(RrParams {
            protocol: Protocol::Tcp,
            request: 1,
            response: 2,
            flows: 3,
            concurrency: 4,
            new_connection: false,
        stamps: false,
    }))
    );
}

#[test]
fn auth_messages_json_shape() {
    let n = "ab".repeat(32);
    let cases = [
        (
            ControlMessage::AuthChallenge { nonce: n.clone() },
            format!(r#"{{"type":"auth_challenge","nonce":"{n}"}}"#),
        ),
        (
            ControlMessage::AuthResponse {
                nonce: n.clone(),
                mac: "01".repeat(32),
            },
            format!(
                r#"{{"type":"auth_response","nonce":"{n}","mac":"{}"}}"#,
                "01".repeat(32)
            ),
        ),
        (
            ControlMessage::AuthOk { mac: n.clone() },
            format!(r#"{{"type":"auth_ok","mac":"{n}"}}"#),
        ),
    ];
    for (msg, json) in cases {
        assert_eq!(serde_json::to_string(&msg).unwrap(), json);
        assert_eq!(round_trip(&msg), msg);
    }
}

#[test]
fn frame_length_limits() {
    let over = |len, limit| Err(ProtoError::Oversized { len, limit });
    assert_eq!(frame_len([0, 0, 0, 1]), Ok(1));
    assert_eq!(frame_len([0, 1, 0, 0]), Ok(MAX_CONTROL_FRAME));
    assert_eq!(frame_len([0, 1, 0, 1]), over(65_537, MAX_CONTROL_FRAME));
    assert_eq!(frame_len([0xFF; 4]), over(4_294_967_295, MAX_CONTROL_FRAME));
    assert!(matches!(frame_len([0; 4]), Err(ProtoError::Malformed(_))));
    assert_eq!(
        ProtoError::Oversized {
            len: 900_000,
            limit: MAX_CONTROL_FRAME
        }
        .to_string(),
        "control message of 900000 bytes exceeds the 65536-byte limit"
    );
    // A report reader accepts more, never more than MAX_REPORT_FRAME.
    assert_eq!(frame_len_within([0, 1, 0, 1], MAX_REPORT_FRAME), Ok(65_537));
    assert_eq!(
        frame_len_within([0xFF; 4], usize::MAX),
        over(4_294_967_295, MAX_REPORT_FRAME)
    );
    assert_eq!(
        decode_body(&vec![b' '; MAX_REPORT_FRAME + 1]),
        Err(ProtoError::Oversized {
            len: MAX_REPORT_FRAME + 1,
            limit: MAX_REPORT_FRAME
        })
    );
}

#[test]
fn peer_text_in_messages_is_made_safe_when_decoded() {
    let body = br#"{"type":"report","protocol":"tcp","mechanism":"stream","messages":0,"bytes":0,"read_calls":0,"elapsed_ns":0,"idle_after_last_ns":0,"lost":0,"duplicates":0,"out_of_order":0,"acks_sent":0,"aborted":true,"abort_reason":"\u001b[2Jevil\nline two"}"#;
    let ControlMessage::Report(r) = decode_body(body).unwrap() else {
        panic!("a report");
    };
    assert_eq!(r.abort_reason.as_deref(), Some("\\u{1b}[2Jevil\\nline two"));
    let long = format!(
        r#"{{"type":"rejected","reason":"{}"}}"#,
        "z".repeat(100_000)
    );
    let ControlMessage::Rejected { reason } = decode_body(long.as_bytes()).unwrap() else {
        panic!("a refusal");
    };
    assert!(crate::vocab::text::is_safe(&reason));
    assert!(reason.len() < 600, "bounded: {}", reason.len());
}

#[test]
fn malformed_bodies_cannot_inject_control_characters() {
    // Found by fuzzing: serde quotes an unknown variant verbatim.
    let err = decode_body(br#"{"type":"lau\u007fch\n\u001b[31m"}"#).unwrap_err();
    let text = err.to_string();
    assert!(!text.chars().any(char::is_control), "{text:?}");
    assert!(
        text.contains(r"unknown variant `lau\u{7f}ch\n\u{1b}[31m`"),
        "{text}"
    );
}

#[test]
fn malformed_bodies() {
    for body in [
        &b""[..],
        b"not json",
        br#"{"type":"launch"}"#,
        br#"{"type":"accepted","session":1}"#,
    ] {
        let err = decode_body(body).unwrap_err();
        assert!(matches!(err, ProtoError::Malformed(_)), "{err:?}");
        assert!(
            err.to_string().starts_with("malformed control message: "),
            "{err}"
        );
    }
}

#[test]
fn duration_is_omitted_when_absent_and_read_when_present() {
    let plain = params();
    let json = serde_json::to_string(&plain).unwrap();
    assert!(!json.contains("duration_us"), "{json}");
    let back: SessionParams = serde_json::from_str(&json).unwrap();
    assert!(!back.timed());
    let timed = SessionParams {
        duration_us: Some(2_000_000),
        total_bytes: UNBOUNDED_TOTAL,
        ..params()
    };
    let back: SessionParams =
        serde_json::from_str(&serde_json::to_string(&timed).unwrap()).unwrap();
    assert_eq!(back, timed);
    assert!(back.timed());
    assert!(
        i64::try_from(UNBOUNDED_TOTAL).is_ok(),
        "fits the store's integers"
    );
}

#[test]
fn a_session_plan_gives_its_messages_its_deadline_and_whole_messages() {
    let mut p = params();
    p.total_bytes = 2_500;
    p.msg_size = 1_000;
    assert_eq!(p.messages().count(), 3);
    assert_eq!(p.messages().len_of(2), 500);
    assert_eq!(p.whole_messages(2_999), 2);
    let start = std::time::Instant::now();
    p.duration_us = None;
    assert_eq!(
        p.deadline(start),
        None,
        "a session by its total has no deadline"
    );
    p.duration_us = Some(1_500_000);
    assert_eq!(
        p.deadline(start),
        Some(start + std::time::Duration::from_micros(1_500_000))
    );
}
