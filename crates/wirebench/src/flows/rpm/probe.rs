//! Latency probes of `wirebench rpm` over the server's request-response (`rr`) sessions: foreign
//! probes (a new TCP connection per probe: connect time, then one small request answered on
//! it) and self probes (one small request on a persistent connection opened before the load);
//! owns the two probe sessions and the timing of each probe; must not aggregate or print.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::datagram::STAMPS_LEN;
use wirebench_core::wire::proto::{ControlMessage, Preamble, RrParams};

use crate::transport::control;

/// Bytes of a probe request: about a small HTTP request line.
pub const REQUEST_BYTES: u32 = 64;

/// Bytes of a probe response: the draft's 1-byte object (our protocol has no headers).
pub const RESPONSE_BYTES: u32 = 1;

/// One admitted rr session for probes.
#[derive(Debug)]
pub struct ProbeSession {
    ctrl: TcpStream,
    preamble: Preamble,
    server: SocketAddr,
    sent: u64,
}

/// What a foreign probe measured.
#[derive(Debug, Clone, Copy)]
pub struct ForeignSample {
    /// TCP connect (SYN → SYN-ACK seen by the client).
    pub tcp: Duration,
    /// Request written → whole response read, on the new connection.
    pub request: Duration,
}

impl ProbeSession {
    /// Asks the server for a probe session: `new_connection` for foreign probes.
    pub async fn open(server: SocketAddr, new_connection: bool, psk: Option<&Psk>) -> Result<Self> {
        Ok(
            Self::open_over(server, Protocol::Tcp, new_connection, psk, false)
                .await?
                .0,
        )
    }

    /// Like [`ProbeSession::open`] over `protocol` (`run --latency-probe` probes over UDP and
    /// QUIC too); also returns what the server granted (its QUIC certificate, its clock). With
    /// `stamps` every answer is [`STAMPS_LEN`] bytes carrying the server's stamps, for one-way
    /// delays.
    pub async fn open_over(
        server: SocketAddr,
        protocol: Protocol,
        new_connection: bool,
        psk: Option<&Psk>,
        stamps: bool,
    ) -> Result<(Self, control::Accepted)> {
        let params = RrParams {
            protocol,
            request: REQUEST_BYTES,
            response: if stamps {
                STAMPS_LEN as u32
            } else {
                RESPONSE_BYTES
            },
            flows: 1,
            concurrency: 1,
            new_connection,
            stamps,
        };
        let (ctrl, granted) =
            control::request_session_auth(server, &ControlMessage::RrRequest(params), psk)
                .await
                .context("the server refused the probe session")?;
        Ok((
            ProbeSession {
                ctrl,
                preamble: Preamble::data(granted.session, granted.token),
                server,
                sent: 0,
            },
            granted,
        ))
    }

    /// The session's data-connection preamble (its session id and token).
    pub fn preamble(&self) -> Preamble {
        self.preamble
    }

    /// Where and with which credentials this session's probe connections go, cheap to copy
    /// into a task.
    pub fn target(&self) -> ProbeTarget {
        ProbeTarget {
            server: self.server,
            preamble: self.preamble,
        }
    }

    /// Counts probes sent, for the session's end.
    pub fn count_sent(&mut self, n: u64) {
        self.sent += n;
    }

    /// Tells the server we are done and waits (briefly) for its report; a probe session that
    /// cannot end cleanly is not an error of the test.
    pub async fn finish(mut self) {
        let done = ControlMessage::SenderDone {
            messages_sent: self.sent,
            bytes_sent: self.sent * u64::from(REQUEST_BYTES),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            control::send(&mut self.ctrl, &done).await?;
            control::read_report(&mut self.ctrl).await
        })
        .await;
    }
}

/// A probe session's address and data-connection preamble.
#[derive(Debug, Clone, Copy)]
pub struct ProbeTarget {
    server: SocketAddr,
    preamble: Preamble,
}

impl ProbeTarget {
    /// Opens a persistent probe connection (self probes), once or after a failure.
    pub async fn connect(self) -> Result<TcpStream> {
        let mut tcp = TcpStream::connect(self.server)
            .await
            .with_context(|| format!("cannot open the probe connection to {}", self.server))?;
        tcp.set_nodelay(true)
            .context("while setting TCP_NODELAY on the probe connection")?;
        control::write_preamble(&mut tcp, &self.preamble).await?;
        Ok(tcp)
    }

    /// A foreign probe: opens a new connection, sends one request on it and reads the answer.
    pub async fn run(self) -> Result<ForeignSample> {
        let at = Instant::now();
        let mut tcp = TcpStream::connect(self.server)
            .await
            .with_context(|| format!("cannot open a probe connection to {}", self.server))?;
        let tcp_time = at.elapsed();
        tcp.set_nodelay(true)
            .context("while setting TCP_NODELAY on a probe connection")?;
        // The preamble and the request leave in one write, as an HTTP client's first bytes do.
        let mut first = self.preamble.encode().to_vec();
        first.resize(first.len() + REQUEST_BYTES as usize, 0);
        let sent = Instant::now();
        tcp.write_all(&first)
            .await
            .context("while sending a probe request")?;
        read_response(&mut tcp).await?;
        let request = sent.elapsed();
        let _ = tcp.shutdown().await;
        Ok(ForeignSample {
            tcp: tcp_time,
            request,
        })
    }
}

/// One self probe on the persistent connection: request written → response read.
pub async fn self_probe(tcp: &mut TcpStream) -> Result<Duration> {
    let request = [0u8; REQUEST_BYTES as usize];
    let sent = Instant::now();
    tcp.write_all(&request)
        .await
        .context("while sending a self probe")?;
    read_response(tcp).await?;
    Ok(sent.elapsed())
}

async fn read_response(tcp: &mut TcpStream) -> Result<()> {
    let mut response = [0u8; RESPONSE_BYTES as usize];
    let mut got = 0;
    while got < response.len() {
        let n = tcp
            .read(&mut response[got..])
            .await
            .context("while reading a probe response")?;
        if n == 0 {
            bail!("the server closed a probe connection before answering");
        }
        got += n;
    }
    Ok(())
}
