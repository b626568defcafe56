//! Accuracy tests that need the machine to themselves: the namespace lab measures goodput
//! through a shaped router to within 1%, which a burst of another test on the same two vCPUs
//! can spoil (measured: 91–94 Mbit/s instead of 95.6 while tests/it ran beside it). Cargo runs
//! test binaries one after another, so a binary of their own keeps tests/it away from them
//! (the one exception to "all integration tests in one binary"); inside it, [`TURN`] makes them
//! take turns.

mod lab;

// The lab needs only the temp-file helper and the test timeout of the shared support module.
#[allow(dead_code)]
#[path = "../it/support.rs"]
mod support;

/// Held by every test here for its whole run: one at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
