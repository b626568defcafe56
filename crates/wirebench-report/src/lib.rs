//! Reports over one or several campaigns: for every configuration, the summary the result
//! model computes (goodput, sent rate, time, UDP loss, retransmissions, round trips, both
//! sides' counts), laid out per configuration or as the seeds' grid (rows = totals or sizes,
//! columns = protocol × mechanism), and the exporters that write it (one file per format);
//! the reports of the request sweeps (rr, DNS, rpm) over one document model. Owns the report
//! layout; must not compute a statistic (`wirebench_core::record` does), open files, read
//! clocks or know about the store: commands load campaigns and hand them in.

pub mod chart;
pub mod compare;
pub mod csv;
pub mod dns;
pub mod document;
pub mod grid;
pub mod html;
pub mod json;
pub mod latency;
pub mod markdown;
pub mod markup;
pub mod model;
pub mod rpm;
pub mod rr;
pub mod series;
pub mod table;
pub mod tabular;

pub use model::{
    configuration_caption, metrics, short_size, Exporter, Format, Heading, Layout, Metric, Report,
    Shape, View, REPORT_SCHEMA_VERSION,
};

/// The exporter of a transfer report in `format`.
pub fn exporter(format: Format) -> Box<dyn Exporter<Report>> {
    match format {
        Format::Table => Box::new(table::Table),
        Format::Markdown => Box::new(markdown::Markdown),
        Format::Csv => Box::new(csv::Csv),
        Format::Json => Box::new(json::Json),
        Format::Html => Box::new(html::Html),
    }
}

/// The exporter of a sweep's report in `format`; `None` for JSON, which each kind writes as
/// its own document (as the command's `--json` printed it).
pub fn sweep_exporter(format: Format) -> Option<Box<dyn Exporter<document::Document>>> {
    match format {
        Format::Table => Some(Box::new(table::Table)),
        Format::Markdown => Some(Box::new(markdown::Markdown)),
        Format::Csv => Some(Box::new(csv::Csv)),
        Format::Html => Some(Box::new(html::Html)),
        Format::Json => None,
    }
}
