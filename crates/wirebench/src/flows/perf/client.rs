//! `wirebench run --proto quic --perf-server`: upload and download tests against any QUIC perf
//! server (draft-banks-quic-performance-00). Owns the perf client, its TLS trust choice and its
//! figures; must not touch wirebench's own QUIC client.
//!
//! Trust model: `--perf-ca FILE` verifies the server's certificate chain and name against the
//! given certificates (webpki, as browsers do, with those as the only roots);
//! `--perf-insecure` accepts any certificate (the handshake signature is still checked against
//! the certificate presented, which proves nothing about who holds it): traffic can then be
//! intercepted by anyone on the path, which a throughput test may accept.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::rustls;
use quinn::rustls::pki_types::pem::PemObject;
use quinn::rustls::pki_types::CertificateDer;
use quinn::{EndpointConfig, TransportConfig, VarInt};
use serde::Serialize;
use wirebench_core::wire::perf;

use crate::transport::tls::{self, Accept, CertCheck};

/// How the client decides to trust the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Verify the chain against these PEM certificates and the name `server_name`.
    Ca {
        /// PEM file with one or more certificates.
        file: PathBuf,
        /// Name the certificate must carry.
        server_name: String,
    },
    /// Accept any certificate.
    Insecure,
}

/// A validated perf test.
#[derive(Debug, Clone)]
pub struct PerfConfig {
    /// The server as named.
    pub name: String,
    /// Its resolved address.
    pub server: SocketAddr,
    /// Bytes to upload on one stream, if an upload test runs.
    pub upload: Option<u64>,
    /// Bytes to request on one stream, if a download test runs.
    pub download: Option<u64>,
    /// Trust choice.
    pub trust: Trust,
    /// Print JSON instead of text.
    pub json: bool,
}

/// One finished transfer.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PerfTransfer {
    /// "upload" or "download".
    pub direction: &'static str,
    /// Payload bytes moved (request bytes not counted).
    pub bytes: u64,
    /// From opening the stream to the server's FIN, seconds.
    pub seconds: f64,
    /// bytes × 8 / seconds.
    pub throughput_bps: f64,
}

/// The JSON document of a perf run.
#[derive(Debug, Serialize)]
pub struct PerfDocument {
    /// Version of this document.
    pub schema_version: u32,
    /// Always "quic-perf".
    pub kind: &'static str,
    /// The draft implemented.
    pub draft: &'static str,
    /// The server as named.
    pub server: String,
    /// QUIC handshake time, seconds.
    pub handshake_seconds: f64,
    /// The transfers, in the order they ran.
    pub transfers: Vec<PerfTransfer>,
}

/// Connects, runs the upload and then the download test, and closes.
pub async fn run(cfg: &PerfConfig) -> Result<PerfDocument> {
    let (crypto, server_name) = client_crypto(&cfg.trust)?;
    let quic = QuicClientConfig::try_from(crypto).context("while configuring QUIC TLS")?;
    let mut client_cfg = quinn::ClientConfig::new(Arc::new(quic));
    client_cfg.transport_config(transport());
    let socket = crate::transport::net::udp_socket(cfg.server.is_ipv6(), None, None)?;
    let endpoint = crate::engine::quic::client_endpoint(socket, EndpointConfig::default())?;
    let started = Instant::now();
    let connection = tokio::time::timeout(
        Duration::from_secs(10),
        endpoint
            .connect_with(client_cfg, cfg.server, &server_name)
            .context("while starting the QUIC handshake")?,
    )
    .await
    .map_err(|_| anyhow::anyhow!("perf server {} did not answer in time", cfg.name))?
    .with_context(|| format!("QUIC handshake with perf server {} failed", cfg.name))?;
    let handshake_seconds = started.elapsed().as_secs_f64();
    let mut transfers = Vec::new();
    if let Some(n) = cfg.upload {
        transfers.push(transfer(&connection, "upload", n, 0).await?);
    }
    if let Some(n) = cfg.download {
        transfers.push(transfer(&connection, "download", 0, n).await?);
    }
    connection.close(VarInt::from_u32(0), b"done");
    crate::engine::quic::drain(&endpoint).await;
    Ok(PerfDocument {
        schema_version: 1,
        kind: "quic-perf",
        draft: perf::DRAFT,
        server: cfg.name.clone(),
        handshake_seconds,
        transfers,
    })
}

/// One stream: request `down` bytes, upload `up` bytes, finish, read the response to FIN.
async fn transfer(
    connection: &quinn::Connection,
    direction: &'static str,
    up: u64,
    down: u64,
) -> Result<PerfTransfer> {
    let start = Instant::now();
    let (mut send, mut recv) = connection
        .open_bi()
        .await
        .context("while opening a perf stream")?;
    send.write_all(&perf::encode_request(down))
        .await
        .context("while sending the perf request")?;
    super::send_bytes(&mut send, up)
        .await
        .context("while uploading")?;
    send.finish().context("while finishing the upload")?;
    let got = super::drain(&mut recv)
        .await
        .context("while reading the perf response")?;
    let seconds = start.elapsed().as_secs_f64();
    if got != down {
        bail!("the perf server sent {got} bytes, {down} were requested");
    }
    let bytes = up + down;
    Ok(PerfTransfer {
        direction,
        bytes,
        seconds,
        throughput_bps: wirebench_core::record::bits_per_second(bytes, seconds),
    })
}

/// Text lines for a finished run.
pub fn text(doc: &PerfDocument) -> String {
    let mut out = format!(
        "QUIC perf ({}) with {}: handshake {:.2} ms\n",
        doc.draft,
        doc.server,
        doc.handshake_seconds * 1e3
    );
    for t in &doc.transfers {
        out.push_str(&format!(
            "  {:<8} {} bytes in {:.4} s ({})\n",
            t.direction,
            t.bytes,
            t.seconds,
            wirebench_core::vocab::units::format_bitrate(t.throughput_bps)
        ));
    }
    out
}

/// Flow-control windows large enough for loopback rates.
fn transport() -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(16 << 20))
        .receive_window(VarInt::from_u32(32 << 20))
        .send_window(32 << 20)
        .keep_alive_interval(Some(Duration::from_secs(2)));
    Arc::new(t)
}

/// The rustls client configuration for `trust`, and the server name to ask for.
fn client_crypto(trust: &Trust) -> Result<(rustls::ClientConfig, String)> {
    let provider = tls::provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("while configuring TLS 1.3")?;
    let (mut cfg, name) = match trust {
        Trust::Ca { file, server_name } => {
            let pem =
                crate::transport::files::read_at_most(file, crate::transport::files::PEM_FILE_MAX)
                    .with_context(|| format!("while reading --perf-ca {}", file.display()))?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert
                    .with_context(|| format!("{} is not a PEM certificate file", file.display()))?;
                roots
                    .add(cert)
                    .with_context(|| format!("{} holds an unusable certificate", file.display()))?;
            }
            if roots.is_empty() {
                bail!("{} holds no PEM certificate", file.display());
            }
            let cfg = builder
                .with_root_certificates(Arc::new(roots))
                .with_no_client_auth();
            (cfg, server_name.clone())
        }
        Trust::Insecure => {
            let cfg = builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(CertCheck {
                    accept: Accept::Any,
                    provider,
                }))
                .with_no_client_auth();
            // Any name: the certificate is not checked.
            (cfg, "perf".to_string())
        }
    };
    cfg.alpn_protocols = vec![perf::ALPN.to_vec()];
    Ok((cfg, name))
}
