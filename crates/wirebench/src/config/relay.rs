//! `wirebench relay`'s flags as a validated relay configuration.

use std::net::SocketAddr;

use wirebench_core::machine::impair::Impairments;
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::units::ByteSize;

use crate::cli::RelayArgs;
use crate::runner::Target;

use super::address::resolve_server;
use super::error::usage;
use super::run::TCP_IMPAIR_NOTE;

/// `--max-held` bounds, bytes: room for the largest datagram, and far more than a relay needs.
const MAX_HELD_RANGE: (u64, u64) = (64 << 10, 64 << 30);

/// Validates `wirebench relay` flags: the relay, and whether it reports in JSON (`--json`).
pub fn relay_command(
    args: &RelayArgs,
) -> Result<(crate::flows::relay::RelayConfig, bool), UsageError> {
    Ok((relay_config(args)?, args.json))
}

/// Validates `wirebench relay` flags.
pub fn relay_config(args: &RelayArgs) -> Result<crate::flows::relay::RelayConfig, UsageError> {
    let listen: SocketAddr = args.listen.parse().map_err(|_| {
        usage(format!(
            "--listen {}: expected ADDR:PORT, e.g. 127.0.0.1:5311 or [::1]:5311",
            args.listen
        ))
    })?;
    let upstream =
        match resolve_server(&args.to).map_err(|e| usage(e.0.replacen("--server", "--to", 1)))? {
            Target::Remote { addr, .. } => addr,
            Target::Embedded(_) => return Err(usage("--to: expected HOST:PORT")),
        };
    let mut impairments = Impairments::default();
    for (key, values) in [
        ("loss", &args.loss),
        ("delay", &args.delay),
        ("jitter", &args.jitter),
        ("reorder", &args.reorder),
        ("duplicate", &args.duplicate),
        ("rate", &args.rate),
        ("queue", &args.queue),
    ] {
        for value in values {
            impairments
                .set(key, value)
                .map_err(|e| usage(format!("--{e}")))?;
        }
    }
    let (mut tcp, mut udp) = (false, false);
    for p in args.proto.split(',').map(str::trim) {
        match p {
            "tcp" => tcp = true,
            "udp" => udp = true,
            other => {
                return Err(usage(format!(
                    "--proto {other}: expected tcp, udp or tcp,udp"
                )))
            }
        }
    }
    if tcp && !udp && impairments.has_packet_only() {
        return Err(usage(format!("--proto tcp: {TCP_IMPAIR_NOTE}")));
    }
    let max_held = args
        .max_held
        .parse::<ByteSize>()
        .map_err(|e| usage(format!("--max-held: {e}")))?
        .0;
    if !(MAX_HELD_RANGE.0..=MAX_HELD_RANGE.1).contains(&max_held) {
        return Err(usage(format!(
            "--max-held {} is out of range: allowed 64KiB (one datagram) to 64GiB",
            args.max_held
        )));
    }
    Ok(crate::flows::relay::RelayConfig {
        listen,
        upstream,
        impairments,
        seed: args.seed,
        tcp,
        udp,
        max_held,
    })
}
