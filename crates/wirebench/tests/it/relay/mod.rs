//! Accuracy of wirebench's figures against the impairment relay's known truth: real sockets on
//! loopback, a real server, the relay in between with a fixed seed, and exact equalities between
//! what the relay did and what the client and server report.

mod commands;
mod impairments;
mod limits;
mod quic_paths;

use wirebench::flows::client::{SessionOutcome, SessionRequest};
use wirebench::flows::relay::{Relay, RelayConfig, RelayCounts};
use wirebench_core::machine::impair::Impairments;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::proto::SessionParams;

use crate::support::TestServer;

pub(super) fn spec(
    protocol: Protocol,
    mechanism: Mechanism,
    msg_size: u32,
    total_bytes: u64,
) -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol,
        mechanism,
        msg_size,
        total_bytes,
        rto_us: None,
        rate_bps: None,
        grace_us: 300_000,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

pub(super) async fn relay(server: &TestServer, impair: &str, seed: u64) -> Relay {
    Relay::start(RelayConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: server.addr,
        impairments: Impairments::parse_list(impair).expect("valid impairments"),
        seed,
        tcp: true,
        udp: true,
        max_held: wirebench::flows::relay::MAX_HELD_BYTES,
    })
    .await
    .expect("relay starts")
}

/// Runs one session through `relay` and returns it with what the relay did during it.
pub(super) async fn through(
    server: &mut TestServer,
    relay: &Relay,
    sp: &SessionParams,
) -> (SessionOutcome, RelayCounts) {
    let before = relay.counts();
    let out = SessionRequest::new(relay.local_addr(), sp)
        .run()
        .await
        .expect("session runs");
    let summary = server.next_session().await;
    assert_eq!(
        summary.report, out.server,
        "printed summary equals the report"
    );
    (out, relay.counts().since(&before))
}
