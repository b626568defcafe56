//! Output of `wirebench run --iperf3`: our figures next to the iperf3 server's, as text or as
//! one JSON document (`kind: "iperf3"`, `schema_version` 1). Owns formatting only; must not do
//! network I/O.

use serde::Serialize;
use wirebench_core::vocab::units::format_bitrate;
use wirebench_core::wire::iperf3::TestResults;

use super::client::{ClientConfig, ClientOutcome, Limit};
use wirebench_core::record::bits_per_second;

/// Version of the JSON document below.
pub const SCHEMA_VERSION: u32 = 1;

/// The JSON document of one iperf3 client test.
#[derive(Debug, Serialize)]
pub struct Iperf3Document {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always "iperf3".
    pub kind: &'static str,
    /// The server as named.
    pub server: String,
    /// "tcp" or "udp".
    pub protocol: &'static str,
    /// The server sent (`-R`).
    pub reverse: bool,
    /// Streams.
    pub parallel: u32,
    /// Bytes per write or datagram.
    pub block_len: u32,
    /// Byte limit, if the test was byte-limited.
    pub limit_bytes: Option<u64>,
    /// Time limit in seconds, if time-limited.
    pub limit_seconds: Option<f64>,
    /// Per-stream UDP rate in bit/s (0 = unlimited).
    pub rate_bps: u64,
    /// What wirebench measured.
    pub wirebench: SideJson,
    /// What the iperf3 server reported.
    pub iperf3_server: SideJson,
}

/// One end's figures.
#[derive(Debug, Serialize, PartialEq)]
pub struct SideJson {
    /// "sender" or "receiver".
    pub role: &'static str,
    /// Bytes over all streams.
    pub bytes: u64,
    /// Seconds the data took (ours: first to last byte; the server's: its longest stream).
    pub seconds: f64,
    /// bytes × 8 / seconds.
    pub throughput_bps: f64,
    /// UDP: datagrams sent (sender) or the highest datagram count seen (receiver).
    pub packets: Option<u64>,
    /// UDP receiver: datagrams lost.
    pub lost: Option<u64>,
    /// UDP receiver: jitter in milliseconds (largest over the streams).
    pub jitter_ms: Option<f64>,
    /// Per stream: id and bytes.
    pub streams: Vec<StreamJson>,
}

/// One stream's bytes.
#[derive(Debug, Serialize, PartialEq)]
pub struct StreamJson {
    /// iperf3 stream id.
    pub id: u32,
    /// Bytes.
    pub bytes: u64,
}

/// Builds the JSON document.
pub fn document(cfg: &ClientConfig, o: &ClientOutcome) -> Iperf3Document {
    let (ours_role, theirs_role) = if cfg.reverse {
        ("receiver", "sender")
    } else {
        ("sender", "receiver")
    };
    let mut ours = side(ours_role, &o.our_results, cfg.udp);
    // Our own clock for our time, not the rounded end_time we sent.
    ours.seconds = o.our_seconds();
    ours.throughput_bps = bits_per_second(ours.bytes, ours.seconds);
    Iperf3Document {
        schema_version: SCHEMA_VERSION,
        kind: "iperf3",
        server: cfg.name.clone(),
        protocol: if cfg.udp { "udp" } else { "tcp" },
        reverse: cfg.reverse,
        parallel: cfg.parallel,
        block_len: cfg.len,
        limit_bytes: match cfg.limit {
            Limit::Bytes(n) => Some(n),
            Limit::Time(_) => None,
        },
        limit_seconds: match cfg.limit {
            Limit::Time(d) => Some(d.as_secs_f64()),
            Limit::Bytes(_) => None,
        },
        rate_bps: cfg.rate_bps,
        wirebench: ours,
        iperf3_server: side(theirs_role, &o.server, cfg.udp),
    }
}

fn side(role: &'static str, r: &TestResults, udp: bool) -> SideJson {
    let bytes = r.total_bytes();
    let seconds = r.duration_s();
    let receiver = role == "receiver";
    SideJson {
        role,
        bytes,
        seconds,
        throughput_bps: bits_per_second(bytes, seconds),
        packets: udp.then(|| r.total_packets()),
        lost: (udp && receiver).then(|| r.total_errors()),
        jitter_ms: (udp && receiver)
            .then(|| r.streams.iter().map(|s| s.jitter * 1e3).fold(0.0, f64::max)),
        streams: r
            .streams
            .iter()
            .map(|s| StreamJson {
                id: s.id,
                bytes: s.bytes,
            })
            .collect(),
    }
}

/// The text block printed after the test.
pub fn text(cfg: &ClientConfig, o: &ClientOutcome) -> String {
    let d = document(cfg, o);
    let limit = match cfg.limit {
        Limit::Bytes(n) => format!("{n} bytes"),
        Limit::Time(t) => format!("{:.1} s", t.as_secs_f64()),
    };
    let mut out = format!(
        "iperf3 {} {} test with {}: {} stream(s), {}-byte blocks, {limit}\n",
        d.protocol.to_uppercase(),
        if cfg.reverse {
            "reverse (-R)"
        } else {
            "forward"
        },
        cfg.name,
        cfg.parallel,
        cfg.len,
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
    if let Some(line) = not_counted(cfg, &d) {
        out.push_str(&line);
    }
    if let Some(text) = &o.server.server_output_text {
        // The server's own words: made safe line by line before they are shown.
        out.push_str("  iperf3 server output:\n");
        for line in text.lines().take(MAX_OUTPUT_LINES) {
            out.push_str(&format!(
                "    {}\n",
                wirebench_core::vocab::text::peer_text(line)
            ));
        }
    }
    out
}

/// What we sent that the iperf3 server did not count, said in one line: it stops counting
/// when it reads TEST_END, which goes as soon as our last write returned (as iperf3's client
/// sends it), so what was still on its way is not in its figures, with iperf3's own client
/// either. UDP: the datagrams after the last one it saw (the ones it saw a gap before are its
/// losses, shown as such).
fn not_counted(cfg: &ClientConfig, d: &Iperf3Document) -> Option<String> {
    if cfg.reverse {
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

/// Most lines of an iperf3 server's output shown (`--get-server-output`): a server's summary
/// is a few dozen; a hostile one is not printed without end.
const MAX_OUTPUT_LINES: usize = 200;
