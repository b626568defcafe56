//! A chart's shape written into its `<svg>` element as attributes, so a test or a script reads
//! what a chart is — its kind, its axes, its series — without reading its drawing. Owns that
//! text only; must not draw.

use super::axis::Axis;
use super::series::Series;

/// The attributes of a chart with axes `x` and `y` and `series` (grouped bars when `bars`):
/// `class="wb-chart"`, `data-kind` (`bars` or `lines`), `data-x` and `data-y` (the axis
/// descriptions) with `data-x-scale` and `data-y-scale` (`categories`, `log` or `linear`),
/// `data-series` (how many), `data-points` (the most marks one series has), `data-colours`
/// (each series' colour, `#rrggbb`) and `data-names` (each series' name, joined by " | "),
/// both in legend order.
pub fn of(bars: bool, x: &Axis, y: &Axis, series: &[Series]) -> String {
    let points = series.iter().map(|s| s.marks.len()).max().unwrap_or(0);
    let colours: Vec<String> = series
        .iter()
        .map(|s| format!("#{:02x}{:02x}{:02x}", s.colour.0, s.colour.1, s.colour.2))
        .collect();
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    format!(
        "class=\"wb-chart\" data-kind=\"{}\" data-x=\"{}\" data-x-scale=\"{}\" data-y=\"{}\" \
         data-y-scale=\"{}\" data-series=\"{}\" data-points=\"{points}\" data-colours=\"{}\" \
         data-names=\"{}\"",
        if bars { "bars" } else { "lines" },
        escaped(&x.desc),
        scale(x),
        escaped(&y.desc),
        scale(y),
        series.len(),
        colours.join(" "),
        escaped(&names.join(" | "))
    )
}

/// How `axis` is drawn: `categories`, `log` or `linear`.
fn scale(axis: &Axis) -> &'static str {
    match (axis.categories.is_empty(), axis.log) {
        (false, _) => "categories",
        (true, true) => "log",
        (true, false) => "linear",
    }
}

/// `text` as an attribute value: the characters that would end it or open markup escaped.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::series::{Mark, COLOURS};

    #[test]
    fn an_axis_description_is_escaped_and_categories_say_so() {
        let series = [Series::new("a \"b\"", COLOURS[0], vec![Mark::at(0.0, 1.0)])];
        let x = Axis::categories("Total <per run>", vec!["1 MiB".into()]);
        let y = Axis::log("Time (ms)", 1.0, 100.0, 300.0, 22.0);
        assert_eq!(
            of(true, &x, &y, &series),
            "class=\"wb-chart\" data-kind=\"bars\" data-x=\"Total &lt;per run&gt;\" \
             data-x-scale=\"categories\" data-y=\"Time (ms)\" data-y-scale=\"log\" \
             data-series=\"1\" data-points=\"1\" data-colours=\"#0072b2\" \
             data-names=\"a &quot;b&quot;\""
        );
    }
}
