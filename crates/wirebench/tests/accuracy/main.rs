//! Accuracy tests against the namespace lab: goodput through a shaped router to within 1%, on a
//! busy machine whose load the test sets itself (a busy process per CPU). Cargo runs test
//! binaries one after another, so a binary of their own keeps the hundreds of tests/it threads
//! from adding a load nobody chose (the one exception to "all integration tests in one
//! binary"); inside it, [`TURN`] makes them take turns.

mod hog;
mod lab;

// The lab needs only the temp-file helper and the test timeout of the shared support module.
#[allow(dead_code)]
#[path = "../it/support.rs"]
mod support;

/// Held by every test here for its whole run: one at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
