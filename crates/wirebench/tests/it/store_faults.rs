//! The store under faults, with real processes: a store another connection holds (waited for,
//! then spooled and brought in by the next open), a measuring process killed by SIGKILL (its
//! campaign marked interrupted, whatever its kind), eight processes opening one new file at
//! once, a full disk (a real tmpfs: the campaign ends failed, its runs kept), and places that
//! would keep nothing (`:memory:`, `/dev/null`) refused. Each SQLite body runs against a
//! throw-away PostgreSQL too where the fault has a PostgreSQL form.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use wirebench::store::Store;
use wirebench_core::record::Status;

use crate::cli::{stderr, wirebench};
use crate::postgres::{backends, TestDb};
use crate::support::{TempPath, TEST_TIMEOUT};
use wirebench::store::run::Run;

/// `wirebench ARGS` with its own data directory (where spool files may go) and environment.
fn spawn(args: &[&str], data_home: &TempPath, env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wirebench"));
    cmd.args(args)
        .env("XDG_DATA_HOME", &data_home.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("wirebench starts")
}

/// `wirebench ARGS` to its end, with `data_home` as its data directory.
async fn run_with(args: &[&str], data_home: &TempPath) -> Output {
    let child = spawn(args, data_home, &[]).wait_with_output();
    tokio::time::timeout(TEST_TIMEOUT, child)
        .await
        .expect("wirebench finished in time")
        .expect("wirebench ran")
}

/// Reads `lines` until one contains `what` (every line read is kept in `seen`).
async fn wait_for_line(
    lines: &mut tokio::io::Lines<impl AsyncBufRead + Unpin>,
    what: &str,
    seen: &mut Vec<String>,
) {
    tokio::time::timeout(TEST_TIMEOUT, async {
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    let found = line.contains(what);
                    seen.push(line);
                    if found {
                        return;
                    }
                }
                _ => panic!("the output ended before {what:?}: {seen:#?}"),
            }
        }
    })
    .await
    .expect("the line comes in time");
}

/// Everything left on `lines`, once the process ends.
async fn rest(lines: &mut tokio::io::Lines<impl AsyncBufRead + Unpin>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        out.push(line);
    }
    out
}

/// A second connection that holds the store until released (or dropped): SQLite's whole file
/// in an exclusive transaction; in PostgreSQL the run table in ACCESS EXCLUSIVE mode, so a
/// campaign begins but no run goes in.
struct Held {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    fn take(db: &TestDb) -> Held {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (ready, is_ready) = std::sync::mpsc::channel::<()>();
        let thread = match db {
            TestDb::Sqlite(path) => {
                let path = path.0.clone();
                std::thread::spawn(move || {
                    let conn = rusqlite::Connection::open(&path).expect("opens");
                    conn.execute_batch("BEGIN EXCLUSIVE").expect("locks");
                    ready.send(()).expect("test waits");
                    let _ = released.recv();
                    conn.execute_batch("COMMIT").expect("unlocks");
                })
            }
            TestDb::Postgres(url, _) => {
                let url = url.clone();
                std::thread::spawn(move || {
                    let mut client =
                        postgres::Client::connect(&url, postgres::NoTls).expect("connects");
                    client
                        .batch_execute("BEGIN; LOCK TABLE run IN ACCESS EXCLUSIVE MODE")
                        .expect("locks");
                    ready.send(()).expect("test waits");
                    let _ = released.recv();
                    client.batch_execute("COMMIT").expect("unlocks");
                })
            }
        };
        is_ready.recv().expect("the lock is taken");
        Held {
            release: Some(release),
            thread: Some(thread),
        }
    }

    fn release(mut self) {
        self.end();
    }

    fn end(&mut self) {
        drop(self.release.take());
        if let Some(t) = self.thread.take() {
            t.join().expect("the holder ends");
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.end();
    }
}

/// Runs `run -t 2 --repeat 2` (UDP, paced: light on the CPU) against `db` while a second
/// connection holds the store: from before the start in PostgreSQL (the campaign begins, its
/// runs wait), from the plan's heading in SQLite (whatever comes next waits). With a wait of
/// 30 s the hold ends when the process says it waits: both runs are stored, exit status 0.
#[tokio::test]
async fn a_busy_store_is_waited_for_and_every_run_stored() {
    crate::support::within(async {
        for db in backends() {
            drop(db.open()); // an existing store: the run itself only writes
            let data_home = TempPath::new("-data");
            let args = busy_plan(&db);
            let mut held = matches!(db, TestDb::Postgres(..)).then(|| Held::take(&db));
            let mut child = spawn(&args, &data_home, &[]);
            let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
            let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
            let (mut seen, mut said) = (Vec::new(), Vec::new());
            wait_for_line(&mut out, "wirebench: 2 runs", &mut seen).await;
            if held.is_none() {
                held = Some(Held::take(&db));
            }
            wait_for_line(&mut err, "is busy (another process holds it)", &mut said).await;
            held.expect("held").release();
            seen.extend(rest(&mut out).await);
            said.extend(rest(&mut err).await);
            let status = child.wait().await.unwrap();
            assert!(status.success(), "{}: {seen:#?}{said:#?}", db.name());
            assert!(
                seen.iter()
                    .any(|l| l.contains("stored as campaign 1 (2 runs, complete)")),
                "{}: {seen:#?}",
                db.name()
            );
            let store = db.open();
            let c = store.campaign::<Run>(1).unwrap().unwrap();
            assert_eq!(
                (c.status, c.stored_runs),
                (Status::Complete, 2),
                "{}",
                db.name()
            );
        }
    })
    .await
}

fn busy_plan(db: &TestDb) -> Vec<&str> {
    vec![
        "run",
        "--db",
        db.arg(),
        "--proto",
        "udp",
        "--rate",
        "20M",
        "-t",
        "2",
        "--repeat",
        "2",
    ]
}

/// The same hold, kept until the process ends, with a wait of 1 s: the runs the store does
/// not take, and the campaign's end, are kept in a spool file the process names (exit status
/// 1); the next command that opens the store brings them in: complete, 2 of 2, and the spool
/// file is gone.
#[tokio::test]
async fn a_store_busy_past_the_wait_keeps_the_runs_until_the_next_open() {
    crate::support::within(async {
        for db in backends() {
            drop(db.open());
            let _spool = SpoolPlace::of(&db);
            let data_home = TempPath::new("-data");
            let args = busy_plan(&db);
            let mut held = matches!(db, TestDb::Postgres(..)).then(|| Held::take(&db));
            let mut child = spawn(&args, &data_home, &[("WIREBENCH_STORE_WAIT", "1s")]);
            let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
            let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
            let mut seen = Vec::new();
            wait_for_line(&mut out, "wirebench: 2 runs", &mut seen).await;
            if held.is_none() {
                held = Some(Held::take(&db));
            }
            seen.extend(rest(&mut out).await);
            let said = rest(&mut err).await.join("\n");
            let status = child.wait().await.unwrap();
            assert_eq!(status.code(), Some(1), "{}: {said}", db.name());
            assert!(said.contains("stayed busy"), "{said}");
            let spool =
                spool_path(&said).unwrap_or_else(|| panic!("a spool file is named: {said}"));
            let doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&spool).expect("the spool file"))
                    .expect("a campaign document");
            assert_eq!(doc["kind"], "run");
            assert_eq!(doc["campaign"]["status"], "complete", "its end is kept too");
            assert_eq!(doc["results"].as_array().map(Vec::len), Some(2));
            held.expect("held").release();
            let listed = run_with(&["runs", "--db", db.arg()], &data_home).await;
            let text = String::from_utf8_lossy(&listed.stdout);
            assert!(listed.status.success(), "{}", stderr(&listed));
            assert!(
                stderr(&listed).contains("it is in"),
                "the open says it: {}",
                stderr(&listed)
            );
            assert!(text.contains("complete") && text.contains("2/2"), "{text}");
            assert!(!spool.exists(), "the spool file is gone once stored");
            let c = db.open().campaign::<Run>(1).unwrap().unwrap();
            assert_eq!(
                (c.status, c.stored_runs),
                (Status::Complete, 2),
                "{}",
                db.name()
            );
        }
    })
    .await
}

/// Ctrl-C while the process waits for a busy store (a wait of 60 s): it stops waiting at
/// once, keeps what the store did not take in the spool and ends (status 130) long before the
/// wait would have; the next open stores the campaign as aborted.
#[tokio::test]
async fn a_stop_signal_does_not_wait_for_a_busy_store() {
    crate::support::within(async {
        let db = TestDb::sqlite();
        drop(db.open());
        let _spool = SpoolPlace::of(&db);
        let data_home = TempPath::new("-data");
        let args = busy_plan(&db);
        let mut child = spawn(&args, &data_home, &[("WIREBENCH_STORE_WAIT", "60s")]);
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        let (mut seen, mut said) = (Vec::new(), Vec::new());
        wait_for_line(&mut out, "wirebench: 2 runs", &mut seen).await;
        let held = Held::take(&db);
        wait_for_line(&mut err, "is busy (another process holds it)", &mut said).await;
        let pid = i32::try_from(child.id().expect("running")).unwrap();
        let signalled = Instant::now();
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        said.extend(rest(&mut err).await);
        let status = child.wait().await.unwrap();
        let took = signalled.elapsed();
        assert_eq!(status.code(), Some(130), "{said:#?}");
        assert!(
            took < Duration::from_secs(30),
            "it waited {took:?} for the store"
        );
        let said = said.join("\n");
        let spool = spool_path(&said).unwrap_or_else(|| panic!("a spool file is named: {said}"));
        held.release();
        let listed = run_with(&["runs", "--db", db.arg()], &data_home).await;
        assert!(listed.status.success(), "{}", stderr(&listed));
        let c = db.open().campaign::<Run>(1).unwrap().unwrap();
        assert_eq!(c.status, Status::Aborted, "{said}");
        assert!(!spool.exists());
    })
    .await
}

/// Removes an SQLite store's spool place (`FILE.spool/`) when dropped, should a test fail
/// before the next open emptied it.
struct SpoolPlace(Option<std::path::PathBuf>);

impl SpoolPlace {
    fn of(db: &TestDb) -> SpoolPlace {
        SpoolPlace(match db {
            TestDb::Sqlite(p) => Some(std::path::PathBuf::from(format!("{}.spool", p.arg()))),
            TestDb::Postgres(..) => None,
        })
    }
}

impl Drop for SpoolPlace {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The spool file a warning names: the word after "kept in".
fn spool_path(said: &str) -> Option<std::path::PathBuf> {
    let at = said.find("kept in ")? + "kept in ".len();
    let path = said[at..].split([' ', ':']).next()?;
    Some(std::path::PathBuf::from(path.trim_end_matches(',')))
}

/// SIGKILL to `rr`, `rpm` and `dns` mid-test: the next command that opens the store finds
/// each campaign's writer dead and marks it interrupted, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_rr_rpm_and_dns_campaigns_are_marked_interrupted() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        let data_home = TempPath::new("-data");
        // A resolver that never answers: the DNS campaign waits out its timeouts.
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let resolver = silent.local_addr().unwrap().to_string();
        let plans: [(&[&str], &str); 2] = [
            (&["rr", "--proto", "udp", "-t", "60"], "rr udp to "),
            (
                &[
                    "dns",
                    "--resolver",
                    &resolver,
                    "--name",
                    "example.org",
                    "--count",
                    "1000",
                    "--timeout",
                    "5s",
                ],
                "dns udp to ",
            ),
        ];
        for (plan, heading) in plans {
            let mut args = plan.to_vec();
            args.extend(["--db", db.arg()]);
            let mut child = spawn(&args, &data_home, &[]);
            let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
            wait_for_line(&mut out, heading, &mut Vec::new()).await;
            kill9(&mut child).await;
        }
        // rpm prints nothing before its end: the store says when it has begun.
        let mut child = spawn(
            &[
                "rpm",
                "--impair",
                "rate=20Mbit",
                "--max-load",
                "60s",
                "--db",
                db.arg(),
            ],
            &data_home,
            &[],
        );
        let deadline = Instant::now() + TEST_TIMEOUT;
        while !(db.0.exists()
            && Store::open(&db.0)
                .ok()
                .and_then(|s| s.campaign::<Rpm>(1).ok().flatten())
                .is_some())
        {
            assert!(Instant::now() < deadline, "the rpm campaign never began");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        kill9(&mut child).await;
        let listed = run_with(&["runs", "--db", db.arg()], &data_home).await;
        let text = String::from_utf8_lossy(&listed.stdout);
        assert!(listed.status.success(), "{}", stderr(&listed));
        for block in ["  RR  ", " DNS  ", " RPM  "] {
            let at = text
                .find(block)
                .unwrap_or_else(|| panic!("{block}: {text}"));
            let line = text[at..].lines().nth(1).unwrap_or_default();
            assert!(line.contains("interrupted"), "{block}: {text}");
        }
        let store = Store::open(&db.0).unwrap();
        use wirebench::store::{dns::Dns, rpm::Rpm, rr::Rr};
        for (what, life) in [
            ("rr", store.get::<Rr>(1).unwrap().map(|c| c.0)),
            ("dns", store.get::<Dns>(1).unwrap().map(|c| c.0)),
            ("rpm", store.get::<Rpm>(1).unwrap().map(|c| c.0)),
        ] {
            let life = life.unwrap_or_else(|| panic!("{what} stored"));
            assert_eq!(life.status, Status::Interrupted, "{what}");
            let why = life.error.unwrap_or_default();
            assert!(why.contains("killed or crashed"), "{what}: {why}");
        }
    })
    .await
}

/// SIGKILL by PID to a child this test started, and its reaping.
async fn kill9(child: &mut Child) {
    let pid = i32::try_from(child.id().expect("running")).unwrap();
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let status = tokio::time::timeout(TEST_TIMEOUT, child.wait())
        .await
        .expect("it dies")
        .unwrap();
    assert_eq!(status.code(), None, "killed");
}

/// Eight `wirebench run` processes open one new file at once, four times over: every one
/// succeeds (the file is made a store once, under the write lock) and stores its campaign.
/// Then 25 rounds of eight threads opening one new file in-process, which races harder.
#[tokio::test]
async fn eight_writers_make_one_new_store_at_once() {
    crate::support::within(async {
        let data_home = TempPath::new("-data");
        for round in 0..4 {
            let db = TempPath::new(".sqlite3");
            // All started before any is waited for.
            let writers: Vec<Child> = (0..8)
                .map(|_| spawn(&["run", "--db", db.arg(), "-n", "10000"], &data_home, &[]))
                .collect();
            for child in writers {
                let out = tokio::time::timeout(TEST_TIMEOUT, child.wait_with_output())
                    .await
                    .expect("in time")
                    .expect("ran");
                assert!(out.status.success(), "round {round}: {}", stderr(&out));
            }
            let store = Store::open(&db.0).unwrap();
            let campaigns = store
                .campaigns::<Run>()
                .unwrap()
                .into_iter()
                .map(|(c, _)| c)
                .collect::<Vec<_>>();
            assert_eq!(campaigns.len(), 8, "round {round}");
            assert!(campaigns.iter().all(|c| c.status == Status::Complete));
        }
        for round in 0..25 {
            let db = TempPath::new(".sqlite3");
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let opens: Vec<_> = (0..8)
                .map(|_| {
                    let (path, barrier) = (db.0.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        Store::open(&path).map(|_| ()).map_err(|e| format!("{e:#}"))
                    })
                })
                .collect();
            for open in opens {
                let opened = open.join().expect("the thread ends");
                assert!(opened.is_ok(), "round {round}: {opened:?}");
            }
        }
    })
    .await
}

/// A 1 MiB tmpfs, mounted for the test and unmounted (by path) when dropped.
struct Tmpfs(TempPath);

impl Tmpfs {
    /// `None`, said on stderr, where this test may not mount (not root, no tmpfs).
    fn mount() -> Option<Tmpfs> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED the full-disk test: mounting a tmpfs needs root");
            return None;
        }
        let dir = TempPath::new("-tmpfs");
        std::fs::create_dir(&dir.0).ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "wirebench-test"])
            .arg(&dir.0)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("SKIPPED the full-disk test: `mount -t tmpfs` failed here");
            return None;
        }
        Some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.0 .0)
            .status();
    }
}

/// Fills the file system of `dir` but for about `leave` bytes; the filler's path.
fn fill(dir: &std::path::Path, leave: usize) -> std::path::PathBuf {
    use std::io::Write;
    let spare = dir.join("spare");
    std::fs::write(&spare, vec![0u8; leave]).unwrap();
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 4096];
    while f.write_all(&block).is_ok() {}
    drop(f);
    std::fs::remove_file(&spare).unwrap();
    filler
}

/// Disk full (a real 1 MiB tmpfs) during `run --repeat 5`: the campaign stops at the run the
/// store cannot take, the process exits with status 1 saying where the runs are kept (beside
/// the store is full too: under the data directory), and once there is room the next open
/// stores them: `failed`, with the full disk as the reason, every printed run stored.
#[tokio::test]
async fn a_full_disk_ends_the_campaign_failed_and_keeps_its_runs() {
    crate::support::within(async {
        let Some(fs) = Tmpfs::mount() else { return };
        let db = fs.0 .0.join("results.sqlite3");
        drop(Store::open(&db).unwrap());
        let filler = fill(&fs.0 .0, 20 * 1024);
        let data_home = TempPath::new("-data");
        let db_arg = db.to_str().unwrap();
        // Interval series make each run's record several pages: five never fit.
        let args = [
            "run", "--db", db_arg, "--proto", "udp", "--rate", "20M", "-t", "1", "-i", "10ms",
            "--repeat", "5",
        ];
        let out = run_with(&args, &data_home).await;
        let said = stderr(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}{said}");
        // A finished run prints its goodput under its heading; the heading of the run in flight
        // when the store failed may be printed too (on a busy machine the next run starts
        // while the last one is being stored), and that run is not a finished one.
        let printed = text.lines().filter(|l| l.starts_with("  goodput:")).count();
        assert!(
            (1..5).contains(&printed),
            "the campaign stopped early: {text}{said}"
        );
        assert!(said.contains("full"), "{said}");
        let spool = spool_path(&said).unwrap_or_else(|| panic!("a spool file is named: {said}"));
        assert!(spool.starts_with(&data_home.0), "{}", spool.display());
        std::fs::remove_file(&filler).unwrap();
        let listed = run_with(&["runs", "--db", db_arg], &data_home).await;
        assert!(listed.status.success(), "{}", stderr(&listed));
        let c = Store::open(&db)
            .unwrap()
            .campaign::<Run>(1)
            .unwrap()
            .unwrap();
        assert_eq!(c.status, Status::Failed);
        assert_eq!(
            c.stored_runs as usize, printed,
            "every printed run is stored: {text}{said}"
        );
        let why = c.error.unwrap_or_default();
        assert!(
            why.contains("full") && why.contains("cannot store run"),
            "{why}"
        );
        assert!(!spool.exists());
    })
    .await
}

/// `--db :memory:`, `/dev/null` and a directory are refused before anything
/// runs (exit status 2, one line), and nothing is left beside `/dev/null`.
#[tokio::test]
async fn places_that_keep_nothing_are_refused() {
    crate::support::within(async {
        let dir = TempPath::new("-dir");
        std::fs::create_dir(&dir.0).unwrap();
        for (db, expect) in [
            (":memory:", "in memory"),
            ("/dev/null", "not a regular file"),
            (dir.arg(), "not a regular file"),
        ] {
            for cmd in [
                &["run", "-n", "1000"][..],
                &["rr", "--count", "3"],
                &["runs"],
            ] {
                let mut args = cmd.to_vec();
                args.extend(["--db", db]);
                let out = wirebench(&args).await;
                assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
                assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
                assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
                assert!(out.stdout.is_empty(), "nothing ran");
            }
        }
        assert!(!std::path::Path::new("/dev/null-journal").exists());
        assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
    })
    .await
}
