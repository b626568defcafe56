//! TLS for QUIC: the server's certificate (self-signed at start, or loaded from PEM files) and
//! the client's trust model, which pins the exact certificate the server announced on the
//! control connection.
//!
//! Trust model, in short: the control connection is plain TCP, so a pinned certificate proves
//! only that the QUIC peer is the same server process that answered the control connection. It
//! does not authenticate the server against an on-path attacker; wirebench measures, it does
//! not protect data. See docs/quic-trust.md.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use quinn::rustls;
use quinn::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use quinn::rustls::crypto::CryptoProvider;
use quinn::rustls::pki_types::pem::PemObject;
use quinn::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime,
};
use quinn::rustls::{DigitallySignedStruct, SignatureScheme};

/// ALPN protocol name of wirebench's QUIC data connections.
pub const ALPN: &[u8] = b"wirebench/1";

/// The name the client asks for in its TLS handshake (the self-signed certificate carries it).
pub const SERVER_NAME: &str = "wirebench";

/// The server's certificate chain and key.
#[derive(Debug)]
pub struct ServerIdentity {
    /// Certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// Private key of the leaf.
    pub key: PrivateKeyDer<'static>,
}

impl ServerIdentity {
    /// A fresh self-signed certificate for the names `wirebench` and `localhost`.
    pub fn self_signed() -> Result<Self> {
        let certified = rcgen::generate_simple_self_signed(vec![
            SERVER_NAME.to_string(),
            "localhost".to_string(),
        ])
        .context("while making a self-signed certificate")?;
        Ok(ServerIdentity {
            chain: vec![certified.cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der())),
        })
    }

    /// Loads a PEM certificate chain and private key.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Self> {
        let cert_pem = super::files::read_at_most(cert, super::files::PEM_FILE_MAX)
            .with_context(|| format!("while reading the certificate {}", cert.display()))?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{} is not a PEM certificate chain", cert.display()))?;
        if chain.is_empty() {
            bail!("{} holds no PEM certificate", cert.display());
        }
        let key_pem = super::files::read_at_most(key, super::files::PEM_FILE_MAX)
            .with_context(|| format!("while reading the private key {}", key.display()))?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .with_context(|| format!("{} is not a PEM private key", key.display()))?;
        Ok(ServerIdentity { chain, key })
    }

    /// The leaf certificate, which clients pin.
    pub fn leaf_der(&self) -> &[u8] {
        self.chain.first().map(|c| c.as_ref()).unwrap_or(&[])
    }
}

/// The crypto provider of every TLS configuration here: ring (quinn's default, built with `cc` only),
/// with AES-128-GCM preferred. ring's default order puts AES-256-GCM first, whose 14 AES rounds
/// against 128's 10 cost a bulk QUIC transfer about a quarter more packet-protection CPU (the
/// largest single cost in a profile of either end); quinn's perf tool prefers 128 as well.
pub fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256,
    };
    Arc::new(CryptoProvider {
        cipher_suites: vec![
            TLS13_AES_128_GCM_SHA256,
            TLS13_AES_256_GCM_SHA384,
            TLS13_CHACHA20_POLY1305_SHA256,
        ],
        ..rustls::crypto::ring::default_provider()
    })
}

/// The rustls server configuration for QUIC.
pub fn server_crypto(identity: &ServerIdentity) -> Result<rustls::ServerConfig> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("while configuring TLS 1.3")?
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())
        .context("the certificate and key do not make a usable TLS identity")?;
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    // QUIC perf clients (draft-banks-quic-performance) are served on the same endpoint.
    cfg.alpn_protocols
        .push(wirebench_core::wire::perf::ALPN.to_vec());
    // Allow 0-RTT for resumed QUIC connections (`wirebench ping` measures it); QUIC requires
    // exactly this value when early data is on. Clients that do not ask for it are unaffected.
    cfg.max_early_data_size = u32::MAX;
    Ok(cfg)
}

/// The rustls client configuration that accepts exactly the certificate `pinned_der`.
pub fn client_crypto(pinned_der: Vec<u8>) -> Result<rustls::ClientConfig> {
    let provider = provider();
    let verifier = Arc::new(CertCheck {
        accept: Accept::Pinned(pinned_der),
        provider: provider.clone(),
    });
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("while configuring TLS 1.3")?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    Ok(cfg)
}

/// A verifier for TLS 1.3 connections that do not go by the Web PKI: whichever certificate it
/// accepts, the handshake signatures are still checked against it, so the peer must hold the
/// certificate's private key.
#[derive(Debug)]
pub struct CertCheck {
    /// Which certificates pass.
    pub accept: Accept,
    /// The crypto provider that checks signatures.
    pub provider: Arc<CryptoProvider>,
}

/// Which server certificates a [`CertCheck`] accepts.
#[derive(Debug)]
pub enum Accept {
    /// Exactly this one (DER): what a wirebench server announced on the control connection.
    Pinned(Vec<u8>),
    /// Any (`--perf-insecure`): anyone on the path can pose as the server.
    Any,
}

impl ServerCertVerifier for CertCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let accepted = match &self.accept {
            Accept::Pinned(der) => end_entity.as_ref() == der.as_slice(),
            Accept::Any => true,
        };
        if accepted {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "QUIC certificate differs from the one announced on the control connection".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
