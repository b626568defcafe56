//! The one series model every chart draws: a named series of marks, each a point (or a bar) at
//! some x with its figure, the spread of that figure over the runs as a whisker, the value
//! printed beside it, and whether the figure stands for only part of the runs (drawn hollow)
//! or for none of them (marked, never silently left out). Names are unique within a chart and
//! each name gets its own colour from the palette. Owns the model and the colours; must not
//! draw or compute statistics (each figure comes from the result model).

use plotters::style::RGBColor;

/// The first colours: Okabe and Ito's colour-blind-safe set (its yellow, too pale on white,
/// and its black, the colour of the axes, left out), then the Tableau 10 colours unlike them,
/// each distinct on screen and in print; further series get colours spread round the colour
/// wheel ([`colour`]). A series also gets a marker shape of its own ([`MARKERS`]), so a reader
/// who cannot tell two colours apart tells the shapes apart.
pub const COLOURS: [RGBColor; 12] = [
    RGBColor(0, 114, 178),   // Okabe–Ito blue
    RGBColor(213, 94, 0),    // vermilion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(121, 85, 72),   // Tableau brown, darkened
    RGBColor(130, 130, 130), // grey
    RGBColor(140, 140, 20),  // olive
    RGBColor(117, 76, 170),  // purple
    RGBColor(176, 30, 60),   // crimson
    RGBColor(30, 60, 120),   // navy
];

/// The marker shapes series take in turn, beside their colours.
pub const MARKERS: [Marker; 5] = [
    Marker::Dot,
    Marker::Triangle,
    Marker::Square,
    Marker::Diamond,
    Marker::InvertedTriangle,
];

/// The colour of the `i`-th series: the fixed colours first, then hues a golden angle apart
/// (never one of the fixed colours again, never one another).
pub fn colour(i: usize) -> RGBColor {
    if let Some(c) = COLOURS.get(i) {
        return *c;
    }
    let n = (i - COLOURS.len()) as f64;
    let hue = (n * 137.507_764 + 17.0) % 360.0;
    // Alternate the lightness so neighbouring hues differ in brightness too.
    let lightness = if (i - COLOURS.len()) % 2 == 0 {
        0.38
    } else {
        0.50
    };
    hsl(hue, 0.70, lightness)
}

fn hsl(h: f64, s: f64, l: f64) -> RGBColor {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let m = l - c / 2.0;
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    RGBColor(byte(r), byte(g), byte(b))
}

/// Colours and marker shapes by series name over a whole page: a name gets the next colour
/// and shape the first time it is asked for and keeps them on every chart of the page, so one
/// colour never stands for two series (one palette is handed to every chart of a report).
#[derive(Debug, Clone, Default)]
pub struct Palette {
    names: Vec<String>,
}

impl Palette {
    fn index(&mut self, name: &str) -> usize {
        match self.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.names.push(name.to_string());
                self.names.len() - 1
            }
        }
    }

    /// The colour of `name`.
    pub fn of(&mut self, name: &str) -> RGBColor {
        colour(self.index(name))
    }

    /// The marker shape of `name`: the shapes in turn, so neighbours in the legend differ in
    /// shape as well as colour.
    pub fn marker_of(&mut self, name: &str) -> Marker {
        MARKERS[self.index(name) % MARKERS.len()]
    }
}

/// How a series' marks are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A dot on each point, joined by a line.
    Dot,
    /// A triangle on each point, joined by a line (a series that may lie on a dotted one).
    Triangle,
    /// A square on each point, joined by a line.
    Square,
    /// A diamond on each point, joined by a line.
    Diamond,
    /// A triangle pointing down on each point, joined by a line.
    InvertedTriangle,
    /// A line alone, dashed (a reference level, such as an idle round trip).
    Dashed,
}

/// One mark of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// Where along x: a value (linear or log axis) or a category index.
    pub x: f64,
    /// The figure, in the chart's display unit; `None` when there is none to draw (no run long
    /// enough to time): the plot marks the place instead of leaving it out.
    pub y: Option<f64>,
    /// The figure's spread over the runs (minimum, maximum), drawn as a whisker.
    pub spread: Option<(f64, f64)>,
    /// Printed beside the mark (bars: above the whisker).
    pub label: Option<String>,
    /// The figure stands for only part of the runs (some were too short to time): hollow.
    pub partial: bool,
}

impl Mark {
    /// A plain point.
    pub fn at(x: f64, y: f64) -> Mark {
        Mark {
            x,
            y: Some(y),
            spread: None,
            label: None,
            partial: false,
        }
    }
}

/// A named, coloured series of marks.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its legend entry; unique within a chart.
    pub name: String,
    /// Its colour; unique within a chart.
    pub colour: RGBColor,
    /// How its marks are drawn.
    pub marker: Marker,
    /// Its marks, ascending in x (lines join them in that order).
    pub marks: Vec<Mark>,
}

impl Series {
    /// A series of `marks`, sorted by x so a line never runs back.
    pub fn new(name: impl Into<String>, colour: RGBColor, mut marks: Vec<Mark>) -> Series {
        marks.sort_by(|a, b| a.x.total_cmp(&b.x));
        Series {
            name: name.into(),
            colour,
            marker: Marker::Dot,
            marks,
        }
    }

    /// The same series drawn with `marker`.
    pub fn with_marker(mut self, marker: Marker) -> Series {
        self.marker = marker;
        self
    }
}

/// Named marks grouped into series in the order the names first appear, each sorted by x,
/// coloured from `palette`.
pub fn group(
    marks: impl IntoIterator<Item = (String, Mark)>,
    palette: &mut Palette,
) -> Vec<Series> {
    let mut names: Vec<String> = Vec::new();
    let mut grouped: Vec<Vec<Mark>> = Vec::new();
    for (name, mark) in marks {
        match names.iter().position(|n| *n == name) {
            Some(i) => grouped[i].push(mark),
            None => {
                names.push(name);
                grouped.push(vec![mark]);
            }
        }
    }
    names
        .into_iter()
        .zip(grouped)
        .map(|(name, marks)| {
            let colour = palette.of(&name);
            let marker = palette.marker_of(&name);
            Series::new(name, colour, marks).with_marker(marker)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_gets_a_colour_of_its_own() {
        let all: Vec<RGBColor> = (0..60).map(colour).collect();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b, "two series share a colour");
            }
        }
        let mut p = Palette::default();
        let tcp = p.of("TCP Streaming");
        assert_eq!(p.of("UDP Streaming"), COLOURS[1]);
        assert_eq!(p.of("TCP Streaming"), tcp, "the same name, the same colour");
        assert_ne!(p.marker_of("TCP Streaming"), p.marker_of("UDP Streaming"));
    }

    /// Okabe–Ito's colours come first: a reader with a red–green deficiency tells them apart.
    #[test]
    fn the_first_colours_are_okabe_and_itos() {
        assert_eq!(colour(0), RGBColor(0, 114, 178));
        assert_eq!(colour(1), RGBColor(213, 94, 0));
        assert_eq!(colour(2), RGBColor(0, 158, 115));
        // No two of the fixed colours are near-identical (the message-size lab's 12 series):
        // each pair at least 60 apart in RGB.
        for (i, a) in COLOURS.iter().enumerate() {
            for b in &COLOURS[i + 1..] {
                let d = |x: u8, y: u8| (f64::from(x) - f64::from(y)).powi(2);
                let distance = (d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2)).sqrt();
                assert!(distance >= 60.0, "{a:?} and {b:?} are {distance:.0} apart");
            }
        }
        // No colour is near-white or the axes' black.
        for c in COLOURS {
            let sum = u32::from(c.0) + u32::from(c.1) + u32::from(c.2);
            assert!(sum > 0 && sum < 3 * 235, "{c:?}");
        }
    }

    #[test]
    fn grouped_marks_come_out_sorted_by_x() {
        let mut p = Palette::default();
        let s = group(
            [
                ("a".to_string(), Mark::at(3.0, 1.0)),
                ("b".to_string(), Mark::at(1.0, 1.0)),
                ("a".to_string(), Mark::at(1.0, 2.0)),
                ("a".to_string(), Mark::at(2.0, 0.5)),
            ],
            &mut p,
        );
        assert_eq!(s.len(), 2);
        let xs: Vec<f64> = s[0].marks.iter().map(|m| m.x).collect();
        assert_eq!(xs, [1.0, 2.0, 3.0], "a line never runs back");
        assert_ne!(s[0].colour, s[1].colour);
    }
}
