//! What keeps a server safe to expose: pre-shared-key authentication of control connections,
//! address validation that keeps UDP sessions from amplifying traffic towards a spoofed source,
//! and peer text made safe to show.

pub mod amplification;
pub mod auth;
pub mod text;
