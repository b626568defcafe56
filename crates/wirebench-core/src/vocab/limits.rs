//! Limits shared by the client, the server and the command line: owns the numbers both ends
//! agree on, so no layer reaches up to another for them.

/// The largest `-P/--parallel`: flows per run.
pub const MAX_PARALLEL: u32 = 128;

/// Default of the server's `--max-sessions`: sessions at once.
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// Default of the server's `--max-sessions-per-client`: one client's largest `-P`.
pub const DEFAULT_MAX_SESSIONS_PER_CLIENT: usize = MAX_PARALLEL as usize;
