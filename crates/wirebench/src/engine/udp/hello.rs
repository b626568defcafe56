//! The client's address validation for UDP sessions: before anything else, each UDP socket of
//! a forward or request-response session sends the session's token in a hello datagram and
//! waits for the server's echo, repeating a lost hello. The server answers nothing from an
//! address before that (docs/protocol.md, "Address validation"). It owns no session figures.

use std::time::Duration;

use anyhow::{bail, Result};
use tokio::net::UdpSocket;
use wirebench_core::security::amplification::encode_hello;
use wirebench_core::wire::datagram::{Header, Kind};

/// Wait for the echo of the first hello; doubled after each unanswered one.
const FIRST_WAIT: Duration = Duration::from_millis(50);
/// Longest wait for one hello's echo.
const MAX_WAIT: Duration = Duration::from_secs(1);
/// Hellos sent without an echo before the client gives up (about 16 s in all).
const MAX_HELLOS: u64 = 20;

/// Sends hellos carrying `token` on `socket` (connected to the server) until the server echoes
/// one for `session`; returns how many hellos it took.
pub async fn validate(socket: &UdpSocket, session: u32, token: u32) -> Result<u64> {
    let mut wait = FIRST_WAIT;
    let mut buf = vec![0u8; 1 << 16];
    for attempt in 0..MAX_HELLOS {
        // A failed send (an ICMP error from an earlier hello) is one more lost hello.
        let _ = socket.send(&encode_hello(session, token, attempt)).await;
        let echoed = tokio::time::timeout(wait, async {
            loop {
                match socket.recv(&mut buf).await {
                    Ok(n) => match Header::decode(&buf[..n]) {
                        Ok(h) if h.kind == Kind::Hello && h.session == session => return,
                        // Anything else is not the answer we wait for.
                        _ => continue,
                    },
                    // An ICMP error (port unreachable) for an earlier hello: try again.
                    Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
        })
        .await;
        if echoed.is_ok() {
            return Ok(attempt + 1);
        }
        wait = (wait * 2).min(MAX_WAIT);
    }
    bail!(
        "the server answered none of {MAX_HELLOS} hello datagrams for session {session:#010x}: is UDP to and from its port blocked?"
    )
}
