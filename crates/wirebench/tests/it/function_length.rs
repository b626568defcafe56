//! No function a reader cannot hold in a few screens: every non-test function of every crate of
//! the workspace is at most [`MOST_LINES`] lines long, from its `fn` line to its closing brace
//! (docs/dev/style.md asks for about 80, or a comment that says why not). Test modules and
//! `tests.rs` files are left out: a test may spell a long scenario out.

use crate::architecture::rust_files;
use crate::import_circles::crate_sources;

/// The longest function allowed, in lines.
const MOST_LINES: usize = 120;

/// A line with its comment, string and character literals blanked, so the braces left are
/// the code's own.
fn code_only(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                // To the closing quote, past escapes.
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            '\'' => {
                // A character literal ('{', '\n', '\u{7b}') or a lifetime ('a): a literal
                // closes within a few characters.
                let ahead: String = chars.clone().take(10).collect();
                let literal_len = if let Some(rest) = ahead.strip_prefix('\\') {
                    rest.find('\'').map(|i| i + 2)
                } else {
                    let mut it = ahead.chars();
                    match (it.next(), it.next()) {
                        (Some(ch), Some('\'')) => Some(ch.len_utf8() + 1),
                        _ => None,
                    }
                };
                if let Some(n) = literal_len {
                    let mut taken = 0;
                    while taken < n {
                        match chars.next() {
                            Some(ch) => taken += ch.len_utf8(),
                            None => break,
                        }
                    }
                    out.push_str("' '");
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Whether a code line starts a function (`fn name`, with any qualifiers before it).
fn starts_function(code: &str) -> Option<String> {
    let words: Vec<&str> = code.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let before_ok = words[..at].iter().all(|w| {
        w.starts_with("pub")
            || matches!(
                *w,
                "async" | "const" | "unsafe" | "extern" | "\"\"" | "default"
            )
    });
    let name = words.get(at + 1)?;
    let name: String = name
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (before_ok && !name.is_empty()).then_some(name)
}

/// `(name, first line, lines)` of every function with a body in `text`, test modules left out.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<String> = text.lines().map(code_only).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim();
        // The test module and everything after it (tests come last in a file).
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        let Some(name) = starts_function(trimmed) else {
            i += 1;
            continue;
        };
        let (mut depth, mut opened, mut end) = (0i64, false, None);
        for (j, line) in lines.iter().enumerate().skip(i) {
            for c in line.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                end = Some(j);
                break;
            }
            // A declaration without a body (a trait's method).
            if !opened && line.trim_end().ends_with(';') {
                break;
            }
        }
        match end {
            Some(j) => {
                out.push((name, i + 1, j - i + 1));
                i = j + 1;
            }
            None => i += 1,
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_a_reader_holds() {
    let mut too_long = Vec::new();
    let mut seen = 0;
    for src in crate_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            if file.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for (name, line, len) in functions(&text) {
                seen += 1;
                if len > MOST_LINES {
                    too_long.push(format!("{}:{line} {name}: {len} lines", file.display()));
                }
            }
        }
    }
    assert!(
        seen > 1000,
        "read only {seen} functions: is the workspace where it was?"
    );
    assert!(
        too_long.is_empty(),
        "functions over {MOST_LINES} lines (split them, docs/dev/style.md):\n{}",
        too_long.join("\n")
    );
}

/// The reader finds what it is for: a long function past braces in strings, characters and
/// comments, a short one, and nothing inside a test module.
#[test]
fn the_length_check_reads_functions_as_the_compiler_does() {
    let mut text =
        String::from("pub(crate) async fn long() {\n    let s = \"}}}\"; // }\n    let c = '{';\n");
    for _ in 0..130 {
        text.push_str("    work();\n");
    }
    text.push_str("}\n\nfn short<'a>(x: &'a str) -> &'a str {\n    x\n}\n\ntrait T {\n    fn declared(&self);\n}\n");
    text.push_str("#[cfg(test)]\nmod tests {\n    fn in_a_test() {\n    }\n}\n");
    let found = functions(&text);
    let names: Vec<(&str, usize)> = found.iter().map(|(n, _, l)| (n.as_str(), *l)).collect();
    assert_eq!(names, vec![("long", 134), ("short", 3)]);
}
