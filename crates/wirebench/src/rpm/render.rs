//! Text rendering of an RPM result: owns the human-readable block `wirebench rpm` prints; takes
//! only the core record and writes to any `impl Write`, never to a terminal of its own choosing,
//! never reads clocks.

use std::io::{self, Write};

use wirebench_core::responsiveness::{LoadDirection, RpmResult};
use wirebench_core::units::format_bitrate;

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// Writes `r` as text: the RPM with its rating and confidence, both components, goodput,
/// idle latency, the intervals and the differences from the draft.
pub fn write_text(r: &RpmResult, out: &mut impl Write) -> io::Result<()> {
    let direction = match r.direction {
        LoadDirection::Download => "download",
        LoadDirection::Upload => "upload",
        LoadDirection::Both => "download + upload",
    };
    writeln!(
        out,
        "Responsiveness ({}) against {}, {} load, {} flow(s) per direction",
        r.draft, r.server, direction, r.load_flows
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
        "Load phase {:.1} s, {} intervals, {} failed probes",
        r.duration_ns as f64 / 1e9,
        r.intervals.len(),
        r.failed_probes
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
