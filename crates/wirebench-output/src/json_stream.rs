//! `run --json-stream`: one JSON object per line as the runs go, in iperf3's `--json-stream`
//! framing (`{"event": ..., "data": ...}`): "start" as a run starts, "interval" per `-i`,
//! "end" with the run's record and headline, "error" when the campaign fails. The data is
//! wirebench's (docs/json-stream.schema.json), or with `--iperf3-shape` iperf3's own shapes
//! (see [`super::iperf3_json`]). Returns lines; never prints.

use serde_json::{json, Value};
use wirebench_core::record::document::RunEntry;
use wirebench_core::record::run::IntervalRecord;
use wirebench_core::record::{AbortedRun, RunRecord};
use wirebench_core::vocab::counters::IntervalSample;

use super::iperf3_json::{self, Context};

/// Version of the event lines' data (wirebench's shape).
pub const SCHEMA_VERSION: u32 = 1;

/// One event line, without its newline.
pub fn line(event: &str, data: Value) -> String {
    json!({"event": event, "data": data}).to_string()
}

/// The "start" event of the run at `run.position` of `of`.
pub fn start(run: &AbortedRun, of: usize, iperf3: Option<&Context<'_>>) -> String {
    let data = match iperf3 {
        // The line goes out before the run's record: the client's socket is not known yet.
        Some(ctx) => iperf3_json::start(ctx, run.params.protocol, run.params.mechanism, &[]),
        None => json!({
            "schema_version": SCHEMA_VERSION,
            "position": run.position,
            "of": of,
            "repeat": run.repeat_index + 1,
            "session": run.params,
        }),
    };
    line("start", data)
}

/// An "interval" event: what the client sent (with -R received) in one interval of the run
/// at `position`.
pub fn interval(
    position: usize,
    run: &AbortedRun,
    sample: &IntervalSample,
    iperf3: Option<&Context<'_>>,
) -> String {
    let data = match iperf3 {
        Some(ctx) => iperf3_json::interval(ctx, run.params.protocol, run.params.reverse, sample),
        None => json!({
            "position": position,
            "sender": !run.params.reverse,
            "interval": IntervalRecord::of(sample),
        }),
    };
    line("interval", data)
}

/// The "end" event of a finished run.
pub fn end(position: usize, record: &RunRecord, iperf3: bool) -> String {
    let data = if iperf3 {
        iperf3_json::end(record)
    } else {
        json!({
            "position": position,
            "run": RunEntry {
                run: record.clone(),
                headline: record.headline(),
                directions: record.direction_headlines(),
            },
        })
    };
    line("end", data)
}

/// The "error" event: why the campaign stopped.
pub fn error(reason: &str) -> String {
    line("error", Value::String(reason.to_string()))
}
