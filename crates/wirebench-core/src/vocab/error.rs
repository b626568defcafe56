//! Error kinds shared by every layer: owns [`UsageError`], the one error that means "the user
//! asked for something not allowed" (exit status 2); must not know where the input came from.

/// A usage error: the user asked for something that is not allowed. Exit status 2. The text is
/// one line that says what was wrong and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    /// A usage error with this message.
    pub fn new(msg: impl Into<String>) -> UsageError {
        UsageError(msg.into())
    }
}
