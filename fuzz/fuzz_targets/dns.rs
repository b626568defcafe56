//! Fuzz target `dns`: feeds libFuzzer's input to `Target::Dns` (see `wirebench_core::untrusted`).
#![no_main]

use std::sync::OnceLock;
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use wirebench_core::untrusted::Target;

/// One origin for the whole run, so an input behaves the same every time it is replayed.
static ORIGIN: OnceLock<Instant> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    Target::Dns.run(data, *ORIGIN.get_or_init(Instant::now));
});
