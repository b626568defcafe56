//! The HTML reports in a real browser: Debian's `chromium`, headless, loads the report of each
//! shape of campaign — one size × one total, seed 000's one size × several totals over three
//! campaigns, a size × total sweep, a stop-and-wait sweep, a run with interval series, a DNS
//! and an rr sweep — from a file. On the DOM it parsed (`--dump-dom`), every chart (SVG) must
//! have a title, both axes described (a numeric axis with its unit), a legend beside the plot
//! with one entry and one colour per series (no two series share a colour or a name) and no
//! data mark under it; no two texts may overlap and no table may run past the page; a
//! screenshot of the page must come out. With WIREBENCH_UPDATE_SCREENSHOTS=1 the charts are
//! also rendered one by one into docs/guide/img/. Skips, saying so, when chromium is not
//! installed (`.ci/run` installs it).
//!
//! The DOM checks read the charts as plotters draws them with the report's style: the title is
//! the largest text, the axis descriptions the next size (the y one rotated), tick labels are
//! centred (x) or right-aligned (y), and the legend is the black-bordered box.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use wirebench::report::{Format, Layout};

use crate::report::{fixture_db, fixtures_db, interval_fixture_db, report_of, SEED_000};
use crate::support::TempPath;

pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
/// The charts of the fixtures the guide shows (docs/guide/img/NAME.png): page name and chart
/// number. (The lab pages show their own commands' reports at full scale, lab-*.png, taken
/// by hand: a fixture is not what those commands make.)
const DOC_IMAGES: [&str; 6] = [
    "seed000-1",
    "seed000-2",
    "seed000-3",
    "sweep-size-total-1",
    "sweep-size-total-2",
    "sweep-saw-3",
];
/// Chromium starts in about a second; a run past this has hung and is killed.
const LIMIT: Duration = Duration::from_secs(90);

/// One page the browser test loads: its name, the HTML, and how many charts it has.
struct Page {
    name: &'static str,
    html: String,
    charts: usize,
}

/// Every shape of report page.
async fn pages() -> Vec<Page> {
    let html =
        |db: &TempPath, ids: &[i64]| report_of(db, ids, Format::Html, Layout::Configurations);
    let seed = fixtures_db(&SEED_000);
    let mut pages = vec![
        Page {
            name: "campaign-export",
            html: html(&fixture_db(), &[1]),
            charts: 3,
        },
        Page {
            name: "seed000",
            html: report_of(&seed, &[1, 2, 3], Format::Html, Layout::Grid),
            charts: 4,
        },
        Page {
            name: "sweep-size-total",
            html: html(&fixtures_db(&["sweep-size-total.json"]), &[1]),
            charts: 3,
        },
        Page {
            name: "sweep-saw",
            html: html(&fixtures_db(&["sweep-saw.json"]), &[1]),
            charts: 3,
        },
        Page {
            name: "campaign-intervals",
            html: html(&interval_fixture_db(), &[1]),
            charts: 3,
        },
    ];
    let (dns, rr, flows) = (
        crate::sweep_report::dns_db(),
        crate::sweep_report::rr_db(),
        crate::sweep_report::rr_flows_db(),
    );
    for (name, db, flag, charts) in [
        ("dns", &dns, "--dns", 2),
        ("rr", &rr, "--rr", 3),
        ("rr-flows", &flows, "--rr", 3),
    ] {
        let out =
            crate::cli::wirebench(&["report", flag, "1", "--format", "html", "--db", db.arg()])
                .await;
        assert!(out.status.success(), "{}", crate::cli::stderr(&out));
        pages.push(Page {
            name,
            html: String::from_utf8(out.stdout).expect("UTF-8"),
            charts,
        });
    }
    pages
}

#[tokio::test]
async fn every_chart_of_every_report_shape_reads_in_a_browser() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!(
            "browser test skipped: {CHROMIUM} is missing (`apt-get install chromium`; .ci/run installs it)"
        );
        return;
    }
    let shots = std::env::var_os("WIREBENCH_UPDATE_SCREENSHOTS").is_some();
    for Page { name, html, charts } in pages().await {
        let page = TempPath::new(".html");
        std::fs::write(&page.0, &html).expect("report written");
        let url = format!("file://{}", page.arg());
        // The report has no scripts; this copy gets one that measures, in the browser's own
        // layout, whether any two texts of a chart overlap (tick labels, legend, title) and
        // whether a table runs past the page.
        let probe = TempPath::new(".html");
        std::fs::write(&probe.0, html.replace("</body>", OVERLAP_PROBE)).expect("probe written");

        let out = chromium(&[
            "--window-size=1200,3000",
            "--dump-dom",
            &format!("file://{}", probe.arg()),
        ])
        .await;
        let dom = String::from_utf8(out.stdout).expect("the DOM is UTF-8");
        assert!(dom.contains("</html>"), "{name}: no DOM dumped: {dom}");
        let overlaps = dom
            .split_once("<pre id=\"text-overlaps\">")
            .and_then(|(_, rest)| rest.split_once("</pre>"))
            .map(|(found, _)| unescape(found))
            .expect("the overlap probe ran");
        assert!(
            overlaps.is_empty(),
            "{name}: texts collide or tables overflow:\n{overlaps}"
        );
        let svgs = charts_of(&dom);
        assert_eq!(svgs.len(), charts, "{name}: charts in the page");
        for (i, svg) in svgs.iter().enumerate() {
            check_chart(&format!("{name}, chart {}", i + 1), svg);
        }

        let shot = TempPath::new(".png");
        chromium(&[
            &format!("--screenshot={}", shot.arg()),
            "--window-size=1200,3000",
            &url,
        ])
        .await;
        assert_png(&shot, (1200, 3000), name);
        if shots {
            for (i, svg) in charts_of(&html).iter().enumerate() {
                let image = format!("{name}-{}", i + 1);
                if DOC_IMAGES.contains(&image.as_str()) {
                    save_chart(&image, svg).await;
                }
            }
        }
    }
}

/// Asserts `shot` is a PNG of `size` with more than a blank page in it.
fn assert_png(shot: &TempPath, size: (u32, u32), name: &str) {
    let png = std::fs::read(&shot.0).expect("chromium wrote the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG");
    // IHDR: width and height, big-endian, after the 8-byte signature and 8-byte chunk head.
    let dim = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    assert_eq!((dim(16), dim(20)), size, "{name}: screenshot size");
    // A blank page compresses to a few KB; charts and tables do not.
    assert!(
        png.len() > 20_000,
        "{name}: screenshot of {} bytes",
        png.len()
    );
}

/// Renders one chart alone as docs/guide/img/NAME.png (its own size, as a reader's browser
/// shows it).
async fn save_chart(name: &str, svg: &str) {
    let dim = |attr: &str| -> u32 {
        svg.split(&format!(" {attr}=\""))
            .nth(1)
            .and_then(|v| v.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(900)
    };
    let page = TempPath::new(".html");
    std::fs::write(
        &page.0,
        format!("<!DOCTYPE html><html><body style=\"margin:0\"><svg{svg}</svg></body></html>"),
    )
    .expect("chart page written");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide/img");
    std::fs::create_dir_all(dir).expect("docs/guide/img");
    let file = format!("{dir}/{name}.png");
    chromium(&[
        &format!("--screenshot={file}"),
        &format!("--window-size={},{}", dim("width"), dim("height")),
        &format!("file://{}", page.arg()),
    ])
    .await;
}

/// Appended to a copy of the report: lists every pair of texts of one chart whose boxes, as
/// laid out, overlap by more than half a pixel each way, in `<pre id="text-overlaps">`.
pub(crate) const OVERLAP_PROBE: &str = r#"<script>
const found = [];
document.querySelectorAll("svg").forEach((svg, i) => {
  const boxes = [...svg.querySelectorAll("text")]
    .filter((t) => t.textContent.trim() !== "")
    .map((t) => [t.textContent.trim(), t.getBoundingClientRect()]);
  for (let a = 0; a < boxes.length; a++) {
    for (let b = a + 1; b < boxes.length; b++) {
      const [ta, ra] = boxes[a];
      const [tb, rb] = boxes[b];
      const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
      const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
      if (w > 0.5 && h > 0.5) found.push(`chart ${i + 1}: "${ta}" overlaps "${tb}"`);
    }
  }
});
document.querySelectorAll("table").forEach((t, i) => {
  const r = t.getBoundingClientRect();
  if (r.right > document.documentElement.clientWidth + 0.5) found.push(`table ${i + 1} runs past the page (${r.right} px)`);
});
const pre = document.createElement("pre");
pre.id = "text-overlaps";
pre.textContent = found.join("\n");
document.body.appendChild(pre);
</script>
</body>"#;

/// The SVG charts of a page, in order (each from after `<svg` to before `</svg>`).
pub(crate) fn charts_of(page: &str) -> Vec<&str> {
    page.split("<svg")
        .skip(1)
        .filter_map(|s| s.split("</svg>").next())
        .collect()
}

/// Runs chromium headless on `args` with a throw-away profile; kills it (the process it
/// started, by its handle) when it outlives [`LIMIT`].
pub(crate) async fn chromium(args: &[&str]) -> Output {
    let profile = TempPath::new("-chromium");
    std::fs::create_dir(&profile.0).expect("profile directory");
    let mut cmd = tokio::process::Command::new(CHROMIUM);
    // --no-sandbox: the test may run as root, where chromium's sandbox refuses to start.
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.arg()))
    .args(args)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let run = cmd.output();
    // On timeout the dropped future kills the child (kill_on_drop).
    let out = tokio::time::timeout(LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("chromium {args:?} still running after {LIMIT:?}: killed"))
        .expect("chromium starts");
    assert!(
        out.status.success(),
        "chromium {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// One element of an SVG: its name, attributes and the text right after its start tag.
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    text: String,
}

impl Element {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn num(&self, name: &str) -> f64 {
        self.attr(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    }
}

/// The elements of a serialized SVG (plotters' flat output: no nesting inside `<text>`).
fn elements(svg: &str) -> Vec<Element> {
    svg.split('<')
        .skip(1)
        .filter(|piece| !piece.starts_with('/'))
        .filter_map(|piece| {
            let (tag, text) = piece.split_once('>')?;
            let tag = tag.trim_end_matches('/');
            let (name, mut rest) = tag.split_once(char::is_whitespace).unwrap_or((tag, ""));
            let mut attrs = Vec::new();
            while let Some((key, after)) = rest.split_once("=\"") {
                let (value, after) = after.split_once('"')?;
                attrs.push((key.trim().to_string(), value.to_string()));
                rest = after;
            }
            Some(Element {
                name: name.to_string(),
                attrs,
                text: unescape(text.trim()),
            })
        })
        .collect()
}

pub(crate) fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Whether an axis description names its unit in its last parentheses: "Goodput (Mbit/s)",
/// "Round-trip time (µs, log scale)", "Server loss (% of messages sent)".
fn has_unit(desc: &str) -> bool {
    const UNITS: [&str; 12] = [
        "bit/s", "kbit/s", "Mbit/s", "Gbit/s", "s", "ms", "µs", "bytes", "B", "%", "1/s", "count",
    ];
    let Some((_, inside)) = desc.rsplit_once('(') else {
        return false;
    };
    inside
        .trim_end_matches(')')
        .split([',', ' '])
        .any(|word| UNITS.contains(&word))
}

/// The non-empty texts of an SVG (or a page), in order.
pub(crate) fn texts_of(svg: &str) -> Vec<String> {
    elements(svg)
        .into_iter()
        .filter(|e| e.name == "text" && !e.text.is_empty())
        .map(|e| e.text)
        .collect()
}

/// The checks every chart must pass; `what` names the chart in failures.
pub(crate) fn check_chart(what: &str, svg: &str) {
    let all = elements(svg);
    let texts: Vec<&Element> = all
        .iter()
        .filter(|e| e.name == "text" && !e.text.is_empty())
        .collect();
    let mut sizes: Vec<f64> = texts.iter().map(|t| t.num("font-size")).collect();
    sizes.sort_by(|a, b| b.total_cmp(a));
    sizes.dedup();
    assert!(
        sizes.len() >= 3,
        "{what}: title, axis and tick sizes: {sizes:?}"
    );
    let of_size = |size: f64| -> Vec<&Element> {
        texts
            .iter()
            .copied()
            .filter(|t| t.num("font-size") == size)
            .collect()
    };

    // A title: the largest text, at the top.
    let title = of_size(sizes[0]);
    assert_eq!(title.len(), 1, "{what}: one title");
    assert!(title[0].num("y") < 60.0, "{what}: title at the top");
    let what = format!("{what} ({})", title[0].text);

    // Both axes described: the y description rotated, the x one not.
    let descs = of_size(sizes[1]);
    assert_eq!(descs.len(), 2, "{what}: two axis descriptions");
    let rotated = |t: &Element| t.attr("transform").is_some_and(|r| r.contains("rotate"));
    let y_desc = descs
        .iter()
        .find(|t| rotated(t))
        .expect("a y-axis description");
    let x_desc = descs
        .iter()
        .find(|t| !rotated(t))
        .expect("an x-axis description");
    // Tick labels: right-aligned on the y axis, centred under the x axis.
    let ticks = |anchor: &str| -> Vec<&str> {
        texts
            .iter()
            .filter(|t| t.attr("text-anchor") == Some(anchor) && t.num("font-size") < sizes[1])
            .map(|t| t.text.as_str())
            .collect()
    };
    let (x_ticks, y_ticks) = (ticks("middle"), ticks("end"));
    assert!(y_ticks.len() >= 2, "{what}: y ticks {y_ticks:?}");
    assert!(
        y_ticks.iter().all(|t| t.parse::<f64>().is_ok()),
        "{what}: y ticks {y_ticks:?}"
    );
    assert!(
        has_unit(&y_desc.text),
        "{what}: y axis without a unit: {}",
        y_desc.text
    );
    assert!(!x_ticks.is_empty(), "{what}: no x tick labels");
    // A numeric x axis names its unit; a categorical one (protocols, RTT figures) names its
    // categories in its ticks.
    if x_ticks.iter().any(|t| t.parse::<f64>().is_ok()) {
        assert!(
            has_unit(&x_desc.text),
            "{what}: x axis without a unit: {}",
            x_desc.text
        );
    }

    // The legend: the black-bordered box, and the texts inside it.
    let legend_box = all
        .iter()
        .find(|e| {
            e.name == "rect"
                && e.attr("fill") == Some("none")
                && e.attr("stroke") == Some("#000000")
        })
        .map(|r| {
            (
                r.num("x"),
                r.num("y"),
                r.num("x") + r.num("width"),
                r.num("y") + r.num("height"),
            )
        })
        .unwrap_or_else(|| panic!("{what}: no legend"));
    let in_legend = |(x, y): (f64, f64)| {
        let (x0, y0, x1, y1) = legend_box;
        (x0..=x1).contains(&x) && (y0..=y1).contains(&y)
    };
    let names: Vec<&str> = texts
        .iter()
        .filter(|t| in_legend((t.num("x"), t.num("y"))))
        .map(|t| t.text.as_str())
        .collect();
    fn colour(c: Option<&str>) -> Option<&str> {
        c.filter(|c| !matches!(*c, "none" | "#FFFFFF" | "#000000"))
    }
    // Swatches: the legend's coloured marks, one per series.
    let swatches: Vec<&str> = all
        .iter()
        .filter_map(|e| {
            let (at, c) = match e.name.as_str() {
                "rect" => ((e.num("x"), e.num("y")), colour(e.attr("fill"))?),
                "polyline" => (first_point(e)?, colour(e.attr("stroke"))?),
                _ => return None,
            };
            in_legend(at).then_some(c)
        })
        .collect();
    assert!(!swatches.is_empty(), "{what}: a legend without entries");
    let mut distinct = swatches.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        swatches.len(),
        "{what}: two series share a colour: {swatches:?}"
    );
    assert!(
        names.len() >= swatches.len(),
        "{what}: {} series, legend texts {names:?}",
        swatches.len()
    );
    let mut unique_names = names.clone();
    unique_names.sort_unstable();
    unique_names.dedup();
    assert_eq!(
        unique_names.len(),
        names.len(),
        "{what}: two series share a name: {names:?}"
    );

    // Data marks: dots, rings, triangles, bars and crosses, each with its series' colour.
    let marks: Vec<(&str, (f64, f64))> = all
        .iter()
        .filter_map(|e| {
            let (at, c) = match e.name.as_str() {
                "circle" => (
                    (e.num("cx"), e.num("cy")),
                    colour(e.attr("fill")).or(colour(e.attr("stroke")))?,
                ),
                "polygon" => (first_point(e)?, colour(e.attr("fill"))?),
                "rect" => (
                    (
                        e.num("x") + e.num("width") / 2.0,
                        e.num("y") + e.num("height") / 2.0,
                    ),
                    colour(e.attr("fill"))?,
                ),
                "line" => (
                    (
                        (e.num("x1") + e.num("x2")) / 2.0,
                        (e.num("y1") + e.num("y2")) / 2.0,
                    ),
                    colour(e.attr("stroke"))?,
                ),
                _ => return None,
            };
            (!in_legend(at) || e.name == "line").then_some((c, at))
        })
        .filter(|(_, at)| !in_legend(*at))
        .collect();
    assert!(!marks.is_empty(), "{what}: no data mark");
    for (c, at) in &marks {
        assert!(
            swatches.contains(c),
            "{what}: a mark coloured {c} at {at:?} has no legend entry ({swatches:?})"
        );
        // The legend sits beside the plot: nothing it could cover.
        assert!(
            at.0 < legend_box.0,
            "{what}: a mark at {at:?} lies under or past the legend {legend_box:?}"
        );
    }
}

/// The first point of a polyline's or polygon's `points`.
fn first_point(e: &Element) -> Option<(f64, f64)> {
    let first = e.attr("points")?.split_whitespace().next()?;
    let (x, y) = first.split_once(',')?;
    Some((x.parse().ok()?, y.parse().ok()?))
}

#[test]
fn the_dom_reader_understands_units_and_elements() {
    assert!(has_unit("Goodput, median and min–max (Mbit/s)"));
    assert!(has_unit("Round-trip time (µs, log scale)"));
    assert!(has_unit("Server loss (% of messages sent)"));
    assert!(!has_unit("Protocol (one bar per mechanism)"));
    assert!(!has_unit("Round-trip figure of each run"));
    let e =
        elements(r##"<text x="3" font-size="12.5" fill="#000000">A &amp; B</text><rect x="1"/>"##);
    assert_eq!(e.len(), 2);
    assert_eq!((e[0].name.as_str(), e[0].text.as_str()), ("text", "A & B"));
    assert_eq!(e[0].num("font-size"), 12.5);
    assert_eq!(e[1].attr("x"), Some("1"));
}

/// The checks fail a chart that lacks a legend, a unit or a data mark, or whose series share a
/// colour (run on the report's own SVG: no browser needed).
#[test]
fn the_chart_checks_catch_a_missing_legend_unit_or_mark() {
    let html = report_of(&fixture_db(), &[1], Format::Html, Layout::Configurations);
    let bars = charts_of(&html)[0];
    check_chart("goodput bars", bars);
    let fails =
        |broken: String| std::panic::catch_unwind(|| check_chart("broken", &broken)).is_err();
    assert!(fails(bars.replace(
        r##"fill="none" stroke="#000000""##,
        r##"fill="none" stroke="#000001""##
    )));
    assert!(fails(bars.replace("(Mbit/s)", "")));
    let mut blank = bars.to_string();
    for colour in ["#0072B2", "#D55E00", "#009E73", "#CC79A7"] {
        blank = blank.replace(&format!("fill=\"{colour}\""), "fill=\"#FFFFFF\"");
    }
    assert!(fails(blank));
    // Two series in one colour.
    assert!(fails(bars.replace("#D55E00", "#0072B2")));
}
