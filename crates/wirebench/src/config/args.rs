//! Parses the command line as the binary does: clap's derive (`cli`) with negative numbers let
//! through to every flag that takes a value, then refused with our own one-line message naming
//! the flag and an example of what it takes. Knows clap and `cli`, nothing else of the crate.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgMatches, CommandFactory, FromArgMatches};

use crate::cli::{Cli, CompletionsArgs, ManArgs};

/// Why the command line was not parsed.
#[derive(Debug)]
pub enum ArgsError {
    /// clap's own error (unknown flag, missing value, `--help`, `--version`): print it with
    /// [`clap::Error::exit`].
    Clap(clap::Error),
    /// A negative number given to a flag, or `ping -c HOST` (the old spelling): one line for
    /// the user (exit status 2).
    Usage(String),
}

/// The clap command of `wirebench`, as the binary parses it: every flag that takes a value
/// accepts a leading `-` followed by a digit as a value (so `-n -5` reaches our check instead of
/// clap's `unexpected argument '-5'`).
pub fn command() -> clap::Command {
    allow_negative(Cli::command())
}

/// `wirebench completions SHELL`: the shell.
pub fn completions_shell(args: &CompletionsArgs) -> clap_complete::Shell {
    args.shell
}

/// `wirebench man [--dir DIR]`: where the pages go (`None`: the main page to stdout).
pub fn man_dir(args: &ManArgs) -> Option<PathBuf> {
    args.dir.clone()
}

/// Parses `argv` (program name first) into a [`Cli`].
pub fn parse_from<I, T>(argv: I) -> Result<Cli, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let cmd = command();
    let matches = match cmd.clone().try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => {
            let ours =
                negative_in_clap_error(&cmd, &argv, &e).or_else(|| old_ping_server(&argv, &e));
            return Err(ours.map_or(ArgsError::Clap(e), ArgsError::Usage));
        }
    };
    if let Some(message) = negative_in_matches(&cmd, &matches) {
        return Err(ArgsError::Usage(message));
    }
    if let Some(message) = two_limits(&matches) {
        return Err(ArgsError::Usage(message));
    }
    Cli::from_arg_matches(&matches).map_err(ArgsError::Clap)
}

/// Whether `value` is a negative number as a user types one (`-5`, `-0.5`, `-5MiB`, `-1s`).
pub fn looks_negative(value: &str) -> bool {
    let mut chars = value.chars();
    chars.next() == Some('-') && chars.next().is_some_and(|c| c.is_ascii_digit() || c == '.')
}

/// The one-line refusal of `value` given to `arg`.
pub fn negative_message(arg: &Arg, value: &str) -> String {
    let example = arg
        .get_default_values()
        .first()
        .and_then(|v| v.to_str())
        .filter(|v| !v.is_empty() && !looks_negative(v))
        .map(str::to_owned)
        .or_else(|| example_without_default(arg.get_id().as_str()).map(str::to_owned));
    let hint = match example {
        Some(ex) => format!("give {} such as {ex}", kind_of(&ex)),
        None => "give 0 or more".to_owned(),
    };
    format!(
        "{}: negative values are not allowed (got {value}); {hint}",
        label(arg)
    )
}

fn allow_negative(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(allow_negative)
}

/// A negative value among the parsed values of the subcommand that ran (string flags: sizes,
/// durations, rates, lists), as our message.
fn negative_in_matches(cmd: &clap::Command, matches: &ArgMatches) -> Option<String> {
    for arg in cmd.get_arguments() {
        let Ok(Some(values)) = matches.try_get_raw(arg.get_id().as_str()) else {
            continue;
        };
        for value in values {
            let value = value.to_string_lossy();
            if looks_negative(&value) {
                return Some(negative_message(arg, &value));
            }
        }
    }
    let (name, sub) = matches.subcommand()?;
    negative_in_matches(cmd.find_subcommand(name)?, sub)
}

/// `run -n` and `-t` both given on the command line (the default `-n` does not count): the
/// one-line refusal.
fn two_limits(matches: &ArgMatches) -> Option<String> {
    let ("run", run) = matches.subcommand()? else {
        return None;
    };
    let given = |id: &str| run.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    if given("total") && given("time") {
        return Some(
            "-n/--total and -t/--time are two ways to end a run: give one \
             (-n 100MiB sends 100 MiB; -t 10 sends for 10 s)"
                .to_string(),
        );
    }
    (given("blockcount") && (given("total") || given("time"))).then(|| {
        "-k/--blockcount, -n/--total and -t/--time are three ways to end a run: give one \
         (-k 1000 sends 1000 messages of -l; -n 100MiB sends 100 MiB; -t 10 sends for 10 s)"
            .to_string()
    })
}

/// A clap error about a negative value given to a typed flag (`-r -3`, `--port -1`), as our
/// message; `None` for every other error.
fn negative_in_clap_error(
    cmd: &clap::Command,
    argv: &[OsString],
    e: &clap::Error,
) -> Option<String> {
    // The subcommand that was run: the first word of argv that names one.
    let sub = argv
        .iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .find_map(|a| cmd.find_subcommand(a))
        .unwrap_or(cmd);
    if e.kind() == ErrorKind::UnknownArgument {
        // "-10,20" is not a number to clap, so it reads it as flags: find the word in argv
        // and the value flag before it.
        let words: Vec<&str> = argv.iter().filter_map(|a| a.to_str()).collect();
        let at = words.iter().position(|w| looks_negative(w))?;
        let flag = words.get(at.checked_sub(1)?)?;
        let arg = sub.get_arguments().find(|a| {
            a.get_action().takes_values()
                && (flag
                    .strip_prefix("--")
                    .is_some_and(|l| a.get_long() == Some(l))
                    || flag
                        .strip_prefix('-')
                        .and_then(|s| s.parse::<char>().ok())
                        .is_some_and(|s| a.get_short() == Some(s)))
        })?;
        return Some(negative_message(arg, words[at]));
    }
    if !matches!(
        e.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return None;
    }
    let value = match e.get(ContextKind::InvalidValue)? {
        ContextValue::String(v) => v.clone(),
        _ => return None,
    };
    if !looks_negative(&value) {
        return None;
    }
    let rendered = match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(a) => a.clone(),
        _ => return None,
    };
    // clap renders the flag as "--repeat <REPEAT>", "-r, --repeat <N>" or "<A>".
    let long = rendered
        .split([' ', ',', '='])
        .find_map(|t| t.strip_prefix("--"))
        .map(str::to_owned);
    let positional = rendered
        .trim()
        .strip_prefix('<')
        .and_then(|r| r.strip_suffix('>'))
        .map(str::to_owned);
    let arg = sub.get_arguments().find(|a| {
        long.as_deref().is_some_and(|l| a.get_long() == Some(l))
            || positional.as_deref().is_some_and(|p| {
                a.get_value_names()
                    .is_some_and(|names| names.iter().any(|n| n.as_str() == p))
            })
    })?;
    Some(negative_message(arg, &value))
}

/// `ping -c HOST`: until 0.1 `-c` named ping's server, as it does run's and rr's; it is now the
/// count, as ping(8)'s. A value that is no count gets a line saying where the server goes.
fn old_ping_server(argv: &[OsString], e: &clap::Error) -> Option<String> {
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let words: Vec<&str> = argv.iter().filter_map(|a| a.to_str()).collect();
    if words.get(1) != Some(&"ping") {
        return None;
    }
    let ContextValue::String(value) = e.get(ContextKind::InvalidValue)? else {
        return None;
    };
    let at = words.iter().position(|w| w == value)?;
    if !matches!(
        words.get(at.checked_sub(1)?),
        Some(&"-c") | Some(&"--count")
    ) {
        return None;
    }
    Some(format!(
        "-c/--count {value}: on ping, -c is the number of probes, as in ping(8); give the server \
         as the argument: wirebench ping {value} (or --server {value})"
    ))
}

/// "-n/--total", "--rate" or "<A>".
fn label(arg: &Arg) -> String {
    match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("-{s}/--{l}"),
        (None, Some(l)) => format!("--{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, None) => match arg.get_value_names().and_then(|n| n.first()) {
            Some(name) => format!("<{name}>"),
            None => format!("<{}>", arg.get_id().as_str().to_uppercase()),
        },
    }
}

/// An example value for flags that have no default.
fn example_without_default(id: &str) -> Option<&'static str> {
    Some(match id {
        "rate" | "max_rate" => "100Mbit",
        "rto" => "20ms",
        "window" | "upload" | "download" => "4MiB",
        "total" => "100MiB",
        "msg_size" => "1024",
        "interval" | "duration" | "time" => "5s",
        "count" => "100",
        "parallel" | "run" | "a" | "b" | "id" => "1",
        "max_sessions_per_client" => "128",
        "fail_on_regression" => "10",
        _ => return None,
    })
}

/// "a size", "a duration", ... for an example value.
fn kind_of(example: &str) -> &'static str {
    let starts_with_digit = example.starts_with(|c: char| c.is_ascii_digit());
    if example.ends_with('B') {
        "a size"
    } else if example.ends_with("bit") {
        "a rate"
    } else if example.ends_with('%') {
        "a percentage"
    } else if starts_with_digit && example.ends_with('s') {
        "a duration"
    } else if example.chars().all(|c| c.is_ascii_digit() || c == ',') {
        "a number"
    } else {
        "a value"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(argv: &[&str]) -> String {
        let mut all = vec!["wirebench"];
        all.extend_from_slice(argv);
        match parse_from(all) {
            Err(ArgsError::Usage(m)) => m,
            Err(ArgsError::Clap(e)) => panic!("{argv:?}: clap error {e}"),
            Ok(cli) => panic!("{argv:?}: parsed {cli:?}"),
        }
    }

    #[test]
    fn negative_values_get_one_line_naming_the_flag() {
        assert_eq!(
            refusal(&["run", "-n", "-5"]),
            "-n/--total: negative values are not allowed (got -5); give a size such as 100MiB"
        );
        assert_eq!(
            refusal(&["run", "--total=-5MiB"]),
            "-n/--total: negative values are not allowed (got -5MiB); give a size such as 100MiB"
        );
        assert_eq!(
            refusal(&["run", "-r", "-3"]),
            "-r/--repeat: negative values are not allowed (got -3); give a number such as 1"
        );
        assert_eq!(
            refusal(&["run", "--rate", "-1"]),
            "-b/--rate: negative values are not allowed (got -1); give a rate such as 100Mbit"
        );
        assert!(refusal(&["ping", "--count", "-1"]).starts_with("-c/--count: negative"));
        assert!(refusal(&["rr", "--concurrency", "-10,20"]).starts_with("--concurrency: negative"));
        assert!(refusal(&["rr", "--flows", "-2"]).starts_with("--flows: negative"));
        assert!(refusal(&["server", "-p", "-1"]).starts_with("-p/--port: negative"));
        assert!(refusal(&[
            "dns",
            "--resolver",
            "127.0.0.1",
            "--name",
            "x",
            "--timeout",
            "-1s"
        ])
        .contains("give a duration such as 1s"));
        assert!(refusal(&["compare", "-1", "2"]).starts_with("<A>: negative"));
    }

    #[test]
    fn other_errors_stay_clap_errors_and_good_lines_parse() {
        let mut argv = vec!["wirebench", "run", "--warpdrive"];
        assert!(matches!(parse_from(&argv), Err(ArgsError::Clap(_))));
        argv.truncate(2);
        argv.extend(["-n", "5MiB", "-r", "2"]);
        assert!(parse_from(&argv).is_ok());
        assert!(!looks_negative("-"));
        let Err(ArgsError::Usage(m)) = parse_from(["wirebench", "ping", "-c", "127.0.0.1"]) else {
            panic!("ping -c HOST is refused with our line");
        };
        assert!(m.contains("wirebench ping 127.0.0.1"), "{m}");
        assert!(!looks_negative("--json"));
        assert!(looks_negative("-.5"));
    }
}
