//! Text a peer sent, made safe to show: owns the one function every boundary where peer text
//! enters (control messages, iperf3 and DNS answers, exporter queries) passes it through, so no
//! line break, terminal escape or NUL from the other end reaches a terminal, a log, a JSON or
//! HTML page or the store, and no peer makes us keep or print an unbounded string.

/// Most characters of peer text kept; longer text is cut and ends with `…`.
pub const MAX_PEER_TEXT: usize = 512;

/// `text` as it may be shown: every control character (C0, DEL, C1 — line breaks, ESC, NUL)
/// and bidirectional override escaped as Rust does (`\n`, `\u{1b}`), and at most [`MAX_PEER_TEXT`] characters in all
/// (cut text ends with `…`). Clean, short text comes back unchanged.
pub fn peer_text(text: &str) -> String {
    let mut out = String::new();
    // Escaping only lengthens: the first MAX_PEER_TEXT + 1 characters decide the result.
    for c in text.chars().take(MAX_PEER_TEXT + 1) {
        if is_unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if let Some((cut, _)) = out.char_indices().nth(MAX_PEER_TEXT) {
        let keep = out
            .char_indices()
            .nth(MAX_PEER_TEXT - 1)
            .map_or(cut, |(at, _)| at);
        out.truncate(keep);
        out.push('…');
    }
    out
}

/// [`peer_text`] in place: a string that is already safe is left alone (no allocation).
pub fn make_safe(text: &mut String) {
    if !is_safe(text) {
        *text = peer_text(text);
    }
}

/// Whether `text` may be shown as it is: no control character, at most [`MAX_PEER_TEXT`]
/// characters.
pub fn is_safe(text: &str) -> bool {
    !text.chars().any(is_unsafe_char) && text.chars().nth(MAX_PEER_TEXT).is_none()
}

/// A character that must not reach a terminal or a page as it is: a control character, or a
/// bidirectional formatting character (U+202E turns the rest of a line around: "Trojan
/// Source", CVE-2021-42574), which is escaped the same way.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidirectional_overrides_are_escaped() {
        assert_eq!(peer_text("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(peer_text("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert!(!is_safe("\u{200f}"));
        // Other non-ASCII text is kept as it is.
        assert_eq!(peer_text("débit ☃"), "débit ☃");
    }

    #[test]
    fn control_characters_are_escaped_and_clean_text_kept() {
        assert_eq!(peer_text("client went away"), "client went away");
        assert_eq!(
            peer_text("a\nprobe kind=run succeeded FORGED"),
            "a\\nprobe kind=run succeeded FORGED"
        );
        assert_eq!(
            peer_text("\u{1b}[2J\0\r\u{7f}\u{9b}"),
            "\\u{1b}[2J\\u{0}\\r\\u{7f}\\u{9b}"
        );
        assert_eq!(peer_text("naïve — ünïcode"), "naïve — ünïcode");
        assert!(is_safe(&peer_text("\u{1b}[31mred")));
    }

    #[test]
    fn long_text_is_cut_to_the_bound() {
        let long = "x".repeat(10_000);
        let safe = peer_text(&long);
        assert_eq!(safe.chars().count(), MAX_PEER_TEXT);
        assert!(safe.ends_with('…'));
        assert!(is_safe(&safe));
        let exact = "y".repeat(MAX_PEER_TEXT);
        assert_eq!(peer_text(&exact), exact);
        assert!(is_safe(&exact));
        // Escapes count too: 200 NULs are 1000 characters escaped, cut to the bound.
        let nuls = peer_text(&"\0".repeat(200));
        assert_eq!(nuls.chars().count(), MAX_PEER_TEXT);
        assert!(is_safe(&nuls));
    }

    #[test]
    fn make_safe_changes_only_unsafe_text() {
        let mut fine = String::from("fine");
        make_safe(&mut fine);
        assert_eq!(fine, "fine");
        let mut bad = String::from("two\nlines");
        make_safe(&mut bad);
        assert_eq!(bad, "two\\nlines");
    }
}
