//! Integration tests: real sockets on loopback, real servers started by each test. One test
//! binary (see STYLE.md); modules by theme.

mod architecture;
mod cli;
mod compare;
mod dns;
mod exporter;
mod interop;
mod limits;
mod measurements;
mod netns;
mod relay;
mod report;
mod results;
mod robustness;
mod rr;
mod security;
mod sessions;
mod store;
mod support;
