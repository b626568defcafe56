//! Everything wirebench shows a person or a program: text blocks and tables, JSON documents.
//! Formatting only: these functions return strings or serialisable values and never print.

pub mod delay;
pub mod dns;
pub mod history;
pub mod iperf3_json;
pub mod iperf3_test;
pub mod json_stream;
pub mod latency;
pub mod load_phases;
pub mod one_way;
pub mod progress;
pub mod prometheus;
pub mod ratesearch;
pub mod relay;
pub mod rpm;
pub mod rr;
pub mod run_block;
pub mod session;
