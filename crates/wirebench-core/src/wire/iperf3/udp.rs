//! iperf3's UDP data: the datagram header (32- or 64-bit counters) and the receiver's loss, order
//! and jitter accounting.

use super::error::Iperf3Error;

/// Length of the UDP datagram header, bytes.
pub fn udp_header_len(counters_64bit: bool) -> usize {
    if counters_64bit {
        16
    } else {
        12
    }
}

/// The header at the start of every iperf3 UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Sender's clock when sending: seconds.
    pub sec: u32,
    /// Sender's clock when sending: microseconds within the second.
    pub usec: u32,
    /// Datagram count, 1 for the first.
    pub count: u64,
}

impl UdpHeader {
    /// Writes the header at the start of `buf` (which must hold [`udp_header_len`] bytes); a
    /// 32-bit count wraps. Returns the header length, or None when `buf` is too short.
    pub fn encode(&self, counters_64bit: bool, buf: &mut [u8]) -> Option<usize> {
        let len = udp_header_len(counters_64bit);
        let head = buf.get_mut(..len)?;
        head[0..4].copy_from_slice(&self.sec.to_be_bytes());
        head[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters_64bit {
            head[8..16].copy_from_slice(&self.count.to_be_bytes());
        } else {
            // 32-bit counters wrap by design; the 64-bit option exists for long runs.
            head[8..12].copy_from_slice(&(self.count as u32).to_be_bytes());
        }
        Some(len)
    }

    /// Reads the header at the start of a datagram.
    pub fn decode(datagram: &[u8], counters_64bit: bool) -> Result<UdpHeader, Iperf3Error> {
        let len = udp_header_len(counters_64bit);
        let Some(head) = datagram.get(..len) else {
            return Err(Iperf3Error::ShortDatagram(datagram.len()));
        };
        let word = |i: usize| u32::from_be_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let count = if counters_64bit {
            (u64::from(word(8)) << 32) | u64::from(word(12))
        } else {
            u64::from(word(8))
        };
        Ok(UdpHeader {
            sec: word(0),
            usec: word(4),
            count,
        })
    }

    /// The send time in seconds.
    pub fn sent_s(&self) -> f64 {
        f64::from(self.sec) + f64::from(self.usec) / 1e6
    }
}

/// A UDP receiver's accounting of one stream: datagrams, highest count, losses, reordering
/// and RFC 3550 interarrival jitter, with arrival times passed in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpReceiver {
    /// Datagrams received, duplicates and late ones included.
    pub datagrams: u64,
    /// Payload bytes received (whole datagrams, as iperf3 counts them).
    pub bytes: u64,
    /// Highest count seen (what iperf3 reports as the receiver's `packets`).
    pub highest: u64,
    /// Counts skipped so far, minus late arrivals that filled a gap.
    pub lost: u64,
    /// Datagrams that arrived with a count at or below the highest already seen.
    pub out_of_order: u64,
    /// Interarrival jitter estimate, seconds.
    pub jitter_s: f64,
    /// The counts at the end of the omitted seconds (`-O`), which the results leave out.
    pub omitted: Option<UdpMark>,
    prev_transit_s: Option<f64>,
}

/// A UDP receiver's counts at one moment: the end of the omitted seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpMark {
    /// Datagrams received by then.
    pub datagrams: u64,
    /// Bytes received by then.
    pub bytes: u64,
    /// Highest count seen by then.
    pub highest: u64,
    /// Counts lost by then.
    pub lost: u64,
}

impl UdpReceiver {
    /// Marks the end of the omitted seconds: what arrived so far is left out of the figures
    /// after it, and the jitter estimate starts again from 0 (as iperf3's does).
    pub fn mark_omitted(&mut self) {
        self.omitted = Some(UdpMark {
            datagrams: self.datagrams,
            bytes: self.bytes,
            highest: self.highest,
            lost: self.lost,
        });
        self.jitter_s = 0.0;
    }

    /// The counts at the omit mark (all zero without one).
    pub fn mark(&self) -> UdpMark {
        self.omitted.unwrap_or_default()
    }

    /// Bytes received after the omit mark.
    pub fn bytes_counted(&self) -> u64 {
        self.bytes.saturating_sub(self.mark().bytes)
    }

    /// Accounts one datagram of `len` bytes carrying `header`, which arrived at `arrival_s` on
    /// the receiver's clock (any origin: only differences matter).
    pub fn on_datagram(&mut self, header: &UdpHeader, len: usize, arrival_s: f64) {
        self.datagrams += 1;
        self.bytes += len as u64;
        if header.count > self.highest {
            self.lost += header.count - self.highest - 1;
            self.highest = header.count;
        } else {
            // A late or repeated datagram: it may fill a gap counted as lost.
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }
        // RFC 3550 §6.4.1: J += (|D| - J) / 16, D the change in transit time.
        let transit = arrival_s - header.sent_s();
        if let Some(prev) = self.prev_transit_s {
            let d = (transit - prev).abs();
            self.jitter_s += (d - self.jitter_s) / 16.0;
        }
        self.prev_transit_s = Some(transit);
    }
}
