//! Socket reads and writes of the round-trip paths, made as plain system calls (`syscall(2)`)
//! instead of through glibc's wrappers of the same names.
//!
//! Why: in a process with more than one thread (every wirebench process), glibc's wrapper of a
//! call that may block (`recv`, `send`, `recvmsg`, `sendto`, `read`, `write`...) makes the call
//! a cancellation point: it switches the thread to asynchronous cancellation before the call and
//! back after it, two atomic compare-and-swaps on the thread's cancellation state. Nothing here
//! cancels threads (Rust has no `pthread_cancel`), so that work is for nothing. A single-threaded
//! peer such as sockperf skips it; measured on two CPUs with both ends on one (`perf record`),
//! it was 1.7 % of a 1 KiB UDP stop-and-wait round trip, about 0.09 µs, every call of which
//! lies between the client's two clock reads.
//!
//! Each function returns what the system call returned, or the error it set; an interrupted
//! call (`EINTR`) is returned as such, for the caller to retry or to treat as its alarm.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// The result of a socket system call: the count it returned, or the error it set.
fn check(ret: libc::c_long) -> io::Result<usize> {
    usize::try_from(ret).map_err(|_| io::Error::last_os_error())
}

// Every integer argument below is widened to `c_long` before it is passed: `syscall` reads
// each of its variadic arguments as a `long`, and a 32-bit one passed as it is would leave the
// register's upper half unspecified.

/// `recvfrom(2)` of at most `len` bytes into `buf`, without the sender's address.
///
/// # Safety
/// `buf` is writable for `len` bytes for the call.
unsafe fn recv_into(fd: RawFd, buf: *mut u8, len: usize, flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is the caller's to uphold; the address arguments are null, which recvfrom
    // accepts.
    check(unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            libc::c_long::from(fd),
            buf,
            len,
            libc::c_long::from(flags),
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    })
}

/// `recv(2)` into `buf`.
pub fn recv(socket: &impl AsRawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length for the whole call.
    unsafe { recv_into(socket.as_raw_fd(), buf.as_mut_ptr(), buf.len(), flags) }
}

/// `recv(2)` into room not yet initialised; the first count bytes of it are, after.
pub fn recv_uninit(
    socket: &impl AsRawFd,
    buf: &mut [std::mem::MaybeUninit<u8>],
    flags: libc::c_int,
) -> io::Result<usize> {
    // SAFETY: as `recv`: the kernel only writes into `buf`, within its length.
    unsafe {
        recv_into(
            socket.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            flags,
        )
    }
}

/// `send(2)` of `buf` on a connected socket.
pub fn send(socket: &impl AsRawFd, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: a null address of length 0 is what `send` passes to sendto.
    unsafe { sendto(socket.as_raw_fd(), buf, flags, std::ptr::null(), 0) }
}

/// [`send`], again when a signal interrupted the call before it sent anything: a blocking
/// receive's alarm (`engine::alarm`) that comes due just then is no send error.
pub fn send_through_signals(
    socket: &impl AsRawFd,
    buf: &[u8],
    flags: libc::c_int,
) -> io::Result<usize> {
    loop {
        match send(socket, buf, flags) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// A connected socket read and written through [`recv`] and [`send`], as
/// `std::io::{Read, Write}` (as std's sockets do: `recv` and `send`, never `read` and `write`,
/// which reach the socket through the file layer, a longer path measured at 2 % of a TCP round
/// trip; and `MSG_NOSIGNAL`, so a write to a closed peer is an error, not a signal).
#[derive(Debug, Clone, Copy)]
pub struct Direct<'a, T>(pub &'a T);

impl<T: AsRawFd> io::Read for Direct<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        recv(self.0, buf, 0)
    }
}

impl<T: AsRawFd> io::Write for Direct<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        send(self.0, buf, libc::MSG_NOSIGNAL)
    }

    /// A socket holds nothing back to flush.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `sendto(2)` of `buf` to the address `to` (`len` bytes of it).
///
/// # Safety
/// `to` points at a socket address of at least `len` bytes, alive for the call.
pub unsafe fn sendto(
    fd: RawFd,
    buf: &[u8],
    flags: libc::c_int,
    to: *const libc::sockaddr,
    len: libc::socklen_t,
) -> io::Result<usize> {
    // SAFETY: `buf` is readable for its length; `to` is the caller's to uphold.
    check(unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(fd),
            buf.as_ptr(),
            buf.len(),
            libc::c_long::from(flags),
            to,
            libc::c_long::from(len),
        )
    })
}

/// `recvmsg(2)` into the buffers `msg` describes.
///
/// # Safety
/// Every pointer in `msg` (name, vectors, control) is valid for the length beside it, and
/// writable, for the call.
pub unsafe fn recvmsg(fd: RawFd, msg: *mut libc::msghdr, flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: the caller's to uphold.
    check(unsafe {
        libc::syscall(
            libc::SYS_recvmsg,
            libc::c_long::from(fd),
            msg,
            libc::c_long::from(flags),
        )
    })
}

/// `sendmsg(2)` of what `msg` describes.
///
/// # Safety
/// Every pointer in `msg` is valid for the length beside it for the call.
pub unsafe fn sendmsg(
    fd: RawFd,
    msg: *const libc::msghdr,
    flags: libc::c_int,
) -> io::Result<usize> {
    // SAFETY: the caller's to uphold.
    check(unsafe {
        libc::syscall(
            libc::SYS_sendmsg,
            libc::c_long::from(fd),
            msg,
            libc::c_long::from(flags),
        )
    })
}

/// `recvmmsg(2)` into the first `len` headers at `msgs`, without a timeout.
///
/// # Safety
/// `msgs` points at `len` headers whose pointers are valid and writable for the call.
pub unsafe fn recvmmsg(
    fd: RawFd,
    msgs: *mut libc::mmsghdr,
    len: libc::c_uint,
    flags: libc::c_int,
) -> io::Result<usize> {
    // SAFETY: the caller's to uphold; a null timeout is allowed.
    check(unsafe {
        libc::syscall(
            libc::SYS_recvmmsg,
            libc::c_long::from(fd),
            msgs,
            libc::c_long::from(len),
            libc::c_long::from(flags),
            std::ptr::null_mut::<libc::timespec>(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    fn connected_pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        // A backstop for a test that fails: a receive that waits too long errs.
        a.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        (a, b)
    }

    #[test]
    fn a_datagram_sent_is_received_whole() {
        let (a, b) = connected_pair();
        assert_eq!(send(&a, b"round trip", 0).unwrap(), 10);
        let mut buf = [0u8; 64];
        assert_eq!(recv(&b, &mut buf, 0).unwrap(), 10);
        assert_eq!(&buf[..10], b"round trip");
    }

    #[test]
    fn an_empty_queue_is_would_block_not_a_count() {
        let (a, _b) = connected_pair();
        let mut buf = [0u8; 8];
        let err = recv(&a, &mut buf, libc::MSG_DONTWAIT).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_closed_descriptor_is_its_error() {
        // Not a closed socket's number: tests run in parallel, and another may reuse it.
        let fd: RawFd = -1;
        let mut buf = [0u8; 8];
        assert_eq!(
            recv(&fd, &mut buf, 0).unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
        assert_eq!(
            send(&fd, b"x", 0).unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
    }

    #[test]
    fn writing_to_a_reset_connection_is_an_error() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        drop(server);
        // The first write is taken (the peer only said it will send no more) and draws the
        // peer's reset.
        assert_eq!(Direct(&client).write(&[0u8; 1024]).unwrap(), 1024);
        // Wait for the reset, however late a busy machine delivers it: a poll that asks for
        // no events reports only an error or a hang-up, which the reset brings both.
        let mut waiting = libc::pollfd {
            fd: client.as_raw_fd(),
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call.
        assert_eq!(unsafe { libc::poll(&mut waiting, 1, 20_000) }, 1);
        // The next write fails on it (EPIPE or ECONNRESET). (Rust's runtime ignores SIGPIPE,
        // so this test cannot tell MSG_NOSIGNAL's absence; the flag matters in a host that
        // does not ignore it.)
        let code = Direct(&client)
            .write(&[0u8; 1024])
            .unwrap_err()
            .raw_os_error();
        assert!(
            matches!(code, Some(libc::EPIPE) | Some(libc::ECONNRESET)),
            "{code:?}"
        );
    }

    #[test]
    fn direct_reads_and_writes_a_tcp_stream() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Direct(&client).write_all(b"request").unwrap();
        let mut buf = [0u8; 7];
        Direct(&server).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"request");
        drop(client);
        assert_eq!(Direct(&server).read(&mut buf).unwrap(), 0);
    }

    #[test]
    fn sendto_reaches_the_address_given() {
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let to = socket2::SockAddr::from(receiver.local_addr().unwrap());
        // SAFETY: `to` is alive and its length is its own.
        let n = unsafe { sendto(sender.as_raw_fd(), b"hi", 0, to.as_ptr().cast(), to.len()) };
        assert_eq!(n.unwrap(), 2);
        let mut buf = [0u8; 8];
        let (n, from) = receiver.recv_from(&mut buf).unwrap();
        assert_eq!(
            (&buf[..n], from),
            (&b"hi"[..], sender.local_addr().unwrap())
        );
    }
}
