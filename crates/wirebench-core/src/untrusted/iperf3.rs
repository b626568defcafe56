//! Harnesses for iperf3's formats: owns feeding arbitrary control-connection bytes (state bytes,
//! cookies, JSON documents) and UDP datagrams to the iperf3 decoders and checking the results;
//! must not do I/O.

use super::cursor::Cursor;
use super::one_line::assert_one_line;
use crate::wire::iperf3::{
    check_cookie, decode_json, encode_json, json_len, make_cookie, udp_header_len, State,
    TestParams, TestResults, UdpHeader, UdpReceiver, COOKIE_LEN, MAX_PARALLEL, MAX_TCP_BLOCK,
    MAX_UDP_BLOCK,
};

/// `data` is a selector byte, then bytes an iperf3 peer sends on a control connection:
/// 0 = state bytes, 1 = a 37-byte cookie (and 36 bytes to make one from), otherwise a
/// length-prefixed JSON document, decoded as both test parameters and results.
///
/// Checks: a known state byte re-encodes to itself; a cookie we make passes the check and a cookie
/// that passes is 36 printable bytes and a NUL; an accepted length is 1 to 1 MiB; accepted
/// parameters plan a test within the documented limits; decoded documents re-encode and decode
/// to themselves; results' totals do not overflow; every error is one line.
pub fn iperf3_control(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector {
        0 => {
            for &b in rest {
                match State::from_byte(b) {
                    Ok(state) => assert_eq!(state.to_byte(), b),
                    Err(e) => assert_one_line(&e.to_string()),
                }
            }
        }
        1 => {
            let mut input = Cursor::new(rest);
            if let Ok(cookie) = <[u8; COOKIE_LEN]>::try_from(input.bytes(COOKIE_LEN)) {
                match check_cookie(&cookie) {
                    Ok(()) => assert!(
                        cookie[COOKIE_LEN - 1] == 0
                            && cookie[..COOKIE_LEN - 1].iter().all(u8::is_ascii_graphic)
                    ),
                    Err(e) => assert_one_line(&e.to_string()),
                }
            }
            if let Ok(random) = <[u8; COOKIE_LEN - 1]>::try_from(input.bytes(COOKIE_LEN - 1)) {
                assert_eq!(check_cookie(&make_cookie(&random)), Ok(()));
            }
        }
        _ => json_document(rest),
    }
}

/// A length prefix and the JSON text after it.
fn json_document(data: &[u8]) {
    let Some((prefix, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    match json_len(*prefix) {
        Ok(len) => assert!((1..=1 << 20).contains(&len), "json_len let {len} through"),
        Err(e) => assert_one_line(&e.to_string()),
    }
    // Whatever the prefix said, the text is decoded too: the decoder must take anything.
    match decode_json::<TestParams>(rest) {
        Ok(params) => {
            check_plan(&params);
            let again: TestParams = round_trip(&params);
            assert_eq!(again, params, "test parameters changed in a round trip");
        }
        Err(e) => assert_one_line(&e.to_string()),
    }
    match decode_json::<TestResults>(rest) {
        Ok(results) => {
            let _ = (
                results.total_bytes(),
                results.total_packets(),
                results.total_errors(),
            );
            let duration = results.duration_s();
            assert!(duration >= 0.0 || duration.is_nan());
            let again: TestResults = round_trip(&results);
            assert_eq!(again, results, "test results changed in a round trip");
        }
        Err(e) => assert_one_line(&e.to_string()),
    }
}

/// A plan is refused with a one-line reason or stays within the limits the server enforces.
fn check_plan(params: &TestParams) {
    match params.plan() {
        Ok(plan) => {
            assert!((1..=MAX_PARALLEL).contains(&plan.parallel));
            let max = if plan.udp {
                MAX_UDP_BLOCK
            } else {
                MAX_TCP_BLOCK
            };
            assert!(plan.len >= 1 && plan.len <= max, "len {}", plan.len);
            if plan.udp {
                assert!(plan.len as usize >= udp_header_len(plan.counters_64bit));
            }
            assert!(plan.time_s > 0);
            assert!(!(plan.bytes.is_some() && plan.blocks.is_some()));
            assert!(!(plan.bidir && plan.reverse));
            assert!(plan.streams() <= 2 * MAX_PARALLEL);
            // A congestion control's name goes into a setsockopt and into output: a word.
            if let Some(cc) = &plan.congestion {
                assert!(
                    cc.len() < 16 && cc.bytes().all(|b| b.is_ascii_graphic()),
                    "{cc:?}"
                );
            }
        }
        Err(e) => assert_one_line(&e.to_string()),
    }
}

/// Encodes a document as we would send it and decodes it back.
fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) -> T {
    let framed = match encode_json(value) {
        Ok(framed) => framed,
        Err(e) => panic!("could not encode a decoded document: {e}"),
    };
    let Some((prefix, text)) = framed.split_first_chunk::<4>() else {
        panic!("encoded document without its length");
    };
    assert_eq!(json_len(*prefix), Ok(text.len()));
    match decode_json(text) {
        Ok(again) => again,
        Err(e) => panic!("could not decode what we encoded: {e}"),
    }
}

/// `data` is a flags byte (bit 0: 64-bit counters), then datagrams, each a `len u8`, that many
/// bytes and a `u16` arrival gap in µs, into one stream's [`UdpReceiver`].
///
/// Checks: a decoded header re-encodes to its bytes; the receiver's counts add up (datagrams,
/// bytes, highest count) and its jitter is a finite, non-negative number of seconds.
pub fn iperf3_udp(data: &[u8]) -> UdpReceiver {
    let mut input = Cursor::new(data);
    let counters_64bit = input.u8() & 1 == 1;
    let header_len = udp_header_len(counters_64bit);
    let mut receiver = UdpReceiver::default();
    let mut arrival_s = 0.0;
    let (mut datagrams, mut bytes, mut highest) = (0u64, 0u64, 0u64);
    while !input.is_empty() {
        let len = usize::from(input.u8());
        let datagram = input.bytes(len);
        arrival_s += f64::from(input.u16()) / 1e6;
        match UdpHeader::decode(datagram, counters_64bit) {
            Ok(header) => {
                let mut out = [0u8; 16];
                assert_eq!(header.encode(counters_64bit, &mut out), Some(header_len));
                assert_eq!(out[..header_len], datagram[..header_len]);
                receiver.on_datagram(&header, datagram.len(), arrival_s);
                datagrams += 1;
                bytes += datagram.len() as u64;
                highest = highest.max(header.count);
            }
            Err(e) => {
                assert!(datagram.len() < header_len);
                assert_one_line(&e.to_string());
            }
        }
    }
    assert_eq!(receiver.datagrams, datagrams);
    assert_eq!(receiver.bytes, bytes);
    assert_eq!(receiver.highest, highest);
    assert!(receiver.out_of_order <= datagrams);
    assert!(receiver.lost <= highest);
    assert!(
        receiver.jitter_s.is_finite() && receiver.jitter_s >= 0.0,
        "jitter {}",
        receiver.jitter_s
    );
    receiver
}
