//! The check every harness makes of an error message meant for users: one line, no control
//! characters.

/// Panics unless an error message meant for users is one line without control characters: a
/// peer must not be able to inject line breaks or terminal escapes into what we print.
pub(super) fn assert_one_line(message: &str) {
    assert!(!message.is_empty(), "empty error message");
    assert!(
        !message.chars().any(char::is_control),
        "error message with a control character: {message:?}"
    );
}
