//! One module per subcommand: each turns a validated configuration into work and output.

pub mod compare;
pub mod dns;
pub mod embedded;
pub mod exporter;
pub mod history;
pub mod interop;
pub mod relay;
pub mod report;
pub mod rpm;
pub mod rr;
pub mod run;
pub mod server;
pub mod store;
