//! Where a client connects: `--server HOST[:PORT]` with `-4`/`-6`, `-p` and `--bind`, resolved once.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use wirebench_core::vocab::error::UsageError;

use crate::cli::{AddressArgs, DEFAULT_PORT};
use crate::runner::Target;

use super::error::usage;

/// The server `run`, `ping` and `rr` test against: `--server` with `-p`, `-4` and `-6`
/// applied, or the embedded server on 127.0.0.1 (`-6`: ::1).
pub fn resolve_target(server: Option<&str>, address: &AddressArgs) -> Result<Target, UsageError> {
    match server {
        None => {
            if let Some(port) = address.port {
                return Err(usage(format!(
                    "-p/--port {port} is the port of a server elsewhere: add --server HOST \
                     (without it, the embedded server takes a free port)"
                )));
            }
            Ok(Target::Embedded(if address.ipv6 {
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            } else {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            }))
        }
        Some(name) => {
            let (name, addr) = resolve_address(name, address, DEFAULT_PORT, "--server")?;
            Ok(Target::Remote { name, addr })
        }
    }
}

/// Resolves HOST, HOST:PORT or [V6]:PORT: a HOST alone gets `-p` or `default_port`; `-4`/`-6`
/// pick the address family. Returns the name for messages (with the `-p` port joined to it, as
/// if typed HOST:PORT) and the address.
pub(super) fn resolve_address(
    name: &str,
    address: &AddressArgs,
    default_port: u16,
    flag: &str,
) -> Result<(String, SocketAddr), UsageError> {
    let bare = name.parse::<IpAddr>().is_ok() || !name.contains(':');
    if !bare && address.port.is_some() {
        return Err(usage(format!(
            "{flag} {name} already names a port: drop -p/--port or the :PORT"
        )));
    }
    let named = if bare {
        let port = address.port.unwrap_or(default_port);
        match name.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            _ => format!("{name}:{port}"),
        }
    } else {
        name.to_string()
    };
    let all: Vec<SocketAddr> = named
        .to_socket_addrs()
        .map_err(|e| {
            usage(format!(
                "{flag} {name}: cannot resolve ({e}); expected HOST, HOST:PORT or [IPv6]:PORT"
            ))
        })?
        .collect();
    let (family, wanted): (&str, fn(&SocketAddr) -> bool) = if address.ipv4 {
        (" IPv4", SocketAddr::is_ipv4)
    } else if address.ipv6 {
        (" IPv6", SocketAddr::is_ipv6)
    } else {
        ("", |_| true)
    };
    let addr = all.iter().copied().find(wanted).ok_or_else(|| {
        usage(format!(
            "{flag} {name}: the name resolves to no{family} address"
        ))
    })?;
    let shown = if address.port.is_some() {
        named
    } else {
        name.to_string()
    };
    Ok((shown, addr))
}

/// Resolves HOST, HOST:PORT or [V6]:PORT; the port defaults to [`DEFAULT_PORT`].
pub(super) fn resolve_server(name: &str) -> Result<Target, UsageError> {
    let with_port = if name.parse::<IpAddr>().is_ok() || !name.contains(':') {
        // A bare address or host name: add the default port (bracketing IPv6).
        match name.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => format!("[{v6}]:{DEFAULT_PORT}"),
            _ => format!("{name}:{DEFAULT_PORT}"),
        }
    } else {
        name.to_string()
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| {
            usage(format!(
                "--server {name}: cannot resolve ({e}); expected HOST, HOST:PORT or [IPv6]:PORT"
            ))
        })?
        .next()
        .ok_or_else(|| usage(format!("--server {name}: the name resolves to no address")))?;
    Ok(Target::Remote {
        name: name.to_string(),
        addr,
    })
}

/// The HOST of HOST, HOST:PORT or [V6]:PORT.
pub(super) fn host_part(name: &str) -> String {
    if name.parse::<IpAddr>().is_ok() {
        return name.to_string();
    }
    if let Some(rest) = name.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_string();
    }
    name.rsplit_once(':').map_or(name, |(h, _)| h).to_string()
}
