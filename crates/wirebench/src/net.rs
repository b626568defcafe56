//! Socket construction: options that must be set before bind (dual stack, buffer sizes,
//! address reuse) live here, so engines receive ready sockets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::{Context, Result};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::engine::udp::UDP_SOCKET_BUFFER;

/// A non-blocking UDP socket bound to `bind` (or the unspecified address of the family, port 0),
/// with large buffers. Binding `::` accepts IPv4 too.
pub fn udp_socket(ipv6: bool, bind: Option<SocketAddr>) -> Result<std::net::UdpSocket> {
    let bind = bind.unwrap_or_else(|| unspecified(ipv6));
    let socket = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))
        .context("while creating a UDP socket")?;
    if bind.is_ipv6() && bind.ip().is_unspecified() {
        // Dual stack where the host allows it; failure just means IPv6 only.
        let _ = socket.set_only_v6(false);
    }
    // Best effort: the kernel caps these at net.core.{r,w}mem_max; the effective size is reported.
    let _ = socket.set_recv_buffer_size(UDP_SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(UDP_SOCKET_BUFFER);
    socket
        .set_nonblocking(true)
        .context("while making a UDP socket non-blocking")?;
    socket
        .bind(&bind.into())
        .with_context(|| format!("while binding UDP {bind}"))?;
    Ok(socket.into())
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
pub fn buffer_sizes<'s>(socket: impl Into<SockRef<'s>>) -> (usize, usize) {
    let s = socket.into();
    (
        s.recv_buffer_size().unwrap_or(0),
        s.send_buffer_size().unwrap_or(0),
    )
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
