//! The README's and the guide's commands cannot rot: every `wirebench ...` (and `cargo run --
//! ...`) line of their `sh` blocks parses with the flags this build has, and every `run`, `ping`
//! and `rr` against the embedded server (loopback, no name to resolve) passes the same
//! validation as when typed, so a recipe that would be refused (a flag renamed, a combination no
//! longer allowed) fails here. Placeholders (HOST, FILE) parse as values; synopsis lines with
//! `[--flag]` or `a|b` alternatives are not commands and are skipped. (tests/it/guide.rs also
//! runs every command of the guide.)

use wirebench::cli::Command;
use wirebench::config::args;
use wirebench::config::rr::RrConfig;
use wirebench::runner::RunConfig;

/// Every command line of the ```sh blocks of `text`, continuation lines joined, comments cut,
/// here-documents (`<<'END'` … `END`) left out, `cargo run -- …` as `wirebench …`.
pub(crate) fn sh_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    let mut heredoc: Option<String> = None;
    for line in text.lines() {
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        if line.starts_with("```") {
            in_sh = line.trim() == "```sh";
            pending.clear();
            continue;
        }
        if !in_sh || line.trim_start().starts_with('#') {
            continue;
        }
        let line = line.split(" #").next().unwrap_or("").trim_end();
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let command = std::mem::take(&mut pending).trim().to_string();
        if let Some((_, marker)) = command.split_once("<<") {
            heredoc = Some(marker.trim().trim_matches(['\'', '"']).to_string());
            continue;
        }
        let command = command
            .strip_prefix("cargo run --release -- ")
            .or_else(|| command.strip_prefix("cargo run -- "))
            .map(|rest| format!("wirebench {rest}"))
            .unwrap_or(command);
        if !command.is_empty() {
            out.push(command);
        }
    }
    out
}

/// The guide's pages: (file name, text).
pub(crate) fn guide_pages() -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide");
    let mut pages: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("docs/guide")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            name.ends_with(".md")
                .then(|| (name, std::fs::read_to_string(&path).expect("a page")))
        })
        .collect();
    pages.sort();
    pages
}

/// Every `wirebench` command line of the README and the guide.
fn readme_commands() -> Vec<String> {
    let mut texts = vec![include_str!("../../../../README.md").to_string()];
    texts.extend(guide_pages().into_iter().map(|(_, text)| text));
    texts
        .iter()
        .flat_map(|t| sh_lines(t))
        .filter(|c| c.starts_with("wirebench "))
        .collect()
}

/// Splits a command line as a shell would for these simple lines: words, with '...' and "..."
/// quoting; `None` for a line with a pipe, redirection or substitution (not one command).
pub(crate) fn words(line: &str) -> Option<Vec<String>> {
    // A trailing `&` runs it in the background: the command is the same.
    let line = line.strip_suffix(" &").unwrap_or(line);
    if line.contains(['|', '>', '<', '$', '`', '[', '&', ';']) || line.contains("...") {
        return None;
    }
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    Some(out)
}

#[test]
fn every_readme_command_parses() {
    let commands = readme_commands();
    assert!(commands.len() > 20, "found only {commands:?}");
    let mut checked = 0;
    let mut validated = 0;
    let mut wrong = Vec::new();
    for line in &commands {
        let Some(argv) = words(line) else { continue };
        checked += 1;
        let cli = match args::parse_from(&argv) {
            Ok(cli) => cli,
            Err(e) => {
                let why = match e {
                    args::ArgsError::Clap(e) => e.to_string(),
                    args::ArgsError::Usage(m) => m,
                };
                wrong.push(format!("{line}\n  {}", why.lines().next().unwrap_or("")));
                continue;
            }
        };
        // The embedded server's commands validate without a name lookup: check them as typed.
        let refused = match &cli.command {
            Command::Run(a)
                if a.server.is_none()
                    && a.iperf3.iperf3.is_none()
                    && a.perf.perf_server.is_none() =>
            {
                validated += 1;
                RunConfig::from_args(a).err().map(|e| e.to_string())
            }
            Command::Ping(a) if a.target.is_none() && a.common.server.is_none() => {
                validated += 1;
                RrConfig::from_ping(a).err().map(|e| e.to_string())
            }
            Command::Rr(a) if a.common.server.is_none() => {
                validated += 1;
                RrConfig::from_rr(a).err().map(|e| e.to_string())
            }
            _ => None,
        };
        if let Some(why) = refused {
            wrong.push(format!("{line}\n  refused: {why}"));
        }
    }
    assert!(checked > 20, "checked only {checked} of {commands:?}");
    assert!(validated >= 5, "validated only {validated}");
    assert!(
        wrong.is_empty(),
        "README and guide commands that no longer parse:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_splitter_keeps_quoted_words_and_skips_pipelines() {
    assert_eq!(
        words("wirebench run --impair 'loss=1%, delay=5ms' -n 1MiB").unwrap(),
        [
            "wirebench",
            "run",
            "--impair",
            "loss=1%, delay=5ms",
            "-n",
            "1MiB"
        ]
    );
    assert!(words("wirebench man | man -l -").is_none());
    assert_eq!(
        words("wirebench server &").unwrap(),
        ["wirebench", "server"]
    );
    assert!(words("wirebench export 3 > campaign-3.json").is_none());
}
