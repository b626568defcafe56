//! Unit tests of iperf3's wire formats against bytes Debian's iperf3 3.12 sent and accepted.

use super::*;

#[test]
fn state_bytes_match_the_protocol() {
    let table: [(State, u8); 13] = [
        (State::TestStart, 1),
        (State::TestRunning, 2),
        (State::TestEnd, 4),
        (State::ParamExchange, 9),
        (State::CreateStreams, 10),
        (State::ServerTerminate, 11),
        (State::ClientTerminate, 12),
        (State::ExchangeResults, 13),
        (State::DisplayResults, 14),
        (State::IperfStart, 15),
        (State::IperfDone, 16),
        (State::AccessDenied, 0xff),
        (State::ServerError, 0xfe),
    ];
    for (state, byte) in table {
        assert_eq!(state.to_byte(), byte);
        assert_eq!(State::from_byte(byte), Ok(state));
    }
    assert_eq!(State::from_byte(3), Err(Iperf3Error::UnknownState(3)));
    assert_eq!(State::from_byte(0x80), Err(Iperf3Error::UnknownState(-128)));
}

#[test]
fn totals_of_a_peers_results_saturate() {
    // Found with the iperf3_control harness: a peer's figures summed past u64::MAX panicked.
    let results: TestResults = decode_json(
        br#"{"streams":[{"id":1,"bytes":18446744073709551615,"packets":9223372036854775807,"errors":9223372036854775807},{"id":3,"bytes":1,"packets":9223372036854775807,"errors":9223372036854775807}]}"#,
    )
    .unwrap();
    assert_eq!(results.total_bytes(), u64::MAX);
    assert_eq!(results.total_packets(), u64::MAX - 1);
    assert_eq!(results.total_errors(), u64::MAX - 1);
    let three: TestResults = decode_json(
        br#"{"streams":[{"id":1,"bytes":1,"packets":9223372036854775807},{"id":3,"bytes":2,"packets":9223372036854775807},{"id":4,"bytes":3,"packets":2}]}"#,
    )
    .unwrap();
    assert_eq!(three.total_bytes(), 6);
    assert_eq!(three.total_packets(), u64::MAX);
}

#[test]
fn cookies_are_36_base32_characters_and_a_nul() {
    let cookie = make_cookie(&[0xff; 36]);
    assert_eq!(cookie.len(), 37);
    assert_eq!(cookie[36], 0);
    assert!(cookie[..36].iter().all(|b| COOKIE_ALPHABET.contains(b)));
    assert_eq!(check_cookie(&cookie), Ok(()));
    let mut bad = cookie;
    bad[36] = b'x';
    assert_eq!(check_cookie(&bad), Err(Iperf3Error::BadCookie));
    let mut bad = cookie;
    bad[3] = 0;
    assert_eq!(check_cookie(&bad), Err(Iperf3Error::BadCookie));
    // A real iperf3 3.12 cookie, as seen on the wire.
    let real: [u8; 37] = *b"aaz7gfymuwuzraqthz7lnhp2l2aqmt56jobi\0";
    assert_eq!(check_cookie(&real), Ok(()));
}

#[test]
fn json_documents_are_length_prefixed_big_endian() {
    let framed = encode_json(&serde_json::json!({"a": 1})).unwrap();
    assert_eq!(&framed[..4], &[0, 0, 0, 7]);
    assert_eq!(&framed[4..], br#"{"a":1}"#);
    assert_eq!(json_len([0, 0, 1, 3]), Ok(259));
    assert_eq!(json_len([0, 0, 0, 0]), Err(Iperf3Error::JsonLength(0)));
    assert_eq!(
        json_len([0xff, 0, 0, 0]),
        Err(Iperf3Error::JsonLength(0xff00_0000))
    );
}

#[test]
fn real_client_parameters_parse_and_plan() {
    // Sent by iperf3 3.12 for `-u -R -P 2 -n 30000 -l 1000 -b 10M`.
    let text = br#"{"udp":true,"omit":0,"time":0,"num":30000,"blockcount":0,"parallel":2,
        "reverse":true,"len":1000,"bandwidth":10000000,"pacing_timer":1000,"client_version":"3.12"}"#;
    let params: TestParams = decode_json(text).unwrap();
    let plan = params.plan().unwrap();
    assert_eq!(
        plan,
        TestPlan {
            udp: true,
            reverse: true,
            parallel: 2,
            len: 1000,
            bytes: Some(30000),
            blocks: None,
            time_s: 10,
            rate_bps: 10_000_000,
            counters_64bit: false,
            bidir: false,
            omit_s: 0,
            fq_rate_bps: 0,
            window: None,
            mss: None,
            nodelay: false,
            tos: None,
            congestion: None,
            server_output: false,
        }
    );
    assert_eq!((plan.streams(), plan.receiving_streams()), (2, 0));
    let tcp: TestParams = decode_json(
        br#"{"tcp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#,
    )
    .unwrap();
    let plan = tcp.plan().unwrap();
    assert!(!plan.udp && !plan.reverse);
    assert_eq!((plan.time_s, plan.bytes, plan.len), (3, None, 131072));
}

#[test]
fn socket_options_omit_and_bidir_are_planned() {
    // Sent by iperf3 3.21 for `-P 2 --bidir -O 1 -w 8M -M 1000 -C reno -N -S 16 --fq-rate 5m
    // --get-server-output -t 2`.
    let text = br#"{"tcp":true,"omit":1,"time":2,"num":0,"blockcount":0,"MSS":1000,
        "nodelay":true,"parallel":2,"bidirectional":true,"window":8388608,"len":131072,
        "fqrate":5000000,"pacing_timer":1000,"TOS":16,"congestion":"reno",
        "get_server_output":1,"client_version":"3.21+"}"#;
    let plan = decode_json::<TestParams>(text).unwrap().plan().unwrap();
    assert!(plan.bidir && !plan.reverse && plan.nodelay && plan.server_output);
    assert_eq!(
        (plan.omit_s, plan.time_s, plan.fq_rate_bps),
        (1, 2, 5_000_000)
    );
    assert_eq!(
        (plan.window, plan.mss, plan.tos),
        (Some(8 << 20), Some(1000), Some(16))
    );
    assert_eq!(plan.congestion.as_deref(), Some("reno"));
    // The client's two sending streams come first; the server sends on the last two.
    assert_eq!((plan.streams(), plan.receiving_streams()), (4, 2));
    let sends: Vec<bool> = (0..4).map(|i| plan.server_sends(i)).collect();
    assert_eq!(sends, [false, false, true, true]);
}

#[test]
fn unsupported_parameters_say_why() {
    let base = TestParams {
        tcp: true,
        parallel: 1,
        len: 1000,
        ..TestParams::default()
    };
    let mut p = base.clone();
    p.bidirectional = true;
    p.reverse = true;
    assert!(matches!(p.plan(), Err(Iperf3Error::Unsupported(m)) if m.contains("bidir")));
    let mut p = base.clone();
    p.sctp = true;
    p.tcp = false;
    assert_eq!(p.plan(), Err(Iperf3Error::NoSctp));
    assert_eq!(Iperf3Error::NoSctp.errno(), errno::NO_SCTP);
    for (field, text) in [
        ("omit", "-O 601"),
        ("window", "-w 536870913"),
        ("MSS", "-M 32768"),
        ("TOS", "-S 256"),
    ] {
        let mut v = serde_json::to_value(&base).unwrap();
        let value: u64 = text.split(' ').nth(1).unwrap().parse().unwrap();
        v[field] = value.into();
        let p: TestParams = serde_json::from_value(v).unwrap();
        assert!(
            matches!(p.plan(), Err(Iperf3Error::Unsupported(m)) if m.starts_with(text)),
            "{field}"
        );
    }
    for name in ["", "reno;rm", "a-very-long-name-of-17", "cubic\n"] {
        let mut p = base.clone();
        p.congestion = Some(name.to_string());
        assert!(p.plan().is_err(), "{name:?}");
    }
    let mut p = base.clone();
    p.udp = true;
    assert!(p.plan().is_err());
    let mut p = base.clone();
    p.parallel = 129;
    assert!(p.plan().is_err());
    let mut p = base.clone();
    p.tcp = false;
    p.udp = true;
    p.len = 11;
    assert!(matches!(p.plan(), Err(Iperf3Error::Unsupported(m)) if m.contains("12 to 65507")));
    let mut p = base;
    p.other
        .insert("authtoken".into(), serde_json::Value::String("x".into()));
    assert!(p.plan().is_err());
}

#[test]
fn our_parameters_encode_as_iperf3_expects() {
    let params = TestParams {
        tcp: true,
        time: 0,
        num: 1000,
        parallel: 2,
        reverse: true,
        len: 100,
        ..TestParams::default()
    };
    let v: serde_json::Value = serde_json::from_slice(&encode_json(&params).unwrap()[4..]).unwrap();
    assert_eq!(v["tcp"], true);
    assert_eq!(v["reverse"], true);
    assert_eq!(v["num"], 1000);
    assert_eq!(v["parallel"], 2);
    assert_eq!(v["len"], 100);
    assert!(v.get("udp").is_none() && v.get("bandwidth").is_none());
}

#[test]
fn results_accept_iperf3s_number_spellings() {
    // From iperf3 3.12: -1 written as u64::MAX, as an integer or as a float.
    let text = br#"{"cpu_util_total":67.2,"cpu_util_user":0,"cpu_util_system":66.9,
        "sender_has_retransmits":18446744073709551615,"congestion_used":"bbr",
        "streams":[{"id":1,"bytes":1000000,"retransmits":1.8446744073709552e+19,"jitter":0,
        "errors":0,"packets":0,"start_time":0,"end_time":0.00057},
        {"id":3,"bytes":15000,"retransmits":0,"jitter":7.8e-06,"errors":2,"packets":15,
        "start_time":0,"end_time":0.0122}]}"#;
    let r: TestResults = decode_json(text).unwrap();
    assert_eq!(r.streams[1].omitted_packets, None);
    assert_eq!(r.sender_has_retransmits, -1);
    assert_eq!(r.streams[0].retransmits, -1);
    assert_eq!(r.total_bytes(), 1_015_000);
    assert_eq!(r.total_packets(), 15);
    assert_eq!(r.total_errors(), 2);
    assert_eq!(r.duration_s(), 0.0122);
    assert_eq!(r.congestion_used.as_deref(), Some("bbr"));
    assert!(decode_json::<TestResults>(b"{\"streams\":[{\"id\":\"x\",\"bytes\":1}]}").is_err());
    // A trailing NUL is tolerated.
    assert!(decode_json::<TestResults>(b"{}\0").is_ok());
}

#[test]
fn stream_ids_skip_two() {
    let ids: Vec<u32> = (0..4).map(stream_id).collect();
    assert_eq!(ids, [1, 3, 4, 5]);
}

#[test]
fn udp_header_round_trips_in_both_widths() {
    // The first datagram of a real iperf3 3.12 client: sec 410, usec 566250, count 1.
    let real = [0, 0, 1, 0x9a, 0, 8, 0xa3, 0xea, 0, 0, 0, 1, 0x47];
    let h = UdpHeader::decode(&real, false).unwrap();
    assert_eq!(
        h,
        UdpHeader {
            sec: 410,
            usec: 566_250,
            count: 1
        }
    );
    let mut buf = [0u8; 16];
    assert_eq!(h.encode(false, &mut buf), Some(12));
    assert_eq!(&buf[..12], &real[..12]);
    let big = UdpHeader {
        sec: 1,
        usec: 2,
        count: (7 << 32) | 9,
    };
    assert_eq!(big.encode(true, &mut buf), Some(16));
    assert_eq!(&buf[8..16], &[0, 0, 0, 7, 0, 0, 0, 9]);
    assert_eq!(UdpHeader::decode(&buf, true), Ok(big));
    assert_eq!(big.encode(true, &mut [0u8; 15]), None);
    assert_eq!(
        UdpHeader::decode(&buf[..11], false),
        Err(Iperf3Error::ShortDatagram(11))
    );
}

#[test]
fn udp_receiver_counts_loss_reordering_and_jitter() {
    let mut r = UdpReceiver::default();
    let at = |count: u64, sent_us: u32| UdpHeader {
        sec: 0,
        usec: sent_us,
        count,
    };
    // 1, 2, 5 (3 and 4 missing), then 3 arrives late.
    r.on_datagram(&at(1, 0), 100, 0.001);
    r.on_datagram(&at(2, 1000), 100, 0.002);
    r.on_datagram(&at(5, 4000), 100, 0.005);
    assert_eq!((r.highest, r.lost, r.out_of_order), (5, 2, 0));
    r.on_datagram(&at(3, 2000), 100, 0.0065);
    assert_eq!((r.highest, r.lost, r.out_of_order), (5, 1, 1));
    assert_eq!((r.datagrams, r.bytes), (4, 400));
    // Constant transit (1 ms) until the late one (4.5 ms): jitter = 3.5 ms / 16.
    assert!((r.jitter_s - 0.0035 / 16.0).abs() < 1e-12, "{}", r.jitter_s);
    // -O: the counts so far are left out, jitter starts again.
    r.mark_omitted();
    assert_eq!(r.jitter_s, 0.0);
    r.on_datagram(&at(7, 6000), 100, 0.007);
    let mark = r.mark();
    assert_eq!(
        (mark.datagrams, mark.bytes, mark.highest, mark.lost),
        (4, 400, 5, 1)
    );
    assert_eq!(
        (
            r.bytes_counted(),
            r.highest - mark.highest,
            r.lost - mark.lost
        ),
        (100, 2, 1)
    );
}

#[test]
fn connect_magic_is_what_iperf3_sends() {
    assert_eq!(UDP_CONNECT_MSG, [0x39, 0x38, 0x37, 0x36]);
    assert_eq!(UDP_CONNECT_REPLY, [0x36, 0x37, 0x38, 0x39]);
    assert_eq!(LEGACY_UDP_CONNECT_MSG, [0x15, 0xcd, 0x5b, 0x07]);
}
