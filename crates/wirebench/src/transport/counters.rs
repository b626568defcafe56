//! Reads what the operating system and the transports counted for a session: TCP_INFO of a data
//! socket, quinn's connection statistics, and the process's CPU time (getrusage). Only reads;
//! the records and the rates derived from them live in `wirebench_core::vocab::counters`.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use wirebench_core::vocab::counters::{CpuUsage, StatsSource, TcpSnapshot, TransportStats};

/// Longest a sender waits for its last segments to be acknowledged before reading TCP_INFO.
const SETTLE_LIMIT: Duration = Duration::from_millis(250);

/// TCP_INFO of a sender's socket once every segment it sent is acknowledged (at most
/// [`SETTLE_LIMIT`] later): the acknowledgements carry the receiver's D-SACK reports, so only
/// then are spurious retransmissions (a tail-loss probe on a busy machine) told apart from
/// real ones.
pub async fn tcp_sender_stats(socket: &impl AsRawFd) -> Option<TransportStats> {
    let deadline = Instant::now() + SETTLE_LIMIT;
    while unacked_segments(socket).is_some_and(|n| n > 0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tcp_stats(socket)
}

/// TCP_INFO of a connected TCP socket; `None` where the OS has no TCP_INFO or refuses it, and
/// where the kernel is too old to fill the counters the retransmission rate needs.
#[cfg(target_os = "linux")]
pub fn tcp_stats(socket: &impl AsRawFd) -> Option<TransportStats> {
    let info = tcp_info(socket)?;
    Some(TransportStats::from_tcp(
        u64::from(info.tcpi_data_segs_out),
        u64::from(info.tcpi_total_retrans),
        u64::from(info.tcpi_dsack_dups),
        u64::from(info.tcpi_rtt),
        u64::from(info.tcpi_snd_cwnd) * u64::from(info.tcpi_snd_mss),
    ))
}

/// The kernel's TCP_INFO, when it fills at least the fields we use (D-SACK counts: Linux 5.0).
#[cfg(target_os = "linux")]
fn tcp_info(socket: &impl AsRawFd) -> Option<libc::tcp_info> {
    // Older kernels fill a shorter struct; the D-SACK counter (Linux 5.0) is the last one used.
    tcp_info_filled_to(
        socket,
        std::mem::offset_of!(libc::tcp_info, tcpi_dsack_dups) + 4,
    )
}

/// The kernel's TCP_INFO of `socket` when it fills at least its first `needed` bytes (older
/// kernels fill a shorter struct): the one place TCP_INFO is read.
#[cfg(target_os = "linux")]
pub fn tcp_info_filled_to(socket: &impl AsRawFd, needed: usize) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data, so all-zero bytes are a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `info`, which outlives the call; the kernel writes
    // at most `len` bytes and reports how many it wrote.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0 && (len as usize) >= needed).then_some(info)
}

/// TCP_INFO is Linux's; elsewhere there is nothing to read.
#[cfg(not(target_os = "linux"))]
pub fn tcp_stats(_socket: &impl AsRawFd) -> Option<TransportStats> {
    None
}

/// A TCP sender's counters and its window and round trip now, from one TCP_INFO reading (an
/// interval's end); `None` as [`tcp_stats`]. The peer's window (`tcpi_snd_wnd`, Linux 5.4)
/// reads 0 on older kernels, which fill a shorter struct.
#[cfg(target_os = "linux")]
pub fn tcp_sender_reading(socket: &impl AsRawFd) -> Option<(TransportStats, TcpSnapshot)> {
    let info = tcp_info(socket)?;
    let stats = TransportStats::from_tcp(
        u64::from(info.tcpi_data_segs_out),
        u64::from(info.tcpi_total_retrans),
        u64::from(info.tcpi_dsack_dups),
        u64::from(info.tcpi_rtt),
        u64::from(info.tcpi_snd_cwnd) * u64::from(info.tcpi_snd_mss),
    );
    let snapshot = TcpSnapshot {
        snd_cwnd: u64::from(info.tcpi_snd_cwnd) * u64::from(info.tcpi_snd_mss),
        snd_wnd: u64::from(info.tcpi_snd_wnd),
        rtt_us: u64::from(info.tcpi_rtt),
        rttvar_us: u64::from(info.tcpi_rttvar),
        pmtu: u64::from(info.tcpi_pmtu),
        reorder: u64::from(info.tcpi_reord_seen),
    };
    Some((stats, snapshot))
}

/// TCP_INFO is Linux's; elsewhere there is nothing to read.
#[cfg(not(target_os = "linux"))]
pub fn tcp_sender_reading(_socket: &impl AsRawFd) -> Option<(TransportStats, TcpSnapshot)> {
    None
}

/// Segments sent and not yet acknowledged; `None` where the OS does not say.
#[cfg(target_os = "linux")]
fn unacked_segments(socket: &impl AsRawFd) -> Option<u32> {
    tcp_info(socket).map(|info| info.tcpi_unacked)
}

/// TCP_INFO is Linux's; elsewhere there is nothing to wait for.
#[cfg(not(target_os = "linux"))]
fn unacked_segments(_socket: &impl AsRawFd) -> Option<u32> {
    None
}

/// Payload bytes the peer has acknowledged on a TCP socket (TCP_INFO `tcpi_bytes_acked`, Linux
/// 4.1); `None` where the OS does not say.
#[cfg(target_os = "linux")]
pub fn tcp_bytes_acked(socket: &impl AsRawFd) -> Option<u64> {
    tcp_info(socket).map(|info| info.tcpi_bytes_acked)
}

/// TCP_INFO is Linux's; elsewhere the caller counts what it wrote.
#[cfg(not(target_os = "linux"))]
pub fn tcp_bytes_acked(_socket: &impl AsRawFd) -> Option<u64> {
    None
}

/// What quinn counted on a QUIC connection so far.
pub fn quic_stats(connection: &quinn::Connection) -> TransportStats {
    quic_stats_of(&connection.stats())
}

/// What a QUIC connection's figures say, however it is driven.
pub fn quic_stats_of(stats: &quinn::ConnectionStats) -> TransportStats {
    let path = stats.path;
    TransportStats {
        source: StatsSource::Quic,
        packets_sent: path.sent_packets,
        packets_retransmitted: path.lost_packets,
        tcp_total_retrans: None,
        tcp_dsack_dups: None,
        srtt_us: Some(u64::try_from(path.rtt.as_micros()).unwrap_or(u64::MAX)),
        cwnd_bytes: Some(path.cwnd),
        congestion_events: Some(path.congestion_events),
        path_mtu: Some(u64::from(path.current_mtu)),
        send_window_bytes: None,
    }
}

/// The CPU time this process has used so far (all its threads); `None` if the OS will not say.
pub fn process_cpu() -> Option<CpuUsage> {
    // SAFETY: rusage is plain old data, so all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage that outlives the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    Some(CpuUsage {
        user_us: timeval_us(usage.ru_utime),
        system_us: timeval_us(usage.ru_stime),
        shared_process: false,
    })
}

/// A running CPU-time measurement of this process.
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter(Option<CpuUsage>);

impl CpuMeter {
    /// Starts measuring now.
    pub fn start() -> Self {
        CpuMeter(process_cpu())
    }

    /// The CPU time used since [`CpuMeter::start`].
    pub fn stop(&self) -> Option<CpuUsage> {
        Some(process_cpu()?.since(&self.0?))
    }
}

fn timeval_us(t: libc::timeval) -> u64 {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u64::try_from(t.tv_usec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let meter = CpuMeter::start();
        // Spin until the process has used measurable CPU (bounded: 2 s of wall time at most).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut x = 0u64;
        while std::time::Instant::now() < deadline {
            x = x.wrapping_add(std::hint::black_box(1));
            if meter
                .stop()
                .is_some_and(|u| u.user_us + u.system_us >= 5_000)
            {
                break;
            }
        }
        let used = meter.stop().expect("getrusage works on the test host");
        assert!(
            used.user_us + used.system_us >= 5_000,
            "{used:?} after {x} spins"
        );
    }
}
