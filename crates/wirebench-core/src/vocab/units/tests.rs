//! Unit tests of the units: parsing every accepted spelling, refusing the rest with the remedy, and
//! formatting.

use super::*;

#[test]
fn rate_units_follow_iperf3s_letters() {
    let m: RateUnit = "m".parse().unwrap();
    assert_eq!(m.format(812_400_000.0), "812.40 Mbit/s");
    let big_m: RateUnit = "M".parse().unwrap();
    assert_eq!(big_m.format(8.0 * 1024.0 * 1024.0 * 3.0), "3.00 MiB/s");
    assert_eq!("g".parse::<RateUnit>().unwrap().label(), "Gbit/s");
    assert_eq!("K".parse::<RateUnit>().unwrap().label(), "KiB/s");
    assert!("x"
        .parse::<RateUnit>()
        .unwrap_err()
        .to_string()
        .contains("iperf3's -f"));
}

fn size(s: &str) -> Result<u64, UnitError> {
    s.parse::<ByteSize>().map(|b| b.0)
}

fn rate(s: &str) -> Result<u64, UnitError> {
    s.parse::<BitRate>().map(|b| b.0)
}

#[test]
fn sizes_plain_and_binary() {
    assert_eq!(size("0").unwrap(), 0);
    assert_eq!(size("1024").unwrap(), 1024);
    assert_eq!(size("1024B").unwrap(), 1024);
    assert_eq!(size("64K").unwrap(), 65_536);
    assert_eq!(size("64k").unwrap(), 65_536);
    assert_eq!(size("64KiB").unwrap(), 65_536);
    assert_eq!(size("500MiB").unwrap(), 524_288_000);
    assert_eq!(size("2m").unwrap(), 2_097_152);
    assert_eq!(size("1G").unwrap(), 1_073_741_824);
    assert_eq!(size("1g").unwrap(), 1_073_741_824);
    assert_eq!(size("1GiB").unwrap(), 1_073_741_824);
    assert_eq!(size("1T").unwrap(), 1_099_511_627_776);
    assert_eq!(size("1TiB").unwrap(), 1_099_511_627_776);
}

#[test]
fn sizes_decimal() {
    assert_eq!(size("1kB").unwrap(), 1_000);
    assert_eq!(size("1KB").unwrap(), 1_000);
    assert_eq!(size("500MB").unwrap(), 500_000_000);
    assert_eq!(size("2GB").unwrap(), 2_000_000_000);
    assert_eq!(size("3TB").unwrap(), 3_000_000_000_000);
}

#[test]
fn sizes_fractions_whitespace_and_limits() {
    assert_eq!(size("1.5KiB").unwrap(), 1536);
    assert_eq!(size("0.5K").unwrap(), 512);
    assert_eq!(size(".25MiB").unwrap(), 262_144);
    assert_eq!(size("1.000B").unwrap(), 1);
    assert_eq!(size("  64 KiB ").unwrap(), 65_536);
    assert_eq!(size("18446744073709551615").unwrap(), u64::MAX);
    assert_eq!(
        size("16777216T"),
        Err(UnitError::SizeOverflow("16777216T".into()))
    );
    assert_eq!(
        size("18446744073709551616"),
        Err(UnitError::SizeOverflow("18446744073709551616".into()))
    );
    assert_eq!(
        size("999999999999999999999999999999999999999999"),
        Err(UnitError::SizeOverflow(
            "999999999999999999999999999999999999999999".into()
        ))
    );
    assert_eq!(size("1.3B"), Err(UnitError::FractionalSize("1.3B".into())));
    assert_eq!(
        size("1.0001K"),
        Err(UnitError::FractionalSize("1.0001K".into()))
    );
}

#[test]
fn sizes_rejected() {
    for bad in [
        "", " ", "12XB", "-1K", "+1K", "1..5K", "1.5.K", ".", "K", "1 K B", "1kib", "1mB", "1e3",
    ] {
        assert_eq!(
            size(bad),
            Err(UnitError::InvalidSize(bad.trim().into())),
            "{bad:?}"
        );
    }
}

#[test]
fn size_error_message_says_what_is_allowed() {
    assert_eq!(
        size("12XB").unwrap_err().to_string(),
        "invalid size \"12XB\": expected a number with a unit such as 1024, 64KiB, 500MB, 1GiB \
         (K/M/G/KiB/MiB/GiB are binary, kB/MB/GB decimal)"
    );
}

#[test]
fn byte_size_display() {
    assert_eq!(ByteSize(524_288_000).to_string(), "524288000 B (500 MiB)");
    assert_eq!(ByteSize(1_073_741_824).to_string(), "1073741824 B (1 GiB)");
    assert_eq!(ByteSize(1000).to_string(), "1000 B");
    assert_eq!(ByteSize(1023).to_string(), "1023 B");
    assert_eq!(ByteSize(1024).to_string(), "1024 B (1 KiB)");
    assert_eq!(ByteSize(1536).to_string(), "1536 B (1.5 KiB)");
    assert_eq!(ByteSize(1_000_000).to_string(), "1000000 B (976.56 KiB)");
    assert_eq!(ByteSize(1_048_575).to_string(), "1048575 B (1 MiB)");
    assert_eq!(
        ByteSize(u64::MAX).to_string(),
        "18446744073709551615 B (16 EiB)"
    );
}

#[test]
fn byte_size_serde_is_a_plain_number() {
    assert_eq!(serde_json::to_string(&ByteSize(65_536)).unwrap(), "65536");
    assert_eq!(
        serde_json::from_str::<ByteSize>("42").unwrap(),
        ByteSize(42)
    );
}

#[test]
fn format_bytes() {
    assert_eq!(format_bytes_iec(0.0), "0 B");
    assert_eq!(format_bytes_iec(512.0), "512 B");
    assert_eq!(format_bytes_iec(1023.0), "1023 B");
    assert_eq!(format_bytes_iec(1024.0), "1.00 KiB");
    assert_eq!(format_bytes_iec(524_288_000.0), "500.00 MiB");
    assert_eq!(format_bytes_iec(1_073_741_824.0), "1.00 GiB");
    assert_eq!(format_bytes_iec(1_048_575.0), "1.00 MiB");
    assert_eq!(format_byterate_iec(726_138_880.0), "692.50 MiB/s");
    assert_eq!(format_byterate_iec(100.0), "100 B/s");
}

#[test]
fn rates_parse() {
    assert_eq!(rate("3bit").unwrap(), 3);
    assert_eq!(rate("3bps").unwrap(), 3);
    assert_eq!(rate("100kbit").unwrap(), 100_000);
    assert_eq!(rate("100kbps").unwrap(), 100_000);
    assert_eq!(rate("500k").unwrap(), 500_000);
    assert_eq!(rate("500K").unwrap(), 500_000);
    assert_eq!(rate("100Mbit").unwrap(), 100_000_000);
    assert_eq!(rate("100 Mbps").unwrap(), 100_000_000);
    assert_eq!(rate("1.5M").unwrap(), 1_500_000);
    assert_eq!(rate("1Gbit").unwrap(), 1_000_000_000);
    assert_eq!(rate("1Gbps").unwrap(), 1_000_000_000);
    assert_eq!(rate("2G").unwrap(), 2_000_000_000);
    assert_eq!(rate("1Tbit").unwrap(), 1_000_000_000_000);
    assert_eq!(rate("1T").unwrap(), 1_000_000_000_000);
    assert_eq!(rate("10B/s").unwrap(), 80);
    assert_eq!(rate("1kB/s").unwrap(), 8_000);
    assert_eq!(rate("50MB/s").unwrap(), 400_000_000);
    assert_eq!(rate("1GB/s").unwrap(), 8_000_000_000);
    assert_eq!(rate("1KiB/s").unwrap(), 8_192);
    assert_eq!(rate("10MiB/s").unwrap(), 83_886_080);
    assert_eq!(rate("1GiB/s").unwrap(), 8_589_934_592);
}

#[test]
fn rates_rejected() {
    assert_eq!(rate("0Mbit"), Err(UnitError::ZeroRate("0Mbit".into())));
    assert_eq!(rate("0.0k"), Err(UnitError::ZeroRate("0.0k".into())));
    assert_eq!(rate("100"), Err(UnitError::InvalidRate("100".into())));
    assert_eq!(
        rate("100 MiB"),
        Err(UnitError::InvalidRate("100 MiB".into()))
    );
    assert_eq!(rate("-1M"), Err(UnitError::InvalidRate("-1M".into())));
    assert_eq!(rate(""), Err(UnitError::InvalidRate(String::new())));
    assert_eq!(
        rate("0.5bit"),
        Err(UnitError::FractionalRate("0.5bit".into()))
    );
    assert_eq!(
        rate("20000000T"),
        Err(UnitError::RateOverflow("20000000T".into()))
    );
}

#[test]
fn bit_rate_display_is_exact_and_parses_back() {
    assert_eq!(BitRate(500_000_000).to_string(), "500 Mbit/s");
    assert_eq!(BitRate(1_500_000).to_string(), "1.5 Mbit/s");
    assert_eq!(BitRate(1_234_567).to_string(), "1.234567 Mbit/s");
    assert_eq!(BitRate(1_000_000_000).to_string(), "1 Gbit/s");
    assert_eq!(BitRate(2_000_000_000_000).to_string(), "2 Tbit/s");
    assert_eq!(BitRate(12_000).to_string(), "12 kbit/s");
    assert_eq!(BitRate(999).to_string(), "999 bit/s");
    for bits in [
        1,
        999,
        1_000,
        1_500_000,
        1_234_567,
        500_000_000,
        8_589_934_592,
    ] {
        assert_eq!(
            BitRate(bits).to_string().parse::<BitRate>().unwrap(),
            BitRate(bits)
        );
    }
}

#[test]
fn format_rates() {
    assert_eq!(format_bitrate(5_810_000_000.0), "5.81 Gbit/s");
    assert_eq!(format_bitrate(812_400_000.0), "812.40 Mbit/s");
    assert_eq!(format_bitrate(12_000.0), "12.00 kbit/s");
    assert_eq!(format_bitrate(3.0), "3 bit/s");
    assert_eq!(format_bitrate(999_999.0), "1.00 Mbit/s");
    assert_eq!(format_bitrate(0.0), "0 bit/s");
}

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
    assert_eq!(parse_duration("100µs").unwrap(), Duration::from_micros(100));
    assert_eq!(
        parse_duration("100\u{3bc}s").unwrap(),
        Duration::from_micros(100)
    );
    assert_eq!(parse_duration("5ns").unwrap(), Duration::from_nanos(5));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
    assert_eq!(
        parse_duration(" 10 ms ").unwrap(),
        Duration::from_millis(10)
    );
    assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
}

#[test]
fn durations_rejected() {
    assert_eq!(
        parse_duration("5"),
        Err(UnitError::InvalidDuration("5".into()))
    );
    assert_eq!(
        parse_duration(""),
        Err(UnitError::InvalidDuration(String::new()))
    );
    assert_eq!(
        parse_duration("-1s"),
        Err(UnitError::InvalidDuration("-1s".into()))
    );
    assert_eq!(
        parse_duration("1d"),
        Err(UnitError::InvalidDuration("1d".into()))
    );
    assert_eq!(
        parse_duration("1.5ns"),
        Err(UnitError::FractionalDuration("1.5ns".into()))
    );
    assert_eq!(
        parse_duration("99999999999999999999h"),
        Err(UnitError::DurationOverflow("99999999999999999999h".into()))
    );
    assert_eq!(
        parse_duration("5").unwrap_err().to_string(),
        "invalid duration \"5\": expected a number with a unit such as 1s, 250ms, 100us, 5ns, 1.5s, 2m, 1h \
         (units: ns, us, µs, ms, s, m, h)"
    );
}
