//! HTML report: one self-contained file (inline CSS and SVG, no scripts, no external resources)
//! with the charts and the per-configuration tables, readable on screen and in print. Writes
//! only to the writer given.

use std::io::{self, Write};

use super::{chart, configuration_caption, metrics, Exporter, Report};

/// The HTML exporter.
pub struct Html;

pub(super) const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;padding:0 1em;max-width:60em;color:#111}\
table{border-collapse:collapse;margin:0.5em 0 1.5em}\
th,td{border:1px solid #999;padding:0.2em 0.6em}td.n{text-align:right;font-variant-numeric:tabular-nums}\
figure{margin:1em 0;page-break-inside:avoid}svg{max-width:100%;height:auto}\
@media print{body{margin:0}h2{page-break-after:avoid}}";

impl Exporter for Html {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        let h = &report.heading;
        let title = format!("wirebench campaign {}", h.campaign);
        page_start(out, &title)?;
        writeln!(
            out,
            "<p>{}, started {} UTC, host {}.</p>",
            escape(&h.status),
            escape(&h.started),
            escape(&h.host)
        )?;
        if chart::single_size(&report.configurations) {
            // One message size × one total: a line "against message size" would be one column
            // of dots, so each configuration gets a bar with its spread over the runs.
            writeln!(out, "<h2>Goodput and transfer time</h2>")?;
            figure(
                out,
                &chart::configuration_bars(&report.configurations, chart::BarFigure::Goodput)?,
                "Median goodput (what the receiver got over the transfer time) of each protocol × mechanism; the whisker runs from the slowest to the fastest run. Runs too short to time are left out.",
            )?;
            figure(
                out,
                &chart::configuration_bars(&report.configurations, chart::BarFigure::Time)?,
                "Median transfer time of each protocol × mechanism; the whisker runs from the shortest to the longest run.",
            )?;
        } else {
            writeln!(out, "<h2>Goodput against message size</h2>")?;
            figure(
                out,
                &chart::throughput_by_size(&report.configurations)?,
                "Median goodput (what the receiver got over the transfer time) of each protocol × mechanism against the message size (log scale).",
            )?;
        }
        if let Some((svg, caption)) = chart::rtt_percentiles(&report.configurations)? {
            writeln!(out, "<h2>Stop-and-wait round-trip time</h2>")?;
            figure(out, &svg, caption)?;
        }
        if let Some(t) = &report.timeline {
            writeln!(out, "<h2>Throughput over time</h2>")?;
            figure(
                out,
                &chart::throughput_over_time(t)?,
                &format!(
                    "Bit rate per interval of {}: what the client sent and what the server read{} (wirebench report --run N picks another run).",
                    t.label,
                    if t.udp_stream {
                        "; the intervals at zero after the last datagram are the grace period, while the server waits for late datagrams (--grace)"
                    } else {
                        ""
                    }
                ),
            )?;
        }
        if let Some(svg) = chart::loss_against_load(&report.loss)? {
            writeln!(out, "<h2>UDP loss against load</h2>")?;
            figure(
                out,
                &svg,
                "Each UDP streaming run: messages the receiver never got, as a share of those sent, against the rate they were sent at; one series per message size.",
            )?;
        }
        writeln!(out, "<h2>Statistics per configuration</h2>")?;
        for c in &report.configurations {
            writeln!(
                out,
                "<h3>{} ({})</h3>",
                escape(&c.title()),
                escape(&configuration_caption(c))
            )?;
            writeln!(
                out,
                "<table>\n<tr><th>View</th><th>Metric</th><th>Min</th><th>Avg</th><th>Median</th><th>Max</th><th>Stddev</th></tr>"
            )?;
            for m in metrics(c) {
                let s = m.summary;
                let cell = |x: f64| format!("<td class=\"n\">{}</td>", m.show(x));
                writeln!(
                    out,
                    "<tr><td>{}</td><td>{}</td>{}{}{}{}{}</tr>",
                    m.view.title(),
                    escape(&m.label),
                    cell(s.min),
                    cell(s.mean),
                    cell(s.median),
                    cell(s.max),
                    cell(s.stddev)
                )?;
            }
            writeln!(out, "</table>")?;
        }
        writeln!(out, "</body>\n</html>")
    }
}

fn figure(out: &mut dyn Write, svg: &str, caption: &str) -> io::Result<()> {
    writeln!(out, "<figure>")?;
    // plotters starts with an XML-less <svg ...> element; it is embedded as is.
    writeln!(out, "{}", svg.trim())?;
    writeln!(
        out,
        "<figcaption>{}</figcaption>\n</figure>",
        escape(caption)
    )
}

/// The start of a self-contained report page: doctype, head with the title and the style, and
/// the title as its heading.
pub fn page_start(out: &mut dyn Write, title: &str) -> io::Result<()> {
    writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">"
    )?;
    writeln!(
        out,
        "<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>",
        escape(title),
        escape(title)
    )
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
