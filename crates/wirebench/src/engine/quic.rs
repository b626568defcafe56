//! QUIC endpoints (quinn): the server endpoint on the shared UDP socket, client endpoints, and
//! the transport tuning both use. Data then flows through `engine::stream` on one QUIC stream.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{
    AsyncUdpSocket, ClientConfig, Endpoint, EndpointConfig, IdleTimeout, RecvStream, SendStream,
    ServerConfig, TransportConfig, VarInt,
};
use socket2::SockRef;
use wirebench_core::proto::DataPathInfo;

use super::demux::{DatagramHandler, DemuxSocket};
use super::stream::{ByteSource, MessageSink};
use crate::tls::{self, ServerIdentity};

/// Flow-control window of one stream. quinn's defaults (1.25 MB) cap a loopback run far below
/// what the stack can do; one session uses one stream, so it may have the whole window.
const STREAM_WINDOW: u32 = 16 << 20;

/// Connection-wide receive window and send buffer.
const CONNECTION_WINDOW: u32 = 32 << 20;

/// Transport settings shared by client and server.
pub fn transport() -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_WINDOW))
        .send_window(u64::from(CONNECTION_WINDOW))
        .max_concurrent_bidi_streams(VarInt::from_u32(4))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .keep_alive_interval(Some(KEEP_ALIVE));
    if let Ok(idle) = IdleTimeout::try_from(IDLE_TIMEOUT) {
        t.max_idle_timeout(Some(idle));
    }
    Arc::new(t)
}

/// A peer silent this long is gone (quinn stretches it to three probe timeouts on a slow
/// path). quinn's default is 30 s; a benchmark whose server vanished (a killed process, an
/// unreachable host) must notice within about a second or two, not a run later. Both ends
/// send keep-alives every [`KEEP_ALIVE`], so only a dead peer or path stays silent.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(3);

/// How often an otherwise idle connection sends a PING: three per idle timeout, so one lost
/// keep-alive never ends a live connection.
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);

/// The server's QUIC endpoint, sharing `socket` with wirebench's own UDP datagrams, which go to
/// `handler`.
pub fn server_endpoint(
    socket: std::net::UdpSocket,
    identity: &ServerIdentity,
    handler: Arc<dyn DatagramHandler>,
) -> Result<Endpoint> {
    let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
    let inner = runtime
        .wrap_udp_socket(socket)
        .context("while registering the server's UDP socket")?;
    let demux = Arc::new(DemuxSocket::new(inner, handler));
    let mut endpoint_cfg = EndpointConfig::default();
    // Never let clients clear the fixed bit: the demultiplexer relies on it.
    endpoint_cfg.grease_quic_bit(false);
    // quinn sizes each receive slot as payload × GRO segments; our own datagrams reach 65507
    // bytes, so one slot must hold that even without GRO.
    let segments = demux.max_receive_segments().max(1);
    let payload = (65_535usize.div_ceil(segments)).clamp(1472, 65_527);
    endpoint_cfg
        .max_udp_payload_size(payload as u16)
        .context("while sizing the QUIC receive buffers")?;
    let crypto = QuicServerConfig::try_from(tls::server_crypto(identity)?)
        .context("while configuring QUIC TLS")?;
    let mut server_cfg = ServerConfig::with_crypto(Arc::new(crypto));
    server_cfg.transport_config(transport());
    Endpoint::new_with_abstract_socket(endpoint_cfg, Some(server_cfg), demux, runtime)
        .context("while starting the QUIC endpoint")
}

/// Connects a fresh client endpoint to `server`, trusting exactly `pinned_cert_der`; also
/// returns what its UDP socket runs with.
pub async fn connect(
    server: SocketAddr,
    pinned_cert_der: Vec<u8>,
) -> Result<(Endpoint, quinn::Connection, DataPathInfo)> {
    let socket = crate::net::udp_socket(server.is_ipv6(), None, None)?;
    let (recv_buffer, send_buffer) = crate::net::buffer_sizes(&SockRef::from(&socket));
    let info = DataPathInfo {
        recv_buffer: recv_buffer as u64,
        send_buffer: send_buffer as u64,
        ..DataPathInfo::default()
    };
    let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
    let endpoint = Endpoint::new(EndpointConfig::default(), None, socket, runtime)
        .context("while starting a QUIC client endpoint")?;
    let crypto = QuicClientConfig::try_from(tls::client_crypto(pinned_cert_der)?)
        .context("while configuring QUIC TLS")?;
    let mut cfg = ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(transport());
    let connection = endpoint
        .connect_with(cfg, server, tls::SERVER_NAME)
        .context("while starting the QUIC handshake")?
        .await
        .with_context(|| format!("QUIC handshake with {server} failed"))?;
    Ok((endpoint, connection, info))
}

/// A [`MessageSink`] over a QUIC send stream: each message is a slice of one shared payload
/// buffer handed to quinn without copying or allocating.
#[derive(Debug)]
pub struct QuicSink<'a> {
    /// The stream.
    pub stream: &'a mut SendStream,
    /// At least `msg_size` bytes of payload.
    pub payload: Bytes,
}

impl MessageSink for QuicSink<'_> {
    async fn send_message(&mut self, len: usize) -> io::Result<u64> {
        self.stream
            .write_chunk(self.payload.slice(..len))
            .await
            .map_err(io::Error::from)?;
        Ok(1)
    }

    async fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A [`ByteSource`] over a QUIC receive stream: reads quinn's buffers in place (no copy).
#[derive(Debug)]
pub struct QuicSource<'a> {
    /// The stream.
    pub stream: &'a mut RecvStream,
}

impl ByteSource for QuicSource<'_> {
    async fn read_some(&mut self, max: usize) -> io::Result<usize> {
        match self.stream.read_chunk(max, true).await {
            Ok(Some(chunk)) => Ok(chunk.bytes.len()),
            Ok(None) => Ok(0),
            Err(e) => Err(io::Error::from(e)),
        }
    }
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
