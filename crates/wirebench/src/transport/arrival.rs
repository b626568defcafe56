//! When a datagram arrived: the kernel's receive timestamp (SO_TIMESTAMPNS), read with the
//! datagram by one `recvmsg`, rather than the moment the program got round to reading it. A
//! reader that a busy host stalled for 30 ms still knows its datagrams came spread over those
//! 30 ms, not all at once when it woke (the relay's link model runs on these times). Owns that
//! one read; falls back to the time of reading where the kernel gives no stamp.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime};

use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Asks the kernel to stamp every datagram `socket` receives. Best effort: without it the
/// reads below date each datagram by when it was read.
pub fn stamp_arrivals(socket: &UdpSocket) {
    #[cfg(target_os = "linux")]
    {
        let _ = super::net::set_int_option(socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}

/// Receives one datagram into `buf`: its length, its sender and when it arrived.
pub async fn recv_from(
    socket: &UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, Instant)> {
    socket
        .async_io(Interest::READABLE, || receive(socket, buf))
        .await
}

/// One `recvmsg`: length, sender and arrival time (the kernel's stamp, else now).
#[cfg(target_os = "linux")]
fn receive(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Instant)> {
    // SAFETY: all-zero bytes are valid for these plain C structs.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a timespec's control message (u64s: aligned for cmsghdr).
    let mut control = [0u64; 8];
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: every pointer in `msg` points at a live buffer of the length given beside it.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, 0) };
    let Ok(n) = usize::try_from(n) else {
        return Err(io::Error::last_os_error());
    };
    // The wall clock first: a pause between the two reads (a busy host) then dates the
    // datagram later than it came, never earlier, so a delay the relay adds is never cut
    // short (read the other way round, a response through `delay=5ms` each way once took
    // 9.978 ms beside two busy processes).
    let read_wall = SystemTime::now();
    let read_at = Instant::now();
    let mut arrived = read_at;
    // SAFETY: the CMSG_* walk stays within `msg.msg_controllen` bytes of `control`, which the
    // kernel filled; a timestamp's data is a timespec, read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let c = &*cmsg;
            if c.cmsg_level == libc::SOL_SOCKET && c.cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                arrived = instant_of(read_at, read_wall, ts);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // SAFETY: the kernel wrote a socket address of `msg_namelen` bytes into `addr`.
    let from = unsafe { socket2::SockAddr::new(addr, msg.msg_namelen) }
        .as_socket()
        .ok_or_else(|| io::Error::other("a datagram from an address that is not IP"))?;
    Ok((n, from, arrived))
}

/// Elsewhere: the time of reading.
#[cfg(not(target_os = "linux"))]
fn receive(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Instant)> {
    let (n, from) = socket.try_recv_from(buf)?;
    Ok((n, from, Instant::now()))
}

/// The monotonic instant of a wall-clock kernel stamp `ts`, given both clocks read just after
/// it, the wall clock first (`read_wall`, then `read_at`); a stamp "after" the reading (the
/// wall clock was stepped back) is taken as the reading.
#[cfg(target_os = "linux")]
fn instant_of(read_at: Instant, read_wall: SystemTime, ts: libc::timespec) -> Instant {
    let (Ok(secs), Ok(nanos)) = (u64::try_from(ts.tv_sec), u32::try_from(ts.tv_nsec)) else {
        return read_at;
    };
    let stamped = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
    let ago = read_wall.duration_since(stamped).unwrap_or(Duration::ZERO);
    read_at.checked_sub(ago).unwrap_or(read_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel turns stamping on for the whole host from a work queue the first time a
    /// socket asks, and stamps a datagram that raced it at its reading; so a datagram may be
    /// dated late right after the first socket asked, and the check tries up to 5 datagrams.
    #[tokio::test]
    async fn a_datagram_read_late_is_dated_when_it_arrived() {
        let rx = UdpSocket::bind("127.0.0.1:0").await.expect("binds");
        stamp_arrivals(&rx);
        let tx = UdpSocket::bind("127.0.0.1:0").await.expect("binds");
        let mut dated = Vec::new();
        for _ in 0..5 {
            let sent_at = Instant::now();
            tx.send_to(b"hello", rx.local_addr().expect("addr"))
                .await
                .expect("sends");
            // Read it 50 ms later, as a stalled reader would.
            std::thread::sleep(Duration::from_millis(50));
            let mut buf = [0u8; 64];
            let (n, from, arrived) = recv_from(&rx, &mut buf).await.expect("receives");
            let read = Instant::now();
            assert_eq!((n, &buf[..n]), (5, &b"hello"[..]));
            assert_eq!(from, tx.local_addr().expect("addr"));
            assert!(arrived + Duration::from_millis(2) >= sent_at && arrived <= read);
            dated.push(read.duration_since(arrived));
            if !cfg!(target_os = "linux") || dated.last() >= Some(&Duration::from_millis(45)) {
                return;
            }
        }
        panic!("no datagram was dated 50 ms before its reading: {dated:?}");
    }
}
