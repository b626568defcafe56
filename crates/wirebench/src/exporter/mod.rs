//! The Prometheus exporter, in the style of the blackbox exporter: `/probe?target=…` runs one
//! bounded test per scrape (a wirebench run through the runner, a ping, an rr exchange, DNS
//! queries, an iperf3 transfer) and answers with its result, `/metrics` with the exporter's own
//! counters. It enforces the limits (volume and allow-list via `config::exporter`, time,
//! concurrency) and counts probes; the pages are rendered by the functions the command hands it
//! in [`Pages`], and finished probes are handed to the command's store through a [`Sink`], so
//! it neither formats nor stores anything itself.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use wirebench_core::record::dns::{DnsResult, NewDnsCampaign};
use wirebench_core::record::rr::{NewRrCampaign, RrResult};
use wirebench_core::record::service::{
    ExporterCounts, FailReason, ProbeError, ProbeOutcome, ProbeResult,
};
use wirebench_core::record::{NewCampaign, RunRecord};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::text::peer_text;

use crate::config::dns::{dns_result, DnsConfig};
use crate::config::exporter::{probe_config, ExporterConfig, Probe, ProbeRefusal};
use crate::config::rr::{rr_result, spec, RrConfig};
use crate::flows::dns::{run_dns, DnsSpec};
use crate::flows::iperf3::client::ClientConfig;
use crate::flows::rr_client::run_rr_auth;
use crate::runner::{self, RunConfig, Target};
use crate::transport::http::{self, Request, Response};
use wirebench_core::vocab::units::duration_ns;

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

/// What the store needs of one finished probe: the records its command would store.
#[derive(Debug, Clone)]
pub enum StoredProbe {
    /// A run or iperf3 probe: a one-run campaign.
    Run {
        /// The campaign.
        campaign: Box<NewCampaign>,
        /// Its one point.
        point: Point,
        /// Its one run.
        run: Box<RunRecord>,
    },
    /// A ping or rr probe: an rr sweep of one result.
    Rr {
        /// The sweep.
        campaign: NewRrCampaign,
        /// Its one result.
        result: Box<RrResult>,
    },
    /// A dns probe: a DNS campaign of one result.
    Dns {
        /// The campaign.
        campaign: NewDnsCampaign,
        /// Its one result.
        result: Box<DnsResult>,
    },
}

/// Where finished probes go to be stored: a bounded queue to the command's storing thread. A
/// full queue drops the record (logged), so a slow database never holds a scrape.
pub type Sink = std::sync::mpsc::SyncSender<StoredProbe>;

/// A configured exporter, shared by every HTTP connection.
#[derive(Debug)]
pub struct Exporter {
    cfg: ExporterConfig,
    pages: Pages,
    sink: Option<Sink>,
    slots: Semaphore,
    probes_run: AtomicU64,
    probes_failed: AtomicU64,
    refused: Mutex<BTreeMap<&'static str, u64>>,
}

impl Exporter {
    /// An exporter with `cfg`'s limits, writing pages with `pages`.
    pub fn new(cfg: ExporterConfig, pages: Pages) -> Arc<Exporter> {
        Exporter::storing(cfg, pages, None)
    }

    /// An exporter that also hands every finished probe's records to `sink`.
    pub fn storing(cfg: ExporterConfig, pages: Pages, sink: Option<Sink>) -> Arc<Exporter> {
        Arc::new(Exporter {
            slots: Semaphore::new(cfg.max_concurrent),
            cfg,
            pages,
            sink,
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
                "wirebench exporter: /probe?target=HOST:PORT&proto=tcp&mode=stream&total=10MiB (or kind=ping, rr, dns, iperf3; see wirebench exporter --help), /metrics",
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
        // Where a scraper's text enters: nothing in the query may put a line break, a NUL or a
        // terminal escape into the log, the page or the store.
        if let Err(reason) = clean_query(&req.query) {
            return self.refuse(400, "bad-request", &reason);
        }
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
        // Each probe's future lives on the heap (here and around each flow below): a debug
        // build lays every nested future out on the stack when it polls it, and the run, rr,
        // dns and iperf3 flows inlined into the connection task overflow a tokio worker's
        // 2 MiB stack.
        let (outcome, stored) = match &probe {
            Probe::Run(cfg) => Box::pin(run_probe(cfg, limit)).await,
            Probe::Ping(cfg) => Box::pin(exchange_probe(cfg, limit, ProbeResult::Ping)).await,
            Probe::Rr(cfg) => Box::pin(exchange_probe(cfg, limit, ProbeResult::Rr)).await,
            Probe::Dns(cfg) => Box::pin(dns_probe(cfg, limit)).await,
            Probe::Iperf3(cfg) => Box::pin(iperf3_probe(cfg, limit)).await,
        };
        self.probes_run.fetch_add(1, Ordering::Relaxed);
        if let Some(failure) = outcome.failure() {
            self.probes_failed.fetch_add(1, Ordering::Relaxed);
            self.log(&format!(
                "probe kind={} of {} failed ({}): {}",
                probe.kind(),
                outcome.target,
                failure.reason.as_str(),
                failure.detail
            ));
        }
        if let (Some(sink), Some(stored)) = (&self.sink, stored) {
            if sink.try_send(stored).is_err() {
                self.log(&format!(
                    "probe kind={} of {} is not stored: the store is behind or gone",
                    probe.kind(),
                    outcome.target
                ));
            }
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
        self.log(&format!("probe refused ({status}): {reason}"));
        Response::text(status, reason)
    }

    /// Logs one line, made safe whole: a scraper's query (a target, a name) reaches the log
    /// inside reasons and details too, so the line is escaped and cut to 512 characters here,
    /// once (a 5,000-character target holding U+202E went to the log whole).
    fn log(&self, line: &str) {
        (self.pages.log)(&peer_text(line));
    }
}

/// Refuses a `/probe` query whose decoded keys or values hold a control character; the reason
/// quotes the offending value escaped.
fn clean_query(query: &str) -> Result<(), String> {
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        for text in [&key, &value] {
            if text.chars().any(char::is_control) {
                return Err(format!(
                    "the query's {} holds a control character ({}): not allowed",
                    peer_text(&key),
                    peer_text(text)
                ));
            }
        }
    }
    Ok(())
}

/// What one probe function returns: the outcome for the page, the records for the store.
type Finished = (ProbeOutcome, Option<StoredProbe>);

/// Runs `test` within `limit`, timing it; `Err` is the one-line reason it failed.
async fn bounded<T>(
    limit: Duration,
    what: &str,
    test: impl std::future::Future<Output = Result<T, String>>,
) -> (u64, Result<T, ProbeError>) {
    let start = Instant::now();
    let ran = tokio::time::timeout(limit, test).await;
    let duration_ns = duration_ns(start.elapsed());
    let result = match ran {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(detail)) => Err(ProbeError {
            reason: FailReason::Error,
            detail,
        }),
        Err(_) => Err(ProbeError {
            reason: FailReason::Timeout,
            detail: format!(
                "the {what} did not finish within {limit:?} (--max-time or the scrape timeout)"
            ),
        }),
    };
    (duration_ns, result)
}

/// The outcome of a probe that finished with `result` (or failed), and what to store.
fn finished(
    target: String,
    (duration_ns, ran): (u64, Result<(ProbeResult, StoredProbe), ProbeError>),
) -> Finished {
    match ran {
        Ok((result, stored)) => (
            ProbeOutcome {
                target,
                duration_ns,
                result: Some(result),
                error: None,
            },
            Some(stored),
        ),
        Err(e) => (
            ProbeOutcome {
                target,
                duration_ns,
                result: None,
                error: Some(e),
            },
            None,
        ),
    }
}

/// A probe that could not start: its configuration lacks what config::exporter always gives.
fn malformed(detail: &str) -> Finished {
    (
        ProbeOutcome {
            target: String::new(),
            duration_ns: 0,
            result: None,
            error: Some(ProbeError {
                reason: FailReason::Error,
                detail: detail.into(),
            }),
        },
        None,
    )
}

/// Runs one probe's run within `limit`; a failure or timeout is an outcome, not an error.
pub async fn run_probe(cfg: &RunConfig, limit: Duration) -> Finished {
    let (target, addr) = match &cfg.target {
        Target::Remote { name, addr } => (name.clone(), *addr),
        // config::exporter only makes remote targets.
        Target::Embedded(_) => return malformed("a probe needs a target"),
    };
    let ran = bounded(limit, "run", async {
        let campaign = Box::pin(runner::run_plan(cfg, addr, &None)).await;
        match (campaign.runs.first(), campaign.failure) {
            (_, Some(failure)) => Err(failure),
            (Some(run), None) => Ok(run.record()),
            (None, None) => Err("the probe ran nothing".into()),
        }
    })
    .await;
    let ran = (
        ran.0,
        ran.1.map(|run| {
            let point = Point {
                msg_size: cfg.msg_size,
                total_bytes: cfg.total_bytes,
            };
            let campaign = NewCampaign {
                started_at_unix_s: unix_now(),
                parameters: cfg.parameters(&target),
                planned_runs: 1,
                msg_sizes: vec![cfg.msg_size],
                totals: vec![cfg.total_bytes],
                environment: crate::transport::environment::detect(),
            };
            let stored = StoredProbe::Run {
                campaign: Box::new(campaign),
                point,
                run: Box::new(run.clone()),
            };
            (ProbeResult::Run(run), stored)
        }),
    );
    finished(target, ran)
}

/// Runs one ping or rr probe (one protocol, one concurrency) within `limit`; `as_result` says
/// which it was.
pub async fn exchange_probe(
    cfg: &RrConfig,
    limit: Duration,
    as_result: fn(RrResult) -> ProbeResult,
) -> Finished {
    let (Target::Remote { name, addr }, Some(&protocol), Some(at)) =
        (&cfg.target, cfg.protocols.first(), cfg.points().next())
    else {
        return malformed("an exchange probe needs a target, a protocol and a concurrency");
    };
    let k = at.concurrency;
    let ran = bounded(limit, "exchange", async {
        Box::pin(run_rr_auth(
            *addr,
            &spec(cfg, protocol, at),
            cfg.psk.as_deref(),
        ))
        .await
        .map(|outcome| rr_result(cfg, protocol, at, &outcome))
        .map_err(|e| format!("{e:#}"))
    })
    .await;
    let ran = (
        ran.0,
        ran.1.map(|result| {
            let campaign = NewRrCampaign {
                started_at_unix_s: unix_now(),
                server: name.clone(),
                protocols: protocol.to_string(),
                concurrency: k.to_string(),
                request_bytes: cfg.request,
                response_bytes: cfg.response,
                flows: at.flows,
                planned_results: 1,
                host_name: crate::transport::environment::detect().host_name,
                wirebench_version: env!("CARGO_PKG_VERSION").to_string(),
            };
            let stored = StoredProbe::Rr {
                campaign,
                result: Box::new(result.clone()),
            };
            (as_result(result), stored)
        }),
    );
    finished(name.clone(), ran)
}

/// Runs one dns probe (one transport, one concurrency) within `limit`.
pub async fn dns_probe(cfg: &DnsConfig, limit: Duration) -> Finished {
    let (Some(&transport), Some(&k)) = (cfg.transports.first(), cfg.concurrency.first()) else {
        return malformed("a dns probe needs a transport and a concurrency");
    };
    let spec = DnsSpec {
        resolver: cfg.addr_for(transport),
        transport,
        question: cfg.question.clone(),
        count: cfg.count,
        flows: cfg.flows,
        concurrency: k,
        new_connection: cfg.new_connection,
        timeout: cfg.timeout,
        retries: cfg.retries,
        // config::exporter refuses DoT.
        tls: None,
        tcp_fallback: cfg.resolver,
    };
    let ran = bounded(limit, "DNS probe", async {
        Box::pin(run_dns(&spec))
            .await
            .map(|outcome| dns_result(cfg, transport, k, &outcome))
            .map_err(|e| format!("{e:#}"))
    })
    .await;
    let ran = (
        ran.0,
        ran.1.map(|result| {
            let campaign = NewDnsCampaign {
                started_at_unix_s: unix_now(),
                resolver: cfg.resolver_name.clone(),
                name: cfg.question.name(),
                record_type: cfg.question.rtype(),
                transports: transport.name().to_string(),
                concurrency: k.to_string(),
                planned_results: 1,
                host_name: crate::transport::environment::detect().host_name,
                wirebench_version: env!("CARGO_PKG_VERSION").to_string(),
            };
            let stored = StoredProbe::Dns {
                campaign,
                result: Box::new(result.clone()),
            };
            (ProbeResult::Dns(result), stored)
        }),
    );
    finished(cfg.resolver_name.clone(), ran)
}

/// Runs one transfer against a real iperf3 server within `limit`.
pub async fn iperf3_probe(cfg: &ClientConfig, limit: Duration) -> Finished {
    let ran = bounded(limit, "iperf3 test", async {
        Box::pin(crate::flows::iperf3::client::run(cfg))
            .await
            .map_err(|e| format!("{e:#}"))
    })
    .await;
    let ran = (
        ran.0,
        ran.1.map(|outcome| {
            let (campaign, point, run) =
                crate::flows::iperf3::record::records(cfg, &outcome, unix_now());
            let stored = StoredProbe::Run {
                campaign: Box::new(campaign),
                point,
                run: Box::new(run.clone()),
            };
            (ProbeResult::Iperf3(run), stored)
        }),
    );
    finished(cfg.name.clone(), ran)
}

/// Seconds since the Unix epoch, now (0 if the clock is before it).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
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
