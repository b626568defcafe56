//! `wirebench compare A B`: loads two campaigns from the store, compares them per configuration
//! and prints the table; reports whether a configuration regressed beyond the allowed percentage.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use crate::commands::history;
use crate::report::compare::{self, Side};
use crate::store::Store;

/// Runs `wirebench compare`; `Ok(false)` means a configuration of B is significantly slower
/// than in A by more than `fail_pct` (exit status 1).
pub fn execute(
    db: &Path,
    a: i64,
    b: i64,
    fail_pct: Option<f64>,
    out: &mut impl Write,
) -> Result<bool> {
    let store = Store::open_existing(db)?;
    let (_, runs_a) = history::load(&store, a)?;
    let (_, runs_b) = history::load(&store, b)?;
    let comparison = compare::compare(
        Side {
            id: a,
            runs: &runs_a,
        },
        Side {
            id: b,
            runs: &runs_b,
        },
    );
    compare::write_text(&comparison, fail_pct, out)?;
    let regressions: Vec<&compare::Row> = match fail_pct {
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
                "\nno configuration is significantly slower by more than {pct}%"
            )?;
        } else {
            writeln!(
                out,
                "\n{} configuration(s) significantly slower by more than {pct}%",
                regressions.len()
            )?;
        }
    }
    Ok(regressions.is_empty())
}
