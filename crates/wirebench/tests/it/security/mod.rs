//! Pre-shared-key authentication and the no-amplification rule, against real servers on
//! loopback: the right key works, a missing or wrong key and a replayed response are refused
//! with their message, and a UDP source that has not echoed its session's token gets nothing.

mod amplification;
mod imports;
mod psk;

use std::sync::Arc;
use std::time::Duration;

use wirebench::flows::rr_client::RrSpec;
use wirebench::flows::server::ServerOptions;
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::proto::{RrParams, SessionParams};

use crate::support::TestServer;

pub(super) fn key(text: &str) -> Arc<Psk> {
    Arc::new(Psk::from_file_contents(text.as_bytes()).expect("a valid key"))
}

pub(super) fn psk_server_options() -> ServerOptions {
    ServerOptions::default().with_psk(Some(key("the server's key, 32 bytes long!")))
}

pub(super) fn transfer(
    protocol: Protocol,
    mechanism: Mechanism,
    total_bytes: u64,
) -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol,
        mechanism,
        msg_size: 1000,
        total_bytes,
        rto_us: None,
        rate_bps: None,
        grace_us: 200_000,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

pub(super) fn rr(protocol: Protocol, request: u32, response: u32, count: u64) -> RrSpec {
    RrSpec {
        params: RrParams {
            protocol,
            request,
            response,
            flows: 1,
            concurrency: 1,
            new_connection: false,
            stamps: false,
        },
        count: Some(count),
        duration: None,
        interval: None,
        timeout: Duration::from_secs(2),
        retries: 0,
        resumption_probe: false,
        per_probe: false,
    }
}

/// Waits for a notice containing `needle`; returns it.
pub(super) async fn notice_containing(server: &mut TestServer, needle: &str) -> String {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), server.events.recv())
            .await
            .unwrap_or_else(|_| panic!("a notice containing {needle:?} within 10 s"))
            .expect("server running");
        if let wirebench::flows::server::ServerEvent::Notice(n) = ev {
            if n.message.contains(needle) {
                return n.message;
            }
        }
    }
}
