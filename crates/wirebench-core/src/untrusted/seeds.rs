//! Seed inputs for the fuzz targets: owns building, with the real encoders, a few well-formed
//! inputs per target (and a few malformed ones) in each harness's input layout; must not do I/O
//! (the ignored test `write_seed_corpus` writes them under `fuzz/corpus/`).

use super::target::Target;
use crate::machine::seq::WINDOW;
use crate::vocab::counters::{CpuUsage, IntervalSample, StatsSource, TransportStats};
use crate::vocab::plan::{Mechanism, Protocol};
use crate::wire::datagram::{write_timestamp, Header, Kind, HEADER_LEN};
use crate::wire::iperf3::{
    encode_json, make_cookie, State, StreamResult, TestParams, TestResults, UdpHeader, COOKIE_LEN,
    UDP_CONNECT_MSG,
};
use crate::wire::proto::{
    encode_frame, ControlMessage, DataPathOptions, Preamble, RrParams, ServerReport, SessionParams,
};

/// Named seed inputs for `target`.
pub fn seeds(target: Target) -> Vec<(&'static str, Vec<u8>)> {
    match target {
        Target::Control => control(),
        Target::Datagram => datagram(),
        Target::SeqTracker => seq_tracker(),
        Target::Impair => impair(),
        Target::Iperf3Control => iperf3_control(),
        Target::Iperf3Udp => iperf3_udp(),
        Target::Dns => dns(),
        Target::Perf => perf(),
    }
}

/// DNS responses in the harness's layout (type byte, ID base, response), built with the
/// query encoder and edited into answers: a clean one, a truncated one, an answer with a TXT
/// record holding control characters, and garbage.
fn dns() -> Vec<(&'static str, Vec<u8>)> {
    let Ok(question) = crate::wire::dns::Question::new("example.org", "A") else {
        return Vec::new();
    };
    let mut query = Vec::new();
    question.encode_into(0x1234, &mut query);
    let mut response = query.clone();
    // QR=1, RD+RA, one answer: example.org A 192.0.2.1 (a pointer to the question's name).
    response[2] = 0x81;
    response[3] = 0x80;
    response[7] = 1;
    response.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
    let mut txt = response.clone();
    txt.truncate(query.len());
    // ... and a TXT record (type 16) whose text holds ESC, a newline and a NUL.
    txt.extend_from_slice(&[0xc0, 0x0c, 0, 16, 0, 1, 0, 0, 0, 60, 0, 9, 8]);
    txt.extend_from_slice(b"\x1b[2J\n\0x");
    let mut truncated = response.clone();
    truncated[2] |= 0x02;
    let framed = |rtype: u8, body: &[u8]| {
        let mut out = vec![rtype, 0x12, 0x34];
        out.extend_from_slice(body);
        out
    };
    vec![
        ("answer", framed(0, &response)),
        ("txt-control", framed(2, &txt)),
        ("truncated", framed(0, &truncated)),
        ("query-not-answer", framed(0, &query)),
        ("garbage", framed(3, b"\xff\xff\x00\x01 not dns")),
    ]
}

/// QUIC perf requests: 1 GiB asked whole, in pieces, and a stream that ends inside it.
fn perf() -> Vec<(&'static str, Vec<u8>)> {
    let mut upload = crate::wire::perf::encode_request(1 << 30).to_vec();
    upload.extend_from_slice(&[0x5a; 32]);
    vec![
        ("request-then-upload", upload),
        ("max", crate::wire::perf::encode_request(u64::MAX).to_vec()),
        ("short", vec![0, 0, 1]),
    ]
}

fn session_params() -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol: Protocol::Udp,
        mechanism: Mechanism::Stream,
        msg_size: 1200,
        total_bytes: 1_000_000,
        rto_us: Some(5_000),
        rate_bps: Some(100_000_000),
        grace_us: 250_000,
        options: DataPathOptions {
            window: Some(262_144),
            congestion: Some("cubic".into()),
            nodelay: true,
            busy_poll: false,
            receipt_us: Some(20_000),
            quic_mtu: None,
            mss: None,
            tos: None,
        },
        interval_us: Some(1_000_000),
        reverse: true,
    }
}

fn control() -> Vec<(&'static str, Vec<u8>)> {
    let frames = |preamble: Preamble, msgs: &[ControlMessage]| {
        let mut out = preamble.encode().to_vec();
        for msg in msgs {
            encode_frame(msg, &mut out);
        }
        out
    };
    let report = ServerReport {
        protocol: Protocol::Udp,
        mechanism: Mechanism::Stream,
        messages: 834,
        bytes: 1_000_000,
        read_calls: 840,
        elapsed_ns: 1_234_567,
        lost: 3,
        duplicates: 1,
        out_of_order: 2,
        jitter_us: Some(12.5),
        aborted: true,
        abort_reason: Some("client went away".into()),
        transport: Some(TransportStats {
            source: StatsSource::TcpInfo,
            packets_sent: 900,
            packets_retransmitted: 4,
            srtt_us: Some(80),
            ..TransportStats::default()
        }),
        cpu: Some(CpuUsage {
            user_us: 1,
            system_us: 2,
            shared_process: false,
        }),
        intervals: vec![IntervalSample {
            start_ns: 0,
            end_ns: 1_000_000_000,
            bytes: 1_000_000,
            lost: Some(3),
            retransmitted: None,
            tcp: None,
            jitter_ns: None,
        }],
        ..ServerReport::default()
    };
    let client = frames(
        Preamble::control(),
        &[
            ControlMessage::SessionRequest(session_params()),
            ControlMessage::SenderDone {
                messages_sent: 834,
                bytes_sent: 1_000_000,
            },
        ],
    );
    let rr = frames(
        Preamble::control(),
        &[ControlMessage::RrRequest(RrParams {
            protocol: Protocol::Tcp,
            request: 64,
            response: 512,
            flows: 2,
            concurrency: 4,
            new_connection: true,
            stamps: false,
        })],
    );
    let server = frames(
        Preamble::control(),
        &[
            ControlMessage::Accepted {
                session: 7,
                token: 0xDEAD_BEEF,
                quic_cert: Some(vec![0x30, 0x82, 1, 2]),
                clock: Some(crate::vocab::clock_offset::ClockInfo {
                    boot_id: Some("3f1c2a9e-7b4d-4e8a-9c1f-0d2e3b4a5c6d".into()),
                    sync_error_ns: Some(1_000),
                }),
            },
            ControlMessage::Report(Box::new(report)),
            ControlMessage::Rejected {
                reason: "busy".into(),
            },
            ControlMessage::Error {
                reason: "unexpected message".into(),
            },
        ],
    );
    let mut truncated = client.clone();
    truncated.truncate(client.len() - 10);
    let mut oversized = Preamble::control().encode().to_vec();
    oversized.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, b'{']);
    let mut bad_json = Preamble::data(1, 2).encode().to_vec();
    bad_json.extend_from_slice(&[0, 0, 0, 17]);
    bad_json.extend_from_slice(br#"{"type":"launch"}"#);
    vec![
        ("client-session", client),
        ("client-rr", rr),
        ("server-replies", server),
        ("data-preamble", Preamble::data(3, 4).encode().to_vec()),
        ("http-get", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("truncated", truncated),
        ("oversized", oversized),
        ("unknown-type", bad_json),
    ]
}

/// A session parameter block for [`super::data_datagrams`].
fn session_block(stop_and_wait: bool, session: u32, total: u64, msg_size: u16) -> Vec<u8> {
    let mut out = vec![u8::from(stop_and_wait)];
    out.extend_from_slice(&session.to_be_bytes());
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&msg_size.to_be_bytes());
    out
}

/// A raw datagram op for [`super::data_datagrams`]: op 0, length, bytes, arrival gap.
fn raw_datagram(out: &mut Vec<u8>, header: Header, payload_len: usize, sent_us: u32, gap: u16) {
    let mut datagram = vec![0u8; HEADER_LEN + payload_len];
    let _ = header.write_to(&mut datagram);
    write_timestamp(&mut datagram[HEADER_LEN..], sent_us);
    out.push(0);
    out.push(u8::try_from(datagram.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(&datagram[..datagram.len().min(255)]);
    out.extend_from_slice(&gap.to_be_bytes());
}

fn datagram() -> Vec<(&'static str, Vec<u8>)> {
    // 1000 bytes in messages of 100: seqs 0..10, each datagram 116 bytes.
    let mut stream = session_block(false, 9, 1000, 100);
    for (seq, gap) in [(0, 100), (1, 100), (3, 90), (2, 130), (3, 10), (9, 500)] {
        raw_datagram(
            &mut stream,
            Header::data(9, seq),
            100,
            seq as u32 * 100,
            gap,
        );
    }
    let mut saw = session_block(true, 5, 250, 100);
    for seq in [0, 0, 1, 2, 4] {
        raw_datagram(
            &mut saw,
            Header::data(5, seq),
            if seq == 2 { 50 } else { 100 },
            0,
            40,
        );
    }
    // Well-formed headers with far seqs (op 1 = synthesized), into a huge session.
    let mut jumps = session_block(false, 1, u64::MAX, 1);
    for seq in [0, WINDOW * 3, 5, u64::MAX - 1, 1 << 40] {
        jumps.push(1);
        jumps.extend_from_slice(&seq.to_be_bytes());
        jumps.push(0xAB);
        jumps.extend_from_slice(&7u16.to_be_bytes());
    }
    let mut junk = session_block(false, 9, 1000, 100);
    raw_datagram(&mut junk, Header::ack(9, 0), 0, 0, 0);
    raw_datagram(
        &mut junk,
        Header {
            kind: Kind::Hello,
            retransmit: true,
            session: 9,
            seq: 1,
        },
        0,
        0,
        0,
    );
    junk.extend_from_slice(&[0, 5, 0x40, 1, 2, 3, 4, 0, 0]);
    vec![
        ("stream-reordered", stream),
        ("saw-duplicates", saw),
        ("far-seqs", jumps),
        ("ack-hello-quic", junk),
    ]
}

fn seq_tracker() -> Vec<(&'static str, Vec<u8>)> {
    let mut in_order = Vec::new();
    for _ in 0..20 {
        in_order.extend_from_slice(&[1, 0, 1]);
    }
    let mut jumps = Vec::new();
    for (op, operand) in [
        (0u8, 5u64),
        (3, 0x80),
        (5, 0x80),
        (2, 1),
        (4, 0),
        (0, u64::MAX),
        (5, 0x7F),
        (0, 0),
    ] {
        jumps.push(op);
        match op {
            0 => jumps.extend_from_slice(&operand.to_be_bytes()),
            1 | 2 => jumps.extend_from_slice(&(operand as u16).to_be_bytes()),
            3 | 5 => jumps.push(operand as u8),
            _ => {}
        }
    }
    // Receives whose socket's counter moves (a host-dropped gap), stands still (a path gap),
    // says nothing, or belongs to another socket; one datagram arrives late after all.
    let mut marks = vec![6, 0x00, 1, 0, 1, 6, 0x00, 1, 0, 5, 6, 0x03, 1, 0, 4];
    marks.extend_from_slice(&[
        2, 0, 2, 6, 0x80, 1, 0, 9, 6, 0x43, 1, 0, 3, 6, 0x05, 1, 0, 1,
    ]);
    vec![
        ("in-order", in_order),
        ("jumps", jumps),
        ("drop-marks", marks),
    ]
}

fn impair() -> Vec<(&'static str, Vec<u8>)> {
    let ops = |out: &mut Vec<u8>| {
        for _ in 0..8 {
            out.extend_from_slice(&[0, 0x05, 0xDC]); // a 1500-byte packet
            out.extend_from_slice(&[2, 0, 0, 0x03, 0xE8]); // 1 ms passes
            out.push(1);
        }
        out.extend_from_slice(&[5, 0x01, 0xF4, 3, 1, 4, 0x40, 0]);
    };
    let mut text = vec![1, 0];
    let setting =
        b"loss=ge:5%/30%,delay=10ms,jitter=2ms,reorder=10%,duplicate=5%,rate=1Mbit,queue=3000";
    text[1] = setting.len() as u8;
    text.extend_from_slice(setting);
    text.extend_from_slice(&42u64.to_be_bytes());
    ops(&mut text);
    let mut structured = vec![0, 1, 0x20, 0]; // random loss of 1/8
    structured.extend_from_slice(&5_000u32.to_be_bytes()); // delay 5 ms
    structured.extend_from_slice(&1_000u32.to_be_bytes()); // jitter 1 ms
    structured.extend_from_slice(&[0x40, 0, 0x20, 0]); // reorder 1/4, duplicate 1/8
    structured.push(1);
    structured.extend_from_slice(&10_000_000u64.to_be_bytes()); // 10 Mbit/s
    structured.extend_from_slice(&4_000u32.to_be_bytes());
    structured.extend_from_slice(&7u64.to_be_bytes());
    ops(&mut structured);
    let mut stream = vec![3, 9];
    stream.extend_from_slice(b"rate=8kbit");
    stream.extend_from_slice(&1u64.to_be_bytes());
    ops(&mut stream);
    vec![
        ("text-setting", text),
        ("structured", structured),
        ("byte-stream", stream),
        ("bad-text", b"\x01\x08loss=5,x".to_vec()),
    ]
}

fn iperf3_control() -> Vec<(&'static str, Vec<u8>)> {
    let document = |json: Vec<u8>| {
        let mut out = vec![2];
        out.extend_from_slice(&json);
        out
    };
    let params = TestParams {
        udp: true,
        time: 10,
        parallel: 2,
        len: 1448,
        bandwidth: 1_000_000,
        pacing_timer: Some(1000),
        client_version: Some("3.12".into()),
        ..TestParams::default()
    };
    let results = TestResults {
        cpu_util_total: 1.5,
        sender_has_retransmits: -1,
        congestion_used: Some("cubic".into()),
        streams: vec![StreamResult {
            id: 1,
            bytes: 1_000_000,
            retransmits: -1,
            jitter: 0.0001,
            errors: 2,
            packets: 700,
            start_time: 0.0,
            end_time: 10.0,
            ..StreamResult::default()
        }],
        ..TestResults::default()
    };
    let mut states = vec![0];
    for s in [
        State::ParamExchange,
        State::CreateStreams,
        State::TestStart,
        State::TestRunning,
        State::TestEnd,
        State::ExchangeResults,
        State::DisplayResults,
        State::IperfDone,
        State::AccessDenied,
        State::ServerError,
    ] {
        states.push(s.to_byte());
    }
    states.extend_from_slice(&[3, 0x80]);
    let mut cookie = vec![1];
    cookie.extend_from_slice(&make_cookie(&[7; COOKIE_LEN - 1]));
    cookie.extend_from_slice(&[0xFF; COOKIE_LEN - 1]);
    let mut cjson = br#"{"tcp":true,"omit":0,"time":0,"num":1e6,"blockcount":0,"parallel":1,"len":131072,"bandwidth":18446744073709551615,"pacing_timer":1000,"client_version":"3.12","authtoken":"x"}"#.to_vec();
    cjson.push(0);
    let mut cjson_doc = (cjson.len() as u32).to_be_bytes().to_vec();
    cjson_doc.extend_from_slice(&cjson);
    vec![
        ("states", states),
        ("cookie", cookie),
        ("params", document(encode_json(&params).unwrap_or_default())),
        (
            "results",
            document(encode_json(&results).unwrap_or_default()),
        ),
        ("cjson-params", document(cjson_doc)),
        ("bad-length", vec![2, 0xFF, 0xFF, 0xFF, 0xFF, b'{', b'}']),
        // iperf3 writes -1 as u64::MAX (and cJSON large integers as floats).
        ("results-minus-one", document(framed(br#"{"cpu_util_total":1,"sender_has_retransmits":18446744073709551615,"streams":[{"id":1,"bytes":9.2e18,"retransmits":18446744073709551615,"jitter":0,"errors":-1,"packets":18446744073709551615,"start_time":0,"end_time":1e300}]}"#))),
    ]
}

/// A JSON text with its 4-byte length in front, as iperf3 sends it.
fn framed(json: &[u8]) -> Vec<u8> {
    let mut out = (json.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(json);
    out
}

fn iperf3_udp() -> Vec<(&'static str, Vec<u8>)> {
    let stream = |counters_64bit: bool, counts: &[u64]| {
        let mut out = vec![u8::from(counters_64bit)];
        for (i, &count) in counts.iter().enumerate() {
            let mut datagram = [0u8; 64];
            let header = UdpHeader {
                sec: 1_700_000_000,
                usec: (i as u32 * 1000) % 1_000_000,
                count,
            };
            let _ = header.encode(counters_64bit, &mut datagram);
            out.push(64);
            out.extend_from_slice(&datagram);
            out.extend_from_slice(&1000u16.to_be_bytes());
        }
        out
    };
    let mut connect = vec![0, 4];
    connect.extend_from_slice(&UDP_CONNECT_MSG);
    connect.extend_from_slice(&[0, 0, 3, 1, 2, 3]);
    vec![
        ("counters32", stream(false, &[1, 2, 4, 3, 3, 7])),
        ("counters64", stream(true, &[1, 1 << 40, 2, u64::MAX])),
        ("connect-and-short", connect),
    ]
}
