//! `wirebench compare A B`: loads two campaigns from the store, compares them per configuration
//! (goodput and UDP loss, by the result model) and prints the table; reports whether a
//! configuration regressed beyond the allowed percentage.

use std::io::Write;

use anyhow::Result;
use wirebench_core::record::comparison::{self, Row};

use crate::commands::history;
use crate::report::compare;
use crate::store::rpm::Rpm;
use crate::store::{Location, Store};

/// Runs `wirebench compare`; `Ok(false)` means a configuration of B is significantly worse than
/// in A beyond `fail_pct`: goodput lower by more than that percentage, or UDP loss higher by
/// more than that many percentage points (exit status 1).
pub fn execute(
    db: impl Into<Location>,
    a: i64,
    b: i64,
    fail_pct: Option<f64>,
    out: &mut impl Write,
) -> Result<bool> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    let (_, runs_a) = history::load(&store, a)?;
    let (_, runs_b) = history::load(&store, b)?;
    let comparison = comparison::compare((a, &runs_a), (b, &runs_b));
    compare::write_text(&comparison, fail_pct, out)?;
    let regressions: Vec<&Row> = match fail_pct {
        Some(pct) => comparison
            .rows
            .iter()
            .filter(|r| r.is_regression(pct))
            .collect(),
        None => Vec::new(),
    };
    if let Some(pct) = fail_pct {
        if regressions.is_empty() {
            writeln!(
                out,
                "\nno configuration is significantly worse (goodput lower by more than {pct}%, or loss higher by more than {pct} points)"
            )?;
        } else {
            writeln!(
                out,
                "\n{} significantly worse (goodput lower by more than {pct}%, or loss higher by more than {pct} points)",
                wirebench_core::record::count_of(regressions.len(), "configuration is", "configurations are")
            )?;
        }
    }
    Ok(regressions.is_empty())
}

/// Runs `wirebench compare --rpm A B`: two stored rpm campaigns, RPM and loaded latency;
/// `Ok(false)` when B is significantly worse beyond `fail_pct` (exit status 1).
pub fn execute_rpm(
    db: impl Into<Location>,
    a: i64,
    b: i64,
    fail_pct: Option<f64>,
    out: &mut impl Write,
) -> Result<bool> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    let load = |id: i64| -> Result<Vec<wirebench_core::machine::responsiveness::RpmResult>> {
        if store.campaign::<Rpm>(id)?.is_none() {
            return Err(wirebench_core::vocab::error::UsageError(format!(
                "there is no rpm campaign {id} in {}; `wirebench runs` lists them",
                db.display()
            ))
            .into());
        }
        Ok(store
            .results::<Rpm>(id)?
            .into_iter()
            .map(|r| r.result)
            .collect())
    };
    let (results_a, results_b) = (load(a)?, load(b)?);
    let comparison = wirebench_core::record::rpm::compare((a, &results_a), (b, &results_b));
    crate::report::rpm::write_comparison(&comparison, fail_pct, out)?;
    Ok(!fail_pct.is_some_and(|pct| comparison.is_regression(pct)))
}
