//! The text forms of a run, a session and the history, under one path: what a person reads
//! while a command runs and afterwards. Each job has its own module ([`super::session`],
//! [`super::run_block`], [`super::history`]); this one only gathers them.

pub use super::history::*;
pub use super::run_block::*;
pub use super::session::*;
