//! JSON report: the report model as one pretty-printed document with `schema_version`. Writes
//! only to the writer given.

use std::io::{self, Write};

use super::model::{Exporter, Report};

/// The JSON exporter.
pub struct Json;

impl Exporter<Report> for Json {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, report)?;
        writeln!(out)
    }
}
