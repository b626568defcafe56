//! What iperf3's output flags add to a `run` campaign's output as its runs go: the JSON lines
//! of `--json-stream`, `-J --iperf3-shape`'s document, `-T`'s title in the JSON, `-V`'s detail.
//! Owns writing those lines; the shapes are `output::json_stream` and `output::iperf3_json`.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use wirebench_core::record::{AbortedRun, Parameters, RunRecord};
use wirebench_core::vocab::counters::IntervalSample;

use crate::config::RunOutput;
use crate::output::iperf3_json::Context;
use crate::output::json_stream;
use crate::runner::{PlannedRun, RunConfig};

/// What iperf3's output flags add to a campaign's output: `--json-stream`'s lines as the runs
/// go, `-J --iperf3-shape`'s document, `-T`'s title in the JSON, `-V`'s detail.
#[derive(Debug)]
pub struct Streamer {
    /// `-i`: the interval period, seconds (0 without).
    interval_s: f64,
    /// `-S`: the type of service the sockets carry.
    tos: u8,
    of: usize,
    params: Parameters,
    started_unix_ms: i64,
    output: RunOutput,
    /// The last plan position whose "start" line went out.
    started: AtomicUsize,
}

impl Streamer {
    /// The output of the runs of `cfg` (`of` in all), whose parameters record is `params`.
    pub fn new(cfg: &RunConfig, of: usize, params: Parameters, output: RunOutput) -> Streamer {
        Streamer {
            interval_s: cfg.interval.map_or(0.0, |d| d.as_secs_f64()),
            tos: cfg.options.tos.unwrap_or(0),
            of,
            params,
            started_unix_ms: crate::commands::clock::unix_now_ms(),
            output,
            started: AtomicUsize::new(0),
        }
    }

    /// `-V`: the run blocks show both ends' data path.
    pub fn verbose(&self) -> bool {
        self.output.verbose
    }

    /// `--json-stream`: the lines take the place of the text and of the JSON document.
    pub fn streaming(&self) -> bool {
        self.output.json_stream
    }

    fn context(&self) -> Context<'_> {
        Context {
            params: &self.params,
            version: env!("CARGO_PKG_VERSION"),
            started_unix_ms: self.started_unix_ms,
            title: self.output.title.as_deref(),
            interval_s: self.interval_s,
            tos: self.tos,
        }
    }

    fn iperf3_shape(&self) -> Option<Context<'_>> {
        self.output.iperf3_shape.then(|| self.context())
    }

    /// The "start" line of the measured run `known` (as the client knows it before any
    /// figure), once.
    fn start(&self, known: &AbortedRun) {
        let position = known.position as usize;
        if self.started.swap(position, Ordering::Relaxed) == position {
            return;
        }
        emit(&json_stream::start(
            known,
            self.of,
            self.iperf3_shape().as_ref(),
        ));
    }

    /// With `--json-stream`: an "interval" line of the measured run `run` (after its "start").
    pub fn interval(&self, run: &PlannedRun, sample: &IntervalSample) {
        if !self.streaming() {
            return;
        }
        let shape = self.iperf3_shape();
        // iperf3 leaves out a last stub of an interval that moved nothing.
        if shape.is_some_and(|ctx| !crate::output::iperf3_json::shown(&ctx, sample)) {
            return;
        }
        let known = run.aborted();
        self.start(&known);
        emit(&json_stream::interval(
            run.position,
            &known,
            sample,
            shape.as_ref(),
        ));
    }

    /// With `--json-stream`: the "end" line of the measured run `run` (after its "start").
    pub fn end(&self, run: &PlannedRun, record: &RunRecord) {
        if !self.streaming() {
            return;
        }
        self.start(&run.aborted());
        emit(&json_stream::end(
            run.position,
            record,
            self.output.iperf3_shape,
        ));
    }

    /// With `--json-stream`: the "error" line.
    pub fn error(&self, reason: &str) {
        if self.streaming() {
            emit(&json_stream::error(reason));
        }
    }

    /// `-J --iperf3-shape`: iperf3's `-J` document of the run (the plan has one).
    pub fn iperf3_document(&self, record: &RunRecord) -> Option<serde_json::Value> {
        let ctx = self.iperf3_shape().filter(|_| !self.streaming())?;
        Some(crate::output::iperf3_json::document(&ctx, record))
    }

    /// `-T` in a JSON document, as iperf3's `-J` carries it.
    pub fn add_title(&self, doc: &mut serde_json::Value) {
        if let (Some(title), serde_json::Value::Object(m)) = (&self.output.title, doc) {
            m.insert("title".into(), title.clone().into());
        }
    }
}

/// Writes one line; a closed stdout (`| head`) is not an error worth stopping for.
fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}
