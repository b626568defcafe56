//! The Prometheus exporter, in the style of the blackbox exporter: `/probe?target=…` runs one
//! bounded wirebench run per scrape through the runner and answers with its result, `/metrics`
//! with the exporter's own counters. It enforces the limits (volume and allow-list via
//! `config::exporter`, time, concurrency) and counts probes; the pages are rendered by the
//! functions the command hands it in [`Pages`], so it formats nothing itself.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use wirebench_core::record::service::{ExporterCounts, ProbeOutcome};

use crate::config::exporter::{probe_config, ExporterConfig, Probe, ProbeRefusal};
use crate::config::rr::{rr_result, spec, RrConfig};
use crate::http::{self, Request, Response};
use crate::rr_client::run_rr_auth;
use crate::runner::{self, RunConfig, Target};

/// Prometheus's header with the scrape's timeout in seconds.
pub const SCRAPE_TIMEOUT_HEADER: &str = "x-prometheus-scrape-timeout-seconds";
/// What a probe leaves of the scrape timeout for its answer to travel (as the blackbox
/// exporter's `--timeout-offset`).
const TIMEOUT_OFFSET: Duration = Duration::from_millis(500);
/// The shortest time a probe is given, whatever the scrape timeout says.
const MIN_PROBE_TIME: Duration = Duration::from_millis(100);

/// How the exporter's pages are written and its events told (supplied by the command, which
/// owns the renderers).
#[derive(Debug, Clone, Copy)]
pub struct Pages {
    /// One probe's page.
    pub probe: fn(&ProbeOutcome) -> String,
    /// The exporter's own `/metrics` page.
    pub own: fn(&ExporterCounts) -> String,
    /// The `Content-Type` of both.
    pub content_type: &'static str,
    /// Logs one line (a failed or refused probe).
    pub log: fn(&str),
}

/// A configured exporter, shared by every HTTP connection.
#[derive(Debug)]
pub struct Exporter {
    cfg: ExporterConfig,
    pages: Pages,
    slots: Semaphore,
    probes_run: AtomicU64,
    probes_failed: AtomicU64,
    refused: Mutex<BTreeMap<&'static str, u64>>,
}

impl Exporter {
    /// An exporter with `cfg`'s limits, writing pages with `pages`.
    pub fn new(cfg: ExporterConfig, pages: Pages) -> Arc<Exporter> {
        Arc::new(Exporter {
            slots: Semaphore::new(cfg.max_concurrent),
            cfg,
            pages,
            probes_run: AtomicU64::new(0),
            probes_failed: AtomicU64::new(0),
            refused: Mutex::new(BTreeMap::new()),
        })
    }

    /// Serves HTTP on `listener` for ever.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        http::serve(listener, move |req| {
            let me = Arc::clone(&self);
            async move { me.handle(req).await }
        })
        .await;
    }

    /// Answers one request: `/probe`, `/metrics`, or an index at `/`.
    pub async fn handle(&self, req: Request) -> Response {
        match req.path.as_str() {
            "/probe" => self.probe(&req).await,
            "/metrics" => Response {
                status: 200,
                content_type: self.pages.content_type,
                body: (self.pages.own)(&self.counts()),
            },
            "/" => Response::text(
                200,
                "wirebench exporter: /probe?target=HOST:PORT&proto=tcp&mode=stream&total=10MiB, /metrics",
            ),
            other => Response::text(404, format!("no page {other}: try /probe or /metrics")),
        }
    }

    /// The counters now.
    pub fn counts(&self) -> ExporterCounts {
        ExporterCounts {
            probes_run: self.probes_run.load(Ordering::Relaxed),
            probes_failed: self.probes_failed.load(Ordering::Relaxed),
            probes_refused: self
                .refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .map(|(k, v)| ((*k).to_string(), *v))
                .collect(),
            probes_in_flight: self
                .cfg
                .max_concurrent
                .saturating_sub(self.slots.available_permits())
                as u64,
        }
    }

    async fn probe(&self, req: &Request) -> Response {
        // The target may be a name: resolve it off the async workers.
        let (query, limits) = (req.query.clone(), self.cfg.limits.clone());
        let checked = tokio::task::spawn_blocking(move || probe_config(&query, &limits))
            .await
            .unwrap_or_else(|e| {
                Err(ProbeRefusal {
                    status: 500,
                    reason: format!("the query check failed: {e}"),
                })
            });
        let probe = match checked {
            Ok(probe) => probe,
            Err(ProbeRefusal { status, reason }) => {
                let why = if status == 403 {
                    "not-allowed"
                } else {
                    "bad-request"
                };
                return self.refuse(status, why, &reason);
            }
        };
        let Ok(_slot) = self.slots.try_acquire() else {
            return self.refuse(
                429,
                "too-many",
                &format!(
                    "{} probes are running, this exporter allows {} at once (--max-concurrent); try again later",
                    self.cfg.max_concurrent, self.cfg.max_concurrent
                ),
            );
        };
        let limit = time_limit(self.cfg.limits.max_time, scrape_timeout(req));
        let outcome = match &probe {
            Probe::Run(cfg) => run_probe(cfg, limit).await,
            Probe::Ping(cfg) => ping_probe(cfg, limit).await,
        };
        self.probes_run.fetch_add(1, Ordering::Relaxed);
        if !outcome.success() {
            self.probes_failed.fetch_add(1, Ordering::Relaxed);
            let error = outcome.error.as_deref().unwrap_or("the run was aborted");
            (self.pages.log)(&format!("probe of {} failed: {error}", outcome.target));
        }
        Response {
            status: 200,
            content_type: self.pages.content_type,
            body: (self.pages.probe)(&outcome),
        }
    }

    fn refuse(&self, status: u16, why: &'static str, reason: &str) -> Response {
        *self
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(why)
            .or_insert(0) += 1;
        (self.pages.log)(&format!("probe refused ({status}): {reason}"));
        Response::text(status, reason)
    }
}

/// Runs one probe's run within `limit`; a failure or timeout is an outcome, not an error.
pub async fn run_probe(cfg: &RunConfig, limit: Duration) -> ProbeOutcome {
    let (target, addr) = match &cfg.target {
        Target::Remote { name, addr } => (name.clone(), *addr),
        // config::exporter only makes remote targets.
        Target::Embedded(_) => {
            return ProbeOutcome {
                target: String::new(),
                duration_ns: 0,
                run: None,
                ping: None,
                error: Some("a probe needs a target".into()),
            }
        }
    };
    let start = Instant::now();
    let ran = tokio::time::timeout(
        limit,
        runner::run_campaign(cfg, addr, |_, _, _| {}, |_, _| {}),
    )
    .await;
    let duration_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let (run, error) = match ran {
        Ok(campaign) => match (campaign.runs.first(), campaign.failure) {
            (_, Some(failure)) => (None, Some(failure)),
            (Some(run), None) => (Some(run.record()), None),
            (None, None) => (None, Some("the probe ran nothing".into())),
        },
        Err(_) => (
            None,
            Some(format!(
                "the run did not finish within {limit:?} (--max-time or the scrape timeout)"
            )),
        ),
    };
    ProbeOutcome {
        target,
        duration_ns,
        run,
        ping: None,
        error,
    }
}

/// Runs one ping probe (one protocol, one probe outstanding) within `limit`.
pub async fn ping_probe(cfg: &RrConfig, limit: Duration) -> ProbeOutcome {
    let (Target::Remote { name, addr }, Some(&protocol)) = (&cfg.target, cfg.protocols.first())
    else {
        return ProbeOutcome {
            target: String::new(),
            duration_ns: 0,
            run: None,
            ping: None,
            error: Some("a ping probe needs a target and a protocol".into()),
        };
    };
    let start = Instant::now();
    let ran = tokio::time::timeout(
        limit,
        run_rr_auth(*addr, &spec(cfg, protocol, 1), cfg.psk.as_deref()),
    )
    .await;
    let duration_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let (ping, error) = match ran {
        Ok(Ok(outcome)) => (Some(rr_result(cfg, protocol, 1, &outcome)), None),
        Ok(Err(e)) => (None, Some(format!("{e:#}"))),
        Err(_) => (
            None,
            Some(format!(
                "the ping did not finish within {limit:?} (--max-time or the scrape timeout)"
            )),
        ),
    };
    ProbeOutcome {
        target: name.clone(),
        duration_ns,
        run: None,
        ping,
        error,
    }
}

/// The scrape's timeout from Prometheus's header, if it sent a sensible one.
fn scrape_timeout(req: &Request) -> Option<Duration> {
    let secs: f64 = req
        .headers
        .get(SCRAPE_TIMEOUT_HEADER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// The time a probe gets: `--max-time`, or the scrape timeout less the offset when smaller.
fn time_limit(max_time: Duration, scrape: Option<Duration>) -> Duration {
    match scrape {
        Some(t) => max_time.min(t.saturating_sub(TIMEOUT_OFFSET).max(MIN_PROBE_TIME)),
        None => max_time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scrape_timeout_bounds_the_probe() {
        let max = Duration::from_secs(10);
        assert_eq!(time_limit(max, None), max);
        assert_eq!(
            time_limit(max, Some(Duration::from_secs(3))),
            Duration::from_millis(2500)
        );
        assert_eq!(time_limit(max, Some(Duration::from_secs(60))), max);
        assert_eq!(
            time_limit(max, Some(Duration::from_millis(200))),
            MIN_PROBE_TIME
        );
    }
}
