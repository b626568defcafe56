//! The text block of one `run --iperf3` test: our figures next to the iperf3 server's, and
//! the server's own output made safe. Formatting only.

use wirebench_core::record::iperf3_test::Iperf3Test;
use wirebench_core::vocab::text::peer_text;
use wirebench_core::vocab::units::format_bitrate;

/// Most lines of an iperf3 server's output shown (`--get-server-output`): a server's summary
/// is a few dozen; a hostile one is not printed without end.
const MAX_OUTPUT_LINES: usize = 200;

/// The text block printed after the test.
pub fn text(d: &Iperf3Test) -> String {
    let limit = match (d.limit_bytes, d.limit_seconds) {
        (Some(n), _) => format!("{n} bytes"),
        (None, Some(t)) => format!("{t:.1} s"),
        (None, None) => "no limit".to_string(),
    };
    let mut out = format!(
        "iperf3 {} {} test with {}: {} stream(s), {}-byte blocks, {limit}\n",
        d.protocol.to_uppercase(),
        if d.reverse { "reverse (-R)" } else { "forward" },
        d.server,
        d.parallel,
        d.block_len,
    );
    for (who, s) in [
        ("wirebench", &d.wirebench),
        ("iperf3 server", &d.iperf3_server),
    ] {
        out.push_str(&format!(
            "  {who:<13} {:<8} {} bytes in {:.4} s ({})",
            s.role,
            s.bytes,
            s.seconds,
            if s.seconds > 0.0 {
                format_bitrate(s.throughput_bps)
            } else {
                "n/a".to_string()
            }
        ));
        if let Some(p) = s.packets {
            out.push_str(&format!(", {p} datagrams"));
        }
        if let (Some(lost), Some(p)) = (s.lost, s.packets) {
            out.push_str(&format!(", lost {lost}/{p}"));
        }
        if let Some(j) = s.jitter_ms {
            out.push_str(&format!(", jitter {j:.3} ms"));
        }
        let per: Vec<String> = s
            .streams
            .iter()
            .map(|x| format!("#{} {}", x.id, x.bytes))
            .collect();
        if per.len() > 1 {
            out.push_str(&format!(" [{}]", per.join(", ")));
        }
        out.push('\n');
    }
    if let Some(line) = not_counted(d) {
        out.push_str(&line);
    }
    if let Some(text) = &d.server_output {
        // The server's own words: made safe line by line before they are shown.
        out.push_str("  iperf3 server output:\n");
        for line in text.lines().take(MAX_OUTPUT_LINES) {
            out.push_str(&format!("    {}\n", peer_text(line)));
        }
    }
    out
}

/// What we sent that the iperf3 server did not count, said in one line: it stops counting
/// when it reads TEST_END, which goes as soon as our last write returned (as iperf3's client
/// sends it), so what was still on its way is not in its figures, with iperf3's own client
/// either. UDP: the datagrams after the last one it saw (the ones it saw a gap before are its
/// losses, shown as such).
fn not_counted(d: &Iperf3Test) -> Option<String> {
    if d.reverse {
        return None;
    }
    let (ours, theirs) = (&d.wirebench, &d.iperf3_server);
    let what = match (ours.packets, theirs.packets) {
        (Some(sent), Some(seen)) if sent > seen => {
            let n = sent - seen;
            format!("the last {n} of {sent} datagrams")
        }
        (None, None) if ours.bytes > theirs.bytes => {
            let n = ours.bytes - theirs.bytes;
            format!("{n} bytes ({:.1} %)", n as f64 * 100.0 / ours.bytes as f64)
        }
        _ => return None,
    };
    Some(format!(
        "  the iperf3 server stopped counting at TEST_END with {what} still on their way, as with iperf3's own client\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::record::iperf3_test::{Iperf3Side, Iperf3StreamBytes, SCHEMA_VERSION};

    fn side(role: &'static str, bytes: u64) -> Iperf3Side {
        Iperf3Side {
            role,
            bytes,
            seconds: 1.0,
            throughput_bps: bytes as f64 * 8.0,
            packets: None,
            lost: None,
            jitter_ms: None,
            streams: vec![Iperf3StreamBytes { id: 1, bytes }],
        }
    }

    fn test(ours: u64, theirs: u64, server_output: Option<&str>) -> Iperf3Test {
        Iperf3Test {
            schema_version: SCHEMA_VERSION,
            kind: "iperf3",
            server: "127.0.0.1:5201".into(),
            protocol: "tcp",
            reverse: false,
            parallel: 1,
            block_len: 131_072,
            limit_bytes: Some(1_000),
            limit_seconds: None,
            rate_bps: 0,
            wirebench: side("sender", ours),
            iperf3_server: side("receiver", theirs),
            server_output: server_output.map(str::to_string),
        }
    }

    #[test]
    fn the_block_names_the_test_both_ends_and_what_the_server_did_not_count() {
        let block = text(&test(1_000, 900, None));
        let lines: Vec<&str> = block.lines().collect();
        assert_eq!(
            lines[0],
            "iperf3 TCP forward test with 127.0.0.1:5201: 1 stream(s), 131072-byte blocks, 1000 bytes"
        );
        assert!(lines[1].starts_with("  wirebench     sender   1000 bytes in 1.0000 s"));
        assert!(lines[2].starts_with("  iperf3 server receiver 900 bytes in 1.0000 s"));
        assert_eq!(
            lines[3],
            "  the iperf3 server stopped counting at TEST_END with 100 bytes (10.0 %) still on their way, as with iperf3's own client"
        );
        assert_eq!(lines.len(), 4);
        assert!(!text(&test(1_000, 1_000, None)).contains("TEST_END"));
    }

    #[test]
    fn the_servers_own_text_is_made_safe_and_bounded() {
        let hostile = format!("ok\x1b[2Jwiped\n{}", "x\n".repeat(500));
        let block = text(&test(1_000, 1_000, Some(&hostile)));
        assert!(!block.contains('\x1b'), "{block:?}");
        let shown = block
            .lines()
            .skip_while(|l| !l.contains("server output"))
            .count();
        assert_eq!(shown, 1 + MAX_OUTPUT_LINES);
    }
}
