//! The history's text: `wirebench runs` (one block per kind of campaign, the sweep kinds'
//! blocks written once), `wirebench show`, aborted runs and UTC times. Formats only; the caller
//! decides where it goes.

use std::fmt::Write as _;

use wirebench_core::record::campaign::AbortedDetail;
use wirebench_core::record::dns::NewDnsCampaign;
use wirebench_core::record::lifecycle::{CampaignKind, SweepInfo};
use wirebench_core::record::load_phases::{LoadPhase, LoadPhasesResult, NewLatencyCampaign};
use wirebench_core::record::rpm::NewRpmCampaign;
use wirebench_core::record::rr::NewRrCampaign;
use wirebench_core::record::{count_of, AbortedRun, CampaignInfo, EndedBy, RunRecord};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::ByteSize;

use super::delay::time;
use super::run_block::headline_text;

/// The `show` line of a run stored as aborted: what it was, why it stopped and what the client
/// had done by then (when known: runs stored before schema version 6 say neither).
pub fn aborted_run_line(a: &AbortedRun, detail: Option<&AbortedDetail>) -> String {
    let p = &a.params;
    let reason = detail
        .and_then(|d| d.reason.as_deref())
        .unwrap_or("interrupted");
    let so_far = match detail.and_then(|d| d.so_far) {
        Some(f) => format!(
            "the client had moved {} messages, {} bytes in {:.4} s",
            f.messages,
            f.bytes,
            f.elapsed.as_secs_f64()
        ),
        None => "no figures".to_string(),
    };
    format!(
        "[{}] {} {} {} B × {} B, run {}: aborted ({reason}); {so_far}\n",
        a.position,
        p.protocol,
        p.mechanism,
        p.msg_size,
        p.total_bytes,
        a.repeat_index + 1
    )
}

/// A Unix time as `YYYY-MM-DD HH:MM:SS` UTC (proleptic Gregorian calendar).
pub fn format_utc(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let secs = unix_s.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// What a campaign ran, in one phrase: `tcp,quic × stream,saw, 1000-byte messages, 97.7 KiB`.
pub fn campaign_what(c: &CampaignInfo) -> String {
    let p = &c.parameters;
    let list = |items: Vec<String>| items.join(",");
    let sizes = match c.msg_sizes.as_slice() {
        [one] => format!("{one}-byte messages"),
        many => format!(
            "{} message sizes ({}..{} B)",
            many.len(),
            many.iter().min().copied().unwrap_or(0),
            many.iter().max().copied().unwrap_or(0)
        ),
    };
    // A timed campaign (-t) says its time: its total is only an upper bound.
    let limit = match p.duration_us {
        Some(us) => format!("{} s", us as f64 / 1e6),
        None => list(c.totals.iter().map(|t| ByteSize(*t).to_string()).collect()),
    };
    format!(
        "{} × {}, {sizes}, {limit} × {}",
        list(p.protocols.iter().map(|p| p.to_string()).collect()),
        list(p.mechanisms.iter().map(|m| m.to_string()).collect()),
        p.repeat
    )
}

/// The measuring host at the end of a `wirebench runs` line (nothing when not recorded): a
/// store many hosts share (PostgreSQL) lists every host's campaigns.
fn host_suffix(host: &Option<String>) -> String {
    host.as_deref()
        .map_or_else(String::new, |h| format!("; host {h}"))
}

/// The `wirebench runs` table: one line per campaign.
pub fn campaign_list(campaigns: &[CampaignInfo]) -> String {
    let mut out = format!(
        "{:>4}  {:<19}  {:<11}  {:>9}  {}\n",
        "ID", "STARTED (UTC)", "STATUS", "RUNS", "WHAT"
    );
    for c in campaigns {
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {:<11}  {:>9}  {}{}{}{}",
            c.id,
            format_utc(c.started_at_unix_s),
            c.status.as_str(),
            format!("{}/{}", c.stored_runs, c.planned_runs),
            campaign_what(c),
            if c.origin == "import" {
                " (imported)"
            } else {
                ""
            },
            if c.aborted_runs > 0 {
                format!(" (+{} aborted in flight)", c.aborted_runs)
            } else {
                String::new()
            },
            host_suffix(&c.environment.host_name),
        );
    }
    out
}

/// One line of a sweep kind's block in `wirebench runs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepRow {
    /// Store id.
    pub id: i64,
    /// Start, seconds since the Unix epoch (UTC).
    pub started_at_unix_s: i64,
    /// How it ended (or `running`).
    pub status: &'static str,
    /// Results stored.
    pub stored: u64,
    /// Results planned.
    pub planned: u64,
    /// What ran.
    pub what: String,
    /// The host it ran on.
    pub host: Option<String>,
}

/// A sweep kind's block of `wirebench runs`: the id column named `kind` (DNS, RR, RPM), the
/// command that reports one (`--dns`), then one line per campaign. Written once for every kind.
pub fn sweep_list(kind: &str, flag: &str, rows: &[SweepRow]) -> String {
    let mut out = format!(
        "{:>4}  {:<19}  {:<11}  {:>9}  WHAT (wirebench report {flag} ID)\n",
        kind, "STARTED (UTC)", "STATUS", "RESULTS"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:>4}  {:<19}  {:<11}  {:>9}  {}{}",
            r.id,
            format_utc(r.started_at_unix_s),
            r.status,
            format!("{}/{}", r.stored, r.planned),
            r.what,
            host_suffix(&r.host),
        );
    }
    out
}

/// The `wirebench runs` block of DNS campaigns (`wirebench report --dns ID` shows one).
pub fn dns_campaign_list(campaigns: &[(SweepInfo<NewDnsCampaign>, u64)]) -> String {
    let rows: Vec<SweepRow> = campaigns
        .iter()
        .map(|(info, stored)| {
            let c = &info.campaign;
            SweepRow {
                id: info.id,
                started_at_unix_s: c.started_at_unix_s,
                status: info.status.as_str(),
                stored: *stored,
                planned: c.planned_results,
                what: format!(
                    "{} {} at {} over {}, concurrency {}",
                    c.record_type, c.name, c.resolver, c.transports, c.concurrency
                ),
                host: c.host_name.clone(),
            }
        })
        .collect();
    sweep_list("DNS", "--dns", &rows)
}

/// The `wirebench runs` block of rr sweeps (`wirebench report --rr ID` shows one).
pub fn rr_campaign_list(campaigns: &[(SweepInfo<NewRrCampaign>, u64)]) -> String {
    let rows: Vec<SweepRow> = campaigns
        .iter()
        .map(|(info, stored)| {
            let c = &info.campaign;
            // A --flows list stores its largest; more results planned than protocols ×
            // concurrencies says the flows were swept too.
            let runs_per_flows = c.protocols.split(',').count() * c.concurrency.split(',').count();
            let flows = if c.planned_results > runs_per_flows as u64 {
                format!("up to {}", count_of(c.flows as usize, "flow", "flows"))
            } else {
                count_of(c.flows as usize, "flow", "flows")
            };
            SweepRow {
                id: info.id,
                started_at_unix_s: c.started_at_unix_s,
                status: info.status.as_str(),
                stored: *stored,
                planned: c.planned_results,
                what: match info.kind {
                    // `ping` is stored as an rr-like sweep: one flow, one probe in flight.
                    CampaignKind::Ping => format!(
                        "ping: {} B probes to {} over {}",
                        c.request_bytes, c.server, c.protocols
                    ),
                    _ => format!(
                        "{} B requests, {} B responses to {} over {}, {flows}, requests in flight {}",
                        c.request_bytes, c.response_bytes, c.server, c.protocols, c.concurrency
                    ),
                },
                host: c.host_name.clone(),
            }
        })
        .collect();
    sweep_list("RR", "--rr", &rows)
}

/// The `wirebench runs` block of rpm campaigns: what ran and the RPM of each test with the
/// draft's rating word.
pub fn rpm_campaign_list(campaigns: &[(SweepInfo<NewRpmCampaign>, Vec<Option<f64>>)]) -> String {
    use wirebench_core::machine::responsiveness::Rating;
    let rows: Vec<SweepRow> = campaigns
        .iter()
        .map(|(info, rpms)| {
            let c = &info.campaign;
            let figures: Vec<String> = rpms
                .iter()
                .map(|r| match r {
                    Some(v) => format!("RPM {v:.0} ({})", Rating::of(*v).word()),
                    None => "no RPM".to_string(),
                })
                .collect();
            SweepRow {
                id: info.id,
                started_at_unix_s: c.started_at_unix_s,
                status: info.status.as_str(),
                stored: rpms.len() as u64,
                planned: c.planned_results,
                what: format!(
                    "{} load against {} over {}, up to {} per direction{}{}",
                    c.direction.as_str(),
                    c.server,
                    c.protocol,
                    count_of(c.max_flows as usize, "flow", "flows"),
                    if figures.is_empty() { "" } else { ": " },
                    figures.join(", "),
                ),
                host: c.host_name.clone(),
            }
        })
        .collect();
    sweep_list("RPM", "--rpm", &rows)
}

/// The `wirebench runs` block of latency campaigns: phases, load and each test's queue in
/// the direction it loaded (the upload phase's up p99, the download phase's down p99).
pub fn latency_campaign_list(
    campaigns: &[(SweepInfo<NewLatencyCampaign>, Vec<LoadPhasesResult>)],
) -> String {
    let rows: Vec<SweepRow> = campaigns
        .iter()
        .map(|(info, results)| {
            let c = &info.campaign;
            let figures: Vec<String> = results.iter().map(loaded_queues).collect();
            SweepRow {
                id: info.id,
                started_at_unix_s: c.started_at_unix_s,
                status: info.status.as_str(),
                stored: results.len() as u64,
                planned: c.planned_results,
                what: format!(
                    "{} against {}, {} load, {} per direction{}{}",
                    c.phases,
                    c.server,
                    c.plan.load,
                    count_of(c.plan.streams as usize, "flow", "flows"),
                    if figures.is_empty() { "" } else { ": " },
                    figures.join("; "),
                ),
                host: c.host_name.clone(),
            }
        })
        .collect();
    sweep_list("latency", "--latency", &rows)
}

/// "upload: up p99 40.00 ms, download: down p99 60.00 ms", or the round trips without stamps.
fn loaded_queues(r: &LoadPhasesResult) -> String {
    let p99 = |phase: LoadPhase, up: bool| {
        let w = r.phase(phase)?.one_way.as_ref()?;
        Some(if up { w.up?.p99_ns } else { w.down?.p99_ns })
    };
    let mut parts = Vec::new();
    if let Some(ns) = p99(LoadPhase::Upload, true) {
        parts.push(format!("upload: up p99 {}", time(ns as f64)));
    }
    if let Some(ns) = p99(LoadPhase::Download, false) {
        parts.push(format!("download: down p99 {}", time(ns as f64)));
    }
    if parts.is_empty() {
        return "no one-way delay".to_string();
    }
    parts.join(", ")
}

/// The `wirebench show` text: the campaign, its host and every run with both views.
pub fn campaign_detail(c: &CampaignInfo, runs: &[(Point, RunRecord)]) -> String {
    let p = &c.parameters;
    let e = &c.environment;
    let unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    let mut out = format!(
        "campaign {}: {}, {} of {} stored{}\n",
        c.id,
        c.status.as_str(),
        c.stored_runs,
        count_of(c.planned_runs as usize, "run", "runs"),
        if c.origin == "import" {
            ", imported"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  started:  {} UTC{}",
        format_utc(c.started_at_unix_s),
        c.finished_at_unix_s
            .map(|f| format!(", finished {} UTC", format_utc(f)))
            .unwrap_or_default()
    );
    if let Some(err) = &c.error {
        let _ = writeln!(out, "  stopped:  {err}");
    }
    let _ = writeln!(out, "  what:     {}", campaign_what(c));
    let _ = writeln!(
        out,
        "  server:   {}{}",
        p.server,
        if p.embedded_server && !p.server.starts_with("embedded") {
            " (embedded)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  host:     {}, kernel {}, CPU {}, wirebench {}",
        unknown(&e.host_name),
        unknown(&e.kernel),
        unknown(&e.cpu_model),
        e.wirebench_version
    );
    let bytes = |v: Option<u64>| v.map_or_else(|| "unknown".to_string(), |b| format!("{b} B"));
    let _ = writeln!(
        out,
        "  sockets:  rmem_max {}, wmem_max {}",
        bytes(e.rmem_max_bytes),
        bytes(e.wmem_max_bytes)
    );
    for (i, (point, r)) in runs.iter().enumerate() {
        let limit = match (r.ended_by, c.parameters.duration_us) {
            (EndedBy::Time, Some(us)) => format!("{} s", us as f64 / 1e6),
            _ => format!("{} B", point.total_bytes),
        };
        let _ = writeln!(
            out,
            "[{}] {} {} {} B × {limit}, run {}: goodput {}; client {} messages, {} bytes in {:.4} s; server {} messages, {} bytes",
            i + 1,
            r.protocol,
            r.mechanism,
            point.msg_size,
            r.repeat_index + 1,
            headline_text(&r.headline()),
            r.client.messages,
            r.client.bytes,
            r.client.seconds,
            r.server.messages,
            r.server.bytes,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_timestamps_match_the_calendar() {
        for (t, expected) in [
            (0, "1970-01-01 00:00:00"),
            (1_763_800_000, "2025-11-22 08:26:40"),
            (951_782_400, "2000-02-29 00:00:00"),
            (4_107_542_399, "2100-02-28 23:59:59"),
            (-86_400, "1969-12-31 00:00:00"),
        ] {
            assert_eq!(format_utc(t), expected, "{t}");
        }
    }
}
