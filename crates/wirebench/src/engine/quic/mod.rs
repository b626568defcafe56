//! QUIC endpoints (quinn): the server endpoint on the shared UDP socket, client endpoints, and
//! the transport tuning both use. Data then flows through `engine::stream` on one QUIC stream,
//! by way of `engine::quic::stream`; `engine::quic::socket` is the UDP socket under every
//! endpoint; `engine::quic::home` the threads the server's connections run on.

pub mod home;
pub mod inline;
pub mod inline_server;
pub mod socket;
pub mod stream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{
    ClientConfig, Endpoint, EndpointConfig, IdleTimeout, MtuDiscoveryConfig, ServerConfig,
    TransportConfig, VarInt,
};
use socket2::SockRef;
use wirebench_core::wire::proto::DataPathInfo;

use crate::engine::demux::{DatagramHandler, DemuxSocket, QuicDivert};
use crate::transport::tls::{self, ServerIdentity};
use home::ConnectionHomes;
use socket::QuicUdpSocket;

/// Flow-control window of one stream (quinn's default is 1.25 MB): the most a sender's window
/// may grow to, enough for 2.7 Gbit/s at a 50 ms round trip. Our senders start far lower and
/// grow only as the path needs (`wirebench_core::machine::send_window`): a sender that filled 16 MiB on loopback
/// overflowed the receiver's 8 MiB UDP buffer (2,000 to 7,000 packets lost per 512 MiB), where
/// the path needs tens of kilobytes.
pub(crate) const STREAM_WINDOW: u32 = 16 << 20;

/// Connection-wide receive window and send buffer.
const CONNECTION_WINDOW: u32 = 32 << 20;

/// The largest UDP payload QUIC allows (RFC 9000: 65527), which a loopback path carries (64 KiB
/// datagrams); the highest `--quic-mtu`. quinn's default bound, 1452, keeps
/// loopback and jumbo-frame paths at Ethernet-sized packets, and every packet costs the same
/// header protection, frame and acknowledgement bookkeeping whatever its size (measured on
/// loopback: 771,000 packets and 3.1 CPU s per GiB at 1452, 17,000 and 1.3 s at 65495).
pub const MAX_UDP_PAYLOAD: u16 = 65_527;

/// The largest UDP payload that still fits a segmentation-offload (GSO) send: quinn 0.11 puts
/// up to 10 packets in one send, and the kernel takes at most 65507 bytes in one. Above this,
/// GSO sends fail as a whole (quinn-udp drops them without a word), which looks like a path
/// black hole and sets the connection back to 1200 bytes. So larger MTUs go without GSO.
pub const GSO_MAX_MTU: u16 = 6_550;

/// The server's transport settings: PMTU discovery up to [`GSO_MAX_MTU`], with segmentation
/// offload. The client's advertised limit caps what a server sends.
pub fn transport() -> Arc<TransportConfig> {
    Arc::new(transport_with(GSO_MAX_MTU))
}

/// A client's transport settings: the server's, with discovery up to `max_mtu`, waiting up to
/// [`HANDSHAKE_TIMEOUT`] for the server's first answer.
///
/// quinn bounds a handshake by the local idle timeout until the peer's transport parameters
/// arrive, and by the negotiated one (the smaller of the two) after. Advertising the longer
/// bound gives a loaded server's first answer time (a lost Initial is resent after about 1 s,
/// then 2 s, 4 s), while our server's [`IDLE_TIMEOUT`] still governs the connection once it
/// has answered.
pub fn client_transport(max_mtu: u16) -> Arc<TransportConfig> {
    let mut t = transport_with(max_mtu);
    if let Ok(wait) = IdleTimeout::try_from(HANDSHAKE_TIMEOUT) {
        t.max_idle_timeout(Some(wait));
    }
    Arc::new(t)
}

/// The transport settings with PMTU discovery bounded by `max_mtu` (without GSO above
/// [`GSO_MAX_MTU`]).
fn transport_with(max_mtu: u16) -> TransportConfig {
    let mut t = TransportConfig::default();
    let mut mtud = MtuDiscoveryConfig::default();
    mtud.upper_bound(max_mtu);
    t.mtu_discovery_config(Some(mtud))
        .enable_segmentation_offload(max_mtu <= GSO_MAX_MTU)
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_WINDOW))
        .send_window(u64::from(CONNECTION_WINDOW))
        .max_concurrent_bidi_streams(VarInt::from_u32(4))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .keep_alive_interval(Some(KEEP_ALIVE));
    if let Ok(idle) = IdleTimeout::try_from(IDLE_TIMEOUT) {
        t.max_idle_timeout(Some(idle));
    }
    t
}

/// The default bound of a client's PMTU discovery: the largest size that keeps segmentation
/// offload. quinn probes upwards from 1200 and stops where probes are lost, so an Ethernet path
/// settles at its own limit (1452–1472) while loopback and jumbo-frame paths reach this one
/// (measured on loopback, 1 KiB messages: 2.3–3.3 Gbit/s at 1452, 4.9–5.2 at 6550).
/// Higher bounds (`--quic-mtu`, up to [`MAX_UDP_PAYLOAD`]) go without GSO and stay opt-in:
/// 500 concurrent sessions probing with 64 KiB datagrams filled the server's UDP receive
/// buffer until their handshakes timed out.
pub const DEFAULT_MTU: u16 = GSO_MAX_MTU;

/// A peer silent this long is gone (quinn stretches it to three probe timeouts on a slow
/// path). quinn's default is 30 s; a benchmark whose server vanished (a killed process, an
/// unreachable host) must notice within about a second or two, not a run later. Both ends
/// send keep-alives every [`KEEP_ALIVE`], so only a dead peer or path stays silent.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a client waits for a server's first QUIC answer: as long as the server waits for a
/// client's data connection. The server is known to be up (the control connection reached it
/// first), so a silent one is loaded or its packets were lost: 500 concurrent sessions against
/// a debug build on a 2-vCPU CI machine once took longer than [`IDLE_TIMEOUT`] to answer one
/// handshake, and each lost Initial alone costs a second or more.
pub const HANDSHAKE_TIMEOUT: Duration = crate::transport::control::SETUP_TIMEOUT;

/// How often an otherwise idle connection sends a PING: three per idle timeout, so one lost
/// keep-alive never ends a live connection.
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);

/// The server's QUIC settings with `identity`: one for quinn's endpoint and the connections
/// served inline (`inline_server`), so a session ticket from either resumes on the other.
pub fn server_config(identity: &ServerIdentity) -> Result<ServerConfig> {
    let crypto = QuicServerConfig::try_from(tls::server_crypto(identity)?)
        .context("while configuring QUIC TLS")?;
    let mut server_cfg = ServerConfig::with_crypto(Arc::new(crypto));
    server_cfg.transport_config(transport());
    Ok(server_cfg)
}

/// The server's QUIC endpoint, sharing `socket` with wirebench's own UDP datagrams, which go to
/// `handler`, and with the connections that `inline` takes (those clients drive inline,
/// `inline_server`). It runs on `homes`: its driver and socket on the first home, each
/// connection on the one [`ConnectionHomes::accept`] chooses.
pub fn server_endpoint(
    socket: std::net::UdpSocket,
    server_cfg: ServerConfig,
    (handler, inline): (Arc<dyn DatagramHandler>, Option<Box<dyn QuicDivert>>),
    homes: &ConnectionHomes,
) -> Result<Endpoint> {
    // Registered with the first home's reactor, so a datagram wakes the endpoint driver's own
    // thread.
    let inner = {
        let _inside = homes.first().handle().enter();
        QuicUdpSocket::new(socket).context("while registering the server's UDP socket")?
    };
    let demux = Arc::new(DemuxSocket::new(inner, handler, inline));
    let mut endpoint_cfg = EndpointConfig::default();
    // Never let clients clear the fixed bit: the demultiplexer relies on it.
    endpoint_cfg.grease_quic_bit(false);
    // Accept QUIC packets as large as PMTU discovery may find (the client's own bound, which it
    // advertises, then caps what the server sends). quinn sizes its receive buffer as payload ×
    // GRO segments × batch, capped at 64 KiB per datagram; the memory is only touched as far
    // as datagrams fill it. One slot also holds our own datagrams (up to 65507 bytes).
    endpoint_cfg
        .max_udp_payload_size(MAX_UDP_PAYLOAD)
        .context("while sizing the QUIC receive buffers")?;
    Endpoint::new_with_abstract_socket(endpoint_cfg, Some(server_cfg), demux, homes.runtime())
        .context("while starting the QUIC endpoint")
}

/// Connects a fresh client endpoint to `server`, trusting exactly `pinned_cert_der`, sending
/// and accepting UDP payloads up to `max_mtu` (None: [`DEFAULT_MTU`]); also returns what its
/// UDP socket runs with.
pub async fn connect(
    server: SocketAddr,
    pinned_cert_der: Vec<u8>,
    max_mtu: Option<u16>,
) -> Result<(Endpoint, quinn::Connection, DataPathInfo)> {
    let socket = client_socket(server)?;
    let info = client_socket_info(&socket);
    let (endpoint_cfg, cfg) = client_configs(pinned_cert_der, max_mtu.unwrap_or(DEFAULT_MTU))?;
    let endpoint = client_endpoint(socket, endpoint_cfg)?;
    let connection = endpoint
        .connect_with(cfg, server, tls::SERVER_NAME)
        .context("while starting the QUIC handshake")?
        .await
        .with_context(|| format!("QUIC handshake with {server} failed"))?;
    Ok((endpoint, connection, info))
}

/// What a QUIC client's UDP socket runs with: its buffers and local address.
pub fn client_socket_info(socket: &std::net::UdpSocket) -> DataPathInfo {
    let (recv_buffer, send_buffer) = crate::transport::net::buffer_sizes(&SockRef::from(socket));
    DataPathInfo {
        recv_buffer: recv_buffer as u64,
        send_buffer: send_buffer as u64,
        local_addr: crate::transport::net::local_addr(&SockRef::from(socket)),
        ..DataPathInfo::default()
    }
}

/// A client's endpoint and connection settings, trusting exactly `pinned_cert_der`, with UDP
/// payloads up to `max_mtu`: the advertised limit caps what the server sends (downloads), the
/// discovery bound ([`client_transport`]) what we send. The fixed bit is never greased (see
/// [`client_endpoint`]).
pub fn client_configs(
    pinned_cert_der: Vec<u8>,
    max_mtu: u16,
) -> Result<(EndpointConfig, ClientConfig)> {
    let mut endpoint_cfg = EndpointConfig::default();
    endpoint_cfg
        .max_udp_payload_size(max_mtu)
        .context("while sizing the QUIC receive buffers")?;
    endpoint_cfg.grease_quic_bit(false);
    let crypto = QuicClientConfig::try_from(tls::client_crypto(pinned_cert_der)?)
        .context("while configuring QUIC TLS")?;
    let mut cfg = ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(client_transport(max_mtu));
    Ok((endpoint_cfg, cfg))
}

/// A QUIC client's UDP socket for `server` (the client's source address and options applied).
pub fn client_socket(server: SocketAddr) -> Result<std::net::UdpSocket> {
    crate::transport::net::udp_socket(server.is_ipv6(), None, None)
}

/// A client endpoint (no server role) on `socket`, in the current tokio runtime.
///
/// It never invites the server to clear QUIC's fixed bit (grease it): wirebench's own UDP
/// datagrams are told from QUIC packets by that bit, by the server's demultiplexer in one
/// direction and by the impairment relay in both. A server packet greased to look like a
/// wirebench hello passed the relay undelayed, ahead of its neighbours, and quinn took the
/// reordering for loss (3% of a `-R --impair delay=10ms` stream, which then ran at 40 Mbit/s).
pub fn client_endpoint(
    socket: std::net::UdpSocket,
    mut config: EndpointConfig,
) -> Result<Endpoint> {
    config.grease_quic_bit(false);
    let socket = QuicUdpSocket::new(socket).context("while registering a QUIC client socket")?;
    Endpoint::new_with_abstract_socket(config, None, socket, Arc::new(quinn::TokioRuntime))
        .context("while starting a QUIC client endpoint")
}

/// Longest a client waits for its closed connections to drain before it moves on.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Waits until the endpoint's closed connections have sent their close and drained, at most
/// [`DRAIN_LIMIT`]: quinn waits three probe timeouts, which on a loaded host (RTT estimates of
/// a second) would hold a finished client for many seconds. The close frame itself leaves at
/// once; the peer times out any connection that misses it.
pub async fn drain(endpoint: &Endpoint) {
    let _ = tokio::time::timeout(DRAIN_LIMIT, endpoint.wait_idle()).await;
}
