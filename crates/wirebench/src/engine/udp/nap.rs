//! A UDP receiver's nap after a fast stream's batch: the lanes' threads and a reversed run's
//! own receive thread sleep a few microseconds on a timer instead of waiting on their socket,
//! so the sender's CPU does not pay to wake them for every GRO batch ([`naps_after`]).

use std::time::Duration;

use super::batch_recv::RecvBatch;

/// How long a receiver sleeps after a receive that brought part of a fast stream (see
/// [`naps_after`]).
const STREAM_NAP: Duration = Duration::from_micros(20);

/// What a receive must bring, at the least, for the receiver to nap after it: a GRO buffer's
/// worth of coalesced datagrams.
const NAP_AFTER_BYTES: usize = 32 * 1024;

/// The timer slack of a napping thread, in nanoseconds: its naps last [`STREAM_NAP`] and a
/// little, not the 50 µs more a thread's default slack allows.
const TIMER_SLACK_NS: libc::c_ulong = 1_000;

/// Whether a receiver sleeps [`STREAM_NAP`] after the receive that filled `buffers` of `batch`,
/// before it waits on its socket again: when they carried a fast stream (coalesced datagrams,
/// [`NAP_AFTER_BYTES`] or more) and left room (a full receive may have left more queued, and
/// is read on at once).
///
/// A receiver that keeps up with a stream drains its socket and sleeps on it, and each
/// datagram the sender's host then queues wakes it: on loopback that wake-up is the sending
/// CPU's work (`sock_def_readable`, 7 % of the sender's samples at 1472 B unpaced, against
/// 0.75 % for iperf3 --gsro, whose slower server is never found asleep). Asleep on a timer
/// instead, the receiver is not on the socket's wait queue, and what arrives meanwhile is read
/// in one receive. On two vCPUs, ends on two CPUs, 1472 B unpaced for 3 s, alternating: the
/// server's lanes 68.5 → 75.6 (50 µs) and 74.6–86.3 → 91.9–104.2 Gbit/s (20 µs), loss
/// unchanged. An 8 MiB socket buffer holds 0.8 ms of 80 Gbit/s. A round trip's receive holds
/// one datagram and never naps; a datagram that arrives during a nap is counted, and its
/// arrival read, that much later.
pub fn naps_after(batch: &RecvBatch, buffers: usize) -> bool {
    if buffers >= batch.slots() {
        return false;
    }
    let mut bytes = 0;
    let mut coalesced = false;
    for (data, r) in batch.received() {
        bytes += data.len();
        coalesced |= data.len() > r.stride;
    }
    coalesced && bytes >= NAP_AFTER_BYTES
}

/// Sleeps this thread for one nap (after [`naps_after`] said so).
pub fn take() {
    std::thread::sleep(STREAM_NAP);
}

/// Readies this thread for naps: its timer slack becomes [`TIMER_SLACK_NS`].
#[cfg(target_os = "linux")]
pub fn prepare_thread() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0) };
}

/// Readies this thread for naps (nothing to do where the timer slack cannot be set).
#[cfg(not(target_os = "linux"))]
pub fn prepare_thread() {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::udp::batch_recv as udp_recv;
    use std::io;
    use std::net::UdpSocket;

    /// Buffers of the receives below: a lane's.
    const SLOTS: usize = 8;

    /// A receiver naps after a receive that brought a stream's coalesced datagrams, GRO's buffer
    /// or near it, and never after a round trip's one datagram, however large, nor after a
    /// few coalesced datagrams.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_receiver_naps_after_a_streams_batch_and_never_after_a_round_trip() {
        use std::os::fd::AsRawFd;
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(udp_recv::enable_gro(&socket));
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let to = socket.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = RecvBatch::new(SLOTS, false);
        let mut receive = |bytes: &[u8]| {
            peer.send_to(bytes, to).unwrap();
            let buffers = batch.recv_at_most(&socket, true, SLOTS).unwrap();
            let sizes: Vec<(usize, usize)> =
                batch.received().map(|(d, r)| (d.len(), r.stride)).collect();
            (sizes, naps_after(&batch, buffers))
        };
        assert_eq!(receive(&[1u8; 60_000]), (vec![(60_000, 60_000)], false));
        // From now on each send is a GSO batch of 1472-byte datagrams, one buffer here.
        let segment: libc::c_int = 1472;
        // SAFETY: UDP_SEGMENT takes one c_int, read from the pointer during the call.
        let rc = unsafe {
            libc::setsockopt(
                peer.as_raw_fd(),
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                std::ptr::from_ref(&segment).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        assert_eq!(receive(&[2u8; 1472 * 44]), (vec![(1472 * 44, 1472)], true));
        assert_eq!(receive(&[3u8; 1472 * 4]), (vec![(1472 * 4, 1472)], false));
    }
}
