//! `--rate max` and the rate search flags → a validated [`SearchPlan`], or the one-line
//! refusal that says what to type instead.

use std::time::Duration;

use wirebench_core::machine::impair::parse_percent;
use wirebench_core::machine::ratesearch::{RateSearch, SearchConfig};
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::plan::{Combination, Mechanism, Protocol};
use wirebench_core::vocab::units::{parse_duration, BitRate};

use crate::cli::SearchArgs;
use crate::runner::ratesearch::{SearchPlan, DEFAULT_TRIAL, DEFAULT_TRIAL_GRACE};

/// Whether `--rate` asks for the search.
pub fn is_max(rate: Option<&str>) -> bool {
    rate.is_some_and(|r| r.eq_ignore_ascii_case("max"))
}

/// What the run around the search asks for, to refuse combinations the search cannot serve.
pub struct Around<'a> {
    /// The plan's protocol × mechanism combinations.
    pub combinations: &'a [Combination],
    /// `-R`.
    pub reverse: bool,
    /// `-P`.
    pub parallel: u32,
}

/// The search plan of `--rate max`, `None` without it; search flags without it are refused.
pub fn plan(
    max: bool,
    args: &SearchArgs,
    around: &Around,
) -> Result<Option<SearchPlan>, UsageError> {
    let err = |m: String| UsageError(m);
    if !max {
        let given = [
            ("--max-loss", &args.max_loss),
            ("--search-low", &args.search_low),
            ("--search-high", &args.search_high),
            ("--resolution", &args.resolution),
            ("--trial", &args.trial),
            ("--trial-grace", &args.trial_grace),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, v)| v.is_some()) {
            return Err(err(format!(
                "{flag} is a flag of the rate search: add --rate max (UDP streaming), or drop {flag}"
            )));
        }
        return Ok(None);
    }
    if let Some(c) = around
        .combinations
        .iter()
        .find(|c| !(c.protocol == Protocol::Udp && c.mechanism == Mechanism::Stream))
    {
        let why = match (c.protocol, c.mechanism) {
            (_, Mechanism::StopAndWait) => {
                "stop-and-wait has one message in flight and is never paced"
            }
            (Protocol::Quic, _) => {
                "QUIC is congestion-controlled: its loss-free rate is what it reaches"
            }
            _ => "TCP is congestion-controlled: its loss-free rate is what it reaches",
        };
        return Err(err(format!(
            "--rate max searches the highest loss-free UDP rate and applies to --proto udp --mode stream only \
             ({why}): use --proto udp --mode stream, or give a rate such as --rate 500Mbit"
        )));
    }
    if around.reverse {
        return Err(err(
            "--rate max searches the client's sending rate: drop -R/--reverse".into(),
        ));
    }
    if around.parallel > 1 {
        return Err(err(
            "--rate max searches one flow's rate: drop -P/--parallel".into(),
        ));
    }
    let rate = |flag: &str, v: &Option<String>, default: u64| -> Result<u64, UsageError> {
        match v {
            None => Ok(default),
            Some(s) => s
                .parse::<BitRate>()
                .map(|r| r.0)
                .map_err(|e| UsageError(format!("{flag}: {e}"))),
        }
    };
    let share = |flag: &str, v: &Option<String>, default: f64| -> Result<f64, UsageError> {
        match v {
            None => Ok(default),
            Some(s) => parse_percent(s).map_err(|e| UsageError(format!("{flag}: {e}"))),
        }
    };
    let duration =
        |flag: &str, v: &Option<String>, default: Duration, min: Duration, max: Duration| {
            let d = match v {
                None => default,
                Some(s) => parse_duration(s).map_err(|e| UsageError(format!("{flag}: {e}")))?,
            };
            if d < min || d > max {
                return Err(UsageError(format!(
                    "{flag} is out of range: allowed {} ms to {} s",
                    min.as_millis(),
                    max.as_secs()
                )));
            }
            Ok(d)
        };
    let config = SearchConfig {
        low_bps: rate("--search-low", &args.search_low, 10_000_000)?,
        high_bps: rate("--search-high", &args.search_high, 10_000_000_000)?,
        resolution: share("--resolution", &args.resolution, 0.01)?,
        max_loss: share("--max-loss", &args.max_loss, 0.0)?,
        ..SearchConfig::new(1, 1, 0.0)
    };
    RateSearch::new(config).map_err(|e| UsageError(format!("--rate max: {e}")))?;
    Ok(Some(SearchPlan {
        config,
        trial: duration(
            "--trial",
            &args.trial,
            DEFAULT_TRIAL,
            Duration::from_millis(10),
            Duration::from_secs(60),
        )?,
        trial_grace: duration(
            "--trial-grace",
            &args.trial_grace,
            DEFAULT_TRIAL_GRACE,
            Duration::ZERO,
            Duration::from_secs(60),
        )?,
    }))
}

#[cfg(test)]
mod tests {
    use crate::cli::{Cli, Command};
    use crate::runner::RunConfig;
    use clap::Parser;

    fn cfg(args: &[&str]) -> Result<RunConfig, String> {
        let argv = ["wirebench", "run"].iter().chain(args).copied();
        match Cli::parse_from(argv).command {
            Command::Run(a) => RunConfig::from_args(&a).map_err(|e| e.0),
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn rate_max_plans_a_search_with_its_defaults_and_leaves_the_rate_open() {
        let c = cfg(&["--proto", "udp", "--rate", "MAX", "--max-loss", "0.1%"]).unwrap();
        assert_eq!(c.rate, None, "set once the search found it");
        let plan = c.search.expect("a search");
        assert_eq!(plan.config.low_bps, 10_000_000);
        assert_eq!(plan.config.high_bps, 10_000_000_000);
        assert_eq!(plan.config.resolution, 0.01);
        assert!((plan.config.max_loss - 0.001).abs() < 1e-12);
        assert_eq!(plan.trial.as_millis(), 200);
        assert_eq!(plan.trial_grace.as_millis(), 30);
        // A given rate plans no search.
        assert!(cfg(&["--proto", "udp", "--rate", "1G"])
            .unwrap()
            .search
            .is_none());
    }

    #[test]
    fn bad_search_flags_say_which_flag() {
        let e = cfg(&["--proto", "udp", "--rate", "max", "--trial", "1ms"]).unwrap_err();
        assert!(e.starts_with("--trial is out of range"), "{e}");
        let e = cfg(&["--proto", "udp", "--rate", "max", "--resolution", "0%"]).unwrap_err();
        assert!(e.contains("resolution"), "{e}");
        let e = cfg(&["--proto", "udp", "--rate", "max", "-P", "2"]).unwrap_err();
        assert!(e.contains("-P/--parallel"), "{e}");
    }

    #[test]
    fn rate_max_is_a_sweep_dimension_like_any_other() {
        // One search per message size × total; the plan keeps every point.
        let c = cfg(&[
            "--proto", "udp", "--rate", "max", "-l", "512,1472", "--repeat", "2",
        ])
        .unwrap();
        assert!(c.search.is_some());
        assert_eq!(c.points.len(), 2);
        assert_eq!(c.repeat, 2);
    }
}
