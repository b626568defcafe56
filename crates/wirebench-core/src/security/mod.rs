//! What keeps a server safe to expose: pre-shared-key authentication of control connections,
//! address validation that keeps UDP sessions from amplifying traffic towards a spoofed source.
//! Peer text made safe to show is vocabulary every layer uses (`crate::vocab::text`).

pub mod amplification;
pub mod auth;
