//! Socket construction: options that must be set before bind (dual stack, buffer sizes,
//! address reuse) live here, so engines receive ready sockets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use std::io;

use anyhow::{Context, Result};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::proto::{DataPathInfo, DataPathOptions};

/// Socket buffer size we ask for on UDP sockets; the kernel caps it at its `*mem_max` unless we
/// may go past that (see `size_udp_buffers`).
pub const UDP_SOCKET_BUFFER: usize = 8 << 20;

/// What every socket the client opens gets, as iperf3's -B and -S give them: the local
/// address and the IP type of service. A process runs one client, so the command sets these
/// once, before its first socket; every client socket is made by [`udp_socket`] (without a
/// bind address), [`connect_tcp`] or [`connect_tcp_data`], so none is missed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientSockets {
    /// `-B`: the local address (port chosen by the OS).
    pub source: Option<IpAddr>,
    /// `-S`: the IP type of service (IPv6: traffic class).
    pub tos: Option<u8>,
    /// `--dont-fragment`: UDP datagrams larger than the path MTU are refused, not fragmented.
    pub dont_fragment: bool,
}

static CLIENT_SOCKETS: std::sync::OnceLock<ClientSockets> = std::sync::OnceLock::new();

/// Sets what every client socket of this process gets; false when it was set already.
pub fn set_client_sockets(c: ClientSockets) -> bool {
    CLIENT_SOCKETS.set(c).is_ok()
}

fn client_sockets() -> ClientSockets {
    CLIENT_SOCKETS.get().copied().unwrap_or_default()
}

/// Sets whether the IP layer may fragment what `socket` sends that is larger than the path
/// MTU (`IP_MTU_DISCOVER`: `IP_PMTUDISC_DONT`), or must refuse it with `EMSGSIZE`
/// (`IP_PMTUDISC_DO`: Don't Fragment set, iperf3's --dont-fragment). Linux; elsewhere the
/// OS default stays.
#[cfg(target_os = "linux")]
pub fn set_fragmentation<S: std::os::fd::AsRawFd>(
    socket: &S,
    ipv6: bool,
    fragment: bool,
) -> io::Result<()> {
    let (level, name, value) = match (ipv6, fragment) {
        (true, true) => (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DONT,
        ),
        (true, false) => (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        ),
        (false, true) => (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DONT,
        ),
        (false, false) => (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        ),
    };
    set_int_option(socket, level, name, value)
}

#[cfg(not(target_os = "linux"))]
pub fn set_fragmentation<S>(_: &S, _: bool, _: bool) -> io::Result<()> {
    Ok(())
}

/// What a UDP send refused with `EMSGSIZE` under `--dont-fragment` means, and the `-l` to
/// give instead: `message` bytes of `-l` travel after `header` bytes of the tool's header.
pub fn too_large_for_the_path(message: u32, header: usize) -> String {
    let datagram = message as usize + header;
    let fits_1500 = 1500 - 28 - header;
    format!(
        "a {datagram}-byte datagram does not fit the path MTU, and --dont-fragment forbids fragmenting it: \
         give -l at most the MTU less {} bytes over IPv4 ({} over IPv6), e.g. -l {fits_1500} for a 1500-byte MTU",
        28 + header,
        48 + header
    )
}

/// Whether the client's UDP datagrams may be fragmented (no `--dont-fragment`).
pub fn client_may_fragment() -> bool {
    !client_sockets().dont_fragment
}

/// Sets the IP type of service (IPv4) or traffic class (IPv6) of a socket.
pub fn set_tos(s: &SockRef<'_>, ipv6: bool, tos: u8) -> io::Result<()> {
    if ipv6 {
        s.set_tclass_v6(u32::from(tos))
    } else {
        s.set_tos(u32::from(tos))
    }
}

/// A client's TCP connection to `server` (the control connection, and the iperf3 client's
/// streams), from `-B`'s address and with `-S`'s type of service when given.
pub async fn connect_tcp(server: SocketAddr) -> io::Result<tokio::net::TcpStream> {
    let socket = client_tcp_socket(server)?;
    socket.connect(server).await
}

/// A TCP socket to connect to `server` with the client's [`ClientSockets`] applied.
fn client_tcp_socket(server: SocketAddr) -> io::Result<tokio::net::TcpSocket> {
    let socket = if server.is_ipv6() {
        tokio::net::TcpSocket::new_v6()
    } else {
        tokio::net::TcpSocket::new_v4()
    }?;
    let c = client_sockets();
    if let Some(ip) = c.source {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    if let Some(tos) = c.tos {
        set_tos(&SockRef::from(&socket), server.is_ipv6(), tos)?;
    }
    Ok(socket)
}

/// A non-blocking UDP socket bound to `bind` (or, for a client, `-B`'s address or the
/// unspecified address of the family, port 0, with `-S`'s type of service), with buffers of
/// `buffer` bytes (default: large). Binding `::` accepts IPv4 too.
pub fn udp_socket(
    ipv6: bool,
    bind: Option<SocketAddr>,
    buffer: Option<u32>,
) -> Result<std::net::UdpSocket> {
    let client = bind.is_none().then(client_sockets);
    let bind = bind.unwrap_or_else(|| match client.and_then(|c| c.source) {
        Some(ip) => SocketAddr::new(ip, 0),
        None => unspecified(ipv6),
    });
    let socket = bound_udp_socket(bind, buffer, false, client.and_then(|c| c.tos))?;
    if client.is_some_and(|c| c.dont_fragment) {
        set_fragmentation(&socket, bind.is_ipv6(), false)
            .context("while setting Don't Fragment (--dont-fragment)")?;
    }
    Ok(socket)
}

/// A UDP socket joining the port group (`SO_REUSEPORT`) on `bind`, large buffers,
/// non-blocking: a receive lane beside the server's shared socket (`engine::udp::lanes`). Only
/// sockets of the same user may join a group.
pub fn udp_port_group_socket(bind: SocketAddr) -> Result<std::net::UdpSocket> {
    bound_udp_socket(bind, None, true, None)
}

/// A blocking UDP socket on the port of the server's socket `local` (joining its group, which
/// must be open: `SO_REUSEPORT`), connected to `peer`: the kernel then gives it what `peer`
/// sends to that port, ahead of the group. Where `local` is a wildcard address it is bound to
/// `to`, the address the client asked at, so that it answers from there. Returns it with
/// `peer` as it names it (an IPv4 peer of a dual-stack socket mapped to IPv6).
///
/// Between its bind and its connect it is an unconnected member of the group and can catch
/// anyone's datagrams: its reader must check who sent each (`engine::demux::Strays`).
pub fn udp_connected_port_socket(
    local: SocketAddr,
    to: Option<IpAddr>,
    peer: SocketAddr,
) -> Result<(std::net::UdpSocket, SocketAddr)> {
    let socket = udp_port_socket_at(local, to)?;
    let peer = connect_blocking(&socket, peer)?;
    Ok((socket, peer))
}

/// The first half of [`udp_connected_port_socket`]: bound, not yet connected.
pub fn udp_port_socket_at(local: SocketAddr, to: Option<IpAddr>) -> Result<std::net::UdpSocket> {
    let local_ip = match to {
        Some(ip) if local.ip().is_unspecified() => same_family(ip, local),
        _ => local.ip(),
    };
    udp_port_group_socket(SocketAddr::new(local_ip, local.port()))
}

/// The second half of [`udp_connected_port_socket`]: connects `socket` to `peer` (named as
/// the socket names it, which it returns) and makes it blocking.
pub fn connect_blocking(socket: &std::net::UdpSocket, peer: SocketAddr) -> Result<SocketAddr> {
    let local = socket
        .local_addr()
        .context("while reading a UDP socket's address")?;
    let peer = SocketAddr::new(same_family(peer.ip(), local), peer.port());
    socket
        .connect(peer)
        .with_context(|| format!("while connecting a UDP socket to {peer}"))?;
    socket
        .set_nonblocking(false)
        .context("while preparing a connected UDP socket")?;
    Ok(peer)
}

/// Wakes a thread blocked receiving on `socket` (or a clone of it) at once: shut down for
/// reading, its receive returns empty, now and after; sending still works. An unconnected
/// socket reports ENOTCONN, yet is shut down and its reader woken.
pub fn wake_reader(socket: &std::net::UdpSocket) {
    let _ = SockRef::from(socket).shutdown(std::net::Shutdown::Read);
}

/// `ip` in the family of the socket at `local` (an IPv4 address on a dual-stack IPv6 socket
/// is mapped).
fn same_family(ip: IpAddr, local: SocketAddr) -> IpAddr {
    match (ip, local) {
        (IpAddr::V4(v4), SocketAddr::V6(_)) => IpAddr::V6(v4.to_ipv6_mapped()),
        _ => ip,
    }
}

fn bound_udp_socket(
    bind: SocketAddr,
    buffer: Option<u32>,
    port_group: bool,
    tos: Option<u8>,
) -> Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))
        .context("while creating a UDP socket")?;
    if let Some(tos) = tos {
        set_tos(&SockRef::from(&socket), bind.is_ipv6(), tos)
            .context("while setting the type of service (-S)")?;
    }
    #[cfg(unix)]
    if port_group {
        socket
            .set_reuse_port(true)
            .context("while setting SO_REUSEPORT")?;
    }
    if bind.is_ipv6() && bind.ip().is_unspecified() {
        // Dual stack where the host allows it; failure just means IPv6 only.
        let _ = socket.set_only_v6(false);
    }
    size_udp_buffers(&socket, buffer.map_or(UDP_SOCKET_BUFFER, |b| b as usize));
    socket
        .set_nonblocking(true)
        .context("while making a UDP socket non-blocking")?;
    socket
        .bind(&bind.into())
        .with_context(|| format!("while binding UDP {bind}"))?;
    Ok(socket.into())
}

/// Asks for UDP socket buffers of `size` bytes (best effort; the effective sizes, which Linux
/// reports doubled for its own bookkeeping, go with each run).
///
/// The kernel caps a plain request at net.core.{r,w}mem_max, 208 KiB on a stock Debian host,
/// which a loaded server's one UDP socket overruns: hundreds of concurrent QUIC and UDP
/// sessions then lost handshake packets there until handshakes timed out. A privileged process
/// (CAP_NET_ADMIN) may go past the cap, as quic-go and WireGuard do, so a capped request is
/// made again that way.
fn size_udp_buffers(socket: &Socket, size: usize) {
    let _ = socket.set_recv_buffer_size(size);
    let _ = socket.set_send_buffer_size(size);
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let uncapped = size.saturating_mul(2);
        let value = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
        if socket.recv_buffer_size().is_ok_and(|got| got < uncapped) {
            let _ = setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &value,
            );
        }
        if socket.send_buffer_size().is_ok_and(|got| got < uncapped) {
            let _ = setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUFFORCE,
                &value,
            );
        }
    }
}

/// A non-blocking TCP listener on `bind`, address reuse on, dual stack for `::`.
pub fn tcp_listener(bind: SocketAddr) -> Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(bind), Type::STREAM, Some(Protocol::TCP))
        .context("while creating a TCP socket")?;
    socket
        .set_reuse_address(true)
        .context("while setting SO_REUSEADDR")?;
    if bind.is_ipv6() && bind.ip().is_unspecified() {
        let _ = socket.set_only_v6(false);
    }
    socket
        .set_nonblocking(true)
        .context("while making the listener non-blocking")?;
    socket
        .bind(&bind.into())
        .with_context(|| format!("while binding TCP {bind}"))?;
    socket
        .listen(1024)
        .with_context(|| format!("while listening on TCP {bind}"))?;
    Ok(socket.into())
}

/// The effective receive and send buffer sizes of a socket, as the kernel reports them.
pub fn buffer_sizes(s: &SockRef<'_>) -> (usize, usize) {
    (
        s.recv_buffer_size().unwrap_or(0),
        s.send_buffer_size().unwrap_or(0),
    )
}

/// Where the kernel lists the TCP congestion controls it offers.
const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// The TCP congestion control algorithms this kernel offers, when it says (Linux).
pub fn available_congestion_controls() -> Option<Vec<String>> {
    std::fs::read_to_string(AVAILABLE_CC)
        .ok()
        .map(|s| s.split_whitespace().map(str::to_string).collect())
}

/// A client's TCP data connection to `server` with a session's options: `-w` before connect
/// (so the window scale offered in the SYN fits the buffer), the rest after, and the sender's
/// pacing rate (`--rate`, [`set_max_pacing_rate`]) when given.
pub async fn connect_tcp_data(
    server: SocketAddr,
    opts: &DataPathOptions,
    mechanism: Mechanism,
    pacing_bps: Option<u64>,
) -> Result<tokio::net::TcpStream> {
    let socket = client_tcp_socket(server).context("while creating the TCP data socket")?;
    if let Some(w) = opts.window {
        socket.set_send_buffer_size(w).context("while setting -w")?;
        socket.set_recv_buffer_size(w).context("while setting -w")?;
    }
    if let Some(mss) = opts.mss {
        // Before connect, so the SYN announces it and the server sends no larger segments.
        SockRef::from(&socket)
            .set_mss(mss)
            .context("while setting -M (TCP_MAXSEG)")?;
    }
    let data = socket
        .connect(server)
        .await
        .with_context(|| format!("cannot open the TCP data connection to {server}"))?;
    apply_tcp_options(&data, opts, mechanism).context("while setting TCP options")?;
    if let Some(rate) = pacing_bps {
        set_max_pacing_rate(&data, rate)
            .context("while pacing the TCP data socket to --rate (SO_MAX_PACING_RATE)")?;
    }
    Ok(data)
}

/// Applies the requested options to a TCP data socket (either end). Stop-and-wait always
/// sets TCP_NODELAY: with one message in flight, Nagle would hold back its tail.
pub fn apply_tcp_options<'s>(
    socket: impl Into<SockRef<'s>>,
    opts: &DataPathOptions,
    mechanism: Mechanism,
) -> io::Result<()> {
    let s = socket.into();
    if let Some(w) = opts.window {
        s.set_send_buffer_size(w as usize)?;
        s.set_recv_buffer_size(w as usize)?;
    }
    if let Some(cc) = &opts.congestion {
        set_congestion(&s, cc)?;
    }
    if opts.nodelay || mechanism == Mechanism::StopAndWait {
        s.set_nodelay(true)?;
    }
    if let Some(mss) = opts.mss {
        s.set_mss(mss)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot set -M {mss}: {e}")))?;
    }
    if let Some(tos) = opts.tos {
        let ipv6 = s.local_addr()?.is_ipv6();
        set_tos(&s, ipv6, tos)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot set -S {tos}: {e}")))?;
    }
    Ok(())
}

/// Waits at most `limit` for the peer to close its side of a TCP connection on which nothing
/// more is due (a stop-and-wait sender says so once it has its last acknowledgement): `Ok`
/// at its FIN, and also when `limit` passes without one (a peer that never closes, as older
/// wirebench clients did, only makes the end late); an error if it sends more instead, or the
/// connection fails. Works on blocking and non-blocking sockets alike.
pub fn wait_for_end(socket: &std::net::TcpStream, limit: std::time::Duration) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd, which outlives the call.
        let rc = unsafe { libc::poll(&mut fd, 1, ms) };
        match rc {
            0 => return Ok(()),
            n if n > 0 => break,
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    let mut byte = [0u8; 1];
    match socket.peek(&mut byte) {
        Ok(0) => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the client sent more than its total",
        )),
        Err(e) => Err(e),
    }
}

/// Paces a TCP sender to `rate_bps` bits per second in the kernel (SO_MAX_PACING_RATE: the fq
/// qdisc, or TCP's own pacing under any other qdisc, spaces the packets out). `--rate` on TCP.
#[cfg(target_os = "linux")]
pub fn set_max_pacing_rate<'s>(socket: impl Into<SockRef<'s>>, rate_bps: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let s = socket.into();
    let bytes_per_second = (rate_bps / 8).max(1);
    // Kernels before 64-bit pacing rates read a 32-bit value; ~0 is "unlimited" there, so a
    // rate that does not fit is passed as 64 bits (which those kernels then cap).
    let rc = match u32::try_from(bytes_per_second) {
        Ok(v) if v != u32::MAX => setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &v,
        ),
        _ => setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &bytes_per_second,
        ),
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Lets a blocking read of `socket` sleep until `bytes` are waiting (SO_RCVLOWAT) rather than
/// wake at the first segment; 1 is the default. A read still returns early at the end of the
/// stream, on an error or when its own timeout passes.
#[cfg(target_os = "linux")]
pub fn set_receive_low_water(socket: &impl std::os::fd::AsRawFd, bytes: usize) -> io::Result<()> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_RCVLOWAT, bytes)
}

/// Bytes that arrived on a stream socket and were not read yet (`FIONREAD`); None where the
/// kernel does not say.
pub fn bytes_queued(socket: &impl std::os::fd::AsRawFd) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which points at a live c_int.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::FIONREAD, &mut n) };
    if rc == 0 {
        usize::try_from(n).ok()
    } else {
        None
    }
}

/// Where SO_RCVLOWAT's wake-up rule is not known to hold, reads keep waking at once.
#[cfg(not(target_os = "linux"))]
pub fn set_receive_low_water(_: &impl std::os::fd::AsRawFd, _: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "receive low-water batching is used on Linux only",
    ))
}

/// SO_MAX_PACING_RATE exists on Linux only.
#[cfg(not(target_os = "linux"))]
pub fn set_max_pacing_rate<'s>(_: impl Into<SockRef<'s>>, _: u64) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "TCP pacing (SO_MAX_PACING_RATE) needs Linux",
    ))
}

/// Sets an integer socket option (`setsockopt` with a `c_int`) on a socket this process owns.
/// Linux.
#[cfg(target_os = "linux")]
pub fn set_int_option(
    socket: &impl std::os::fd::AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    match setsockopt(socket.as_raw_fd(), level, name, &value) {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// setsockopt(`level`, `name`) with a value of `T`'s width: the one raw call the options here
/// go through.
#[cfg(target_os = "linux")]
fn setsockopt<T>(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> libc::c_int {
    // SAFETY: setsockopt reads `size_of::<T>()` bytes from a valid `T` for the duration of the
    // call, on a descriptor the caller's socket owns.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    }
}

/// What a TCP data socket runs with, as the kernel reports it (busy-poll, a choice of the
/// caller's that the socket does not know, is left for the caller to set).
pub fn tcp_data_path<'s>(socket: impl Into<SockRef<'s>>) -> DataPathInfo {
    let s = socket.into();
    let (recv, send) = buffer_sizes(&s);
    DataPathInfo {
        recv_buffer: recv as u64,
        send_buffer: send as u64,
        congestion: congestion(&s),
        nodelay: s.nodelay().unwrap_or(false),
        gso_segments: 0,
        cpu: current_cpu(),
        local_addr: local_addr(&s),
        mss: tcp_mss(&s),
        ..DataPathInfo::default()
    }
}

/// A socket's own address as `IP:PORT`, if it has one.
pub fn local_addr(s: &SockRef<'_>) -> Option<String> {
    s.local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map(|a| a.to_string())
}

#[cfg(unix)]
fn tcp_mss(s: &SockRef<'_>) -> Option<u32> {
    s.mss().ok()
}

#[cfg(not(unix))]
fn tcp_mss(_: &SockRef<'_>) -> Option<u32> {
    None
}

#[cfg(target_os = "linux")]
fn set_congestion(s: &SockRef<'_>, cc: &str) -> io::Result<()> {
    s.set_tcp_congestion(cc.as_bytes())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot use congestion control {cc}: {e}")))
}

#[cfg(not(target_os = "linux"))]
fn set_congestion(_: &SockRef<'_>, cc: &str) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("cannot use congestion control {cc}: only Linux lets a socket choose one"),
    ))
}

#[cfg(target_os = "linux")]
fn congestion(s: &SockRef<'_>) -> Option<String> {
    s.tcp_congestion().ok().map(|name| {
        String::from_utf8_lossy(&name)
            .trim_end_matches('\0')
            .to_string()
    })
}

#[cfg(not(target_os = "linux"))]
fn congestion(_: &SockRef<'_>) -> Option<String> {
    None
}

/// The CPU the calling thread runs on now, where the OS tells (Linux).
#[cfg(target_os = "linux")]
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and only reads the caller's scheduling state.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
}

/// The CPU the calling thread runs on now, where the OS tells (not here).
#[cfg(not(target_os = "linux"))]
pub fn current_cpu() -> Option<u32> {
    None
}

/// Maps an IPv4-mapped IPv6 address (from a dual-stack socket) back to IPv4, so peers compare equal.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

fn unspecified(ipv6: bool) -> SocketAddr {
    if ipv6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A privileged process gets the UDP buffers it asks for whatever net.core.rmem_max says
    /// (a stock Debian host caps plain requests at 208 KiB; CI runs as root there), large or
    /// small.
    #[test]
    #[cfg(target_os = "linux")]
    fn udp_sockets_get_the_buffers_they_ask_for_when_privileged() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root (CAP_NET_ADMIN) to go past net.core.rmem_max");
            return;
        }
        let socket = udp_socket(false, Some("127.0.0.1:0".parse().unwrap()), None).unwrap();
        // Linux reports twice what it was given.
        let doubled = 2 * UDP_SOCKET_BUFFER;
        assert_eq!(buffer_sizes(&SockRef::from(&socket)), (doubled, doubled));
        let small = udp_socket(false, Some("127.0.0.1:0".parse().unwrap()), Some(65536)).unwrap();
        assert_eq!(buffer_sizes(&SockRef::from(&small)), (131072, 131072));
    }
}
