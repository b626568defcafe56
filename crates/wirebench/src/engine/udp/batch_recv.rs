//! Batched UDP receives (and single replies) on a socket of our own, reading with each receive
//! what quinn's socket layer leaves out: the socket's drop counter (`SO_RXQ_OVFL`), beside the
//! GRO segment size and the address a datagram was sent to. Used where a loss figure must say
//! what the receiving host dropped: the server's receive lanes and a `--reverse` client. Linux
//! only (elsewhere every call says "unsupported"); must not count or interpret datagrams.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

#[cfg(target_os = "linux")]
use crate::transport::net::set_int_option;
#[cfg(target_os = "linux")]
use crate::transport::syscall;
use wirebench_core::machine::seq::DropMark;

/// Bytes of one receive slot: the largest UDP payload, and the largest GRO buffer (64 KiB).
pub const SLOT_LEN: usize = 1 << 16;

/// Most slots one receive fills.
pub const MAX_SLOTS: usize = 16;

/// One datagram buffer of a receive: with GRO, several datagrams of one flow `stride` bytes
/// apart (the last may be shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Which slot of the batch holds it.
    slot: usize,
    /// Bytes received.
    pub len: usize,
    /// Bytes per datagram (GRO); `len` for a single datagram.
    pub stride: usize,
    /// Who sent it.
    pub from: SocketAddr,
    /// The address it was sent to (when the socket asked, see [`enable_destination`]).
    pub to_ip: Option<IpAddr>,
    /// The socket's drop counter when the buffer was queued (when the socket asked, see
    /// [`enable_drop_marks`]).
    pub dropped: Option<u32>,
}

impl Received {
    /// The drop mark of this buffer on socket number `socket`.
    pub fn mark(&self, socket: u32) -> Option<DropMark> {
        self.dropped.map(|dropped| DropMark { socket, dropped })
    }
}

/// Room for the datagrams of one receive, reused for every receive.
#[derive(Debug)]
pub struct RecvBatch {
    buf: Vec<u8>,
    slots: usize,
    /// The socket reports its drop counter: a buffer without one was queued at 0.
    marks: bool,
    received: Vec<Received>,
}

impl RecvBatch {
    /// Room for `slots` buffers of [`SLOT_LEN`] (at most [`MAX_SLOTS`]), from a socket that
    /// reports its drop counter when `marks` (see [`enable_drop_marks`]).
    pub fn new(slots: usize, marks: bool) -> Self {
        let slots = slots.clamp(1, MAX_SLOTS);
        RecvBatch {
            buf: vec![0u8; slots * SLOT_LEN],
            slots,
            marks,
            received: Vec::with_capacity(slots),
        }
    }

    /// How many buffers one receive may fill.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The buffers of the last receive, with what the kernel said of each.
    pub fn received(&self) -> impl Iterator<Item = (&[u8], &Received)> {
        self.received.iter().map(|r| {
            let at = r.slot * SLOT_LEN;
            (&self.buf[at..at + r.len], r)
        })
    }

    /// Receives what is queued on `socket`, up to the batch's slots: on a blocking socket
    /// with `wait`, waits for the first buffer (or the socket's receive timeout); otherwise
    /// returns "would block" at once when nothing is queued. Returns how many buffers came
    /// (a buffer without a sender's address, as after a shutdown, is left out).
    #[cfg(target_os = "linux")]
    pub fn recv(&mut self, socket: &impl AsRawFd, wait: bool) -> io::Result<usize> {
        self.recv_at_most(socket, wait, self.slots)
    }

    /// As [`RecvBatch::recv`], into at most `slots` of the batch's buffers (at least one). A
    /// receive that asks for more than one buffer pays, once the first has come, for a look
    /// at the queue that finds it empty when datagrams come one at a time; one buffer is a
    /// plain `recvmsg`.
    #[cfg(target_os = "linux")]
    pub fn recv_at_most(
        &mut self,
        socket: &impl AsRawFd,
        wait: bool,
        slots: usize,
    ) -> io::Result<usize> {
        use std::mem::{size_of, zeroed, MaybeUninit};
        let slots = slots.clamp(1, self.slots);
        self.received.clear();
        // Only the batch's own slots are set up (and zeroed): a receive on a lane of 8 slots
        // or a reversed session's 4 does not clear room for 16.
        let mut names = [const { MaybeUninit::<libc::sockaddr_storage>::uninit() }; MAX_SLOTS];
        let mut ctrls = [const { MaybeUninit::<Control>::uninit() }; MAX_SLOTS];
        let mut iovs = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX_SLOTS];
        let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_SLOTS];
        for (i, chunk) in self.buf.chunks_exact_mut(SLOT_LEN).enumerate().take(slots) {
            let iov = iovs[i].write(libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: SLOT_LEN,
            });
            // SAFETY: plain C structs for which all-zero bytes are a valid value.
            let name = names[i].write(unsafe { zeroed() });
            let ctrl = ctrls[i].write(Control([0; CONTROL_WORDS]));
            // SAFETY: as above.
            let hdr = hdrs[i].write(unsafe { zeroed() });
            let h = &mut hdr.msg_hdr;
            h.msg_name = (name as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = iov;
            h.msg_iovlen = 1;
            h.msg_control = ctrl.0.as_mut_ptr().cast();
            h.msg_controllen = size_of::<Control>() as _;
        }
        let flags = match (wait, slots) {
            (false, _) => libc::MSG_DONTWAIT,
            // `recvmsg` below: it waits by default.
            (true, 1) => 0,
            (true, _) => libc::MSG_WAITFORONE,
        };
        let n = loop {
            let n = if slots == 1 {
                // One buffer: `recvmsg`, which is what `recvmmsg` runs for each buffer, without
                // the batch loop around it (a round trip's receive). Its result is the
                // datagram's length, which `recvmmsg` would have stored in `msg_len`. Not
                // `recvfrom`, though that is about 1.5 % cheaper a same-CPU round trip
                // (`lab/udp-receive-cost.c`): it would lose the control messages, and a GRO
                // burst of another session would read as one datagram.
                // SAFETY: as below, for the first header only, which was set up above.
                unsafe {
                    let hdr = hdrs[0].assume_init_mut();
                    syscall::recvmsg(socket.as_raw_fd(), &mut hdr.msg_hdr, flags).map(|len| {
                        // One datagram, even an empty one.
                        hdr.msg_len = len as libc::c_uint;
                        1
                    })
                }
            } else {
                // SAFETY: every header points into buffers (`self.buf`, `names`, `iovs`,
                // `ctrls`) that outlive the call, with their true lengths; the kernel writes
                // within them.
                unsafe {
                    syscall::recvmmsg(
                        socket.as_raw_fd(),
                        hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
                        slots as libc::c_uint,
                        flags,
                    )
                }
            };
            match n {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        for slot in 0..n.min(slots) {
            // SAFETY: slots below `slots` were written above, and the kernel fills at
            // most as many as it was given.
            let (hdr, name) =
                unsafe { (hdrs[slot].assume_init_ref(), names[slot].assume_init_ref()) };
            let len = hdr.msg_len as usize;
            let Some(from) = sockaddr(name, hdr.msg_hdr.msg_namelen) else {
                continue;
            };
            // SAFETY: the header's control buffer was filled by this receive, within its length.
            let (stride, to_ip, dropped) = unsafe { control_messages(&hdr.msg_hdr) };
            self.received.push(Received {
                slot,
                len,
                stride: stride.filter(|s| *s > 0).unwrap_or(len.max(1)),
                from,
                to_ip,
                dropped: self.marks.then_some(dropped.unwrap_or(0)),
            });
        }
        Ok(self.received.len())
    }

    /// Receiving with drop marks is Linux's.
    #[cfg(not(target_os = "linux"))]
    pub fn recv(&mut self, _socket: &impl AsRawFd, _wait: bool) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Receiving with drop marks is Linux's.
    #[cfg(not(target_os = "linux"))]
    pub fn recv_at_most(
        &mut self,
        _socket: &impl AsRawFd,
        _wait: bool,
        _slots: usize,
    ) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Words of one receive's control buffer: GRO size, drop counter and destination address
/// (CMSG_SPACE of 4, 4 and 20 bytes: 88), with room to spare.
const CONTROL_WORDS: usize = 24;

/// A control-message buffer, aligned as `cmsghdr` needs.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control([u64; CONTROL_WORDS]);

/// The GRO segment size, the destination address and the drop counter a receive's control
/// messages carry.
///
/// # Safety
/// `hdr` must describe a control buffer filled by the kernel, `msg_controllen` bytes long.
#[cfg(target_os = "linux")]
unsafe fn control_messages(hdr: &libc::msghdr) -> (Option<usize>, Option<IpAddr>, Option<u32>) {
    let (mut stride, mut to_ip, mut dropped) = (None, None, None);
    let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
    while !cmsg.is_null() {
        let data = libc::CMSG_DATA(cmsg);
        match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
            (libc::SOL_UDP, libc::UDP_GRO) => {
                let size: libc::c_int = std::ptr::read_unaligned(data.cast());
                stride = usize::try_from(size).ok();
            }
            (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                dropped = Some(std::ptr::read_unaligned(data.cast::<u32>()));
            }
            (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                let info: libc::in_pktinfo = std::ptr::read_unaligned(data.cast());
                to_ip = Some(IpAddr::from(info.ipi_addr.s_addr.to_ne_bytes()));
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                let info: libc::in6_pktinfo = std::ptr::read_unaligned(data.cast());
                to_ip = Some(IpAddr::from(info.ipi6_addr.s6_addr));
            }
            _ => {}
        }
        cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
    }
    (stride, to_ip, dropped)
}

/// The address in `name` (of `len` bytes), if it is one.
#[cfg(target_os = "linux")]
fn sockaddr(name: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    if len == 0 {
        return None;
    }
    // SAFETY: `name` is a sockaddr_storage the kernel filled with `len` bytes (zeroed before);
    // SockAddr reads the family itself.
    unsafe { socket2::SockAddr::new(*name, len) }.as_socket()
}

/// Sends one datagram to `to`, from `from_ip` when given (a socket bound to a wildcard
/// address must answer from the address it was asked at), without waiting for room: a full
/// socket is an error the caller counts.
#[cfg(target_os = "linux")]
pub fn send_to(
    socket: &impl AsRawFd,
    data: &[u8],
    to: SocketAddr,
    from_ip: Option<IpAddr>,
) -> io::Result<()> {
    use std::mem::size_of;
    let to = socket2::SockAddr::from(to);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    let mut ctrl = Control([0; CONTROL_WORDS]);
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_name = to.as_ptr().cast_mut().cast();
    hdr.msg_namelen = to.len();
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    if let Some(ip) = from_ip {
        hdr.msg_control = ctrl.0.as_mut_ptr().cast();
        hdr.msg_controllen = size_of::<Control>() as _;
        // SAFETY: the control buffer is large and aligned enough for one pktinfo message,
        // and msg_controllen is cut to what it holds.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&hdr);
            match (ip, to.is_ipv6()) {
                (IpAddr::V4(v4), false) => {
                    (*cmsg).cmsg_level = libc::IPPROTO_IP;
                    (*cmsg).cmsg_type = libc::IP_PKTINFO;
                    (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::in_pktinfo>() as _) as _;
                    let info = libc::in_pktinfo {
                        ipi_ifindex: 0,
                        ipi_spec_dst: libc::in_addr {
                            s_addr: u32::from_ne_bytes(v4.octets()),
                        },
                        ipi_addr: libc::in_addr { s_addr: 0 },
                    };
                    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), info);
                    hdr.msg_controllen = libc::CMSG_SPACE(size_of::<libc::in_pktinfo>() as _) as _;
                }
                (ip, true) => {
                    let v6 = match ip {
                        IpAddr::V6(v6) => v6,
                        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    };
                    (*cmsg).cmsg_level = libc::IPPROTO_IPV6;
                    (*cmsg).cmsg_type = libc::IPV6_PKTINFO;
                    (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::in6_pktinfo>() as _) as _;
                    let info = libc::in6_pktinfo {
                        ipi6_addr: libc::in6_addr {
                            s6_addr: v6.octets(),
                        },
                        ipi6_ifindex: 0,
                    };
                    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), info);
                    hdr.msg_controllen = libc::CMSG_SPACE(size_of::<libc::in6_pktinfo>() as _) as _;
                }
                // An IPv6 source for an IPv4 destination: let the kernel choose.
                (IpAddr::V6(_), false) => {
                    hdr.msg_control = std::ptr::null_mut();
                    hdr.msg_controllen = 0;
                }
            }
        }
    }
    loop {
        // Without a source to set, `sendto`: the kernel then copies no message header and no
        // vector from user memory, a shorter path for every answer of a round trip.
        let n = if hdr.msg_controllen == 0 {
            // SAFETY: `data` and `to` are alive here, and their lengths are theirs.
            unsafe {
                syscall::sendto(
                    socket.as_raw_fd(),
                    data,
                    libc::MSG_DONTWAIT,
                    to.as_ptr().cast(),
                    to.len(),
                )
            }
        } else {
            // SAFETY: `hdr` points at `iov` (over `data`), `to` and `ctrl`, all alive here.
            unsafe { syscall::sendmsg(socket.as_raw_fd(), &hdr, libc::MSG_DONTWAIT) }
        };
        match n {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Sending with a chosen source is Linux's.
#[cfg(not(target_os = "linux"))]
pub fn send_to(
    _socket: &impl AsRawFd,
    _data: &[u8],
    _to: SocketAddr,
    _from_ip: Option<IpAddr>,
) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Asks the kernel to say, with each receive, how many buffers the socket had dropped when it
/// queued that one (`SO_RXQ_OVFL`); false where it will not.
pub fn enable_drop_marks(socket: &impl AsRawFd) -> bool {
    #[cfg(target_os = "linux")]
    {
        set_int_option(socket, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        false
    }
}

/// The socket's drop counter now (`SO_MEMINFO`): buffers it dropped for want of room, or
/// None where the kernel does not say.
pub fn drops_now(socket: &impl AsRawFd) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        let mut info = [0u32; 16];
        let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `info` and says how many.
        let rc = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let at = libc::SK_MEMINFO_DROPS as usize;
        (rc == 0 && len as usize > at * 4).then(|| info[at])
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        None
    }
}

/// Lets one receive hold several datagrams of a flow (UDP_GRO); false where it cannot.
pub fn enable_gro(socket: &impl AsRawFd) -> bool {
    #[cfg(target_os = "linux")]
    {
        set_int_option(socket, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        false
    }
}

/// Asks the kernel to say, with each receive, the address a datagram was sent to (needed to
/// answer from it on a socket bound to a wildcard address).
pub fn enable_destination(socket: &impl AsRawFd, ipv6: bool) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        if ipv6 {
            set_int_option(socket, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)
        } else {
            set_int_option(socket, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (socket, ipv6);
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::net::UdpSocket;

    use super::*;

    fn bound() -> UdpSocket {
        UdpSocket::bind("127.0.0.1:0").unwrap()
    }

    /// A socket that reports drop marks and destinations, a peer, and the socket's address.
    fn marked_pair() -> (UdpSocket, UdpSocket, SocketAddr) {
        let socket = bound();
        assert!(enable_drop_marks(&socket));
        enable_destination(&socket, false).unwrap();
        let to = socket.local_addr().unwrap();
        (socket, bound(), to)
    }

    /// Datagrams come back with their sender, the address they were sent to and the socket's
    /// drop counter (0 before any drop); a reply leaves from the asked address.
    #[test]
    fn a_receive_says_who_sent_where_and_the_drop_counter() {
        let (socket, peer, to) = marked_pair();
        for byte in [1u8, 2, 3] {
            peer.send_to(&[byte; 100], to).unwrap();
        }
        let mut batch = RecvBatch::new(8, true);
        let mut got = Vec::new();
        while got.len() < 3 {
            socket.set_nonblocking(false).unwrap();
            batch.recv(&socket, true).unwrap();
            for (data, r) in batch.received() {
                assert_eq!(r.from, peer.local_addr().unwrap());
                assert_eq!(r.to_ip, Some(to.ip()));
                assert_eq!(r.dropped, Some(0));
                assert_eq!(r.stride, 100);
                got.push(data.to_vec());
            }
        }
        assert_eq!(got, [vec![1u8; 100], vec![2; 100], vec![3; 100]]);
        send_to(
            &socket,
            b"answer",
            peer.local_addr().unwrap(),
            Some(to.ip()),
        )
        .unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = peer.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"answer"[..], to));
        assert_eq!(drops_now(&socket), Some(0));
    }

    /// A receive of one buffer (`recvmsg`, a lane's round trip) says what a batch says, counts
    /// an empty datagram as one, and takes one datagram of several queued; an answer without
    /// a source to set (`sendto`) leaves from the socket's address.
    #[test]
    fn a_receive_of_one_buffer_says_what_a_batch_says() {
        let (socket, peer, to) = marked_pair();
        let mut batch = RecvBatch::new(8, true);
        let nothing = batch.recv_at_most(&socket, false, 1).unwrap_err();
        assert_eq!(nothing.kind(), io::ErrorKind::WouldBlock);
        peer.send_to(&[], to).unwrap();
        peer.send_to(&[5u8; 300], to).unwrap();
        socket.set_nonblocking(false).unwrap();
        let mut got = Vec::new();
        for _ in 0..2 {
            assert_eq!(batch.recv_at_most(&socket, true, 1).unwrap(), 1);
            let (data, r) = batch.received().next().unwrap();
            assert_eq!(batch.received().count(), 1);
            assert_eq!(
                (r.from, r.to_ip, r.dropped),
                (peer.local_addr().unwrap(), Some(to.ip()), Some(0))
            );
            // One datagram per buffer (an empty one strides 1, so nothing divides by 0).
            assert_eq!(r.stride, data.len().max(1));
            got.push(data.to_vec());
        }
        assert_eq!(got, [vec![], vec![5u8; 300]]);
        send_to(&socket, b"answer", peer.local_addr().unwrap(), None).unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = peer.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"answer"[..], to));
    }

    /// A socket whose buffer is full drops what arrives; the counter with the next receive
    /// and SO_MEMINFO both say how many buffers it dropped.
    #[test]
    fn a_full_socket_counts_its_drops() {
        let socket = bound();
        socket2::SockRef::from(&socket)
            .set_recv_buffer_size(4096)
            .unwrap();
        assert!(enable_drop_marks(&socket));
        let peer = bound();
        let to = socket.local_addr().unwrap();
        let mut sent = 0u32;
        while drops_now(&socket) == Some(0) {
            peer.send_to(&[7u8; 1000], to).unwrap();
            sent += 1;
            assert!(sent < 10_000, "a 4 KiB buffer never overflowed");
        }
        let dropped = drops_now(&socket).unwrap();
        let mut batch = RecvBatch::new(MAX_SLOTS, true);
        let mut marks = Vec::new();
        let mut drain = |marks: &mut Vec<u32>| {
            while batch.recv(&socket, false).is_ok_and(|n| n > 0) {
                marks.extend(batch.received().map(|(_, r)| r.dropped.unwrap()));
            }
        };
        drain(&mut marks);
        // Everything queued was queued before the first drop; each datagram sent on loopback
        // was either queued or dropped.
        assert!(marks.iter().all(|m| *m == 0), "{marks:?}");
        assert_eq!(marks.len() as u32 + dropped, sent);
        // One queued after the drops carries the count.
        peer.send_to(&[8u8; 1000], to).unwrap();
        marks.clear();
        drain(&mut marks);
        assert_eq!(marks, [dropped]);
    }
}
