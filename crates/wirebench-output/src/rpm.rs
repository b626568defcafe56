//! Text rendering of an RPM result: owns the human-readable block `wirebench rpm` prints; takes
//! only the core record and writes to any `impl Write`, never to a terminal of its own choosing,
//! never reads clocks.

use std::io::{self, Write};

use wirebench_core::machine::responsiveness::{LoadDirection, RpmResult};
use wirebench_core::vocab::units::format_bitrate;

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// Writes `r` as text: the RPM with its rating and confidence, both components, the loaded
/// round trips' percentiles, goodput, idle latency, the intervals and the differences from the
/// draft.
pub fn write_text(r: &RpmResult, out: &mut impl Write) -> io::Result<()> {
    let direction = match r.direction {
        LoadDirection::Download => "download",
        LoadDirection::Upload => "upload",
        LoadDirection::Both => "download + upload",
    };
    writeln!(
        out,
        "Responsiveness ({}) against {}, {} load, {} per direction",
        r.draft,
        r.server,
        direction,
        wirebench_core::record::count_of(r.load_flows as usize, "flow", "flows")
    )?;
    match (r.rpm, r.rating) {
        (Some(rpm), Some(rating)) => writeln!(
            out,
            "RPM: {:.0} ({}), confidence {}",
            rpm,
            rating.word(),
            r.rpm_confidence.word()
        )?,
        _ => writeln!(
            out,
            "RPM: not measured (no probe completed), confidence {}",
            r.rpm_confidence.word()
        )?,
    }
    if let Some(c) = &r.components {
        writeln!(
            out,
            "  foreign: {:.0} RPM  (TCP handshake {}, request {}{})",
            c.foreign_rpm,
            ms(c.foreign_tcp_handshake_rtt_ns),
            ms(c.foreign_request_rtt_ns),
            c.foreign_tls_handshake_rtt_ns
                .map(|t| format!(", TLS {}", ms(t)))
                .unwrap_or_default()
        )?;
        writeln!(
            out,
            "  self:    {:.0} RPM  (request {})",
            c.self_rpm,
            ms(c.self_request_rtt_ns)
        )?;
    }
    let loaded = wirebench_core::record::rpm::loaded_latency(r);
    if let Some(l) = loaded.all {
        writeln!(
            out,
            "Loaded round trips ({} samples, foreign and self requests): p50 {}, p90 {}, p99 {}, max {}",
            l.samples,
            ms(l.p50_ns),
            ms(l.p90_ns),
            ms(l.p99_ns),
            ms(l.max_ns)
        )?;
    }
    if let Some(i) = &r.idle {
        writeln!(
            out,
            "Idle ({} probes): TCP handshake {}, request {} (new connection), {} (persistent)",
            i.probes,
            ms(i.tcp_handshake_rtt_ns),
            ms(i.foreign_request_rtt_ns),
            ms(i.self_request_rtt_ns)
        )?;
    }
    writeln!(
        out,
        "Goodput: download {}, upload {}, confidence {}{}",
        format_bitrate(r.download_goodput_bps),
        format_bitrate(r.upload_goodput_bps),
        r.goodput_confidence.word(),
        if r.goodput_stable { " (stable)" } else { "" }
    )?;
    writeln!(
        out,
        "Load phase {:.1} s, {}, {}",
        r.duration_ns as f64 / 1e9,
        wirebench_core::record::count_of(r.intervals.len(), "interval", "intervals"),
        wirebench_core::record::count_of(r.failed_probes as usize, "failed probe", "failed probes")
    )?;
    writeln!(
        out,
        "  #  flows  download      upload        RPM     probes"
    )?;
    for i in &r.intervals {
        writeln!(
            out,
            "{:>3}  {:>5}  {:<12}  {:<12}  {:>7}  {}+{}",
            i.index,
            i.flows,
            format_bitrate(i.download_goodput_bps),
            format_bitrate(i.upload_goodput_bps),
            i.rpm
                .map(|v| format!("{v:.0}"))
                .unwrap_or_else(|| "-".into()),
            i.foreign_probes,
            i.self_probes
        )?;
    }
    writeln!(out, "Differences from the draft:")?;
    for d in &r.differences {
        writeln!(out, "  - {d}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::machine::responsiveness::{
        ComponentRecord, Confidence, IdleRecord, IntervalRecord, Parameters, Rating,
    };

    fn result() -> RpmResult {
        RpmResult {
            schema_version: 1,
            draft: "draft-ietf-ippm-responsiveness-08".into(),
            server: "embedded 127.0.0.1:5310".into(),
            protocol: "tcp".into(),
            direction: LoadDirection::Download,
            rpm: Some(877.4),
            rating: Some(Rating::Fair),
            rpm_confidence: Confidence::High,
            goodput_confidence: Confidence::High,
            components: Some(ComponentRecord {
                foreign_tcp_handshake_rtt_ns: 279_000,
                foreign_tls_handshake_rtt_ns: None,
                foreign_request_rtt_ns: 102_260_000,
                self_request_rtt_ns: 102_962_000,
                foreign_rpm: 1170.3,
                self_rpm: 582.7,
            }),
            idle: Some(IdleRecord {
                probes: 10,
                tcp_handshake_rtt_ns: 581_000,
                foreign_request_rtt_ns: 1_262_000,
                self_request_rtt_ns: 767_000,
            }),
            download_goodput_bps: 20.04e6,
            upload_goodput_bps: 0.0,
            load_flows: 4,
            goodput_stable: true,
            rpm_stable: true,
            duration_ns: 11_000_000_000,
            failed_probes: 0,
            parameters: Parameters::draft(),
            intervals: vec![IntervalRecord {
                index: 0,
                flows: 1,
                download_goodput_bps: 19.74e6,
                upload_goodput_bps: 0.0,
                moving_average_goodput_bps: None,
                rpm: Some(883.0),
                foreign_probes: 3,
                self_probes: 1,
                foreign_tcp_handshake_rtt_ns: vec![279_000; 3],
                foreign_request_rtt_ns: vec![101_000_000, 102_500_000, 104_000_000],
                self_request_rtt_ns: vec![103_000_000],
            }],
            differences: vec!["No TLS.".into()],
        }
    }

    #[test]
    fn text_shows_rpm_rating_confidence_components_and_differences() {
        let mut out = Vec::new();
        write_text(&result(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let expected = "\
Responsiveness (draft-ietf-ippm-responsiveness-08) against embedded 127.0.0.1:5310, download load, 4 flows per direction
RPM: 877 (Fair), confidence High
  foreign: 1170 RPM  (TCP handshake 0.279 ms, request 102.260 ms)
  self:    583 RPM  (request 102.962 ms)
Loaded round trips (4 samples, foreign and self requests): p50 102.500 ms, p90 104.000 ms, p99 104.000 ms, max 104.000 ms
Idle (10 probes): TCP handshake 0.581 ms, request 1.262 ms (new connection), 0.767 ms (persistent)
Goodput: download 20.04 Mbit/s, upload 0 bit/s, confidence High (stable)
Load phase 11.0 s, 1 interval, 0 failed probes
  #  flows  download      upload        RPM     probes
  0      1  19.74 Mbit/s  0 bit/s           883  3+1
Differences from the draft:
  - No TLS.
";
        assert_eq!(text, expected);
    }
}
