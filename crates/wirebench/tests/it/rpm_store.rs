//! `wirebench rpm` tests in the store, `runs`, `report --rpm` and `compare --rpm`: a live test
//! against the embedded server is stored with its time series (every interval's probe round
//! trips) and its counts read back exactly; a fixture campaign renders every report format
//! byte for byte as its snapshot (WIREBENCH_UPDATE_SNAPSHOTS=1 rewrites them after an intended
//! change); two campaigns compare; SIGTERM stores a shortened test as aborted.

use std::time::{Duration, Instant};

use serde_json::Value;
use wirebench::store::Store;
use wirebench_core::machine::responsiveness::{Rating, RpmResult};
use wirebench_core::record::rpm::NewRpmCampaign;
use wirebench_core::record::Status;

use crate::cli::{stderr, wirebench};
use crate::support::{TempPath, TEST_TIMEOUT};
use wirebench::store::rpm::Rpm;

/// A short live test: download load, two flows, 250 ms intervals, at most 2 s of load, through
/// a 20 Mbit/s relay (an unthrottled loopback load would take both CPUs from the tests that
/// run beside it).
fn live_args(db: &TempPath) -> Vec<&str> {
    vec![
        "rpm",
        "--impair",
        "rate=20Mbit,queue=64KiB",
        "--direction",
        "download",
        "--max-flows",
        "2",
        "--ramp-interval",
        "250ms",
        "--max-load",
        "2s",
        "--idle-probes",
        "2",
        "--probe-rate",
        "20",
        "--db",
        db.arg(),
    ]
}

/// Two live tests are stored as rpm campaigns 1 and 2 with every probe's round trip; `runs`
/// lists them, `report --rpm` renders each format from the stored series and `compare --rpm`
/// counts exactly the stored samples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_rpm_tests_are_stored_listed_reported_and_compared() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        for id in 1..=2 {
            let out = wirebench(&live_args(&db)).await;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "{text}{}", stderr(&out));
            assert!(
                text.contains(&format!("stored as rpm campaign {id} in ")),
                "{text}"
            );
        }
        let store = Store::open(&db.0).unwrap();
        let mut samples = Vec::new();
        for id in 1..=2 {
            let info = store.campaign::<Rpm>(id).unwrap().expect("stored");
            assert_eq!(info.status, Status::Complete);
            assert_eq!(info.campaign.max_flows, 2);
            assert_eq!(info.campaign.interval_ns, 250_000_000);
            assert!(info.finished_at_unix_s.is_some());
            let results = store
                .results::<Rpm>(id)
                .unwrap()
                .into_iter()
                .map(|r| r.result)
                .collect::<Vec<_>>();
            assert_eq!(results.len(), 1);
            let r = &results[0];
            assert!(r.rpm.is_some() && !r.intervals.is_empty(), "{r:?}");
            // Every probe counted in an interval has its round trip stored there.
            let mut n = 0u64;
            for i in &r.intervals {
                assert_eq!(i.foreign_request_rtt_ns.len(), i.foreign_probes as usize);
                assert_eq!(
                    i.foreign_tcp_handshake_rtt_ns.len(),
                    i.foreign_probes as usize
                );
                assert_eq!(i.self_request_rtt_ns.len(), i.self_probes as usize);
                n += u64::from(i.foreign_probes + i.self_probes);
            }
            assert!(n > 0);
            samples.push(n);
            assert_eq!(store.rpm_figures(id).unwrap(), vec![r.rpm]);
        }
        drop(store);

        let runs = wirebench(&["runs", "--db", db.arg()]).await;
        let listed = String::from_utf8_lossy(&runs.stdout);
        assert!(
            listed.contains("WHAT (wirebench report --rpm ID)"),
            "{listed}"
        );
        assert_eq!(
            listed
                .lines()
                .filter(|l| l.contains("complete")
                    && l.contains("1/1")
                    && l.contains("download load against embedded")
                    && l.contains("via impairment relay"))
                .count(),
            2,
            "{listed}"
        );

        let report = |args: Vec<&'static str>| {
            let db = db.arg().to_string();
            async move {
                let mut all = vec!["report".to_string(), "--rpm".to_string()];
                all.extend(args.iter().map(|s| s.to_string()));
                all.extend(["--db".to_string(), db]);
                let refs: Vec<&str> = all.iter().map(String::as_str).collect();
                let out = wirebench(&refs).await;
                assert!(out.status.success(), "{}", stderr(&out));
                String::from_utf8(out.stdout).unwrap()
            }
        };
        let text = report(vec!["1"]).await;
        assert!(text.starts_with("rpm campaign 1 (complete"), "{text}");
        assert!(text.contains("Loaded round trips"), "{text}");
        let json: Value =
            serde_json::from_str(&report(vec!["2", "--format", "json"]).await).unwrap();
        assert_eq!(json["campaign"]["id"], 2);
        assert_eq!(
            json["results"][0]["loaded_latency"]["all"]["samples"].as_u64(),
            Some(samples[1])
        );
        let csv = report(vec!["--last", "--format", "csv"]).await;
        let intervals = json["results"][0]["intervals"].as_array().unwrap().len();
        assert_eq!(csv.lines().count(), 1 + intervals, "{csv}");
        let html = report(vec!["1", "--format", "html"]).await;
        assert!(html.contains("Latency and goodput over time, test 1") && html.contains("<svg"));

        let out = wirebench(&["compare", "--rpm", "1", "2", "--db", db.arg()]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", stderr(&out));
        let counts = text
            .lines()
            .find(|l| l.starts_with("loaded samples"))
            .expect("the sample counts");
        let figures: Vec<&str> = counts.split_whitespace().skip(2).collect();
        assert_eq!(
            figures,
            vec![samples[0].to_string(), samples[1].to_string()],
            "{text}"
        );
        assert!(text.contains("loaded p99"), "{text}");
        let missing = wirebench(&["compare", "--rpm", "1", "9", "--db", db.arg()]).await;
        assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
        assert!(stderr(&missing).contains("there is no rpm campaign 9"));
    })
    .await
}

fn fixture() -> (NewRpmCampaign, RpmResult) {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{manifest}/tests/fixtures/rpm-campaign.json")).unwrap(),
    )
    .unwrap();
    (
        serde_json::from_value(doc["campaign"].clone()).unwrap(),
        serde_json::from_value(doc["result"].clone()).unwrap(),
    )
}

fn store_campaign(db: &TempPath, c: &NewRpmCampaign, r: &RpmResult) -> i64 {
    let store = Store::open(&db.0).unwrap();
    let id = store.begin::<Rpm>(c).unwrap().id;
    store.record::<Rpm>(id, 1, r).unwrap();
    store
        .finish::<Rpm>(id, Status::Complete, c.started_at_unix_s + 20, None)
        .unwrap();
    id
}

/// The fixture campaign renders as its snapshots in every format; its JSON holds the stored
/// result unchanged, with the loaded latency beside it.
#[tokio::test]
async fn a_stored_rpm_campaign_reports_as_its_snapshots() {
    crate::support::within(async {
        let manifest = env!("CARGO_MANIFEST_DIR");
        let (campaign, result) = fixture();
        let db = TempPath::new(".sqlite3");
        let id = store_campaign(&db, &campaign, &result);
        {
            let store = Store::open(&db.0).unwrap();
            assert_eq!(
                store
                    .results::<Rpm>(id)
                    .unwrap()
                    .into_iter()
                    .map(|r| r.result)
                    .collect::<Vec<_>>(),
                vec![result.clone()]
            );
            let info = store.campaign::<Rpm>(id).unwrap().unwrap();
            assert_eq!(info.campaign, campaign);
        }
        for (format, file) in [
            ("table", "rpm-report.txt"),
            ("markdown", "rpm-report.md"),
            ("csv", "rpm-report.csv"),
            ("html", "rpm-report.html"),
        ] {
            let out = wirebench(&[
                "report",
                "--rpm",
                "--last",
                "--format",
                format,
                "--db",
                db.arg(),
            ])
            .await;
            assert!(out.status.success(), "{}", stderr(&out));
            let page = String::from_utf8(out.stdout).unwrap();
            let snapshot = format!("{manifest}/tests/snapshots/{file}");
            if std::env::var_os("WIREBENCH_UPDATE_SNAPSHOTS").is_some() {
                std::fs::write(&snapshot, &page).unwrap();
            }
            assert!(
                page == std::fs::read_to_string(&snapshot).expect("snapshot exists"),
                "the rpm report differs from {snapshot}:\n{page}"
            );
        }
        let out = wirebench(&["report", "--rpm", "1", "--format", "csv", "--db", db.arg()]).await;
        let csv = String::from_utf8(out.stdout).unwrap();
        // Interval 0 of the fixture: foreign 3 + self ... probes; one CSV row per interval.
        assert_eq!(csv.lines().count(), 1 + result.intervals.len());
        let first = csv.lines().nth(1).unwrap();
        let i0 = &result.intervals[0];
        let n0 = i0.foreign_probes + i0.self_probes;
        assert!(
            first.starts_with(&format!(
                "1,0,0,0.5,1,18200000,0,,{},{},{n0},",
                i0.foreign_probes, i0.self_probes
            )),
            "{first}"
        );
        let text = String::from_utf8(
            wirebench(&["report", "--rpm", "1", "--db", db.arg()])
                .await
                .stdout,
        )
        .unwrap();
        assert!(text.contains("RPM                  2262 (Good)"), "{text}");
        let json = wirebench(&["report", "--rpm", "1", "--format", "json", "--db", db.arg()]).await;
        let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
        let mut entry = doc["results"][0].clone();
        let loaded = entry
            .as_object_mut()
            .unwrap()
            .remove("loaded_latency")
            .unwrap();
        assert_eq!(entry, serde_json::to_value(&result).unwrap());
        let total: usize = result
            .intervals
            .iter()
            .map(|i| i.foreign_request_rtt_ns.len() + i.self_request_rtt_ns.len())
            .sum();
        assert_eq!(loaded["all"]["samples"].as_u64(), Some(total as u64));
        let wrong = wirebench(&["report", "--rpm", "7", "--db", db.arg()]).await;
        assert_eq!(wrong.status.code(), Some(2), "{}", stderr(&wrong));
    })
    .await
}

/// Several rpm campaigns are one report, side by side: each a section of its own headed by
/// its campaign, its verdict under its name, one CSV whose first column names each row's
/// campaign; `--last 2` is the same report.
#[tokio::test]
async fn rpm_campaigns_stand_side_by_side_in_one_report() {
    crate::support::within(async {
        let (campaign, a) = fixture();
        let mut b = a.clone();
        b.rpm = a.rpm.map(|r| r / 3.0);
        b.rating = b.rpm.map(Rating::of);
        let db = TempPath::new(".sqlite3");
        store_campaign(&db, &campaign, &a);
        store_campaign(&db, &campaign, &b);
        let report = |args: &[&str]| {
            let mut argv = vec!["report", "--rpm"];
            argv.extend_from_slice(args);
            argv.extend(["--db", db.arg()]);
            let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
            async move {
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let out = wirebench(&argv).await;
                assert!(out.status.success(), "{argv:?}: {}", stderr(&out));
                String::from_utf8(out.stdout).unwrap()
            }
        };
        let text = report(&["1", "2"]).await;
        assert!(text.contains("2 rpm campaigns side by side"), "{text}");
        let (one, two) = (
            text.find("\nrpm campaign 1: ")
                .unwrap_or_else(|| panic!("campaign 1's section: {text}")),
            text.find("\nrpm campaign 2: ")
                .unwrap_or_else(|| panic!("campaign 2's section: {text}")),
        );
        assert!(one < two, "in the order given: {text}");
        // Each section has its own campaign's verdict.
        let rpm = |r: Option<f64>| format!("{:.0}", r.unwrap());
        assert!(text[one..two].contains(&rpm(a.rpm)), "{text}");
        assert!(text[two..].contains(&rpm(b.rpm)), "{text}");
        assert_eq!(report(&["--last", "2"]).await, text);
        let csv = report(&["1", "2", "--format", "csv"]).await;
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines[0].starts_with("campaign,"), "{csv}");
        assert_eq!(lines.len(), 1 + 2 * a.intervals.len(), "{csv}");
        assert!(lines[1].starts_with("rpm campaign 1,"), "{csv}");
        assert!(
            lines.last().unwrap().starts_with("rpm campaign 2,"),
            "{csv}"
        );
        let width = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == width), "{csv}");
        let json: Value =
            serde_json::from_str(&report(&["1", "2", "--format", "json"]).await).unwrap();
        assert_eq!(json.as_array().map(Vec::len), Some(2), "one document each");
    })
    .await
}

/// B is A with every probe round trip three times as long and a third of the RPM: compare
/// says so with exact figures, and --fail-on-regression 10 exits 1; A against itself is no
/// difference and exits 0.
#[tokio::test]
async fn compare_rpm_flags_a_slower_campaign() {
    crate::support::within(async {
        let (campaign, a) = fixture();
        let mut b = a.clone();
        b.rpm = a.rpm.map(|r| r / 3.0);
        b.rating = b.rpm.map(Rating::of);
        for i in &mut b.intervals {
            for v in i
                .foreign_request_rtt_ns
                .iter_mut()
                .chain(i.self_request_rtt_ns.iter_mut())
            {
                *v *= 3;
            }
        }
        let db = TempPath::new(".sqlite3");
        let id_a = store_campaign(&db, &campaign, &a);
        let id_b = store_campaign(&db, &campaign, &b);
        let (ia, ib) = (id_a.to_string(), id_b.to_string());
        let out = wirebench(&[
            "compare",
            "--rpm",
            &ia,
            &ib,
            "--fail-on-regression",
            "10",
            "--db",
            db.arg(),
        ])
        .await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
        // 2262.3 / 3 = 754.1 (Fair): -66.7 %; every round trip × 3: p99 +200.0 %.
        let rpm_line = text.lines().find(|l| l.starts_with("RPM")).unwrap();
        assert!(
            rpm_line.contains("2262 (Good)")
                && rpm_line.contains("754 (Fair)")
                && rpm_line.ends_with("-66.7%"),
            "{text}"
        );
        let p99 = text.lines().find(|l| l.starts_with("loaded p99")).unwrap();
        assert!(p99.ends_with("+200.0%"), "{text}");
        assert!(
            text.contains("B is less responsive") && text.contains("REGRESSION"),
            "{text}"
        );

        let same = wirebench(&[
            "compare",
            "--rpm",
            &ia,
            &ia,
            "--fail-on-regression",
            "10",
            "--db",
            db.arg(),
        ])
        .await;
        let text = String::from_utf8_lossy(&same.stdout);
        assert!(same.status.success(), "{text}");
        assert!(text.contains("no significant difference"), "{text}");
    })
    .await
}

/// SIGTERM during the load phase ends the test early: exit status 143, the result stored with
/// the intervals that finished, the campaign marked aborted, long before --max-load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stores_the_test_as_aborted() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        let data_home = TempPath::new("-data");
        let mut args = live_args(&db);
        // A load phase far longer than the test may take.
        let at = args.iter().position(|a| *a == "2s").unwrap();
        args[at] = "60s";
        let started = Instant::now();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .args(&args)
            .env("XDG_DATA_HOME", &data_home.0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("wirebench starts");
        // The campaign is stored as running before any traffic: poll the store for it.
        let deadline = Instant::now() + TEST_TIMEOUT;
        loop {
            let begun = db.0.exists()
                && Store::open(&db.0)
                    .ok()
                    .and_then(|s| s.campaign::<Rpm>(1).ok().flatten())
                    .is_some_and(|c| c.status == Status::Running);
            if begun {
                break;
            }
            assert!(Instant::now() < deadline, "the campaign never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pid = i32::try_from(child.id().expect("still running")).unwrap();
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let out = tokio::time::timeout(TEST_TIMEOUT, child.wait_with_output())
            .await
            .expect("it ends after the signal")
            .expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(143), "{err}");
        assert!(err.contains("rpm campaign 1 is stored as aborted"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(30));
        let store = Store::open(&db.0).unwrap();
        let info = store.campaign::<Rpm>(1).unwrap().expect("the campaign");
        assert_eq!(info.status, Status::Aborted);
        let results = store
            .results::<Rpm>(1)
            .unwrap()
            .into_iter()
            .map(|r| r.result)
            .collect::<Vec<_>>();
        assert_eq!(results.len(), 1);
        assert!(
            results[0]
                .differences
                .iter()
                .any(|d| d.starts_with("Stopped by a signal after")),
            "{:?}",
            results[0].differences
        );
    })
    .await
}

/// The HTML report of the fixture in headless chromium: one chart, with both panels' titles,
/// axis descriptions, tick labels and legends laid out without any two texts overlapping, and
/// every interval drawn (a dot per p50, p99 and goodput point). Skips without chromium.
#[tokio::test]
async fn the_rpm_chart_reads_in_a_browser() {
    crate::support::within(async {
        use crate::browser::{charts_of, chromium, unescape, CHROMIUM, OVERLAP_PROBE};
        if !std::path::Path::new(CHROMIUM).exists() {
            eprintln!("browser test skipped: {CHROMIUM} is missing (`apt-get install chromium`)");
            return;
        }
        let (campaign, result) = fixture();
        let db = TempPath::new(".sqlite3");
        store_campaign(&db, &campaign, &result);
        let out = wirebench(&["report", "--rpm", "1", "--format", "html", "--db", db.arg()]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let html = String::from_utf8(out.stdout).unwrap();
        let probe = TempPath::new(".html");
        std::fs::write(&probe.0, html.replace("</body>", OVERLAP_PROBE)).unwrap();
        let out = chromium(&["--dump-dom", &format!("file://{}", probe.arg())]).await;
        let dom = String::from_utf8(out.stdout).expect("the DOM is UTF-8");
        let overlaps = dom
            .split_once("<pre id=\"text-overlaps\">")
            .and_then(|(_, rest)| rest.split_once("</pre>"))
            .map(|(found, _)| unescape(found))
            .expect("the overlap probe ran");
        assert!(overlaps.is_empty(), "texts collide:\n{overlaps}");
        let charts = charts_of(&dom);
        assert_eq!(charts.len(), 1);
        // Six intervals, each with a loaded p50, a p99 and a download goodput dot (plotters draws
        // a dot as a circle element).
        let dots = charts[0].matches("<circle").count();
        // And one dot on each of the three dotted series' legend entries.
        assert_eq!(dots, 3 * result.intervals.len() + 3, "dots in the chart");
        for text in ["Loaded p99", "Loaded p50", "Idle", "Download"] {
            assert!(charts[0].contains(text), "{text} missing from the legends");
        }
    })
    .await
}
