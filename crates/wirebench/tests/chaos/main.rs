//! The chaos and load test in a test binary of its own: 500 concurrent sessions, killed
//! clients and garbage floods load both vCPUs for up to a minute, which would spoil the timing
//! of tests that run beside it (tests/it's lossy-forwarder timeouts, the accuracy lab). Cargo
//! runs test binaries one after another.

mod chaos;

// The chaos test needs only the test timeout of the shared support module.
#[allow(dead_code)]
#[path = "../it/support.rs"]
mod support;
