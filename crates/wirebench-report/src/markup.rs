//! The pieces every HTML report page shares, the transfer reports' and the sweeps' alike: the
//! page's start and end with its style, a chart as a figure, and text escaped for HTML.

use std::io::{self, Write};

use super::chart::Figure;

/// The style of every report page: tables never wider than the page (wide ones scroll on
/// screen instead of running past its edge), figures kept whole in print.
pub const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;padding:0 1em;max-width:72em;color:#111}\
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.92em}\
caption{text-align:left;font-weight:bold;padding:0.3em 0}\
th,td{border:1px solid #999;padding:0.2em 0.5em}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
div.wide{overflow-x:auto;max-width:100%}p.note{font-size:0.9em;margin-top:-1em}\
figure{margin:1em 0;page-break-inside:avoid}svg{max-width:100%;height:auto}\
@media print{body{margin:0}h2{page-break-after:avoid}div.wide{overflow:visible}}";

/// A chart under its heading, with its caption.
pub fn figure(out: &mut dyn Write, f: &Figure) -> io::Result<()> {
    writeln!(out, "<h2>{}</h2>\n<figure>", escape(&f.heading))?;
    // plotters starts with an XML-less <svg ...> element; it is embedded as is.
    writeln!(out, "{}", f.svg.trim())?;
    writeln!(
        out,
        "<figcaption>{}</figcaption>\n</figure>",
        escape(&f.caption)
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

/// The end of a report page.
pub fn page_end(out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "</body>\n</html>")
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
