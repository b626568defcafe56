//! The usage error every flag's check returns, made from its message.

use wirebench_core::vocab::error::UsageError;

/// A usage error from a message.
pub(super) fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}
