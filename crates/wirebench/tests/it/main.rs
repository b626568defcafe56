//! Integration tests: real sockets on loopback, real servers started by each test. One test
//! binary (see docs/dev/testing.md); modules by theme.

mod architecture;
mod bidir;
mod browser;
mod cli;
mod compare;
mod dns;
mod exporter;
mod interop;
mod latency_probe;
mod limits;
mod liveness;
mod measurements;
mod netns;
mod omit;
mod pacing;
mod peers;
mod postgres;
mod ratesearch;
mod readme;
mod relay;
mod report;
mod results;
mod robustness;
mod rpm;
mod rpm_store;
mod rr;
mod rr_store;
mod security;
mod sessions;
mod store;
mod store_faults;
mod store_lifecycle;
mod support;
mod timed;
