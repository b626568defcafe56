//! What keeps a server safe to expose: pre-shared-key authentication of control connections and
//! address validation that keeps UDP sessions from amplifying traffic towards a spoofed source.

pub mod amplification;
pub mod auth;
