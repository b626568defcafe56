//! DNS-over-TLS trust: builds the rustls client configuration (quinn's rustls, ring provider)
//! from `--dot-ca PEM` or `--dot-insecure`, and the server name sent as SNI. Opens no
//! connection.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use quinn::rustls;
use quinn::rustls::pki_types::pem::PemObject;
use quinn::rustls::pki_types::{CertificateDer, ServerName};

use crate::transport::tls::{provider, Accept, CertCheck};

/// ALPN protocol id of DNS-over-TLS (RFC 7858, IANA registry).
pub const ALPN_DOT: &[u8] = b"dot";

/// How a DoT connection is made: a TLS connector and the name the certificate must carry.
#[derive(Clone)]
pub struct DotTls {
    /// The TLS client (its configuration is shared by every connection of a run).
    pub connector: tokio_rustls::TlsConnector,
    /// Sent as SNI and checked against the certificate (unless insecure).
    pub server_name: ServerName<'static>,
}

/// Which certificates a DoT client accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DotTrust {
    /// Certificates issued by the CA(s) in this PEM file, for the server name.
    Ca(std::path::PathBuf),
    /// Any certificate: the connection is encrypted but anyone on the path can pose as the
    /// resolver.
    Insecure,
}

impl DotTls {
    /// The DoT client for `trust` and the server name `name` (a DNS name or an IP address).
    pub fn new(trust: &DotTrust, name: &str) -> Result<Self> {
        let server_name = ServerName::try_from(name.to_string())
            .with_context(|| format!("--dot-name {name:?} is not a DNS name or IP address"))?;
        let provider = provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .context("while configuring TLS")?;
        let mut cfg = match trust {
            DotTrust::Ca(path) => builder
                .with_root_certificates(roots(path)?)
                .with_no_client_auth(),
            DotTrust::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(CertCheck {
                    accept: Accept::Any,
                    provider,
                }))
                .with_no_client_auth(),
        };
        cfg.alpn_protocols = vec![ALPN_DOT.to_vec()];
        Ok(DotTls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(cfg)),
            server_name,
        })
    }
}

/// The CA certificates of a PEM file.
fn roots(path: &Path) -> Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read --dot-ca {}", path.display()))?;
    for cert in certs {
        let cert = cert.with_context(|| format!("--dot-ca {}: bad PEM", path.display()))?;
        roots
            .add(cert)
            .with_context(|| format!("--dot-ca {}: not a usable certificate", path.display()))?;
    }
    if roots.is_empty() {
        bail!(
            "--dot-ca {} holds no certificate (expected PEM, -----BEGIN CERTIFICATE-----)",
            path.display()
        );
    }
    Ok(roots)
}
