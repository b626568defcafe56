//! SVG charts for the HTML reports, every one drawn from one series model ([`series`]) by one
//! plot routine ([`plot`]): the legend in a panel beside the plot, a colour per series, lines
//! sorted by x, whiskers for the spread over the runs and marks for runs too short to time.
//! Which charts a report gets follows the shape of what was measured ([`campaign`] for
//! transfers, [`sweep`] for rr and DNS sweeps, [`rpm`] for responsiveness tests). Owns chart
//! layout only; must not open files, read clocks or compute statistics.

pub mod attributes;
pub mod axis;
pub mod campaign;
pub mod load_phases;
pub mod plot;
pub mod rpm;
pub mod series;
pub mod shape;
pub mod sweep;

/// One chart of a report page: the heading above it, the SVG and the caption below it.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The section heading.
    pub heading: String,
    /// The chart, an `<svg>` element.
    pub svg: String,
    /// What it shows, in a sentence or two.
    pub caption: String,
}
